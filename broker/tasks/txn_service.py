"""The transaction coordinator's Trio shell: `__transaction_state`, loading, timers, markers.

How it works:
- `TxnService` owns the sans-IO `TransactionCoordinator` (broker/core/txn/) and gives it
  its two effects: `append`, an acks=all write of one record to a `__transaction_state`
  partition through the `ReplicaManager` (answered when the ISR has it, or with the error
  the coordinator maps), and `send_markers`, the `MarkerSender` (txn_markers.py), whose
  completions go back to `coordinator.markers_written`.
- `leadership_changed()` is called after every LeaderAndIsr and StopReplica: for each
  `__transaction_state` partition this broker has become leader of, a loader task reads
  it from its log start in bounded chunks and installs its ids (the partition's leader
  epoch is the coordinator epoch the markers carry); the coordinator then resends the
  markers of every transaction it finds in PrepareCommit/PrepareAbort. Partitions no
  longer led are unloaded at once (their ids answer NOT_COORDINATOR).
- `_timers`: every `transaction.abort.timed.out.transaction.cleanup.interval.ms` the
  timed-out transactions are aborted; every
  `transaction.remove.expired.transaction.cleanup.interval.ms` idle ids expire.
- `ensure_state_topic()` creates `__transaction_state` on first use (FindCoordinator
  key type 1): `transaction.state.log.num.partitions`, RF min(replication factor, live
  brokers), compacted, min.insync.replicas min(`transaction.state.log.min.isr`, RF).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import trio
import trio.lowlevel

from broker.core.delayed_produce import ProduceResult
from broker.core.metadata_cache import MetadataCache
from broker.core.replica_manager import ReplicaManager
from broker.core.txn.config import TxnConfig
from broker.core.txn.coordinator import MarkerJob, TransactionCoordinator
from broker.core.txn.manager import StateLoader
from broker.core.txn.state_log import TRANSACTION_STATE_TOPIC
from broker.tasks.group_service import create_internal_topic
from broker.tasks.txn_markers import MarkerSender
from broker.zookeeper.gateway import BrokerZkGateway
from client.connection import Connector
from client.protocol import records as rec
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TxnTopicSettings:
    replication_factor: int = 3
    min_isr: int = 2
    segment_bytes: int = 100 * 1024 * 1024
    load_chunk_bytes: int = 5 * 1024 * 1024
    abort_interval_s: float = 10.0
    expire_interval_s: float = 3600.0

    @classmethod
    def from_config(cls, config) -> TxnTopicSettings:
        return cls(
            replication_factor=config["transaction.state.log.replication.factor"],
            min_isr=config["transaction.state.log.min.isr"],
            segment_bytes=config["transaction.state.log.segment.bytes"],
            load_chunk_bytes=config["transaction.state.log.load.buffer.size"],
            abort_interval_s=config["transaction.abort.timed.out.transaction.cleanup.interval.ms"]
            / 1000,
            expire_interval_s=config["transaction.remove.expired.transaction.cleanup.interval.ms"]
            / 1000,
        )


class TxnService:
    def __init__(
        self,
        config: TxnConfig,
        settings: TxnTopicSettings,
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache,
        gateway: BrokerZkGateway,
        *,
        broker_id: int,
        connector: Connector | None,
        clock: Callable[[], int],
        events: Callable[[str, dict], None],
    ) -> None:
        self.rm = replica_manager
        self.gateway = gateway
        self.settings = settings
        self.now_ms = clock
        self.markers = MarkerSender(
            metadata_cache,
            broker_id=broker_id,
            connector=connector,
            on_done=self._markers_done,
            is_current=self._job_current,
        )
        self.coordinator = TransactionCoordinator(
            config, self._append, self.markers.add, events=events
        )
        self._leading: set[int] = set()
        self._nursery: trio.Nursery | None = None
        self._creating = False

    # -- the coordinator's effects ---------------------------------------------------------
    def _append(
        self,
        partition: int,
        key: bytes,
        value: bytes | None,
        now_ms: int,
        done: Callable[[ErrorCode], None],
    ) -> None:
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition)
        batch = rec.build_batch([rec.Record(key=key, value=value, timestamp_ms=now_ms)])

        def respond(results: dict[TopicPartition, ProduceResult]) -> None:
            done(results[tp].error_code)

        self.rm.append_records(
            now_ms,
            acks=-1,
            timeout_ms=self.coordinator.config.write_timeout_ms,
            entries={tp: batch},
            respond=respond,
        )

    def _markers_done(self, job: MarkerJob) -> None:
        self.coordinator.markers_written(job, self.now_ms())

    def _job_current(self, job: MarkerJob) -> bool:
        return self.coordinator.job_current(job)

    # -- tasks -----------------------------------------------------------------------------
    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self.markers.run)
            nursery.start_soon(self._abort_timer)
            nursery.start_soon(self._expire_timer)
            task_status.started()
            self.leadership_changed()

    async def _abort_timer(self) -> None:
        while True:
            await trio.sleep(self.settings.abort_interval_s)
            aborted = self.coordinator.abort_timed_out(self.now_ms())
            if aborted:
                log.info("aborting %d timed-out transaction(s)", aborted)

    async def _expire_timer(self) -> None:
        while True:
            await trio.sleep(self.settings.expire_interval_s)
            expired = self.coordinator.expire_ids(self.now_ms())
            if expired:
                log.info("expiring %d transactional id(s)", expired)

    # -- leadership of the __transaction_state partitions --------------------------------
    def leadership_changed(self) -> None:
        if self._nursery is None:
            return
        leading = {
            tp.partition: partition.leader_epoch
            for tp, partition in self.rm.partitions.items()
            if tp.topic == TRANSACTION_STATE_TOPIC and partition.is_leader
        }
        for p in sorted(self._leading - set(leading)):
            gone = self.coordinator.unload(p)
            log.info("no longer coordinating %s-%d (%d id(s))", TRANSACTION_STATE_TOPIC, p, gone)
        for p in sorted(set(leading) - self._leading):
            token = self.coordinator.begin_loading(p, leading[p])
            self._nursery.start_soon(self._load, p, token)
        self._leading = set(leading)

    async def _load(self, p: int, token: int) -> None:
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, p)
        loader = StateLoader()
        offset = None
        while self.coordinator.is_loading(p, token):
            partition = self.rm.get_partition(tp)
            if partition is None or not partition.is_leader:
                return
            log_ = partition.log
            if offset is None:
                offset = log_.log_start_offset
            end = log_.log_end_offset
            if offset >= end:
                break
            try:
                data = log_.read(offset, self.settings.load_chunk_bytes, end).records
            except Exception as exc:  # truncated, or retention moved the start: restart
                log.warning("loading %s at %d: %s", tp, offset, exc)
                offset = None
                await trio.sleep(0.1)
                continue
            if not data:
                break
            for record in rec.decode_batches(data):
                if record.offset >= offset:
                    loader.add(record.key, record.value)
                    offset = record.offset + 1
            for _, header in rec.iter_batches(data):
                offset = max(offset, header.next_offset)
            await trio.lowlevel.checkpoint()
        count = self.coordinator.finish_loading(p, token, loader)
        if count is not None:
            log.info("loaded %s: %d transactional id(s)", tp, count)

    # -- the state topic -------------------------------------------------------------------
    async def ensure_state_topic(self) -> None:
        """Create `__transaction_state` if it does not exist (one attempt at a time)."""
        if self._creating:
            return
        self._creating = True
        try:
            await create_internal_topic(
                self.gateway,
                TRANSACTION_STATE_TOPIC,
                self.coordinator.config.state_partitions,
                self.settings.replication_factor,
                lambda rf: {
                    "cleanup.policy": "compact",
                    "segment.bytes": str(self.settings.segment_bytes),
                    "min.insync.replicas": str(min(self.settings.min_isr, rf)),
                    "unclean.leader.election.enable": "false",
                },
            )
        finally:
            self._creating = False
