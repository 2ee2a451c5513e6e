"""The group coordinator's Trio shell: loading, timers, writes and the offsets topic.

How it works:
- `GroupService` owns the sans-IO `GroupCoordinator` (broker/core/group/) and gives it
  its one effect, `append`: an acks=all write to a `__consumer_offsets` partition through
  the `ReplicaManager`, answered when the ISR has it (or with the error the coordinator
  maps, e.g. NOT_COORDINATOR after a leader change).
  TxnOffsetCommit's writes (`_append_txn`) are transactional batches of the producer,
  numbered after its last batch in the partition's producer state.
- `leadership_changed()` is called after every LeaderAndIsr and StopReplica: for each
  offsets partition this broker has become leader of, it starts a loader task
  that reads the partition from its log start in bounded chunks, yielding between them,
  and installs the groups (`replay`: a transactional batch's offsets count once its
  producer's COMMIT marker is read); partitions it no longer leads are unloaded at once.
- `txn_marker_landed` (in the replica manager's `txn_marker_listeners`) completes the
  transactional offset commits of a producer whose marker lands on an offsets partition.
- `reaper` expires the coordinator's delayed joins and heartbeats (woken early by the
  purgatories' `wake_at`); `offsets_expirer` runs `offsets.retention.check.interval.ms`.
- `ensure_offsets_topic()` creates `__consumer_offsets` on first use (FindCoordinator):
  `offsets.topic.num.partitions` partitions, RF min(`offsets.topic.replication.factor`,
  live brokers), compacted, written through ZooKeeper like any CreateTopics.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio
import trio.lowlevel

from broker.core.assignment import AssignmentError
from broker.core.delayed_produce import ProduceResult
from broker.core.group.coordinator import (
    Done,
    GroupConfig,
    GroupCoordinator,
    GroupLoader,
    Records,
)
from broker.core.group.offsets_topic import OFFSETS_TOPIC
from broker.core.log.producer_state import increment_sequence
from broker.core.rack_assignment import choose_assignment
from broker.core.replica_manager import ReplicaManager
from broker.zookeeper.gateway import BrokerZkGateway
from client.protocol import records as rec
from client.protocol.types import TopicPartition
from server_common.zk import ZkError

log = logging.getLogger(__name__)
CONTROL_COMMIT = 1  # Kafka's ControlRecordType: the key is int16 version, int16 type


def transactional_batch(
    records: list[rec.Record], producer_id: int, producer_epoch: int, base_sequence: int = 0
) -> bytes:
    """A batch of `records` by the producer with the transactional bit set."""
    plain = rec.build_batch(
        records,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    header = rec.read_header(plain)
    return rec.pack_batch(
        memoryview(plain)[rec.BATCH_OVERHEAD :],
        base_offset=header.base_offset,
        leader_epoch=header.partition_leader_epoch,
        attributes=header.attributes | rec.ATTR_TRANSACTIONAL,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=header.base_timestamp,
        max_timestamp=header.max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records_count=header.records_count,
    )


def replay(loader: GroupLoader, data: bytes | memoryview, offset: int) -> int:
    """Feed the loader the batches of `data` from `offset` on: plain records as they are,
    transactional ones held until their producer's marker (a control batch); the next
    offset to read."""
    view = memoryview(data)
    for pos, header in rec.iter_batches(view):
        if header.next_offset <= offset:
            continue
        try:
            records = rec.decode_batches(view[pos : pos + header.size])
        except rec.RecordError as exc:
            log.warning("skipping an unreadable batch at %d: %s", header.base_offset, exc)
            records = []
        if header.attributes & rec.ATTR_CONTROL:
            key = records[0].key if records else None
            if key is not None and len(key) >= 4:
                committed = int.from_bytes(key[2:4], "big") == CONTROL_COMMIT
                loader.marker(header.producer_id, committed)
        elif header.attributes & rec.ATTR_TRANSACTIONAL:
            for record in records:
                if record.offset >= offset:
                    loader.add_transactional(header.producer_id, record.key, record.value)
        else:
            for record in records:
                if record.offset >= offset:
                    loader.add(record.key, record.value)
        offset = max(offset, header.next_offset)
    return offset


LOAD_CHUNK_BYTES = 1 << 20
IDLE_REAPER_S = 3600.0


def group_config(config) -> GroupConfig:
    """The coordinator's settings from a BrokerConfig."""
    return GroupConfig(
        offsets_partitions=config["offsets.topic.num.partitions"],
        min_session_timeout_ms=config["group.min.session.timeout.ms"],
        max_session_timeout_ms=config["group.max.session.timeout.ms"],
        initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
        max_size=config["group.max.size"],
        commit_timeout_ms=config["offsets.commit.timeout.ms"],
        metadata_max_bytes=config["offset.metadata.max.bytes"],
        offsets_retention_ms=config["offsets.retention.minutes"] * 60_000,
    )


