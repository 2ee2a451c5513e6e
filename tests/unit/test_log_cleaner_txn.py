"""The log cleaner and transactions, as Kafka 2.8's LogCleaner: aborted data goes in the
first pass while its ABORT marker and `.txnindex` entry stay; markers whose transaction
has no batch left go once past `delete.retention.ms`; each producer's last batch stays,
so a read_committed reader and recovery see the same thing before and after cleaning.

Sans-IO over a real `Log` in a temporary directory, with an injected clock; the
read_committed reader is the real consumer's decoder (`decode_fetched`) fed as the
broker's fetch path feeds it (records below the LSO and the aborted transactions
overlapping them)."""

from __future__ import annotations

import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.core.log.cleaner import CleaningJob
from broker.core.log.cleaner_manager import log_to_clean
from broker.core.log.config import LogConfig
from broker.core.log.log import Log
from broker.core.log.txn_index import read_txn_index
from client.consumer.batch import decode_fetched
from client.protocol.errors import ErrorCode
from client.protocol.records import (
    ATTR_CONTROL,
    Record,
    build_batch,
    build_control_batch,
    iter_batches,
    read_control_marker,
)
from client.protocol.types import TopicPartition

TP = TopicPartition("t", 0)
# One group per pass (segments are rolled by hand), tombstones/markers kept 1 s.
CONFIG = LogConfig(cleanup_policy="compact", segment_bytes=1 << 20, delete_retention_ms=1_000)
DATA_TS = 1_000
MARKER_TS = 2_000
BEFORE_HORIZON = 2_500  # now - delete.retention.ms < the markers' timestamps
AFTER_HORIZON = 10_000


