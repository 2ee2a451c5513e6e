"""One partition replica on this broker: leader or follower, its ISR and its HW.

How it works (SPEC.md "Produce", "Fetch", "Follower state ... ISR rules"; Kafka's
`Partition.scala`):

- `make_leader` / `make_follower` apply a LeaderAndIsr state from the controller. A new
  leader records the start offset of its epoch (its LEO now) in the leader-epoch cache,
  takes the ISR from the controller as committed, and forgets what it knew of followers
  (their LEOs are unknown until they fetch; ISR members get a grace period).
- As leader: `append_records_to_leader` checks min.insync.replicas for acks=all, then
  appends; `update_follower_fetch_state` records a follower's fetch (its LEO and the
  caught-up time rules of `FollowerState`), then maybe expands the ISR and maybe
  advances the HW; `maybe_shrink_isr` drops followers that have not caught up within
  `replica.lag.time.max.ms`; `maybe_increment_hw` sets HW = min LEO over the maximal
  ISR, never backwards.
- ISR changes are not applied directly: `maybe_expand_isr`/`maybe_shrink_isr` return an
  `IsrUpdate` (write this state to ZooKeeper if the znode is still at version v) and
  enter a pending state (see `isr.py`). `complete_isr_update` applies ZooKeeper's answer:
  success commits it; a version conflict adopts the controller's state if we are still
  leader at our epoch, or drops the change otherwise. An answer is applied only to the
  update it answers (`sent`): writes are pipelined, and an answer to a write made before
  the controller reset the state (LeaderAndIsr) used to be taken for the answer to the
  next one, leaving the leader sure of an ISR that ZooKeeper did not hold, for good.
- As follower: appends the leader's batches as they are, and keeps
  HW = min(own LEO, leader HW).

Every method that may change the HW reports whether it did, so the replica manager
knows when to try completing delayed produces and fetches.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from broker.core.errors import PartitionError
from broker.core.isr import (
    CommittedIsr,
    IsrState,
    PendingExpandIsr,
    PendingShrinkIsr,
    ordered,
)
from broker.core.log.errors import ControlBatchError, KeylessRecordError
from broker.core.log.log import Log, LogAppendInfo
from broker.core.log.producer_state import ProducerStateError
from broker.core.replica import FollowerState
from client.protocol.errors import ErrorCode
from client.protocol.records import iter_batches
from client.protocol.types import TopicPartition
from server_common.zkdata import LeaderAndIsr

log = logging.getLogger(__name__)

NO_EPOCH = -1


class Role(Enum):
    NONE = "none"
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(frozen=True, slots=True)
class PartitionStateUpdate:
    """A partition's state as the controller sends it in LeaderAndIsr."""

    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    is_new: bool = False

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class IsrUpdate:
    """Effect: write `new_state` to the partition's state znode iff its version is
    `new_state.zk_version` (the version this leader last saw)."""

    topic_partition: TopicPartition
    new_state: LeaderAndIsr


@dataclass(frozen=True, slots=True)
class IsrUpdateSucceeded:
    new_zk_version: int


@dataclass(frozen=True, slots=True)
class IsrUpdateConflict:
    """ZooKeeper's version differed; `current` is what the znode holds now (or None)."""

    current: LeaderAndIsr | None


@dataclass(frozen=True, slots=True)
class IsrUpdateFailed:
    """ZooKeeper could not be reached: the change is dropped and will be retried."""

    reason: str


IsrUpdateOutcome = IsrUpdateSucceeded | IsrUpdateConflict | IsrUpdateFailed


class LogReadInfo(NamedTuple):  # a NamedTuple: made per partition of every fetch, built fast
    records: bytes
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int = -1
    # read_committed: (producer id, first offset) of the aborted transactions read.
    aborted_transactions: tuple[tuple[int, int], ...] = ()


def read_end_offset(records: bytes) -> int:
    """The offset after the last whole batch of a read (its aborted transactions are
    those overlapping the offsets read)."""
    end = -1
    for _, header in iter_batches(records):
        end = header.base_offset + header.last_offset_delta + 1
    return end


