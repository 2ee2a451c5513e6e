"""The data source's `read_committed` option (no Spark session needed: the reader's arrow
output is checked): transaction markers and aborted transactions' records (the
partition's `.txnindex`) are left out; without it the log is read as it is, markers
included."""

from __future__ import annotations

from broker.core.log.config import LogConfig
from broker.core.log.log import Log
from client.protocol.records import Record, build_batch, build_control_batch
from spark.decode import SegmentSlice, aborted_transactions, read_slice_records


def _txn(pid: int, seq: int, value: bytes) -> bytes:
    return build_batch(
        [Record(None, value, 1)],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        transactional=True,
    )


def test_read_committed_leaves_out_markers_and_aborted_records(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=300), now_ms=0)
    log.append_as_leader(build_batch([Record(None, b"plain", 1)]), 0, now_ms=1)
    for round_ in range(3):
        log.append_as_leader(_txn(1, round_, b"kept-%d" % round_), 0, now_ms=1)
        log.append_as_leader(_txn(2, round_, b"aborted-%d" % round_), 0, now_ms=1)
        for pid, commit in ((1, True), (2, False)):
            marker = build_control_batch(pid, 0, commit, 0, 1)
            log.append_as_leader(marker, 0, now_ms=1, origin="coordinator")
    log.flush()
    log.close()
    directory = tmp_path / "t-0"
    assert sorted(aborted_transactions(str(directory))) == [2]
    pieces = [
        SegmentSlice(str(path), str(tmp_path), 1, "t", 0, int(path.stem), 0, path.stat().st_size)
        for path in sorted(directory.glob("*.log"))
    ]
    assert len(pieces) > 1

    def values(**options) -> list[bytes]:
        return [
            value
            for piece in pieces
            for table in read_slice_records(piece, **options)
            for value in table.column("value").to_pylist()
        ]

    assert values(read_committed=True) == [b"plain", b"kept-0", b"kept-1", b"kept-2"]
    raw = values()
    assert len(raw) == 1 + 3 * 4  # every data record and every marker (one record each)
    assert b"aborted-1" in raw
