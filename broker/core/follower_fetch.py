"""The follower side of replication: what to ask each leader, and what its answers mean.

How it works (Kafka's `AbstractFetcherThread` state machine, without the threads): every
partition this broker follows has a `FollowerFetchState` naming its leader and leader
epoch and a phase:

- TRUNCATING: before fetching anything from a new leader (or after finding we are ahead
  of it), ask it for the end offset of our latest epoch (OffsetForLeaderEpoch) and
  truncate as `truncation.decide_truncation` says (KIP-101/279); possibly several rounds.
- FETCHING: fetch from our LEO with our current leader epoch (KIP-320 fencing); append
  the batches as they are, and set our HW to min(our LEO, the leader's HW); a HW move
  is reported (`high_watermark_moved`), for the consumers a follower serves (KIP-392).

Errors back a partition off for `replica.fetch.backoff.ms`. A fetched batch that fails
its CRC check is never appended (the log validates the whole response before writing a
byte): the partition's fetch counts as failed (`stats.corrupt_fetches`, one ERROR line
naming the leader and offsets), it backs off and fetches the same offset again, in the
hope that the leader's scrubber repairs its copy or leadership moves. OFFSET_OUT_OF_RANGE
below the
leader's log start restarts the log there, above its end goes back to TRUNCATING. The
shell's fetcher tasks (one per leader) only carry requests and answers: they ask
`truncation_requests`/`fetch_request` and hand back `apply_truncation`/`apply_fetch`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, NamedTuple

from broker.core.truncation import UNDEFINED_EPOCH, decide_truncation
from client.protocol.errors import ErrorCode
from client.protocol.records import CorruptRecordError
from client.protocol.types import TopicPartition

if TYPE_CHECKING:
    from broker.core.partition import Partition
    from broker.core.replication import (
        FetchedPartition,
        ReplicaManagerStats,
        ReplicationConfig,
    )

log = logging.getLogger(__name__)


class FetchPhase(Enum):
    TRUNCATING = "truncating"
    FETCHING = "fetching"


@dataclass
class FollowerFetchState:
    """Where a follower partition stands with its leader's fetcher."""

    leader_id: int
    leader_epoch: int
    phase: FetchPhase = FetchPhase.TRUNCATING
    # The epoch to ask the leader about next (None: our latest).
    truncation_epoch: int | None = None
    delayed_until_ms: int = 0
    consecutive_errors: int = 0


class FollowerFetchPartition(NamedTuple):
    """What the next fetch asks of one partition; a NamedTuple: one is made per partition
    of every fetch, and the fetch session compares it with the last one (both fast)."""

    topic_partition: TopicPartition
    fetch_offset: int
    current_leader_epoch: int
    log_start_offset: int
    partition_max_bytes: int


