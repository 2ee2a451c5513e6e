"""A group consumer's membership as a state machine (sans-IO): states, generation, timers,
and what every group response means for the member. Kafka 2.8's AbstractCoordinator
and ConsumerCoordinator response handlers, eager rebalance protocol.

How it works: `GroupMembership` holds what the member knows (the coordinator's address,
its `MemberState`, its `Generation`: generation id, member id, chosen protocol; whether
it must rejoin; a fatal error) and Kafka's heartbeat timers (next heartbeat, session,
max poll interval). The shell (client/consumer/group/coordinator.py) asks it for the next request
(`join_request`, `sync_request`, `heartbeat_request`, `leave_request`), sends it, and
hands the answer's error code back (`on_join_response`, `on_sync_response`,
`on_heartbeat_response`, `commit_error`); each returns a `Step` saying what to do next,
and updates the state first. A connection failure is passed in as NETWORK_EXCEPTION.
Time comes in as `now_ms`; nothing here does I/O.

    UNJOINED --join_request--> PREPARING_REBALANCE --JoinGroup ok--> COMPLETING_REBALANCE
        --SyncGroup ok--> STABLE --heartbeat says REBALANCE_IN_PROGRESS--> (rejoin_needed)

What each error means (Kafka 2.8, except ILLEGAL_GENERATION keeps the member id, as
later Kafka does and the group contract asks):
- MEMBER_ID_REQUIRED (KIP-394): take the id the coordinator gave and rejoin at once.
- UNKNOWN_MEMBER_ID: forget generation and member id, rejoin. ILLEGAL_GENERATION: forget
  the generation, rejoin. REBALANCE_IN_PROGRESS: rejoin.
- NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a timeout or a lost connection: the
  coordinator is unknown; find it again. COORDINATOR_LOAD_IN_PROGRESS: retry after backoff.
- FENCED_INSTANCE_ID (another consumer took our group.instance.id), INCONSISTENT_GROUP_
  PROTOCOL, INVALID_SESSION_TIMEOUT, INVALID_GROUP_ID, GROUP_MAX_SIZE_REACHED and
  anything unexpected: fatal; the consumer raises it from `poll()`.
Heartbeat errors about a generation the member has already left behind are ignored.
Commits: `commit_generation()` is what to commit with (a member must be Stable:
`RebalanceInProgressError` while rebalancing, `CommitFailedError` when not in the group);
`commit_error()` turns per-partition answers into the error to raise, with
`.retriable` telling `commit()` whether to try again.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from client.protocol import messages as m
from client.protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.types import TopicPartition

log = logging.getLogger(__name__)

UNKNOWN_MEMBER_ID = ""
NO_GENERATION_ID = -1


class MemberState(enum.Enum):
    UNJOINED = "Unjoined"
    PREPARING_REBALANCE = "PreparingRebalance"  # JoinGroup sent, no answer yet
    COMPLETING_REBALANCE = "CompletingRebalance"  # joined, SyncGroup not answered yet
    STABLE = "Stable"


@dataclass(frozen=True)
class Generation:
    generation_id: int = NO_GENERATION_ID
    member_id: str = UNKNOWN_MEMBER_ID
    protocol: str | None = None


NO_GENERATION = Generation()


class Step(enum.Enum):
    """What the shell does after a response."""

    OK = "ok"  # the step succeeded: go on
    RETRY = "retry"  # the same step again after retry_backoff_ms
    REJOIN = "rejoin"  # send JoinGroup again now
    FIND_COORDINATOR = "find_coordinator"  # look the coordinator up, then go on
    FATAL = "fatal"  # stop: `fatal_error` says why


class CommitFailedError(TributaryError):
    """The commit cannot succeed: this consumer is no longer a member of the generation
    it committed for (the group rebalanced without it, or it was kicked out). Its
    partitions may belong to another member now; rejoining happens by itself."""

    def __init__(self, code: ErrorCode | int = ErrorCode.ILLEGAL_GENERATION, detail: str = ""):
        super().__init__(
            code,
            "the commit cannot be completed: the consumer is not part of the group's current "
            "generation (it was kicked out or the group rebalanced)"
            + (f"; {detail}" if detail else ""),
        )

    @property
    def retriable(self) -> bool:
        return False


class RebalanceInProgressError(TributaryError):
    """The group is rebalancing: the commit cannot be made now. Call poll() (the
    rebalance completes) and commit again if the partitions are still assigned."""

    def __init__(self, detail: str = "the group is rebalancing") -> None:
        super().__init__(ErrorCode.REBALANCE_IN_PROGRESS, detail)


# Errors after which the coordinator we know is not (or no longer) the right one.
COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)


class GroupMembership:
    """One consumer's view of its group membership; see the module docstring."""

    def __init__(
        self,
        group_id: str,
        *,
        group_instance_id: str | None = None,
        session_timeout_ms: int = 10_000,
        rebalance_timeout_ms: int = 300_000,
        heartbeat_interval_ms: int = 3_000,
        retry_backoff_ms: int = 100,
        now_ms: float = 0,
    ) -> None:
        if heartbeat_interval_ms >= session_timeout_ms:
            raise ValueError("heartbeat_interval_ms must be lower than session_timeout_ms")
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.coordinator: tuple[int, str, int] | None = None  # (node id, host, port)
        self.state = MemberState.UNJOINED
        self.generation = NO_GENERATION
        self.leader_id: str | None = None
        self.rejoin_needed = True
        self.rejoin_reason = "the consumer has not joined yet"
        self.fatal_error: TributaryError | None = None
        # Kafka's Heartbeat: when the next heartbeat is due, when an answer last came.
        self._next_heartbeat_ms = now_ms
        self._last_heartbeat_answer_ms = now_ms
        self._last_poll_ms = now_ms

    # --- the coordinator ---------------------------------------------------------------

    def coordinator_found(self, node_id: int, host: str, port: int, now_ms: float) -> None:
        """A FindCoordinator answer: the session clock starts again (Kafka's)."""
        self.coordinator = (node_id, host, port)
        self._last_heartbeat_answer_ms = now_ms

    def coordinator_unknown(self, reason: str) -> None:
        if self.coordinator is not None:
            log.info(
                "group %s: coordinator %d is unavailable or invalid (%s); will look it up again",
                self.group_id,
                self.coordinator[0],
                reason,
            )
        self.coordinator = None

    # --- state -------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader_id is not None and self.leader_id == self.generation.member_id

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def rebalancing(self) -> bool:
        return self.state in (MemberState.PREPARING_REBALANCE, MemberState.COMPLETING_REBALANCE)

    @property
    def needs_join(self) -> bool:
        return self.rejoin_needed or self.state is not MemberState.STABLE

    def request_rejoin(self, reason: str) -> None:
        if not self.rejoin_needed:
            log.info("group %s: rejoining (%s)", self.group_id, reason)
        self.rejoin_needed = True
        self.rejoin_reason = reason

    def reset_generation(self, reason: str, *, keep_member_id: bool = False) -> None:
        """Forget the generation (and the member id unless kept): a new join follows."""
        member_id = self.generation.member_id if keep_member_id else UNKNOWN_MEMBER_ID
        self.generation = Generation(member_id=member_id)
        self.leader_id = None
        self.state = MemberState.UNJOINED
        self.request_rejoin(reason)

    @property
    def generation_lost(self) -> bool:
        """The generation is gone (reset after an error): the assignment is lost, not
        revoked (Kafka's onPartitionsLost)."""
        return self.generation.generation_id == NO_GENERATION_ID

    def _fail(self, code: ErrorCode, what: str) -> Step:
        self.fatal_error = TributaryError(code, f"group {self.group_id}: {what}")
        self.state = MemberState.UNJOINED
        log.error("%s", self.fatal_error)
        return Step.FATAL

    # --- JoinGroup ---------------------------------------------------------------------

    def join_request(self, protocols: list[tuple[str, bytes]]) -> m.JoinGroupRequest:
        self.state = MemberState.PREPARING_REBALANCE
        return m.JoinGroupRequest(
            group_id=self.group_id,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            member_id=self.generation.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocols=[m.JoinGroupProtocol(name=n, metadata=data) for n, data in protocols],
        )

    def on_join_response(
        self, code: ErrorCode, response: m.JoinGroupResponse | None, now_ms: float
    ) -> Step:
        if code is ErrorCode.NONE and response is not None:
            if self.state is not MemberState.PREPARING_REBALANCE:
                return Step.REJOIN  # we left (or reset) while the join was out
            self.generation = Generation(
                response.generation_id, response.member_id, response.protocol_name
            )
            self.leader_id = response.leader
            self.state = MemberState.COMPLETING_REBALANCE
            self.rejoin_needed = False
            self.reset_timers(now_ms)
            return Step.OK
        self.state = MemberState.UNJOINED
        if code is ErrorCode.MEMBER_ID_REQUIRED and response is not None:
            self.generation = Generation(member_id=response.member_id)
            return Step.REJOIN
        if code is ErrorCode.UNKNOWN_MEMBER_ID:
            self.reset_generation("the coordinator does not know our member id")
            return Step.REJOIN
        if code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REBALANCE_IN_PROGRESS):
            return Step.RETRY
        if code in COORDINATOR_ERRORS:
            self.coordinator_unknown(f"JoinGroup: {code.name}")
            return Step.FIND_COORDINATOR
        return self._fail(code, f"JoinGroup failed: {code.description}")

    # --- SyncGroup ---------------------------------------------------------------------

    def sync_request(self, assignments: Mapping[str, bytes]) -> m.SyncGroupRequest:
        return m.SyncGroupRequest(
            group_id=self.group_id,
            generation_id=self.generation.generation_id,
            member_id=self.generation.member_id,
            group_instance_id=self.group_instance_id,
            assignments=[
                m.SyncGroupAssignment(member_id=member, assignment=data)
                for member, data in assignments.items()
            ],
        )

    def on_sync_response(self, code: ErrorCode, now_ms: float) -> Step:
        if code is ErrorCode.NONE:
            if self.state is not MemberState.COMPLETING_REBALANCE:
                return Step.REJOIN
            self.state = MemberState.STABLE
            self.reset_timers(now_ms)
            return Step.OK
        self.state = MemberState.UNJOINED
        if code is ErrorCode.REBALANCE_IN_PROGRESS:
            self.request_rejoin("the group rebalanced again during SyncGroup")
            return Step.REJOIN
        if code is ErrorCode.UNKNOWN_MEMBER_ID:
            self.reset_generation("SyncGroup: the coordinator does not know our member id")
            return Step.REJOIN
        if code is ErrorCode.ILLEGAL_GENERATION:
            self.reset_generation("SyncGroup: our generation is stale", keep_member_id=True)
            return Step.REJOIN
        if code in COORDINATOR_ERRORS:
            self.coordinator_unknown(f"SyncGroup: {code.name}")
            self.request_rejoin("the coordinator moved during SyncGroup")
            return Step.FIND_COORDINATOR
        if code is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            self.request_rejoin("the coordinator is loading")
            return Step.RETRY
        return self._fail(code, f"SyncGroup failed: {code.description}")

    # --- heartbeats and liveness (Kafka's Heartbeat) -----------------------------------

    def reset_timers(self, now_ms: float) -> None:
        self._next_heartbeat_ms = now_ms + self.heartbeat_interval_ms
        self._last_heartbeat_answer_ms = now_ms
        self._last_poll_ms = now_ms

    @property
    def heartbeat_wanted(self) -> bool:
        return (
            self.fatal_error is None
            and self.coordinator is not None
            and self.state in (MemberState.COMPLETING_REBALANCE, MemberState.STABLE)
        )

    def time_to_next_heartbeat(self, now_ms: float) -> float:
        return max(0.0, self._next_heartbeat_ms - now_ms)

    def session_expired(self, now_ms: float) -> bool:
        """No heartbeat answer for a session timeout: the coordinator may be gone."""
        return now_ms - self._last_heartbeat_answer_ms > self.session_timeout_ms

    def heartbeat_request(self, now_ms: float) -> tuple[m.HeartbeatRequest, Generation]:
        self._next_heartbeat_ms = now_ms + self.heartbeat_interval_ms
        request = m.HeartbeatRequest(
            group_id=self.group_id,
            generation_id=self.generation.generation_id,
            member_id=self.generation.member_id,
            group_instance_id=self.group_instance_id,
        )
        return request, self.generation

    def on_heartbeat_response(self, code: ErrorCode, sent: Generation, now_ms: float) -> Step:
        if code is ErrorCode.NONE:
            self._last_heartbeat_answer_ms = now_ms
            return Step.OK
        if code in COORDINATOR_ERRORS:
            self.coordinator_unknown(f"Heartbeat: {code.name}")
            self._next_heartbeat_ms = now_ms + self.retry_backoff_ms
            return Step.FIND_COORDINATOR
        if code is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            self._next_heartbeat_ms = now_ms + self.retry_backoff_ms
            return Step.RETRY
        self._last_heartbeat_answer_ms = now_ms
        if code is ErrorCode.REBALANCE_IN_PROGRESS:
            if self.state is MemberState.STABLE:
                self.request_rejoin("the group is rebalancing")
                return Step.REJOIN
            return Step.OK  # SyncGroup will tell
        if code in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID):
            if sent != self.generation:
                return Step.OK  # about a generation we have already left behind
            self.reset_generation(
                f"Heartbeat: {code.name}", keep_member_id=code is ErrorCode.ILLEGAL_GENERATION
            )
            return Step.REJOIN
        return self._fail(code, f"Heartbeat failed: {code.description}")

    # --- max.poll.interval.ms -------------------------------------------------------------

    def poll_called(self, now_ms: float) -> None:
        self._last_poll_ms = now_ms

    def time_to_poll_timeout(self, now_ms: float) -> float:
        return max(0.0, self._last_poll_ms + self.rebalance_timeout_ms - now_ms)

    def poll_timeout_expired(self, now_ms: float) -> bool:
        return now_ms - self._last_poll_ms > self.rebalance_timeout_ms

    # --- LeaveGroup ----------------------------------------------------------------------

    def leave_request(self) -> m.LeaveGroupRequest | None:
        """The LeaveGroup to send, if any (dynamic members that joined: static members
        stay until their session times out, as Kafka's). Resets the generation either way."""
        request = None
        if (
            not self.is_static
            and self.coordinator is not None
            and self.state is not MemberState.UNJOINED
            and self.generation.member_id != UNKNOWN_MEMBER_ID
        ):
            request = m.LeaveGroupRequest(
                group_id=self.group_id,
                members=[m.LeaveGroupMember(member_id=self.generation.member_id)],
            )
        self.reset_generation("the consumer left the group")
        return request

    # --- OffsetCommit ----------------------------------------------------------------------

    def commit_generation(self) -> Generation:
        """The generation a member commits with; raises when it is not in a stable group."""
        if self.state is MemberState.STABLE:
            return self.generation
        if self.rebalancing or (self.rejoin_needed and not self.generation_lost):
            raise RebalanceInProgressError(
                "the consumer is rebalancing; the commit can be retried once poll() has "
                "completed the rebalance"
            )
        raise CommitFailedError(detail="the consumer is not in an active group")

    def commit_error(
        self, errors: Mapping[TopicPartition, ErrorCode], sent: Generation
    ) -> TributaryError | None:
        """The error an OffsetCommit answer means (None: every partition committed).
        Updates the state as Kafka's OffsetCommitResponseHandler does."""
        for tp, code in sorted(errors.items()):
            if code is ErrorCode.NONE:
                continue
            where = f"committing {tp}"
            if code in COORDINATOR_ERRORS:
                self.coordinator_unknown(f"OffsetCommit: {code.name}")
                return TributaryError(code, where)
            if code in (
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ):
                return TributaryError(code, where)
            if code is ErrorCode.REBALANCE_IN_PROGRESS:
                self.request_rejoin("OffsetCommit: the group is rebalancing")
                return RebalanceInProgressError(f"{where}: the group is rebalancing")
            if code in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID):
                if sent == self.generation and sent.generation_id != NO_GENERATION_ID:
                    self.reset_generation(
                        f"OffsetCommit: {code.name}",
                        keep_member_id=code is ErrorCode.ILLEGAL_GENERATION,
                    )
                return CommitFailedError(code, f"{where}: {code.name}")
            if code is ErrorCode.FENCED_INSTANCE_ID:
                self._fail(code, "another consumer took our group.instance.id")
            return _NotRetriable(code, where)
        return None


class _NotRetriable(TributaryError):
    """A commit error Kafka does not retry (even if its code is retriable elsewhere)."""

    @property
    def retriable(self) -> bool:
        return False