class Partition:
    def __init__(
        self,
        topic_partition: TopicPartition,
        local_broker_id: int,
        log: Log,
        *,
        high_watermark: int = 0,
    ):
        self.topic_partition = topic_partition
        self.local_broker_id = local_broker_id
        self.log = log
        self.role = Role.NONE
        self.assigned_replicas: tuple[int, ...] = ()
        self.leader_id: int = -1
        self.leader_epoch: int = NO_EPOCH
        self.leader_epoch_start_offset: int = -1
        self.controller_epoch: int = -1
        self.zk_version: int = -1
        self.isr_state: IsrState = CommittedIsr(frozenset())
        # The state the pending ISR change asked ZooKeeper for (None: none pending).
        self.isr_update_sent: LeaderAndIsr | None = None
        self.followers: dict[int, FollowerState] = {}
        self.high_watermark = max(min(high_watermark, log.log_end_offset), log.log_start_offset)

    # -- views ---------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def isr(self) -> tuple[int, ...]:
        return ordered(self.isr_state.isr, self.assigned_replicas)

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def min_insync_replicas(self) -> int:
        return self.log.config.min_insync_replicas

    def is_under_replicated(self) -> bool:
        return self.is_leader and len(self.isr_state.isr) < len(self.assigned_replicas)

    def is_under_min_isr(self) -> bool:
        return self.is_leader and len(self.isr_state.isr) < self.min_insync_replicas

    # -- leadership changes --------------------------------------------------------
    def make_leader(self, state: PartitionStateUpdate, now_ms: int) -> bool:
        """Become (or stay) leader at `state.leader_epoch`. True if this starts a new term."""
        new_term = not self.is_leader or state.leader_epoch != self.leader_epoch
        self.controller_epoch = state.controller_epoch
        self.assigned_replicas = tuple(state.replicas)
        self.isr_state = CommittedIsr(frozenset(state.isr))
        self.isr_update_sent = None  # an answer to a write made before is stale
        self.zk_version = state.zk_version
        self.leader_id = self.local_broker_id
        if new_term:
            self.role = Role.LEADER
            self.leader_epoch = state.leader_epoch
            self.leader_epoch_start_offset = self.log.log_end_offset
            self.log.maybe_assign_epoch_start_offset(
                state.leader_epoch, self.leader_epoch_start_offset
            )
            self.followers = {
                r: FollowerState.for_new_leader_term(
                    r, self.leader_epoch_start_offset, now_ms, in_isr=r in state.isr
                )
                for r in state.replicas
                if r != self.local_broker_id
            }
            log.info(
                "%s: became leader at epoch %d, epoch start offset %d, ISR %s, HW %d",
                self.topic_partition,
                self.leader_epoch,
                self.leader_epoch_start_offset,
                list(self.isr),
                self.high_watermark,
            )
        else:
            # Same term, new assignment or ISR from the controller: keep what we know.
            for r in state.replicas:
                if r != self.local_broker_id and r not in self.followers:
                    self.followers[r] = FollowerState(broker_id=r)
            for r in list(self.followers):
                if r not in state.replicas:
                    del self.followers[r]
        return new_term

    def make_follower(self, state: PartitionStateUpdate, now_ms: int) -> bool:
        """Follow `state.leader`. True if the leader or epoch changed (fetcher must move)."""
        changed = (
            self.role is not Role.FOLLOWER
            or state.leader != self.leader_id
            or state.leader_epoch != self.leader_epoch
        )
        self.role = Role.FOLLOWER
        self.controller_epoch = state.controller_epoch
        self.assigned_replicas = tuple(state.replicas)
        self.isr_state = CommittedIsr(frozenset(state.isr))
        self.isr_update_sent = None
        self.zk_version = state.zk_version
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.leader_epoch_start_offset = -1
        self.followers = {}
        if changed:
            log.info(
                "%s: became follower of %d at epoch %d (LEO %d, HW %d)",
                self.topic_partition,
                state.leader,
                state.leader_epoch,
                self.log.log_end_offset,
                self.high_watermark,
            )
        return changed

    def make_offline(self) -> None:
        """Stop acting for this partition (StopReplica without delete)."""
        self.role = Role.NONE
        self.leader_id = -1
        self.followers = {}

    # -- leader: writes ------------------------------------------------------------
    def append_records_to_leader(
        self, records: bytes, required_acks: int, now_ms: int, origin: str = "client"
    ) -> LogAppendInfo:
        """Append as leader (`origin` "coordinator": transaction markers); returns the
        log's append info. Raises PartitionError."""
        if not self.is_leader:
            raise PartitionError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.local_broker_id} is not the leader of {self.topic_partition}",
            )
        in_sync = len(self.isr_state.isr)
        if required_acks == -1 and in_sync < self.min_insync_replicas:
            raise PartitionError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"ISR {list(self.isr)} of {self.topic_partition} is smaller than "
                f"min.insync.replicas={self.min_insync_replicas}",
            )
        try:
            info = self.log.append_as_leader(records, self.leader_epoch, now_ms, origin=origin)
        except (KeylessRecordError, ControlBatchError) as exc:
            raise PartitionError(ErrorCode.INVALID_RECORD, str(exc)) from None
        except ProducerStateError as exc:  # idempotent producer: out of order, old epoch...
            raise PartitionError(exc.code, str(exc)) from None
        self.maybe_increment_hw(now_ms)
        return info

    # -- leader: DeleteRecords ------------------------------------------------------
    def delete_records_on_leader(self, offset: int) -> int:
        """Move the log start offset up to `offset` (-1: the HW), as Kafka's
        deleteRecordsOnLeader; returns the offset the request then waits for every ISR
        member to reach (`low_watermark_if_leader`). Raises PartitionError."""
        if not self.is_leader:
            raise PartitionError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.local_broker_id} is not the leader of {self.topic_partition}",
            )
        if not self.log.config.delete_enabled:
            raise PartitionError(
                ErrorCode.POLICY_VIOLATION,
                f"Records of partition {self.topic_partition} can not be deleted due to the "
                "configured policy",
            )
        converted = self.high_watermark if offset == -1 else offset
        if converted < 0 or converted > self.high_watermark:
            raise PartitionError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"Cannot increment the log start offset to {converted} of partition "
                f"{self.topic_partition} since it is larger than the high watermark "
                f"{self.high_watermark}"
                if converted >= 0
                else f"The offset {converted} for partition {self.topic_partition} is not valid",
            )
        self.log.maybe_increment_log_start_offset(converted)
        return converted

    def low_watermark_if_leader(self) -> int:
        """The smallest log start offset among the leader and its in-sync followers (a
        follower that has not fetched in this term counts as unknown, -1)."""
        low = self.log.log_start_offset
        for replica in self.isr_state.isr:
            if replica == self.local_broker_id:
                continue
            state = self.followers.get(replica)
            low = min(low, state.log_start_offset if state is not None else -1)
        return low

    # -- leader: reads -------------------------------------------------------------
    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320: a request naming an epoch must name ours."""
        if current_leader_epoch == NO_EPOCH:
            return
        if current_leader_epoch < self.leader_epoch:
            raise PartitionError(
                ErrorCode.FENCED_LEADER_EPOCH,
                f"epoch {current_leader_epoch} is older than {self.leader_epoch}",
            )
        if current_leader_epoch > self.leader_epoch:
            raise PartitionError(
                ErrorCode.UNKNOWN_LEADER_EPOCH,
                f"epoch {current_leader_epoch} is newer than {self.leader_epoch}",
            )

    def check_replica(self, current_leader_epoch: int, require_leader: bool) -> None:
        """`check_leader`, or (a consumer fetch a follower may serve, KIP-392) that this
        broker is a replica at the epoch named."""
        if require_leader or self.role is Role.NONE:
            self.check_leader(current_leader_epoch)
        else:
            self.check_leader_epoch(current_leader_epoch)

    def check_leader(self, current_leader_epoch: int = NO_EPOCH) -> None:
        if not self.is_leader:
            raise PartitionError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.local_broker_id} is not the leader of {self.topic_partition}",
            )
        self.check_leader_epoch(current_leader_epoch)

    @property
    def last_stable_offset(self) -> int:
        """The LSO: read_committed consumers read below it (`producer_state.py`)."""
        return self.log.last_stable_offset(self.high_watermark)

    def fetch_upper_bound(self, from_follower: bool, read_committed: bool = False) -> int:
        """Followers read to the LEO; consumers never past the HW, read_committed ones
        never past the LSO."""
        if from_follower:
            return self.log.log_end_offset
        return self.last_stable_offset if read_committed else self.high_watermark

    def read_records(
        self,
        fetch_offset: int,
        current_leader_epoch: int,
        max_bytes: int,
        *,
        from_follower: bool,
        min_one_batch: bool = True,
        require_leader: bool = True,
        read_committed: bool = False,
    ) -> LogReadInfo:
        """Followers' fetches read to the LEO, consumers' to the HW; with
        `require_leader` False (KIP-392) a follower serves a consumer up to its own HW."""
        self.check_replica(current_leader_epoch, require_leader)
        hw = self.high_watermark
        leo = self.log.log_end_offset
        start = self.log.log_start_offset
        if fetch_offset < start or fetch_offset > leo:
            raise PartitionError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {fetch_offset} is outside [{start}, {leo}] of {self.topic_partition}",
            )
        lso = self.log.last_stable_offset(hw)
        upper = leo if from_follower else lso if read_committed else hw
        if fetch_offset >= upper:
            return LogReadInfo(b"", hw, start, leo, lso)
        records = self.log.read(fetch_offset, max_bytes, upper, min_one_batch).records
        aborted: tuple[tuple[int, int], ...] = ()
        if read_committed and records:
            end = read_end_offset(records)
            aborted = tuple(
                (txn.producer_id, txn.first_offset)
                for txn in self.log.collect_aborted_transactions(fetch_offset, end)
            )
        return LogReadInfo(bytes(records), hw, start, leo, lso, aborted)

    def bytes_available(self, fetch_offset: int, upper: int, max_bytes: int, wanted: int) -> int:
        """Bytes a fetch at `fetch_offset` could read below `upper` (enough to tell whether
        `wanted` bytes are there: for the common min_bytes=1 no read is needed)."""
        if upper <= fetch_offset:
            return 0
        if wanted <= 1:
            return 1
        return len(self.log.read(fetch_offset, max_bytes, upper, True).records)

    # -- leader: follower progress, ISR and HW --------------------------------------
    def update_follower_fetch_state(
        self,
        follower_id: int,
        fetch_offset: int,
        follower_log_start_offset: int,
        leader_leo: int,
        now_ms: int,
    ) -> tuple[bool, IsrUpdate | None]:
        """Record a follower's fetch. Returns (HW advanced, ISR update to write or None)."""
        if not self.is_leader:
            return False, None
        state = self.followers.get(follower_id)
        if state is None:
            # Not an assigned replica (e.g. a stale fetcher after reassignment).
            return False, None
        self.followers[follower_id] = state.after_fetch(
            fetch_offset, follower_log_start_offset, leader_leo, now_ms
        )
        update = self.maybe_expand_isr(follower_id, now_ms)
        hw_moved = self.maybe_increment_hw(now_ms)
        return hw_moved, update

    def maybe_expand_isr(self, follower_id: int, now_ms: int) -> IsrUpdate | None:
        if not self.is_leader or self.isr_state.is_inflight:
            return None
        if follower_id in self.isr_state.isr or follower_id not in self.assigned_replicas:
            return None
        state = self.followers.get(follower_id)
        if state is None:
            return None
        leo = state.log_end_offset
        if leo < self.high_watermark or leo < self.leader_epoch_start_offset:
            return None
        new_isr = self.isr_state.isr | {follower_id}
        log.info(
            "%s: expanding ISR from %s to %s",
            self.topic_partition,
            list(self.isr),
            list(ordered(new_isr, self.assigned_replicas)),
        )
        self.isr_state = PendingExpandIsr(self.isr_state.isr, follower_id)
        return self._isr_update(new_isr)

    def out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> frozenset[int]:
        leader_leo = self.log.log_end_offset
        return frozenset(
            r
            for r in self.isr_state.isr
            if r != self.local_broker_id
            and (state := self.followers.get(r)) is not None
            and state.is_out_of_sync(leader_leo, now_ms, max_lag_ms)
        )

    def maybe_shrink_isr(self, now_ms: int, max_lag_ms: int) -> IsrUpdate | None:
        if not self.is_leader or self.isr_state.is_inflight:
            return None
        lagging = self.out_of_sync_replicas(now_ms, max_lag_ms)
        if not lagging:
            return None
        new_isr = self.isr_state.isr - lagging
        if self.local_broker_id not in new_isr:  # never shrink below the leader itself
            new_isr |= {self.local_broker_id}
        log.info(
            "%s: shrinking ISR from %s to %s (lagging: %s, leader LEO %d, HW %d)",
            self.topic_partition,
            list(self.isr),
            list(ordered(new_isr, self.assigned_replicas)),
            sorted(lagging),
            self.log.log_end_offset,
            self.high_watermark,
        )
        self.isr_state = PendingShrinkIsr(self.isr_state.isr, lagging)
        return self._isr_update(new_isr)

    def _isr_update(self, new_isr: frozenset[int]) -> IsrUpdate:
        self.isr_update_sent = LeaderAndIsr(
            leader=self.local_broker_id,
            leader_epoch=self.leader_epoch,
            isr=ordered(new_isr, self.assigned_replicas),
            controller_epoch=self.controller_epoch,
            zk_version=self.zk_version,
        )
        return IsrUpdate(self.topic_partition, self.isr_update_sent)

    def complete_isr_update(
        self, outcome: IsrUpdateOutcome, now_ms: int, sent: LeaderAndIsr | None = None
    ) -> bool:
        """Apply ZooKeeper's answer to the pending change: the answer to the write of
        `sent` (the `IsrUpdate`'s state; None: to whatever is pending). An answer to
        another write than the pending one is dropped. Returns True if HW moved."""
        pending = self.isr_state
        if isinstance(pending, CommittedIsr):  # no change in flight
            return False
        if sent is not None and sent is not self.isr_update_sent:
            log.info(
                "%s: dropping ZooKeeper's answer to an earlier ISR update (%s at version %d)",
                self.topic_partition,
                list(sent.isr),
                sent.zk_version,
            )
            return False
        self.isr_update_sent = None
        if isinstance(outcome, IsrUpdateSucceeded):
            if isinstance(pending, PendingExpandIsr):
                new_isr = pending.isr | {pending.new_in_sync_replica}
            else:
                new_isr = pending.isr - pending.out_of_sync_replicas
                new_isr |= {self.local_broker_id}
            self.isr_state = CommittedIsr(frozenset(new_isr))
            self.zk_version = outcome.new_zk_version
        elif isinstance(outcome, IsrUpdateConflict):
            current = outcome.current
            self.isr_state = CommittedIsr(pending.isr)
            if (
                current is not None
                and current.leader == self.local_broker_id
                and current.leader_epoch == self.leader_epoch
            ):
                # The controller changed the ISR under us (e.g. a broker died): adopt it.
                log.info(
                    "%s: ISR update conflicted; adopting ZooKeeper's ISR %s at version %d",
                    self.topic_partition,
                    list(current.isr),
                    current.zk_version,
                )
                self.isr_state = CommittedIsr(frozenset(current.isr))
                self.zk_version = current.zk_version
            else:
                log.info(
                    "%s: ISR update conflicted and we are no longer leader at epoch %d; "
                    "dropping it and waiting for the controller",
                    self.topic_partition,
                    self.leader_epoch,
                )
        else:
            log.warning(
                "%s: ISR update failed (%s); will retry", self.topic_partition, outcome.reason
            )
            self.isr_state = CommittedIsr(pending.isr)
        return self.maybe_increment_hw(now_ms)

    def maybe_increment_hw(self, now_ms: int) -> bool:
        """HW = min LEO over the maximal ISR; moves only forward. True if it moved."""
        if not self.is_leader:
            return False
        new_hw = self.log.log_end_offset
        for r in self.isr_state.maximal_isr:
            if r == self.local_broker_id:
                continue
            state = self.followers.get(r)
            follower_leo = state.log_end_offset if state is not None else -1
            if follower_leo < new_hw:
                new_hw = follower_leo
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            self.log.producer_state.on_high_watermark_updated(new_hw)
            return True
        return False

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """DelayedProduce's test: (done, error). Done with NONE when HW >= required."""
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark >= required_offset:
            if len(self.isr_state.maximal_isr) >= self.min_insync_replicas:
                return True, ErrorCode.NONE
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return False, ErrorCode.NONE

    # -- follower ------------------------------------------------------------------
    def append_records_to_follower(
        self, records: bytes, leader_hw: int, now_ms: int
    ) -> LogAppendInfo | None:
        info = None
        if records:
            info = self.log.append_as_follower(records, now_ms)
        self.update_follower_high_watermark(leader_hw)
        return info

    def update_follower_high_watermark(self, leader_hw: int) -> None:
        self.high_watermark = max(
            min(self.log.log_end_offset, leader_hw), self.log.log_start_offset
        )
        self.log.producer_state.on_high_watermark_updated(self.high_watermark)

    def truncate_to(self, offset: int) -> None:
        if offset < self.log.log_end_offset:
            log.info(
                "%s: truncating from LEO %d to %d",
                self.topic_partition,
                self.log.log_end_offset,
                offset,
            )
            self.log.truncate_to(offset)
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        log.info("%s: truncating fully, restarting at %d", self.topic_partition, offset)
        self.log.truncate_fully_and_start_at(offset)
        self.high_watermark = offset