class Writer:
    """Appends to a log as clients and the coordinator do, tracking sequences."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.seqs: dict[int, int] = {}
        self.filler = 0

    def txn(self, pid: int, *records: tuple[bytes, bytes | None], epoch: int = 0) -> int:
        seq = self.seqs.get(pid, 0)
        self.seqs[pid] = seq + len(records)
        batch = build_batch(
            [Record(k, v, DATA_TS) for k, v in records],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            transactional=True,
        )
        return self.log.append_as_leader(batch, 0, now_ms=DATA_TS).first_offset

    def idempotent(self, pid: int, key: bytes, value: bytes, seq: int | None = None) -> int:
        seq = self.seqs.get(pid, 0) if seq is None else seq
        self.seqs[pid] = seq + 1
        batch = build_batch(
            [Record(key, value, DATA_TS)], producer_id=pid, producer_epoch=0, base_sequence=seq
        )
        return self.log.append_as_leader(batch, 0, now_ms=DATA_TS).first_offset

    def end(self, pid: int, commit: bool, epoch: int = 0) -> int:
        batch = build_control_batch(pid, epoch, commit, 0, MARKER_TS)
        return self.log.append_as_leader(
            batch, 0, now_ms=MARKER_TS, origin="coordinator"
        ).first_offset

    def plain(self, key: bytes, value: bytes | None) -> int:
        batch = build_batch([Record(key, value, DATA_TS)])
        return self.log.append_as_leader(batch, 0, now_ms=DATA_TS).first_offset

    def roll(self, filler: bool = True) -> None:
        """A filler record (so no marker ends a segment) and a new active segment."""
        if filler:
            self.filler += 1
            self.plain(b"filler", str(self.filler).encode())
        self.log.roll(DATA_TS)


def open_log(directory: Path, config: LogConfig = CONFIG, **kwargs) -> Log:
    return Log.open(directory / "t-0", config, now_ms=0, **kwargs)


def clean(log: Log, now_ms: int) -> CleaningJob:
    hw = log.log_end_offset
    job = CleaningJob(log_to_clean(TP, log, now_ms, hw), now_ms=now_ms, map_capacity=1 << 20)
    job.run_to_end(max_bytes_per_step=200)
    assert not job.aborted
    return job


def markers(log: Log) -> list[tuple[int, int, bool]]:
    """(offset, producer id, commit) of every marker in the log."""
    found = []
    for batch_offset, data in batches(log):
        header = data[1]
        if header.attributes & ATTR_CONTROL:
            commit = read_control_marker(data[0])[0]
            found.append((batch_offset, header.producer_id, commit))
    return found


def batches(log: Log):
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        records = log.read(offset, 1 << 20).records
        for position, header in iter_batches(records):
            yield header.base_offset, (records[position : position + header.size], header)
            offset = header.next_offset


def read_committed(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """What a read_committed consumer from the start gets, fetching as the broker answers
    (`Partition.read`): batches below the LSO and the aborted transactions they overlap."""
    lso = log.last_stable_offset(log.log_end_offset)
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = log.log_start_offset
    while offset < lso:
        records = bytes(log.read(offset, 1 << 20, lso).records)
        if not records:  # cleaning left nothing below the LSO past `offset`
            break
        end = max(h.next_offset for _, h in iter_batches(records))
        aborted = [
            (t.producer_id, t.first_offset) for t in log.collect_aborted_transactions(offset, end)
        ]
        batch, next_offset, corrupt = decode_fetched(TP, records, offset, aborted=aborted)
        assert corrupt is None
        out += zip(batch.offsets, batch.keys, batch.values, strict=True)
        offset = max(next_offset, end)
    return out


def latest(records) -> dict[bytes, bytes | None]:
    view: dict[bytes, bytes | None] = {}
    for _, key, value in records:
        if key is not None and key != b"filler":
            view[key] = value
    return {k: v for k, v in view.items() if v is not None}


def txnindex_of(log: Log, base: int) -> list[tuple[int, int, int]]:
    path = log.directory / f"{base:020d}.txnindex"
    if not path.exists():
        return []
    entries, clean_end = read_txn_index(path.read_bytes())
    assert clean_end
    return [(e.producer_id, e.first_offset, e.last_offset) for e in entries]


def aborted_list(log: Log) -> list[tuple[int, int, int]]:
    return [
        (t.producer_id, t.first_offset, t.last_offset)
        for t in log.collect_aborted_transactions(0, log.log_end_offset)
    ]


# -- tests --------------------------------------------------------------------------------


def test_a_committed_marker_goes_after_its_records_and_delete_retention(tmp_path):
    log = open_log(tmp_path)
    w = Writer(log)
    w.txn(1, (b"a", b"1"))
    w.txn(1, (b"b", b"1"))
    old_commit = w.end(1, commit=True)
    w.txn(1, (b"a", b"2"), (b"b", b"2"))  # supersedes every record of the first one
    new_commit = w.end(1, commit=True)
    w.roll()
    view = latest(read_committed(log))
    assert view == {b"a": b"2", b"b": b"2"}

    clean(log, BEFORE_HORIZON)  # the old records go; their marker was read with them
    assert [m[0] for m in markers(log)] == [old_commit, new_commit]
    w.plain(b"c", b"1")
    w.roll()
    clean(log, BEFORE_HORIZON)  # eligible now, but not past delete.retention.ms
    assert [m[0] for m in markers(log)] == [old_commit, new_commit]
    assert latest(read_committed(log)) == {**view, b"c": b"1"}

    w.plain(b"d", b"1")
    w.roll()
    job = clean(log, AFTER_HORIZON)
    assert job.stats.markers_removed == 1
    assert [m[0] for m in markers(log)] == [new_commit]  # its transaction still has records
    assert latest(read_committed(log)) == {**view, b"c": b"1", b"d": b"1"}


def test_an_abort_marker_outlives_its_data_by_one_pass_and_the_horizon(tmp_path):
    log = open_log(tmp_path)
    w = Writer(log)
    w.plain(b"k", b"committed")
    first = w.txn(2, (b"k", b"aborted"))
    w.txn(2, (b"j", b"aborted"))
    abort = w.end(2, commit=False)
    w.txn(2, (b"other", b"x"))  # producer 2's last batch is elsewhere
    w.end(2, commit=True)
    w.roll()
    base = log.segments[0].base_offset
    assert aborted_list(log) == [(2, first, abort)]
    view = latest(read_committed(log))
    assert view == {b"k": b"committed", b"other": b"x"}

    clean(log, AFTER_HORIZON)  # dirty before the pass: the marker stays, the data goes
    offsets = [offset for offset, _ in batches(log)]
    assert first not in offsets and first + 1 not in offsets
    assert abort in [m[0] for m in markers(log)]
    assert txnindex_of(log, base) == [(2, first, abort)]  # the cleaned segment's index
    assert aborted_list(log) == [(2, first, abort)]
    assert latest(read_committed(log)) == view

    w.plain(b"z", b"1")
    w.roll()
    clean(log, BEFORE_HORIZON)  # no data left, but not yet past the horizon
    assert abort in [m[0] for m in markers(log)]
    assert aborted_list(log) == [(2, first, abort)]

    w.plain(b"y", b"1")
    w.roll()
    clean(log, AFTER_HORIZON)
    assert abort not in [m[0] for m in markers(log)]
    assert txnindex_of(log, base) == []
    assert aborted_list(log) == []
    assert latest(read_committed(log)) == {**view, b"z": b"1", b"y": b"1"}


def test_markers_stay_while_their_transaction_has_records(tmp_path):
    """A committed value never superseded keeps its marker; an aborted transaction whose
    batch is its producer's last stays (empty) and so keeps its marker and entry."""
    log = open_log(tmp_path)
    w = Writer(log)
    w.txn(3, (b"kept", b"v"))
    commit = w.end(3, commit=True)
    first = w.txn(4, (b"kept", b"aborted"))
    abort = w.end(4, commit=False)
    w.roll()
    for now in (AFTER_HORIZON, AFTER_HORIZON + 1, AFTER_HORIZON + 2):
        w.plain(b"x", str(now).encode())
        w.roll()
        clean(log, now)
    assert [m[:2] for m in markers(log)] == [(commit, 3), (abort, 4)]
    assert aborted_list(log) == [(4, first, abort)]
    assert latest(read_committed(log))[b"kept"] == b"v"
    data_offsets = [offset for offset, _ in batches(log)]
    assert first in data_offsets  # producer 4's last batch, emptied


