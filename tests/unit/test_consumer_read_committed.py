"""The consumer's side of transactions (Kafka's Fetcher): control batches are never
handed out, and read_committed drops the records of the aborted transactions a fetch
answer names."""

from __future__ import annotations

import pytest

from client.consumer.batch import decode_fetched, isolation_level_of
from client.protocol.records import Record, build_batch, build_control_batch, build_kafka_batch
from client.protocol.types import TopicPartition

TP = TopicPartition("t", 0)


def _at(batch: bytes, offset: int) -> bytes:
    out = bytearray(batch)
    out[0:8] = offset.to_bytes(8, "big")  # the base offset lies outside the CRC
    return bytes(out)


def _log() -> bytes:
    def txn(pid: int, value: bytes, kafka: bool = False) -> bytes:
        build = build_kafka_batch if kafka else build_batch
        return build(
            [Record(None, value, 1)], producer_id=pid, producer_epoch=0, transactional=True
        )

    parts = [
        build_batch([Record(None, b"plain", 1)]),  # 0
        txn(1, b"aborted-1"),  # 1
        txn(2, b"committed-2", kafka=True),  # 2
        txn(1, b"aborted-1b", kafka=True),  # 3
        build_control_batch(1, 0, False, 0, 1),  # 4: ABORT producer 1
        build_control_batch(2, 0, True, 0, 1),  # 5: COMMIT producer 2
        txn(1, b"later-1"),  # 6 (a new transaction of producer 1)
    ]
    return b"".join(_at(part, offset) for offset, part in enumerate(parts))


def test_read_uncommitted_sees_every_data_record_and_no_marker():
    batch, next_offset, error = decode_fetched(TP, _log(), 0)
    assert error is None and next_offset == 7
    assert batch.values == [
        b"plain",
        b"aborted-1",
        b"committed-2",
        b"aborted-1b",
        b"later-1",
    ]
    assert batch.offsets == [0, 1, 2, 3, 6]


def test_read_committed_drops_aborted_transactions_records():
    batch, next_offset, error = decode_fetched(TP, _log(), 0, aborted=[(1, 1)])
    assert error is None and next_offset == 7
    assert batch.values == [b"plain", b"committed-2", b"later-1"]
    # From inside the range: the aborted transaction began before the position.
    batch, _, _ = decode_fetched(TP, _log(), 3, aborted=[(1, 1)])
    assert batch.values == [b"later-1"]


def test_a_fetch_of_only_markers_moves_the_position_past_them():
    markers = _at(build_control_batch(1, 0, True, 0, 1), 4)
    batch, next_offset, _ = decode_fetched(TP, markers, 4, aborted=[])
    assert len(batch) == 0 and next_offset == 5


def test_isolation_level_names():
    assert isolation_level_of("read_committed") == 1
    assert isolation_level_of("read_uncommitted") == 0
    with pytest.raises(ValueError, match="isolation_level"):
        isolation_level_of("serializable")