class FollowerFetch:
    """Fetch state of every partition this broker follows, and the rules above."""

    def __init__(
        self,
        partitions: dict[TopicPartition, Partition],
        config: ReplicationConfig,
        stats: ReplicaManagerStats,
        events: Callable[[str, dict], None],
        truncation: str = "leader_epoch",
    ):
        # "leader_epoch" (KIP-101/279). "high_watermark" is the pre-KIP-101 rule, kept only
        # so tests can show the data loss and divergence it causes.
        if truncation not in ("leader_epoch", "high_watermark"):
            raise ValueError(f"unknown truncation strategy {truncation!r}")
        self.partitions = partitions
        self.config = config
        self.stats = stats
        self._events = events
        self.truncation = truncation
        self.states: dict[TopicPartition, FollowerFetchState] = {}
        # Called with (partition, now) when an answer moved a partition's HW: consumers
        # this follower serves (KIP-392) may be waiting for it in the fetch purgatory.
        self.high_watermark_moved: Callable[[TopicPartition, int], object] = lambda tp, now: 0

    def start(self, tp: TopicPartition, leader_id: int, leader_epoch: int) -> None:
        """Follow `leader_id` at `leader_epoch`, starting with a truncation round."""
        self.states[tp] = FollowerFetchState(leader_id, leader_epoch)

    def stop(self, tp: TopicPartition) -> None:
        self.states.pop(tp, None)

    def is_following(self, tp: TopicPartition) -> bool:
        return tp in self.states

    def leaders(self) -> dict[int, set[TopicPartition]]:
        """Leader id -> partitions this broker should be fetching from it."""
        by_leader: dict[int, set[TopicPartition]] = {}
        for tp, state in self.states.items():
            by_leader.setdefault(state.leader_id, set()).add(tp)
        return by_leader

    def _ready(
        self, leader_id: int, phase: FetchPhase, now_ms: int
    ) -> Iterator[tuple[TopicPartition, FollowerFetchState]]:
        for tp, state in self.states.items():
            if (
                state.leader_id == leader_id
                and state.phase is phase
                and state.delayed_until_ms <= now_ms
                and tp in self.partitions
            ):
                yield tp, state

    def next_wakeup_ms(self, leader_id: int) -> int | None:
        delays = [s.delayed_until_ms for s in self.states.values() if s.leader_id == leader_id]
        return min(delays) if delays else None

    def truncation_requests(
        self, leader_id: int, now_ms: int
    ) -> dict[TopicPartition, tuple[int, int]]:
        """Partitions to ask the leader about: tp -> (current leader epoch, epoch asked)."""
        requests = {}
        for tp, state in self._ready(leader_id, FetchPhase.TRUNCATING, now_ms):
            cache = self.partitions[tp].log.leader_epoch_cache
            epoch = state.truncation_epoch
            if epoch is None:
                epoch = cache.latest_epoch if cache.latest_epoch is not None else UNDEFINED_EPOCH
            if self.truncation == "high_watermark":
                self._truncate(tp, self.partitions[tp].high_watermark, "high watermark (legacy)")
                state.phase = FetchPhase.FETCHING
                continue
            if epoch == UNDEFINED_EPOCH:
                # Nothing written under any epoch: our HW is all we can vouch for.
                self._truncate(tp, self.partitions[tp].high_watermark, "no leader epochs")
                state.phase = FetchPhase.FETCHING
                continue
            requests[tp] = (state.leader_epoch, epoch)
        return requests

    def apply_truncation(
        self,
        leader_id: int,
        answers: dict[TopicPartition, tuple[ErrorCode, int, int]],
        now_ms: int,
    ) -> None:
        """OffsetForLeaderEpoch answers: tp -> (error, leader's epoch, end offset)."""
        for tp, (error, epoch, end_offset) in answers.items():
            state = self.states.get(tp)
            partition = self.partitions.get(tp)
            if state is None or partition is None or state.leader_id != leader_id:
                continue
            if error is not ErrorCode.NONE:
                self._back_off(tp, state, error, now_ms)
                continue
            decision = decide_truncation(
                partition.log.leader_epoch_cache,
                partition.log_end_offset,
                partition.high_watermark,
                epoch,
                end_offset,
            )
            self._truncate(tp, decision.offset, f"leader epoch {epoch} ends at {end_offset}")
            state.consecutive_errors = 0
            if decision.completed:
                state.phase = FetchPhase.FETCHING
                state.truncation_epoch = None
            else:
                state.truncation_epoch = decision.next_epoch

    def _truncate(self, tp: TopicPartition, offset: int, reason: str) -> None:
        partition = self.partitions[tp]
        if offset < partition.log_end_offset:
            self.stats.truncations += 1
            self._events(
                "truncation",
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "from_offset": partition.log_end_offset,
                    "to_offset": offset,
                    "reason": reason,
                },
            )
        partition.truncate_to(offset)

    def fetch_request(self, leader_id: int, now_ms: int) -> list[FollowerFetchPartition]:
        """The partitions to put in the next fetch to `leader_id` (empty: nothing ready)."""
        wanted = []
        for tp, state in self._ready(leader_id, FetchPhase.FETCHING, now_ms):
            partition = self.partitions[tp]
            wanted.append(
                FollowerFetchPartition(
                    tp,
                    partition.log_end_offset,
                    state.leader_epoch,
                    partition.log_start_offset,
                    self.config.replica_fetch_max_bytes,
                )
            )
        return wanted

    def apply_fetch(
        self,
        leader_id: int,
        sent: list[FollowerFetchPartition],
        results: dict[TopicPartition, FetchedPartition],
        now_ms: int,
    ) -> None:
        """Apply a fetch response from `leader_id` to the partitions we follow."""
        for request in sent:
            tp = request.topic_partition
            state = self.states.get(tp)
            partition = self.partitions.get(tp)
            if state is None or partition is None or state.leader_id != leader_id:
                continue  # leadership moved while the fetch was in flight
            if state.leader_epoch != request.current_leader_epoch:
                continue
            result = results.get(tp)
            if result is None:
                continue
            if partition.log_end_offset != request.fetch_offset:
                continue  # truncated meanwhile; the next fetch starts from the new LEO
            if result.error_code is ErrorCode.NONE:
                try:
                    hw_before = partition.high_watermark
                    partition.append_records_to_follower(
                        result.records, result.high_watermark, now_ms
                    )
                    if partition.high_watermark != hw_before:
                        self.high_watermark_moved(tp, now_ms)
                    if result.log_start_offset > partition.log_start_offset:
                        partition.log.maybe_increment_log_start_offset(
                            min(result.log_start_offset, partition.high_watermark)
                        )
                except CorruptRecordError as exc:
                    self.stats.corrupt_fetches += 1
                    log.error(
                        "%s: corrupt batch in the fetch response from leader %d at offset %d "
                        "(not appended; retrying after %d ms): %s",
                        tp,
                        leader_id,
                        request.fetch_offset,
                        self.config.replica_fetch_backoff_ms,
                        exc,
                    )
                    self._back_off(tp, state, ErrorCode.CORRUPT_MESSAGE, now_ms)
                    continue
                except Exception as exc:
                    log.warning("%s: could not append fetched data: %s", tp, exc)
                    state.phase = FetchPhase.TRUNCATING
                    self._back_off(tp, state, ErrorCode.CORRUPT_MESSAGE, now_ms)
                    continue
                state.consecutive_errors = 0
            elif result.error_code is ErrorCode.OFFSET_OUT_OF_RANGE:
                if 0 <= result.log_start_offset and request.fetch_offset < result.log_start_offset:
                    # The leader deleted what we need next: start over at its log start.
                    partition.truncate_fully_and_start_at(result.log_start_offset)
                    self._events(
                        "truncation",
                        {
                            "topic": tp.topic,
                            "partition": tp.partition,
                            "to_offset": result.log_start_offset,
                            "reason": "behind the leader's log start offset",
                        },
                    )
                else:
                    # We are ahead of the leader: find the divergence point by epoch.
                    state.phase = FetchPhase.TRUNCATING
                    state.truncation_epoch = None
            else:
                self._back_off(tp, state, result.error_code, now_ms)

    def fetch_failed(
        self, leader_id: int, sent_partitions: list[TopicPartition], now_ms: int
    ) -> None:
        """The leader could not be reached: back off every partition in the request,
        with one log line for all of them (a fetch may carry thousands)."""
        backed_off = 0
        for tp in sent_partitions:
            state = self.states.get(tp)
            if state is not None and state.leader_id == leader_id:
                self._back_off(tp, state, ErrorCode.NETWORK_EXCEPTION, now_ms, quiet=True)
                backed_off += 1
        if backed_off:
            log.info(
                "fetch of %d partitions from leader %d failed; backing off %d ms",
                backed_off,
                leader_id,
                self.config.replica_fetch_backoff_ms,
            )

    def _back_off(
        self,
        tp: TopicPartition,
        state: FollowerFetchState,
        error: ErrorCode,
        now_ms: int,
        *,
        quiet: bool = False,
    ) -> None:
        state.consecutive_errors += 1
        state.delayed_until_ms = now_ms + self.config.replica_fetch_backoff_ms
        if quiet:
            return
        if state.consecutive_errors == 1 or state.consecutive_errors % 50 == 0:
            log.info(
                "%s: fetch from leader %d failed with %s; backing off %d ms",
                tp,
                state.leader_id,
                error.name,
                self.config.replica_fetch_backoff_ms,
            )