def test_an_idempotent_producers_last_batch_survives_cleaning_and_recovery(tmp_path):
    log = open_log(tmp_path)
    w = Writer(log)
    first = w.idempotent(7, b"k", b"v0")
    last = w.idempotent(7, b"k2", b"v1")
    w.plain(b"k", b"newer")
    w.plain(b"k2", b"newer")  # every record of producer 7 is superseded
    w.roll()
    clean(log, AFTER_HORIZON)
    offsets = [offset for offset, _ in batches(log)]
    assert first not in offsets and last in offsets  # its last batch stays, empty
    log.close()
    for snapshot in (tmp_path / "t-0").glob("*.snapshot"):
        snapshot.unlink()
    log = open_log(tmp_path, recovery_point=0)  # rebuilt from the log alone
    entry = log.producer_state.entry(7)
    assert entry is not None and entry.last_seq == 1
    w.log = log
    retry = w.idempotent(7, b"k2", b"v1", seq=1)
    assert retry == last  # a retry of the last batch is still a duplicate
    try:
        w.idempotent(7, b"k3", b"v", seq=5)
    except Exception as exc:  # a gap is still refused
        assert getattr(exc, "code", None) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    else:
        raise AssertionError("a sequence gap was accepted after cleaning")
    log.close()


def three_segments_of_a_committed_and_an_aborted_transaction(w: Writer) -> None:
    """Three segments, each: producer 1 commits key a, producer 2 aborts key a."""
    for round_ in range(3):
        w.txn(1, (b"a", f"c{round_}".encode()))
        w.end(1, commit=True)
        w.txn(2, (b"a", f"x{round_}".encode()))
        w.end(2, commit=False)
        w.roll()


def test_recovery_after_cleaning_rebuilds_the_same_state(tmp_path):
    log = open_log(tmp_path)
    w = Writer(log)
    three_segments_of_a_committed_and_an_aborted_transaction(w)
    w.txn(5, (b"open", b"o"))  # an open transaction: never cleaned
    w.roll()
    clean(log, BEFORE_HORIZON)
    w.plain(b"b", b"1")
    w.roll()
    clean(log, AFTER_HORIZON)
    view, aborted = read_committed(log), aborted_list(log)
    state = {pid: (e.producer_epoch, e.last_seq) for pid, e in log.producer_state.entries.items()}
    ongoing = dict(log.producer_state.ongoing_txns)
    assert ongoing == {5: log.last_stable_offset(log.log_end_offset)}
    leo = log.log_end_offset
    log.flush()
    log.close()

    reopened = open_log(tmp_path, had_clean_shutdown=True, recovery_point=leo)
    assert aborted_list(reopened) == aborted and read_committed(reopened) == view
    reopened.close()
    for path in (tmp_path / "t-0").glob("*.snapshot"):
        path.unlink()
    for path in (tmp_path / "t-0").glob("*.txnindex"):
        path.unlink()
    rebuilt = open_log(tmp_path, recovery_point=0)  # everything from the log's batches
    assert {
        pid: (e.producer_epoch, e.last_seq) for pid, e in rebuilt.producer_state.entries.items()
    } == state
    assert rebuilt.producer_state.ongoing_txns == ongoing
    # Each ABORT marker left ends the same aborted transaction (its data is gone, so
    # recovery may start it at the marker), and readers see the same records.
    assert [(p, last) for p, _, last in aborted_list(rebuilt)] == [
        (p, last) for p, _, last in aborted
    ]
    assert read_committed(rebuilt) == view
    rebuilt.close()


# -- property -------------------------------------------------------------------------------

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("txn"), st.integers(0, 2), st.sampled_from([b"a", b"b", b"c"])),
        st.tuples(st.just("end"), st.integers(0, 2), st.booleans()),
        st.tuples(st.just("plain"), st.sampled_from([b"a", b"b", b"c"]), st.booleans()),
        st.tuples(st.just("roll"), st.booleans()),
        st.tuples(st.just("clean"), st.sampled_from([BEFORE_HORIZON, AFTER_HORIZON, 50_000])),
    ),
    max_size=40,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_OPS, st.sampled_from([1 << 20, 300]))
