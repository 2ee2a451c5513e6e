"""Transactional data in the log: control batches (markers), the producer state of open
transactions, the last stable offset (LSO) and the `.txnindex` of aborted transactions,
kept across restarts (clean or not), rebuilt by recovery and cut by truncation."""

from __future__ import annotations

import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.core.log.config import LogConfig
from broker.core.log.errors import ControlBatchError
from broker.core.log.log import Log
from broker.core.log.producer_state import ProducerStateError
from broker.core.log.txn_index import AbortedTxn
from client.protocol.errors import ErrorCode
from client.protocol.records import (
    Record,
    build_batch,
    build_control_batch,
    decode_records,
    iter_batches,
    read_control_marker,
    read_header,
    validate_batches,
)

SMALL = LogConfig(segment_bytes=700, index_interval_bytes=64)


def txn_batch(pid: int, seq: int, count: int = 2, epoch: int = 0) -> bytes:
    records = [Record(None, f"p{pid}-{seq + i}".encode() * 8, 1000, ()) for i in range(count)]
    return build_batch(
        records, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True
    )


def marker(pid: int, commit: bool, coordinator_epoch: int = 0, epoch: int = 0) -> bytes:
    return build_control_batch(pid, epoch, commit, coordinator_epoch, 2000)


def open_log(path, **kwargs) -> Log:
    return Log.open(path / "t-0", SMALL, now_ms=0, **kwargs)


def write_marker(
    log: Log, pid: int, commit: bool, coordinator_epoch: int = 0, epoch: int = 0
) -> int:
    info = log.append_as_leader(
        marker(pid, commit, coordinator_epoch, epoch), 0, now_ms=5, origin="coordinator"
    )
    return info.first_offset


def test_a_control_batch_is_kafkas_marker_readable_by_every_reader():
    batch = marker(7, commit=False, coordinator_epoch=3)
    [header] = validate_batches(batch, strict=False)
    assert header.attributes & 0x30 == 0x30 and not header.attributes & 0x80  # Kafka format
    assert (header.producer_id, header.records_count, header.base_sequence) == (7, 1, -1)
    assert read_control_marker(batch) == (False, 3)
    assert read_control_marker(marker(7, commit=True)) == (True, 0)
    [record] = decode_records(batch)
    assert record.key == b"\x00\x00\x00\x00" and record.value == b"\x00\x00\x00\x00\x00\x03"


def test_clients_may_not_write_markers_but_may_write_transactional_batches(tmp_path):
    log = open_log(tmp_path)
    with pytest.raises(ControlBatchError):
        log.append_as_leader(marker(7, True), 0, now_ms=1)
    log.append_as_leader(txn_batch(7, 0), 0, now_ms=1)
    assert log.producer_state.ongoing_txns == {7: 0}
    with pytest.raises(ControlBatchError):  # the coordinator's path takes only markers
        log.append_as_leader(txn_batch(7, 2), 0, now_ms=1, origin="coordinator")


