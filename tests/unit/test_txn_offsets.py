"""Transactional offset commits in the group coordinator (TxnOffsetCommit, KIP-447):
pending until the producer's marker lands on the offsets partition (then committed or
dropped), invisible to OffsetFetch meanwhile, zombie members fenced by generation, and
a reload of `__consumer_offsets` deciding by the markers in the log (the group service's
`replay` reads transactional and control batches)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from broker.core.group import offsets_topic as ot
from broker.core.group.coordinator import GroupConfig, GroupCoordinator, GroupLoader
from broker.core.metadata_cache import MetadataCache
from broker.handlers.groups import GroupHandlers
from broker.tasks.group_service import replay, transactional_batch
from client.protocol import messages as m
from client.protocol import records as rec
from client.protocol.errors import ErrorCode

CONFIG = GroupConfig(offsets_partitions=1, min_session_timeout_ms=100, initial_rebalance_delay_ms=0)
PID, EPOCH = 7, 3


@dataclass
class OffsetsPartition:
    """`__consumer_offsets` partition 0 as batches: plain, transactional and markers."""

    batches: list[bytes] = field(default_factory=list)

    def _add(self, batch: bytes) -> None:
        offset = sum(rec.read_header(b).records_count for b in self.batches)
        header = rec.read_header(batch)
        self.batches.append(
            rec.pack_batch(
                memoryview(batch)[rec.BATCH_OVERHEAD :],
                base_offset=offset,
                leader_epoch=0,
                attributes=header.attributes,
                last_offset_delta=header.last_offset_delta,
                base_timestamp=header.base_timestamp,
                max_timestamp=header.max_timestamp,
                producer_id=header.producer_id,
                producer_epoch=header.producer_epoch,
                base_sequence=header.base_sequence,
                records_count=header.records_count,
            )
        )

    def append(self, partition, records, now_ms, done) -> None:
        self._add(
            rec.build_batch(rec.Record(key=k, value=v, timestamp_ms=now_ms) for k, v in records)
        )
        done(ErrorCode.NONE, now_ms)

    def append_txn(self, partition, records, pid, epoch, now_ms, done) -> None:
        self._add(
            transactional_batch(
                [rec.Record(key=k, value=v, timestamp_ms=now_ms) for k, v in records], pid, epoch
            )
        )
        done(ErrorCode.NONE, now_ms)

    def marker(self, pid: int, committed: bool) -> None:
        """A control batch as Kafka writes it: key int16 version 0, int16 type."""
        key = b"\x00\x00\x00\x01" if committed else b"\x00\x00\x00\x00"
        plain = transactional_batch([rec.Record(key=key, value=b"", timestamp_ms=0)], pid, EPOCH)
        header = rec.read_header(plain)
        self._add(
            rec.pack_batch(
                memoryview(plain)[rec.BATCH_OVERHEAD :],
                base_offset=0,
                leader_epoch=0,
                attributes=header.attributes | rec.ATTR_CONTROL,
                last_offset_delta=0,
                base_timestamp=0,
                max_timestamp=0,
                producer_id=pid,
                producer_epoch=EPOCH,
                base_sequence=-1,
                records_count=1,
            )
        )


def coordinator_over(log: OffsetsPartition) -> GroupCoordinator:
    coordinator = GroupCoordinator(CONFIG, log.append, append_txn=log.append_txn)
    token = coordinator.begin_loading(0, 0)
    loader = GroupLoader()
    replay(loader, b"".join(log.batches), 0)
    coordinator.finish_loading(0, token, loader, 0)
    return coordinator


def txn_commit(coordinator, offset, *, generation=-1, member="", pid=PID, partition=0):
    answers: list = []
    coordinator.commit_txn_offsets(
        "g",
        pid,
        EPOCH,
        generation,
        member,
        None,
        {("t", partition): ot.OffsetValue(offset)},
        0,
        answers.append,
    )
    return answers[0][("t", partition)]


def committed(coordinator, partition=0):
    code, offsets = coordinator.fetch_offsets("g", [("t", partition)])
    assert code == ErrorCode.NONE
    value = offsets[("t", partition)]
    return None if value is None else value.offset


def test_pending_until_commit_marker_then_visible():
    log = OffsetsPartition()
    coordinator = coordinator_over(log)
    assert txn_commit(coordinator, 10) == ErrorCode.NONE
    assert committed(coordinator) is None  # pending: not shown
    assert coordinator.txn_offsets.has_pending("g", ("t", 0))
    assert coordinator.complete_txn(0, PID, True, 1) == 1
    assert committed(coordinator) == 10
    assert not coordinator.txn_offsets.has_pending("g")


def test_abort_marker_drops_them_and_other_producers_are_untouched():
    coordinator = coordinator_over(OffsetsPartition())
    assert txn_commit(coordinator, 10, pid=1) == ErrorCode.NONE
    assert txn_commit(coordinator, 20, pid=2, partition=1) == ErrorCode.NONE
    coordinator.complete_txn(0, 1, False, 1)
    assert committed(coordinator) is None
    coordinator.complete_txn(0, 2, True, 1)
    assert committed(coordinator, 1) == 20


def test_a_member_of_an_old_generation_is_fenced():
    coordinator = coordinator_over(OffsetsPartition())
    assert txn_commit(coordinator, 10, generation=5, member="zombie") == ErrorCode.UNKNOWN_MEMBER_ID
    coordinator.unload(0, 0)
    assert txn_commit(coordinator, 10) == ErrorCode.NOT_COORDINATOR


def test_reload_decides_by_the_markers_in_the_log():
    log = OffsetsPartition()
    first = coordinator_over(log)
    txn_commit(first, 10, pid=1)  # committed below
    txn_commit(first, 20, pid=2, partition=1)  # aborted below
    txn_commit(first, 30, pid=3, partition=2)  # still open at the failover
    log.marker(1, True)
    log.marker(2, False)
    second = coordinator_over(log)
    assert committed(second) == 10
    assert committed(second, 1) is None
    assert committed(second, 2) is None and second.txn_offsets.has_pending("g", ("t", 2))
    second.complete_txn(0, 3, True, 5)  # the open one's marker lands on the new coordinator
    assert committed(second, 2) == 30


def test_offset_fetch_require_stable_waits_for_the_marker():
    """KIP-447: a read_committed consumer's OffsetFetch (require_stable) is told
    UNSTABLE_OFFSET_COMMIT for a partition with a pending transactional commit."""
    coordinator = coordinator_over(OffsetsPartition())
    handlers = GroupHandlers(
        SimpleNamespace(coordinator=coordinator),  # the service: only its coordinator is used
        MetadataCache(),
        broker_id=1,
        clock=lambda: 0,
    )
    txn_commit(coordinator, 10)

    def fetch(stable: bool) -> m.OffsetFetchResponsePartition:
        request = m.OffsetFetchRequest(
            group_id="g",
            topics=[m.OffsetFetchTopic(name="t", partition_indexes=[0])],
            require_stable=stable,
        )
        [topic] = handlers.offset_fetch(request).topics
        return topic.partitions[0]

    assert fetch(True).error_code == ErrorCode.UNSTABLE_OFFSET_COMMIT
    assert (fetch(False).error_code, fetch(False).committed_offset) == (ErrorCode.NONE, -1)
    coordinator.complete_txn(0, PID, True, 1)
    assert (fetch(True).error_code, fetch(True).committed_offset) == (ErrorCode.NONE, 10)