def test_cleaning_never_changes_what_read_committed_readers_see(
    tmp_path_factory, ops, segment_bytes
):
    """Random transactional histories and passes at random clocks (small segments: a
    transaction spans segments and groups): the latest committed value per key a
    read_committed reader sees is the same before and after every pass and after
    recovery from the log alone; the index lists exactly the ABORT markers left; each
    producer's epoch and sequence survive."""
    path = tmp_path_factory.mktemp("txnclean")
    config = LogConfig(
        cleanup_policy="compact", segment_bytes=segment_bytes, delete_retention_ms=1_000
    )
    log = open_log(path, config)
    w = Writer(log)
    open_txn: set[int] = set()
    for op in ops:
        if op[0] == "txn":
            w.txn(op[1], (op[2], f"{op[1]}-{len(w.seqs)}-{w.seqs.get(op[1], 0)}".encode()))
            open_txn.add(op[1])
        elif op[0] == "end":
            if op[1] in open_txn or op[2]:
                w.end(op[1], commit=op[2])
                open_txn.discard(op[1])
        elif op[0] == "plain":
            w.plain(op[1], None if op[2] else b"p" + op[1])
        elif op[0] == "roll":
            w.roll(filler=op[1])
        else:
            w.roll()
            before = latest(read_committed(log))
            clean(log, op[1])
            assert latest(read_committed(log)) == before
            aborts = [(pid, offset) for offset, pid, commit in markers(log) if not commit]
            assert [(p, last) for p, _, last in aborted_list(log)] == aborts
    w.roll()
    before = latest(read_committed(log))
    state = {pid: (e.producer_epoch, e.last_seq) for pid, e in log.producer_state.entries.items()}
    ongoing = dict(log.producer_state.ongoing_txns)
    log.close()
    for snapshot in path.glob("t-0/*.snapshot"):
        snapshot.unlink()
    rebuilt = open_log(path, config, recovery_point=0)
    assert latest(read_committed(rebuilt)) == before
    got = {pid: (e.producer_epoch, e.last_seq) for pid, e in rebuilt.producer_state.entries.items()}
    assert got == state
    assert rebuilt.producer_state.ongoing_txns == ongoing
    rebuilt.close()
    shutil.rmtree(path)


# -- crash safety ---------------------------------------------------------------------------


def _aborts_indexed_match_markers(log: Log) -> bool:
    aborts = [(pid, offset) for offset, pid, commit in markers(log) if not commit]
    return [(p, last) for p, _, last in aborted_list(log)] == aborts


def test_a_crash_anywhere_in_a_pass_keeps_the_txnindex_with_its_segment(tmp_path):
    """The cleaned `.txnindex` is swapped in with its segment: after a crash at any file
    operation of a pass (and maybe another in the recovery of the swap; then a recovery
    that replays nothing: the segments were flushed), the index lists exactly the ABORT
    markers in the log and readers see the same latest values."""
    source = tmp_path / "source"
    log = open_log(source)
    w = Writer(log)
    three_segments_of_a_committed_and_an_aborted_transaction(w)
    w.txn(2, (b"b", b"last"))
    w.end(2, commit=True)
    w.roll()
    view = latest(read_committed(log))
    leo = log.log_end_offset
    log.flush()
    log.close()
    crash_at, crashed = 0, True
    while crashed:
        crash_at += 1
        for recovery_crash_at in (None, 3):
            run = tmp_path / "run"
            shutil.copytree(source, run)
            crashed = _crash_pass(run, leo, crash_at, recovery_crash_at)
            recovered = open_log(run, recovery_point=leo)
            where = f"crash at {crash_at}, in recovery at {recovery_crash_at}"
            assert _aborts_indexed_match_markers(recovered), where
            assert latest(read_committed(recovered)) == view, where
            recovered.close()
            shutil.rmtree(run)
    assert crash_at > 5


def _crash_pass(run: Path, leo: int, crash_at: int, recovery_crash_at: int | None) -> bool:
    """A pass over the log in `run` that dies at file operation `crash_at`, and maybe a
    first recovery of its swap that dies too; returns whether the pass died."""
    from broker.core.log.swap import recover_interrupted_swaps
    from tests.unit.test_log_cleaner import Crash, CrashingOps, abandon

    log = open_log(run, had_clean_shutdown=True, recovery_point=leo)
    target = log_to_clean(TP, log, BEFORE_HORIZON, leo)
    job = CleaningJob(target, now_ms=BEFORE_HORIZON, map_capacity=1000)
    job.ops = CrashingOps(crash_at)
    try:
        job.run_to_end(200)
        crashed = False
    except Crash:
        crashed = True
    abandon(log, job)
    if recovery_crash_at is not None:
        try:
            recover_interrupted_swaps(run / "t-0", CrashingOps(recovery_crash_at))
        except Crash:
            pass
    return crashed