def test_open_transactions_hold_the_lso_until_their_marker_is_replicated(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(build_batch([Record(None, b"plain", 1)]), 0, now_ms=1)  # offset 0
    log.append_as_leader(txn_batch(1, 0), 0, now_ms=1)  # 1-2
    log.append_as_leader(txn_batch(2, 0), 0, now_ms=1)  # 3-4
    assert log.last_stable_offset(5) == 1
    assert log.last_stable_offset(0) == 0  # never past the HW
    commit_at = write_marker(log, 1, commit=True)  # 5
    assert log.last_stable_offset(6) == 3  # producer 2 still open
    abort_at = write_marker(log, 2, commit=False)  # 6
    assert log.last_stable_offset(6) == 3  # the abort marker is not below the HW yet
    assert log.last_stable_offset(7) == 7
    assert (commit_at, abort_at) == (5, 6)
    assert log.collect_aborted_transactions(0, 7) == [AbortedTxn(2, 3, 6, 7)]
    assert log.collect_aborted_transactions(5, 7) == [AbortedTxn(2, 3, 6, 7)]
    assert log.collect_aborted_transactions(0, 3) == []  # before its data


def test_marker_checks_epochs_as_kafka(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(txn_batch(1, 0, epoch=3), 0, now_ms=1)
    write_marker(log, 1, commit=True, coordinator_epoch=5, epoch=3)
    with pytest.raises(ProducerStateError) as fenced:
        write_marker(log, 1, commit=True, coordinator_epoch=4, epoch=3)
    assert fenced.value.code is ErrorCode.TRANSACTION_COORDINATOR_FENCED
    with pytest.raises(ProducerStateError) as old:
        log.append_as_leader(
            build_control_batch(1, 2, True, 5, 1), 0, now_ms=1, origin="coordinator"
        )
    assert old.value.code is ErrorCode.INVALID_PRODUCER_EPOCH
    # A plain batch from a producer with a transaction open is INVALID_TXN_STATE.
    log.append_as_leader(txn_batch(1, 2, epoch=3), 0, now_ms=1)
    plain = build_batch([Record(None, b"x", 1)], producer_id=1, producer_epoch=3, base_sequence=4)
    with pytest.raises(ProducerStateError) as state:
        log.append_as_leader(plain, 0, now_ms=1)
    assert state.value.code is ErrorCode.INVALID_TXN_STATE


def test_a_follower_keeps_the_same_transactions_and_index(tmp_path):
    leader = Log.open(tmp_path / "a" / "t-0", SMALL, now_ms=0)
    follower = Log.open(tmp_path / "b" / "t-0", SMALL, now_ms=0)
    leader.append_as_leader(txn_batch(1, 0), 0, now_ms=1)
    leader.append_as_leader(txn_batch(2, 0), 0, now_ms=1)
    write_marker(leader, 1, commit=False)
    offset = 0
    while offset < leader.log_end_offset:
        data = leader.read(offset, 1 << 20).records
        follower.append_as_follower(bytearray(data), now_ms=2)
        offset = follower.log_end_offset
    assert follower.producer_state == leader.producer_state
    assert follower.producer_state.ongoing_txns == {2: 2}
    assert follower.collect_aborted_transactions(0, 10) == [AbortedTxn(1, 0, 4, 2)]


def _txn_workload(log: Log) -> None:
    """Enough transactions to roll several segments: aborts, commits, one left open."""
    seqs = {1: 0, 2: 0, 3: 0}
    for round_ in range(4):
        for pid in (1, 2):
            log.append_as_leader(txn_batch(pid, seqs[pid]), 0, now_ms=1)
            seqs[pid] += 2
        write_marker(log, 1, commit=round_ % 2 == 0)
        write_marker(log, 2, commit=False)
    log.append_as_leader(txn_batch(3, 0), 0, now_ms=1)


def test_a_restart_keeps_open_transactions_and_the_index(tmp_path):
    log = open_log(tmp_path)
    _txn_workload(log)
    assert len(log.segments) > 2
    state, leo = log.producer_state, log.log_end_offset
    aborted = log.collect_aborted_transactions(0, leo)
    assert len(aborted) == 6
    assert list((tmp_path / "t-0").glob("*.txnindex"))
    log.flush()
    log.close()
    reopened = open_log(tmp_path, had_clean_shutdown=True, recovery_point=leo)
    assert reopened.producer_state.ongoing_txns == state.ongoing_txns
    assert reopened.collect_aborted_transactions(0, leo) == aborted
    assert reopened.last_stable_offset(leo) == state.ongoing_txns[3]
    reopened.close()
    # Unclean: no snapshots, index files gone or torn: recovery rebuilds all of it.
    for path in (tmp_path / "t-0").glob("*.snapshot"):
        path.unlink()
    indexes = sorted((tmp_path / "t-0").glob("*.txnindex"))
    indexes[0].unlink()
    with open(indexes[-1], "ab") as file:
        file.write(b"\x00\x00\x01")  # a torn entry
    recovered = open_log(tmp_path, recovery_point=0)
    assert recovered.producer_state.ongoing_txns == state.ongoing_txns
    assert recovered.collect_aborted_transactions(0, leo) == aborted
    recovered.close()


def test_truncation_cuts_the_index_and_reopens_transactions(tmp_path):
    log = open_log(tmp_path)
    _txn_workload(log)
    leo = log.log_end_offset
    aborted = log.collect_aborted_transactions(0, leo)
    last_abort = aborted[-1]
    log.truncate_to(last_abort.last_offset)  # the last ABORT marker goes
    assert log.collect_aborted_transactions(0, leo) == aborted[:-1]
    # Producer 2's last transaction is open again, from its first offset.
    assert log.producer_state.ongoing_txns[2] == last_abort.first_offset
    assert log.last_stable_offset(leo) == min(last_abort.first_offset, log.log_end_offset)
    log.close()
    reopened = open_log(tmp_path, recovery_point=0)
    assert reopened.collect_aborted_transactions(0, leo) == aborted[:-1]
    reopened.close()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["data", "commit", "abort"]))))
