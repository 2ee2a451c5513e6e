"""ReplicaManager: every partition this broker hosts, both purgatories, and the rules
that tie produce, fetch, replication and leadership together.

How it works (SPEC.md; Kafka's `ReplicaManager.scala` and `AbstractFetcherThread`):

- Produce (`append_records`): per partition, append as leader (acks=all first checks
  min.insync.replicas); then wake delayed fetches (followers want the new data) and,
  if the HW moved, delayed produces. acks=all parks a `DelayedProduce` in the produce
  purgatory until the HW reaches what was appended. Results go to a `respond` callback.
- Fetch (`fetch_messages`): reads every partition (followers to the LEO, consumers to
  the HW). A follower's fetch also records its progress (ISR expand, HW advance) as it
  arrives. If fewer than min_bytes came back and the fetch may wait, a `DelayedFetch`
  parks it; its completion reads again and records nothing (as Kafka's).
- KIP-392: a consumer fetch carrying a rack (`FetchParams.client_rack`) may be served
  by a follower, up to the follower's own HW (a fetch past its LEO is
  OFFSET_OUT_OF_RANGE, as Kafka's); on the leader, with `replica.selector.class` set,
  `replica_selector.py` may pick another replica, and the partition is answered at once
  (an error is too) with `preferred_read_replica` and no records (`consumer_reads.py`,
  which also counts consumer reads as leader or follower).
- DeleteRecords (`delete_records`): the leader moves each partition's log start offset
  (`Partition.delete_records_on_leader`) and a `DelayedDeleteRecords` waits in its own
  purgatory until every in-sync follower reported a log start offset at least as high
  (followers copy the leader's from fetch responses); whole segments below it go at the
  next retention run, and the offset is checkpointed with the others.
- LeaderAndIsr (`become_leader_or_follower`) and StopReplica (`stop_replicas`) are
  `RoleChanges`' (role_changes.py): it rejects a stale controller epoch and older
  leader epochs, creates logs, turns partitions into leaders or followers (a partition
  that starts following a (new) leader enters the TRUNCATING phase) or takes them
  offline, and the delayed operations of every changed partition are checked again.
- Follower side: `self.followers` (follower_fetch.py) keeps the fetch state of every
  partition we follow; the shell's fetcher tasks, one per leader, carry its
  OffsetForLeaderEpoch and Fetch requests and hand the answers back.
- Transactions: `append_records` with `origin` "coordinator" appends transaction
  markers (the WriteTxnMarkers handler, broker/handlers/txn_markers.py, then calls each
  of `txn_marker_listeners` for the partitions written); a read_committed fetch reads
  below the LSO with its aborted transactions, and ListOffsets' latest is the LSO for
  it. `txn_verifier` (broker/core/txn_verification.py, KIP-890) is what the produce
  handlers ask before a transaction's first batch on a partition.
- Periodic: `maybe_shrink_isrs` (every replica.lag.time.max.ms / 2),
  `maybe_propagate_isr_changes`, `expire_delayed`, `high_watermarks_to_checkpoint`.

Effects the shell must carry out are queued as values: `IsrUpdate` (a conditional set
on the partition state znode; answer with `complete_isr_update`). The core also tells
the shell when to act, through two callbacks it is given: `wake_at(deadline_ms)` when a
delayed operation's deadline became the earliest (the shell's expiry timer sleeps until
`next_deadline_ms()` otherwise), and `followers_changed()` after every LeaderAndIsr and
StopReplica (the set of partitions to fetch, per leader, is a query, `followers.leaders()`,
that the shell reconciles its fetcher tasks against). So request handlers only call the
core; they never have to remember to poke a timer or a fetcher. Nothing here does
network or ZooKeeper I/O or reads a clock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker.core.consumer_reads import ConsumerReads
from broker.core.delayed_delete_records import (
    DelayedDeleteRecords,
    DeleteRecordsResult,
    DeleteRecordsStatus,
)
from broker.core.delayed_fetch import DelayedFetch, FetchParams, FetchPartitionRequest
from broker.core.delayed_produce import DelayedProduce, ProducePartitionStatus, ProduceResult
from broker.core.errors import PartitionError
from broker.core.follower_fetch import FollowerFetch
from broker.core.isr_propagation import IsrChangePropagation
from broker.core.leader_queries import LeaderQueries
from broker.core.log.config import LogConfig
from broker.core.log.errors import InvalidTimestampError, RecordTooLargeError
from broker.core.log.log import LogAppendInfo
from broker.core.log.manager import LogManager
from broker.core.partition import (
    IsrUpdate,
    IsrUpdateOutcome,
    IsrUpdateSucceeded,
    Partition,
    PartitionStateUpdate,
)
from broker.core.purgatory import Purgatory
from broker.core.replication import FetchedPartition, ReplicaManagerStats, ReplicationConfig
from broker.core.role_changes import BecomeResult, RoleChanges
from broker.core.txn_verification import ALLOW_ALL, TransactionVerifier
from client.protocol.errors import ErrorCode
from client.protocol.records import RecordError
from client.protocol.types import TopicPartition
from server_common.zkdata import LeaderAndIsr

# The shell imports these from here (some are defined beside the replica manager).
__all__ = [
    "BecomeResult",
    "FetchedPartition",
    "ReplicaManager",
    "ReplicaManagerStats",
    "ReplicationConfig",
]

log = logging.getLogger(__name__)

EventSink = Callable[[str, dict], None]
# Called after a transaction marker was written as leader (and replicated):
# (partition, producer id, committed).
TxnMarkerListener = Callable[[TopicPartition, int, bool], None]


class ReplicaManager(LeaderQueries):
    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        config: ReplicationConfig,
        *,
        log_config_for: Callable[[str], LogConfig],
        now_ms: int,
        events: EventSink | None = None,
        effects: Callable[[IsrUpdate], None] | None = None,
        wake_at: Callable[[int], None] | None = None,
        followers_changed: Callable[[], None] | None = None,
        truncation: str = "leader_epoch",
    ):
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.config = config
        self._events = events or (lambda kind, data: None)
        self.partitions: dict[TopicPartition, Partition] = {}
        self.produce_purgatory = Purgatory("Produce", wake_at)
        self.fetch_purgatory = Purgatory("Fetch", wake_at)
        self.delete_records_purgatory = Purgatory("DeleteRecords", wake_at)
        self.isr_changes = IsrChangePropagation(
            config.isr_change_propagation_blackout_ms, config.isr_change_propagation_interval_ms
        )
        self.stats = ReplicaManagerStats()
        # (from_follower, waited_ms) per fetch answered: its time in the fetch purgatory.
        self.fetch_waited: Callable[[bool, int], None] = lambda from_follower, ms: None
        # The follower side: fetch state per followed partition (follower_fetch.py).
        self.followers = FollowerFetch(
            self.partitions, config, self.stats, self._events, truncation
        )
        self.consumer_reads = ConsumerReads(config, self.followers, self.fetch_purgatory)
        # Transactions (module docstring); the coordinator's wiring sets both.
        self.txn_marker_listeners: list[TxnMarkerListener] = []
        self.txn_verifier: TransactionVerifier = ALLOW_ALL
        self._effects: list[IsrUpdate] = []
        self._emit: Callable[[IsrUpdate], None] = effects or self._effects.append
        # LeaderAndIsr and StopReplica (role_changes.py).
        self.roles = RoleChanges(
            broker_id,
            self.partitions,
            self.followers,
            log_manager,
            log_config_for,
            events=self._events,
            recheck=self._recheck_delayed,
            followers_changed=followers_changed or (lambda: None),
        )

    # -- lookups -------------------------------------------------------------------
    def get_partition(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    def get_partition_or_error(self, tp: TopicPartition) -> Partition:
        partition = self.partitions.get(tp)
        if partition is None:
            raise PartitionError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"{tp} is not hosted on broker {self.broker_id}",
            )
        return partition

    def leader_partition_or_error(self, tp: TopicPartition) -> Partition:
        partition = self.get_partition_or_error(tp)
        if not partition.is_leader:
            raise PartitionError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {self.broker_id} does not lead {tp}"
            )
        return partition

    def take_effects(self) -> list[IsrUpdate]:
        """Effects queued so far (when no effect sink was given)."""
        effects = list(self._effects)
        self._effects.clear()
        return effects

    def leader_count(self) -> int:
        return sum(1 for p in self.partitions.values() if p.is_leader)

    def under_replicated_count(self) -> int:
        return sum(1 for p in self.partitions.values() if p.is_under_replicated())

    def under_min_isr_count(self) -> int:
        return sum(1 for p in self.partitions.values() if p.is_under_min_isr())

    # -- produce -------------------------------------------------------------------
    def append_records(
        self,
        now_ms: int,
        *,
        acks: int,
        timeout_ms: int,
        entries: dict[TopicPartition, bytes],
        respond: Callable[[dict[TopicPartition, ProduceResult]], None],
        origin: str = "client",
    ) -> None:
        """Append to every leader partition (`origin` "coordinator": transaction markers);
        respond now (acks 0/1, or all failed) or when acks=all holds for every append."""
        if acks not in (0, 1, -1):
            respond({tp: ProduceResult(ErrorCode.INVALID_REQUIRED_ACKS) for tp in entries})
            return
        results: dict[TopicPartition, ProduceResult] = {}
        statuses: dict[TopicPartition, ProducePartitionStatus] = {}
        for tp, records in entries.items():
            result, info = self._append_to_leader(tp, records, acks, now_ms, origin)
            results[tp] = result
            if info is not None:
                statuses[tp] = ProducePartitionStatus(info.last_offset + 1, result)
            else:
                statuses[tp] = ProducePartitionStatus(-1, result, pending=False)
        if acks == -1 and any(s.pending for s in statuses.values()):
            op = DelayedProduce(now_ms + max(timeout_ms, 0), statuses, self.get_partition, respond)
            self.produce_purgatory.try_complete_else_watch(
                op, [tp for tp, s in statuses.items() if s.pending], now_ms
            )
        else:
            respond(results)

    def _append_to_leader(
        self, tp: TopicPartition, records: bytes, acks: int, now_ms: int, origin: str
    ) -> tuple[ProduceResult, LogAppendInfo | None]:
        try:
            partition = self.get_partition_or_error(tp)
            hw_before = partition.high_watermark
            info = partition.append_records_to_leader(records, acks, now_ms, origin)
        except PartitionError as exc:
            return ProduceResult(exc.code, error_message=exc.message), None
        except RecordTooLargeError as exc:
            log.info("%s: rejected produce: %s", tp, exc)
            return ProduceResult(ErrorCode.MESSAGE_TOO_LARGE, error_message=str(exc)), None
        except InvalidTimestampError as exc:
            log.info("%s: rejected produce: %s", tp, exc)
            return ProduceResult(ErrorCode.INVALID_TIMESTAMP, error_message=str(exc)), None
        except RecordError as exc:  # bad CRC, torn batch, bad magic, unknown codec...
            log.info("%s: rejected produce: %s", tp, exc)
            return ProduceResult(ErrorCode.CORRUPT_MESSAGE, error_message=str(exc)), None
        except Exception as exc:  # a storage failure must not take the broker down
            log.exception("%s: append failed", tp)
            return ProduceResult(ErrorCode.KAFKA_STORAGE_ERROR, error_message=str(exc)), None
        if info.duplicate:  # an idempotent producer's retry: answered with the first write
            self.stats.duplicate_batches += 1
            log.debug("%s: duplicate batch, answered with offset %d", tp, info.first_offset)
        else:
            self.stats.bytes_in += len(records)
            self.stats.messages_in += info.last_offset - info.first_offset + 1
        # Followers may be waiting for exactly this data.
        self.fetch_purgatory.check_and_complete(tp, now_ms)
        if partition.high_watermark != hw_before:
            self._recheck_delayed(tp, now_ms)
        result = ProduceResult(
            ErrorCode.NONE,
            base_offset=info.first_offset,
            log_append_time_ms=info.log_append_time_ms,
            log_start_offset=partition.log_start_offset,
        )
        return result, info

    def _recheck_delayed(self, tp: TopicPartition, now_ms: int) -> None:
        """`tp`'s HW, ISR or role changed: its delayed operations may complete now."""
        self.produce_purgatory.check_and_complete(tp, now_ms)
        self.fetch_purgatory.check_and_complete(tp, now_ms)
        self.delete_records_purgatory.check_and_complete(tp, now_ms)

    # -- fetch (leader side) ------------------------------------------------------
    def fetch_messages(
        self,
        now_ms: int,
        params: FetchParams,
        partitions: dict[TopicPartition, FetchPartitionRequest],
        respond: Callable[[dict[TopicPartition, FetchedPartition]], None],
    ) -> None:
        results = self._read(params, partitions, now_ms, record_progress=True)
        total = sum(len(r.records) for r in results.values())
        errors = any(r.error_code or r.preferred_read_replica >= 0 for r in results.values())
        if params.max_wait_ms <= 0 or not partitions or total >= params.min_bytes or errors:
            self.fetch_waited(params.from_follower, 0)
            respond(results)
            return

        def complete(completed_ms: int, unchanged: bool) -> None:
            self.fetch_waited(params.from_follower, max(0, completed_ms - now_ms))
            if unchanged and total == 0:
                # Expired with no change to any of its partitions: the read at arrival
                # (nothing to send) still holds. Not re-reading thousands of idle
                # partitions at every expiry is most of a follower's idle cost.
                respond(results)
                return
            # Only a read: the follower's progress was recorded when its fetch arrived
            # (Kafka's DelayedFetch.onComplete does not record it again either).
            respond(self._read(params, partitions, completed_ms, record_progress=False))

        op = DelayedFetch(
            now_ms + params.max_wait_ms, params, partitions, self.get_partition, complete
        )
        self.fetch_purgatory.try_complete_else_watch(op, partitions.keys(), now_ms)

    def _read(
        self,
        params: FetchParams,
        partitions: dict[TopicPartition, FetchPartitionRequest],
        now_ms: int,
        *,
        record_progress: bool,
    ) -> dict[TopicPartition, FetchedPartition]:
        """Read every partition; with `record_progress`, a follower's read also records
        its progress (ISR expand, HW advance)."""
        results: dict[TopicPartition, FetchedPartition] = {}
        budget = params.max_bytes
        for tp, request in partitions.items():
            limit = max(0, min(request.partition_max_bytes, budget))
            # Kafka's rule: until some partition returned data, at least one whole batch is
            # returned even if it exceeds the limits, so a big batch never blocks a reader.
            result = self._read_one(
                tp,
                request,
                params,
                limit,
                min_one_batch=budget == params.max_bytes,
                now_ms=now_ms,
                record_progress=record_progress,
            )
            budget -= len(result.records)
            results[tp] = result
        return results

    def _read_one(
        self,
        tp: TopicPartition,
        request: FetchPartitionRequest,
        params: FetchParams,
        limit: int,
        *,
        min_one_batch: bool,
        now_ms: int,
        record_progress: bool,
    ) -> FetchedPartition:
        partition = self.partitions.get(tp)
        from_follower = params.replica_id >= 0  # params.from_follower, read once
        try:
            if partition is None:
                raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if from_follower and params.replica_id not in partition.assigned_replicas:
                raise PartitionError(
                    ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    f"broker {params.replica_id} is not a replica of {tp}",
                )
            redirected = self.consumer_reads.redirect(partition, request, params, now_ms)
            if redirected is not None:
                return redirected
            info = partition.read_records(
                request.fetch_offset,
                request.current_leader_epoch,
                limit,
                from_follower=from_follower,
                min_one_batch=min_one_batch,
                require_leader=params.fetch_only_from_leader,
                read_committed=params.read_committed,
            )
        except PartitionError as exc:
            if partition is not None and partition.is_leader:
                return FetchedPartition(
                    exc.code,
                    partition.high_watermark,
                    partition.log_start_offset,
                    partition.log_end_offset,
                )
            return FetchedPartition(exc.code)
        except Exception:
            log.exception("%s: read failed", tp)
            return FetchedPartition(ErrorCode.KAFKA_STORAGE_ERROR)
        if from_follower and record_progress:
            hw_moved, update = partition.update_follower_fetch_state(
                params.replica_id,
                request.fetch_offset,
                request.log_start_offset,
                info.log_end_offset,
                now_ms,
            )
            if update is not None:
                self._emit(update)
            if hw_moved:
                self._recheck_delayed(tp, now_ms)
            else:  # the follower's log start offset may have moved (DeleteRecords)
                self.delete_records_purgatory.check_and_complete(tp, now_ms)
        self.stats.bytes_out += len(info.records)
        self.consumer_reads.count(params, partition, len(info.records))
        return FetchedPartition(
            ErrorCode.NONE,
            # The HW after this fetch was recorded: the follower learns it one round sooner.
            partition.high_watermark if from_follower else info.high_watermark,
            info.log_start_offset,
            info.log_end_offset,
            info.records,
            last_stable_offset=info.last_stable_offset,
            aborted_transactions=info.aborted_transactions,
        )

    # -- DeleteRecords (leader side) ------------------------------------------------
    def delete_records(
        self,
        now_ms: int,
        *,
        timeout_ms: int,
        offsets: dict[TopicPartition, int],
        respond: Callable[[dict[TopicPartition, DeleteRecordsResult]], None],
    ) -> None:
        """Move each partition's log start offset (Kafka's deleteRecords); respond when
        every in-sync replica has followed (a `DelayedDeleteRecords`), or at once if all
        have already or every partition failed."""
        statuses: dict[TopicPartition, DeleteRecordsStatus] = {}
        for tp, offset in offsets.items():
            try:
                partition = self.get_partition_or_error(tp)
                required = partition.delete_records_on_leader(offset)
            except PartitionError as exc:
                result = DeleteRecordsResult(exc.code, error_message=exc.message)
                statuses[tp] = DeleteRecordsStatus(-1, result, pending=False)
                continue
            except Exception as exc:  # a storage failure must not take the broker down
                log.exception("%s: DeleteRecords failed", tp)
                result = DeleteRecordsResult(ErrorCode.KAFKA_STORAGE_ERROR, error_message=str(exc))
                statuses[tp] = DeleteRecordsStatus(-1, result, pending=False)
                continue
            log.info("%s: log start offset moved to %d by DeleteRecords", tp, required)
            self._events(
                "delete_records",
                {"topic": tp.topic, "partition": tp.partition, "log_start_offset": required},
            )
            low = partition.low_watermark_if_leader()
            statuses[tp] = DeleteRecordsStatus(
                required, DeleteRecordsResult(ErrorCode.NONE, low), pending=low < required
            )
            # Consumer fetches parked below the new start must learn they are out of range.
            self.fetch_purgatory.check_and_complete(tp, now_ms)
        pending = [tp for tp, s in statuses.items() if s.pending]
        if not pending:
            respond({tp: s.result for tp, s in statuses.items()})
            return
        op = DelayedDeleteRecords(
            now_ms + max(timeout_ms, 0), statuses, self.get_partition, respond
        )
        self.delete_records_purgatory.try_complete_else_watch(op, pending, now_ms)

    # -- offsets (leader side) ------------------------------------------------------
    # -- controller requests --------------------------------------------------------
    @property
    def controller_epoch(self) -> int:
        return self.roles.controller_epoch

    def become_leader_or_follower(
        self,
        now_ms: int,
        controller_epoch: int,
        states: list[PartitionStateUpdate],
    ) -> BecomeResult:
        """LeaderAndIsr: make partitions leaders or followers (`role_changes.py`)."""
        return self.roles.become_leader_or_follower(now_ms, controller_epoch, states)

    def stop_replicas(
        self,
        now_ms: int,
        controller_epoch: int,
        partitions: list[tuple[TopicPartition, bool, int]],
    ) -> BecomeResult:
        """StopReplica: (partition, delete?, leader epoch) triples (`role_changes.py`)."""
        return self.roles.stop_replicas(now_ms, controller_epoch, partitions)

    # -- ISR maintenance ------------------------------------------------------------
    def maybe_shrink_isrs(self, now_ms: int) -> int:
        """The isr-expiration task. Returns how many ISR updates were started."""
        started = 0
        for partition in self.partitions.values():
            update = partition.maybe_shrink_isr(now_ms, self.config.replica_lag_time_max_ms)
            if update is not None:
                self._emit(update)
                started += 1
        return started

    def complete_isr_update(
        self,
        tp: TopicPartition,
        outcome: IsrUpdateOutcome,
        now_ms: int,
        sent: LeaderAndIsr | None = None,
    ) -> None:
        """ZooKeeper's answer to the ISR write of `sent` (an `IsrUpdate.new_state`)."""
        partition = self.partitions.get(tp)
        if partition is None:
            return
        before = partition.isr
        hw_moved = partition.complete_isr_update(outcome, now_ms, sent)
        after = partition.isr
        if isinstance(outcome, IsrUpdateSucceeded):
            if len(after) < len(before):
                self.stats.isr_shrinks += 1
                kind = "isr_shrink"
            else:
                self.stats.isr_expands += 1
                kind = "isr_expand"
            self.isr_changes.record(tp, now_ms)
            self._events(
                kind,
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "old_isr": list(before),
                    "new_isr": list(after),
                    "replicas": list(partition.assigned_replicas),
                    "leader_epoch": partition.leader_epoch,
                    "high_watermark": partition.high_watermark,
                    "log_end_offset": partition.log_end_offset,
                },
            )
        else:
            self.stats.failed_isr_updates += 1
        # The ISR changed (or the pending change was dropped): produces may now complete.
        if hw_moved or before != after:
            self._recheck_delayed(tp, now_ms)
        else:
            self.produce_purgatory.check_and_complete(tp, now_ms)
            self.delete_records_purgatory.check_and_complete(tp, now_ms)

    def maybe_propagate_isr_changes(self, now_ms: int) -> list[TopicPartition] | None:
        return self.isr_changes.maybe_propagate(now_ms)

    # -- timers and checkpoints -----------------------------------------------------
    def expire_delayed(self, now_ms: int) -> int:
        return (
            self.produce_purgatory.expire_due(now_ms)
            + self.fetch_purgatory.expire_due(now_ms)
            + self.delete_records_purgatory.expire_due(now_ms)
        )

    def next_deadline_ms(self) -> int | None:
        deadlines = [
            d
            for d in (
                self.produce_purgatory.next_deadline_ms(),
                self.fetch_purgatory.next_deadline_ms(),
                self.delete_records_purgatory.next_deadline_ms(),
            )
            if d is not None
        ]
        return min(deadlines) if deadlines else None

    def high_watermarks(self) -> dict[TopicPartition, int]:
        hws = dict(self.roles.checkpointed_hw)
        hws.update({tp: p.high_watermark for tp, p in self.partitions.items()})
        return hws

    def high_watermarks_to_checkpoint(self) -> dict[TopicPartition, int]:
        """The HW of every hosted partition, as `replication-offset-checkpoint` holds
        them (the shell writes them with `log_manager.write_high_watermarks` in a worker
        thread: the write fsyncs twice, milliseconds during which no request is served
        if done on the event loop)."""
        return {tp: p.high_watermark for tp, p in self.partitions.items()}

    def checkpoint_high_watermarks(self) -> None:
        self.log_manager.write_high_watermarks(self.high_watermarks_to_checkpoint())

    def shutdown(self, now_ms: int) -> None:
        """Clean shutdown: answer everything waiting, checkpoint HWs, close logs."""
        self.produce_purgatory.force_complete_all(now_ms)
        self.fetch_purgatory.force_complete_all(now_ms)
        self.delete_records_purgatory.force_complete_all(now_ms)
        self.checkpoint_high_watermarks()
