"""Scanning segments for damage and rebuilding them from another replica's batches
(broker/core/log/verify.py), on real log files."""

from __future__ import annotations

from broker.core.log import Log, LogConfig
from broker.core.log.verify import SegmentScan, rebuild_segment, segment_end_offset
from client.protocol.records import Record, build_batch

CONFIG = LogConfig(segment_bytes=1024, index_interval_bytes=64)


def filled(path, batches: int = 20) -> Log:
    log = Log.open(path, CONFIG, now_ms=0)
    for i in range(batches):
        records = [Record(None, f"v-{i}-{j}".encode() * 3, 1_000 + i) for j in range(2)]
        log.append_as_leader(build_batch(records), 0, now_ms=0)
    return log


def scan(log: Log, segment) -> SegmentScan:
    s = SegmentScan(segment, segment.base_offset, segment_end_offset(log, segment))
    while not s.done:
        s.step(100)
    return s


def flip(segment, position: int) -> None:
    with open(segment.log_path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0x01]))


def test_a_flipped_value_byte_is_one_range_and_is_spliced_back(tmp_path):
    damaged, pristine = filled(tmp_path / "t-0"), filled(tmp_path / "copy" / "t-0")
    segment = damaged.segments[1]
    second_pos, second = list(segment.iter_headers(0))[1]
    flip(segment, second_pos + second.size - 5)
    found = scan(damaged, segment)
    assert [(r.first_offset, r.last_offset) for r in found.corrupt] == [
        (second.base_offset, second.last_offset)
    ]
    assert found.batches == len(list(segment.iter_headers(0)))
    leo = damaged.log_end_offset
    good = pristine.read(second.base_offset, 10_000, second.last_offset + 1).records
    rebuild_segment(damaged, segment, found.corrupt, good, now_ms=5)
    assert damaged.log_end_offset == leo
    for a, b in zip(damaged.segments, pristine.segments, strict=True):
        assert a.log_path.read_bytes() == b.log_path.read_bytes()
    assert not scan(damaged, damaged.segments[1]).corrupt
    assert damaged.read(second.base_offset, 10_000).records.startswith(good)


def test_a_broken_length_runs_to_the_end_of_the_segment(tmp_path):
    damaged, pristine = filled(tmp_path / "t-0"), filled(tmp_path / "copy" / "t-0")
    segment = damaged.segments[0]
    end = segment_end_offset(damaged, segment)
    pos, header = list(segment.iter_headers(0))[2]
    flip(segment, pos + 8)  # the batch length's high byte
    found = scan(damaged, segment)
    assert [(r.first_offset, r.last_offset) for r in found.corrupt] == [
        (header.base_offset, end - 1)
    ]
    good = pristine.segments[0].pread(pristine.segments[0].size - pos, pos)
    rebuild_segment(damaged, segment, found.corrupt, good, now_ms=5)
    assert damaged.segments[0].log_path.read_bytes() == pristine.segments[0].log_path.read_bytes()


def test_a_segment_gone_before_the_swap_changes_nothing(tmp_path):
    import pytest

    from broker.core.log.errors import LogError

    damaged, pristine = filled(tmp_path / "t-0"), filled(tmp_path / "copy" / "t-0")
    segment = damaged.segments[1]
    pos, header = list(segment.iter_headers(0))[0]
    flip(segment, pos + header.size - 5)
    found = scan(damaged, segment)
    good = pristine.read(header.base_offset, 10_000, header.last_offset + 1).records
    damaged.truncate_to(segment.base_offset)  # a follower truncation got there first
    with pytest.raises(LogError):
        rebuild_segment(damaged, segment, found.corrupt, good, now_ms=5)
    assert not [p for p in damaged.directory.iterdir() if p.name.endswith(".cleaned")]
