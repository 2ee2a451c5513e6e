"""The data source's `read_committed` option (no Spark session needed: the reader's arrow
output is checked): transaction markers and aborted transactions' records (the
partition's `.txnindex`) are left out, and nothing at or past the last stable offset
(the earliest open transaction, `spark.lso`) is read; without it the log is read as it
is, markers included. The header-only LSO scan agrees with the log store's own producer
state on random transactional histories."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.core.log.config import LogConfig
from broker.core.log.log import Log
from client.protocol.records import Record, build_batch, build_control_batch
from spark.datasource import plan_input_partitions
from spark.decode import SegmentSlice, aborted_transactions, read_slice_records
from spark.lso import first_open_offset, with_stable_end
from tests.spark.synthetic import log_dir_of, write_meta


def _txn(pid: int, seq: int, value: bytes, *, transactional: bool = True) -> bytes:
    return build_batch(
        [Record(None, value, 1)],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        transactional=transactional,
    )


def _plain(value: bytes) -> bytes:
    return build_batch([Record(None, value, 1)])


def _end(log: Log, pid: int, commit: bool) -> None:
    marker = build_control_batch(pid, 0, commit, 0, 1)
    log.append_as_leader(marker, 0, now_ms=1, origin="coordinator")


def _pieces(directory: Path, root: Path) -> list[SegmentSlice]:
    return [
        SegmentSlice(str(path), str(root), 1, "t", 0, int(path.stem), 0, path.stat().st_size)
        for path in sorted(directory.glob("*.log"))
    ]


def _values(pieces, **options) -> list[bytes]:
    return [
        value
        for piece in pieces
        for table in read_slice_records(piece, **options)
        for value in table.column("value").to_pylist()
    ]


def test_read_committed_leaves_out_markers_and_aborted_records(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=300), now_ms=0)
    log.append_as_leader(_plain(b"plain"), 0, now_ms=1)
    for round_ in range(3):
        log.append_as_leader(_txn(1, round_, b"kept-%d" % round_), 0, now_ms=1)
        log.append_as_leader(_txn(2, round_, b"aborted-%d" % round_), 0, now_ms=1)
        _end(log, 1, True)
        _end(log, 2, False)
    log.flush()
    log.close()
    directory = tmp_path / "t-0"
    assert sorted(aborted_transactions(str(directory))) == [2]
    pieces = with_stable_end(_pieces(directory, tmp_path))
    assert len(pieces) > 1
    assert {piece.stable_end for piece in pieces} == {None}  # every transaction is closed

    assert _values(pieces, read_committed=True) == [b"plain", b"kept-0", b"kept-1", b"kept-2"]
    raw = _values(pieces)
    assert len(raw) == 1 + 3 * 4  # every data record and every marker (one record each)
    assert b"aborted-1" in raw


def _planned_values(root: Path, **options) -> list[bytes]:
    groups = plan_input_partitions(str(root), read_committed=True, **options)
    return _values([piece for group in groups for piece in group], read_committed=True)


def _log_with_open_transaction(root: Path) -> tuple[Log, int]:
    """Broker 1's `t-0` under `root`: committed, plain, producer 2's transaction left
    open (at the offset returned), then committed, aborted and plain records after it."""
    write_meta(log_dir_of(root, 1), 1)
    log = Log.open(log_dir_of(root, 1) / "t-0", LogConfig(segment_bytes=300), now_ms=0)
    log.append_as_leader(_txn(1, 0, b"committed-0"), 0, now_ms=1)
    _end(log, 1, True)
    log.append_as_leader(_plain(b"plain-0"), 0, now_ms=1)
    open_at = log.log_end_offset
    log.append_as_leader(_txn(2, 0, b"open"), 0, now_ms=1)  # no marker yet
    log.append_as_leader(_plain(b"plain-1"), 0, now_ms=1)
    log.append_as_leader(_txn(3, 0, b"committed-1"), 0, now_ms=1)
    _end(log, 3, True)
    log.append_as_leader(_txn(1, 1, b"aborted"), 0, now_ms=1)
    _end(log, 1, False)
    for i in range(4):
        log.append_as_leader(_plain(b"plain-%d" % (2 + i)), 0, now_ms=1)
    log.flush()
    return log, open_at


def test_an_open_transaction_holds_back_every_later_record_until_it_ends(tmp_path):
    log, open_at = _log_with_open_transaction(tmp_path)
    directory = log_dir_of(tmp_path, 1) / "t-0"
    assert log.last_stable_offset(log.log_end_offset) == open_at  # the broker agrees

    pieces = _pieces(directory, tmp_path)
    assert len(pieces) > 2
    assert first_open_offset(pieces) == open_at
    # Kafka's read_committed: nothing at or past the open transaction's first offset.
    assert _planned_values(tmp_path) == [b"committed-0", b"plain-0"]
    # Segments wholly past the LSO are not planned at all.
    planned = plan_input_partitions(str(tmp_path), read_committed=True)
    assert len(planned) < len(plan_input_partitions(str(tmp_path)))
    # An offset range ending before the open transaction is not bounded by it.
    assert first_open_offset(pieces, until=open_at - 1) is None

    _end(log, 2, True)  # the transaction commits: everything after it is released
    log.flush()
    log.close()
    assert _planned_values(tmp_path) == [
        b"committed-0",
        b"plain-0",
        b"open",
        b"plain-1",
        b"committed-1",
        *(b"plain-%d" % (2 + i) for i in range(4)),
    ]


@pytest.mark.spark
def test_spark_read_committed_stops_at_the_open_transaction(spark, tmp_path):
    log, open_at = _log_with_open_transaction(tmp_path)
    log.close()
    rows = (
        spark.read.format("tributary")
        .option("read_committed", "true")
        .option("pushdown", "true")  # the offset range is pushed down to the plan too
        .load(str(tmp_path))
        .where(f"offset <= {open_at + 5}")
        .collect()
    )
    assert sorted((row.offset, row.value) for row in rows) == [
        (0, b"committed-0"),
        (2, b"plain-0"),
    ]
    assert open_at == 3


# One step of a history: (producer 1-3, what it does).
_STEPS = st.lists(
    st.tuples(
        st.integers(1, 3), st.sampled_from(["txn", "commit", "abort", "plain", "idempotent"])
    ),
    max_size=40,
)


@settings(max_examples=40, deadline=None)
@given(steps=_STEPS)
def test_the_header_scan_agrees_with_the_logs_producer_state(steps):
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "t-0"
        log = Log.open(directory, LogConfig(segment_bytes=400), now_ms=0)
        sequences = {1: 0, 2: 0, 3: 0}
        open_ = set()
        for pid, step in steps:
            if step in ("commit", "abort"):
                _end(log, pid, step == "commit")  # also with no open transaction
                open_.discard(pid)
            elif step == "plain":
                log.append_as_leader(_plain(b"p"), 0, now_ms=1)
            else:  # a producer with an open transaction may only write transactionally
                transactional = step == "txn" or pid in open_
                batch = _txn(pid, sequences[pid], b"v", transactional=transactional)
                log.append_as_leader(batch, 0, now_ms=1)
                sequences[pid] += 1
                if transactional:
                    open_.add(pid)
        log.flush()
        leo = log.log_end_offset
        expected = log.last_stable_offset(leo)
        log.close()
        found = first_open_offset(_pieces(directory, Path(tmp)))
        assert (leo if found is None else found) == expected
        reopened = Log.open(directory, LogConfig(segment_bytes=400), now_ms=0)
        try:  # and with the state the store rebuilds from its files
            assert reopened.last_stable_offset(leo) == expected
        finally:
            reopened.close()