def test_lso_and_aborted_ranges_match_a_model(tmp_path_factory, ops):
    """Any interleaving of three producers' writes and markers: the LSO is the first
    offset of the earliest open transaction, and the index lists exactly the aborted
    ones, also after a reopen without snapshots (recovery)."""
    path = tmp_path_factory.mktemp("txn")
    log = open_log(path)
    seqs = [0, 0, 0]
    open_from: dict[int, int] = {}
    aborted: list[tuple[int, int, int]] = []
    for pid, op in ops:
        if op == "data":
            offset = log.append_as_leader(txn_batch(pid, seqs[pid], 1), 0, now_ms=1).first_offset
            seqs[pid] += 1
            open_from.setdefault(pid, offset)
        else:
            at = write_marker(log, pid, commit=op == "commit")
            first = open_from.pop(pid, at)
            if op == "abort":
                aborted.append((pid, first, at))
    leo = log.log_end_offset
    assert log.last_stable_offset(leo) == min(open_from.values(), default=leo)
    found = [
        (t.producer_id, t.first_offset, t.last_offset)
        for t in log.collect_aborted_transactions(0, leo)
    ]
    assert found == aborted
    log.close()
    for snapshot in (path / "t-0").glob("*.snapshot"):
        snapshot.unlink()
    recovered = open_log(path, recovery_point=0)
    again = [
        (t.producer_id, t.first_offset, t.last_offset)
        for t in recovered.collect_aborted_transactions(0, leo)
    ]
    assert again == aborted
    assert recovered.producer_state.ongoing_txns == open_from
    recovered.close()
    shutil.rmtree(path)


def test_headers_of_markers_have_no_sequence():
    header = read_header(marker(1, True))
    assert header.base_sequence == -1
    assert [h.producer_id for _, h in iter_batches(marker(1, True) + marker(2, False))] == [1, 2]


def test_the_cleaner_keeps_markers_drops_aborted_data_and_leaves_open_transactions(tmp_path):
    """A compacted log with transactions: an aborted record never hides the committed one
    of the same key and goes away; every marker stays, so recovery still ends each
    transaction; an open transaction's records are not touched."""
    from broker.core.log.cleaner import CleaningJob
    from broker.core.log.cleaner_manager import log_to_clean
    from client.protocol.types import TopicPartition

    config = LogConfig(cleanup_policy="compact", segment_bytes=400, delete_retention_ms=1_000)
    log = Log.open(tmp_path / "t-0", config, now_ms=0)

    def keyed(pid: int, seq: int, key: bytes, value: bytes) -> None:
        batch = build_batch(
            [Record(key, value, 1000)],
            producer_id=pid,
            producer_epoch=0,
            base_sequence=seq,
            transactional=True,
        )
        log.append_as_leader(batch, 0, now_ms=1)

    for round_ in range(3):
        keyed(1, round_, b"k", f"committed-{round_}".encode())
        write_marker(log, 1, commit=True)
        keyed(2, round_, b"k", f"aborted-{round_}".encode())
        write_marker(log, 2, commit=False)
    keyed(3, 0, b"k", b"open")
    log.append_as_leader(build_batch([Record(b"z", b"filler" * 40, 1000)]), 0, now_ms=1)
    log.roll(now_ms=2)
    tp = TopicPartition("t", 0)
    job = CleaningJob(
        log_to_clean(tp, log, 10_000, log.log_end_offset), now_ms=10_000, map_capacity=1000
    )
    job.run_to_end(max_bytes_per_step=256)
    values, markers = [], 0
    offset = 0
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).records
        for position, header in iter_batches(data):
            if header.attributes & 0x20:
                markers += 1
            else:
                values += [r.value for r in decode_records(data[position : position + header.size])]
            offset = header.next_offset
    assert markers == 6
    assert b"committed-2" in values and b"open" in values
    assert not [v for v in values if v.startswith(b"aborted")]
    assert b"committed-0" not in values  # compacted away by the newer committed value
    log.close()
    reopened = Log.open(tmp_path / "t-0", config, now_ms=0, recovery_point=0)
    assert reopened.producer_state.ongoing_txns == {3: log.producer_state.ongoing_txns[3]}
    reopened.close()


def test_dump_log_shows_markers_and_the_txnindex(tmp_path, capsys):
    import argparse

    from tools.commands.dump_log import _dump_log

    log = open_log(tmp_path)
    log.append_as_leader(txn_batch(4, 0), 0, now_ms=1)
    write_marker(log, 4, commit=False, coordinator_epoch=7)
    log.flush()
    log.close()
    directory = tmp_path / "t-0"
    files = ",".join(
        str(p) for p in sorted(directory.glob("*.log")) + sorted(directory.glob("*.txnindex"))
    )
    args = argparse.Namespace(files=files, print_data_log=True, deep_iteration=False)
    assert _dump_log(args) == 0
    out = capsys.readouterr().out
    assert "isTransactional: true isControl: false" in out
    assert "isTransactional: true isControl: true" in out
    assert "endTxnMarker: ABORT coordinatorEpoch: 7" in out
    assert "version: 0 producerId: 4 firstOffset: 0 lastOffset: 2 lastStableOffset: 3" in out