class GroupService:
    def __init__(
        self,
        config: GroupConfig,
        replica_manager: ReplicaManager,
        gateway: BrokerZkGateway,
        *,
        clock: Callable[[], int],
        events: Callable[[str, dict], None],
        offsets_replication_factor: int,
        offsets_segment_bytes: int,
        retention_check_s: float,
    ) -> None:
        self.rm = replica_manager
        self.gateway = gateway
        self.now_ms = clock
        self.replication_factor = offsets_replication_factor
        self.segment_bytes = offsets_segment_bytes
        self.retention_check_s = retention_check_s
        self.coordinator = GroupCoordinator(
            config, self._append, wake_at=self._wake_at, events=events, append_txn=self._append_txn
        )
        self._wakeup = trio.Event()
        self._leading: set[int] = set()  # offsets partitions we lead (loading or loaded)
        self._nursery: trio.Nursery | None = None
        self._creating = False

    # -- the coordinator's effect --------------------------------------------------------
    def _append(
        self,
        partition: int,
        records: Records,
        now_ms: int,
        done: Done,
    ) -> None:
        tp = TopicPartition(OFFSETS_TOPIC, partition)
        batch = rec.build_batch(
            rec.Record(key=key, value=value, timestamp_ms=now_ms) for key, value in records
        )

        def respond(results: dict[TopicPartition, ProduceResult]) -> None:
            done(results[tp].error_code, self.now_ms())

        self.rm.append_records(
            now_ms,
            acks=-1,
            timeout_ms=self.coordinator.config.commit_timeout_ms,
            entries={tp: batch},
            respond=respond,
        )

    def _append_txn(
        self,
        partition: int,
        records: Records,
        producer_id: int,
        producer_epoch: int,
        now_ms: int,
        done: Done,
    ) -> None:
        """TxnOffsetCommit's write: a transactional batch of the producer, numbered after
        the last batch of the producer's epoch in this partition's producer state (Kafka
        skips the sequence check for its coordinators' writes; here they pass it, so a
        second commit of one epoch is not taken for a duplicate of the first)."""
        tp = TopicPartition(OFFSETS_TOPIC, partition)
        batch = transactional_batch(
            [rec.Record(key=key, value=value, timestamp_ms=now_ms) for key, value in records],
            producer_id,
            producer_epoch,
            self._next_sequence(tp, producer_id, producer_epoch),
        )

        def respond(results: dict[TopicPartition, ProduceResult]) -> None:
            done(results[tp].error_code, self.now_ms())

        self.rm.append_records(
            now_ms,
            acks=-1,
            timeout_ms=self.coordinator.config.commit_timeout_ms,
            entries={tp: batch},
            respond=respond,
        )

    def _next_sequence(self, tp: TopicPartition, producer_id: int, producer_epoch: int) -> int:
        partition = self.rm.get_partition(tp)
        log_ = partition.log if partition is not None else None
        entry = log_.producer_state.entry(producer_id) if log_ is not None else None
        if entry is None or entry.producer_epoch != producer_epoch or entry.last_seq < 0:
            return 0
        return increment_sequence(entry.last_seq, 1)

    def txn_marker_landed(self, tp: TopicPartition, producer_id: int, committed: bool) -> None:
        """A `ReplicaManager.txn_marker_listeners` callback: a COMMIT/ABORT marker was
        appended on a partition this broker leads; on an offsets partition it completes
        the producer's transactional offset commits."""
        if tp.topic == OFFSETS_TOPIC:
            self.coordinator.complete_txn(tp.partition, producer_id, committed, self.now_ms())

    def _wake_at(self, deadline_ms: int) -> None:
        self._wakeup.set()

    # -- tasks ---------------------------------------------------------------------------
    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._reaper)
            nursery.start_soon(self._offsets_expirer)
            task_status.started()
            self.leadership_changed()

    async def _reaper(self) -> None:
        coordinator = self.coordinator
        while True:
            coordinator.expire_due(self.now_ms())
            deadline = coordinator.next_deadline_ms()
            self._wakeup = trio.Event()
            delay = (
                IDLE_REAPER_S if deadline is None else max(0.0, (deadline - self.now_ms()) / 1000)
            )
            with trio.move_on_after(delay):
                await self._wakeup.wait()

    async def _offsets_expirer(self) -> None:
        while True:
            await trio.sleep(self.retention_check_s)
            expired = self.coordinator.expire_offsets(self.now_ms())
            if expired:
                log.info("expired %d committed offset(s)", expired)

    def shutdown(self) -> None:
        self.coordinator.shutdown(self.now_ms())

    # -- leadership of the offsets partitions ------------------------------------------
    def leadership_changed(self) -> None:
        """Load the offsets partitions we newly lead; unload those we stopped leading."""
        if self._nursery is None:
            return
        coordinator = self.coordinator
        now = self.now_ms()
        leading = {
            tp.partition
            for tp, partition in self.rm.partitions.items()
            if tp.topic == OFFSETS_TOPIC and partition.is_leader
        }
        for p in sorted(self._leading - leading):
            gone = coordinator.unload(p, now)
            log.info("no longer coordinating offsets partition %d (%d group(s))", p, gone)
        # As Kafka: a new leader epoch while we stay leader (an ISR change by the
        # controller) is no reason to reload; only becoming leader is.
        for p in sorted(leading - self._leading):
            token = coordinator.begin_loading(p, now)
            self._nursery.start_soon(self._load, p, token)
        self._leading = leading

    async def _load(self, p: int, token: int) -> None:
        tp = TopicPartition(OFFSETS_TOPIC, p)
        loader = GroupLoader()
        started = self.now_ms()
        offset = None
        while self.coordinator.is_loading(p, token):
            partition = self.rm.get_partition(tp)
            if partition is None or not partition.is_leader:
                return  # leadership moved on; leadership_changed unloads
            log_ = partition.log
            if offset is None:
                offset = log_.log_start_offset
            end = log_.log_end_offset
            if offset >= end:
                break
            try:
                data = log_.read(offset, LOAD_CHUNK_BYTES, end).records
            except Exception as exc:  # truncated or retention moved the start: restart later
                log.warning("loading offsets partition %d at %d: %s", p, offset, exc)
                offset = None
                await trio.sleep(0.1)
                continue
            if not data:
                break
            offset = replay(loader, data, offset)
            await trio.lowlevel.checkpoint()
        groups = self.coordinator.finish_loading(p, token, loader, self.now_ms())
        if groups is not None:
            log.info(
                "loaded offsets partition %d: %d group(s) in %d ms",
                p,
                groups,
                self.now_ms() - started,
            )

    # -- the offsets topic ---------------------------------------------------------------
    async def ensure_offsets_topic(self) -> None:
        """Create `__consumer_offsets` if it does not exist (one attempt at a time)."""
        if self._creating:
            return
        self._creating = True
        try:
            await create_internal_topic(
                self.gateway,
                OFFSETS_TOPIC,
                self.coordinator.config.offsets_partitions,
                self.replication_factor,
                lambda rf: {"cleanup.policy": "compact", "segment.bytes": str(self.segment_bytes)},
            )
        finally:
            self._creating = False


async def create_internal_topic(
    gateway: BrokerZkGateway,
    name: str,
    partitions: int,
    replication_factor: int,
    config_for: Callable[[int], dict[str, str]],
) -> None:
    """Create the internal topic `name` (`__consumer_offsets`, `__transaction_state`) if
    it does not exist: `partitions`, the replication factor capped by the live brokers,
    rack-aware, with `config_for(rf)`; a ZooKeeper or assignment failure is logged (the
    next request that needs the topic tries again)."""
    try:
        if await gateway.topic_exists(name):
            return
        live = await gateway.live_broker_racks()  # broker id -> rack
        if not live:
            return
        rf = min(replication_factor, len(live))
        assignment = choose_assignment(partitions, rf, live)
        if await gateway.create_topic(name, assignment, config_for(rf)):
            log.info("created %s with %d partitions, replication factor %d", name, partitions, rf)
    except (ZkError, AssignmentError) as exc:
        log.warning("could not create %s: %s", name, exc)
