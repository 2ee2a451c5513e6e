"""Log compaction in the log store (broker/core/log: cleaner_manager, cleaner, swap).

What a user of a compacted topic relies on: after cleaning, each key's newest record is
still there at its offset, older ones are gone, tombstones go only after
`delete.retention.ms`, the active segment, the part above the high watermark and
segments younger than `min.compaction.lag.ms` are left alone, a reader from the
beginning sees an ordered log, and a crash at any point of a cleaning pass leaves a log
that reopens as the old or the new one.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from broker.core.log import (
    CleaningJob,
    KeylessRecordError,
    Log,
    LogConfig,
    LogManager,
    grab_filthiest_log,
)
from broker.core.log.cleaner_manager import log_to_clean
from broker.core.log.swap import FileOps, recover_interrupted_swaps
from client.protocol.records import (
    Codec,
    Record,
    build_batch,
    build_kafka_batch,
    decode_batches,
    decode_records,
    filter_batch,
    iter_batches,
    read_header,
    validate_batch,
)
from client.protocol.types import TopicPartition

TP = TopicPartition("t", 0)
COMPACT = LogConfig(cleanup_policy="compact", segment_bytes=400, delete_retention_ms=1_000)
BIG_MAP = 1_000_000
TEMP_SUFFIXES = (".cleaned", ".swap", ".deleted")


# -- helpers ---------------------------------------------------------------------------------


def open_log(directory: Path, config: LogConfig = COMPACT) -> Log:
    return Log.open(directory / "t-0", config, now_ms=0)


def append(log: Log, *records: tuple[bytes | None, bytes | None], ts: int = 1_000) -> int:
    """One batch of (key, value) records; returns its first offset."""
    batch = build_batch([Record(key, value, ts) for key, value in records])
    return log.append_as_leader(batch, leader_epoch=0, now_ms=ts).first_offset


def read_all(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """What a consumer from the beginning gets: (offset, key, value), asserting order."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).records
        assert data, f"no batch at or after {offset} below the LEO {log.log_end_offset}"
        for position, header in iter_batches(data):
            out += [
                (r.offset, r.key, r.value)
                for r in decode_records(data[position : position + header.size])
                if r.offset >= offset
            ]
            offset = header.next_offset
    offsets = [record[0] for record in out]
    assert offsets == sorted(set(offsets)), "offsets must strictly increase"
    return out


def clean(log: Log, now_ms: int = 10_000, hw: int | None = None, capacity: int = BIG_MAP):
    """One cleaning pass, all steps at once; returns the job."""
    job = CleaningJob(log_to_clean(TP, log, now_ms, hw), now_ms=now_ms, map_capacity=capacity)
    job.run_to_end(max_bytes_per_step=128)
    return job


def latest_per_key(records) -> dict[bytes, tuple[int, bytes | None]]:
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, key, value in records:
        if key is not None:
            latest[key] = (offset, value)
    return latest


def roll(log: Log, ts: int = 1_000) -> None:
    log.roll(ts)


# -- records: a gapped batch ---------------------------------------------------------------


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.GZIP, Codec.LZ4, Codec.ZSTD])
def test_filter_batch_keeps_offsets_span_and_codec(codec):
    records = [Record(b"k%d" % i, b"v%d" % i, 100 + i) for i in range(5)]
    batch = build_batch(records, base_offset=40, codec=codec, leader_epoch=3)
    kept = filter_batch(batch, lambda offset, key, value: offset in (41, 43))
    header = validate_batch(kept, strict=False)  # a good CRC
    assert (header.base_offset, header.last_offset_delta, header.records_count) == (40, 4, 2)
    assert (header.codec, header.partition_leader_epoch, header.max_timestamp) == (codec, 3, 103)
    assert [(r.offset, r.key, r.timestamp) for r in decode_records(kept)] == [
        (41, b"k1", 101),
        (43, b"k3", 103),
    ]
    assert filter_batch(batch, lambda *_: True) is batch
    assert filter_batch(batch, lambda *_: False) is None
    empty = filter_batch(batch, lambda *_: False, keep_empty=True)
    assert (read_header(empty).records_count, read_header(empty).last_offset_delta) == (0, 4)
    assert decode_records(empty) == []


# -- what cleaning keeps ---------------------------------------------------------------------


def test_each_keys_latest_value_remains_at_its_offset(tmp_path):
    log = open_log(tmp_path)
    for i in range(40):
        append(log, (b"k%d" % (i % 4), b"v%d" % i))
    before = read_all(log)
    active_base = log.active_segment.base_offset
    job = clean(log)
    after = read_all(log)
    assert job.end_offset == active_base  # everything below the active segment
    assert log.cleaner_checkpoint == active_base
    cleaned = [r for r in after if r[0] < active_base]
    assert cleaned == sorted(
        (offset, key, value)
        for key, (offset, value) in latest_per_key(r for r in before if r[0] < active_base).items()
    )
    assert [r for r in after if r[0] >= active_base] == [r for r in before if r[0] >= active_base]
    assert latest_per_key(after) == latest_per_key(before)
    assert set(after) <= set(before)  # offsets and values unchanged
    assert log.log_end_offset == 40


def test_kafka_format_batches_compact_in_their_own_format(tmp_path):
    """Batches from Kafka clients (varint records) are cleaned like Tributary's own, stay in
    Kafka's format (CRC valid), and keyless ones are refused by a compacted log."""
    log = open_log(tmp_path)
    kafka_format = {}  # base offset -> written by a Kafka client
    for i in range(40):
        # Two records a batch, so cleaning rewrites batches, not only drops them.
        records = [Record(b"k%d" % (i % 3), b"a%d" % i, 1_000), Record(b"j%d" % (i % 5), b"", 1)]
        build = build_kafka_batch if i % 2 else build_batch
        batch = build(records, codec=Codec.LZ4)
        info = log.append_as_leader(batch, leader_epoch=0, now_ms=1_000)
        kafka_format[info.first_offset] = bool(i % 2)
    with pytest.raises(KeylessRecordError, match="without a key"):
        batch = build_kafka_batch([Record(b"k", b"v", 1), Record(None, b"v", 1)])
        log.append_as_leader(batch, leader_epoch=0, now_ms=1_000)
    before = read_all(log)
    active_base = log.active_segment.base_offset
    job = clean(log)
    assert 0 < job.stats.records_kept < job.stats.records_read
    after = read_all(log)
    assert latest_per_key(after) == latest_per_key(before)
    assert [offset for offset, _, _ in after if offset < active_base] == sorted(
        offset for offset, _ in latest_per_key(r for r in before if r[0] < active_base).values()
    )
    formats: set[tuple[bool, bool]] = set()
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).records
        for position, header in iter_batches(data):
            validate_batch(data, position, strict=False)
            assert header.kafka_format == kafka_format[header.base_offset]
            gapped = header.records_count < header.last_offset_delta + 1
            formats.add((header.kafka_format, gapped))
            offset = header.next_offset
    # Both formats, each both whole and rewritten with a gap.
    assert formats == {(True, False), (True, True), (False, False), (False, True)}


def test_cleaning_is_stable_and_survives_reopen(tmp_path):
    log = open_log(tmp_path)
    for i in range(30):
        append(log, (b"k%d" % (i % 3), b"v%d" % i))
    clean(log)
    once = read_all(log)
    job = clean(log)
    assert read_all(log) == once
    assert job.stats.records_kept == job.stats.records_read
    log.close()
    reopened = open_log(tmp_path)
    assert read_all(reopened) == once
    assert not [p for p in (tmp_path / "t-0").iterdir() if p.name.endswith(TEMP_SUFFIXES)]


def test_tombstones_stay_until_delete_retention_ms_then_go(tmp_path):
    log = open_log(tmp_path)  # delete.retention.ms = 1000
    append(log, (b"gone", b"v1"), ts=1_000)
    append(log, (b"kept", b"v"), ts=1_000)
    append(log, (b"gone", None), ts=1_000)  # the tombstone, offset 2
    roll(log)
    clean(log, now_ms=500_000)
    assert read_all(log) == [(1, b"kept", b"v"), (2, b"gone", None)]  # dirty: kept once
    append(log, (b"x", b"1"), ts=1_900)
    roll(log)
    clean(log, now_ms=1_500)  # clean now, but its segment is younger than 1000 ms
    assert (2, b"gone", None) in read_all(log)
    append(log, (b"x", b"2"), ts=1_900)
    roll(log)
    # Its segment (merged with x=1's, so its newest record is at 1900) is now older than
    # delete.retention.ms, and the tombstone was already clean: it goes.
    clean(log, now_ms=3_000)
    assert read_all(log) == [(1, b"kept", b"v"), (4, b"x", b"2")]


def test_records_without_a_key_are_refused_by_a_compacted_log(tmp_path):
    log = open_log(tmp_path)
    with pytest.raises(KeylessRecordError, match="without a key"):
        append(log, (b"k", b"v"), (None, b"no key"))
    assert log.log_end_offset == 0
    plain = Log.open(tmp_path / "u-0", LogConfig(), now_ms=0)
    append(plain, (None, b"fine"))


def test_keyless_records_left_from_a_delete_topic_are_dropped(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=400))
    append(log, (None, b"a"), (b"k", b"1"))
    append(log, (b"k", b"2"))
    roll(log)
    log.update_config(COMPACT)
    clean(log)
    assert read_all(log) == [(2, b"k", b"2")]


def test_active_segment_and_records_above_the_high_watermark_are_not_cleaned(tmp_path):
    log = open_log(tmp_path)
    for i in range(12):
        append(log, (b"k", b"v%d" % i))
    roll(log)
    for i in range(12, 15):
        append(log, (b"k", b"v%d" % i))  # active segment: duplicates stay
    # The HW at 6: records 6.. may still be truncated away, so they must not make
    # records below 6 disappear, and are not cleaned themselves.
    job = clean(log, hw=6)
    assert job.end_offset == 6
    assert [r[0] for r in read_all(log)] == [5, *range(6, 15)]
    clean(log, hw=15)
    assert [r[0] for r in read_all(log)] == [11, 12, 13, 14]


# -- which log, which range --------------------------------------------------------------------


def test_dirty_ratio_decides_and_zero_ratio_does_not_spin(tmp_path):
    config = COMPACT.merged(min_cleanable_dirty_ratio=0.6)
    log = open_log(tmp_path, config)
    for i in range(20):
        append(log, (b"k%d" % i, b"v"))
    roll(log)
    target, ratio = grab_filthiest_log({TP: log}, {TP: log.log_end_offset}, 10_000)
    assert ratio == 1.0 and target is not None and target.log is log
    clean(log)
    target, ratio = grab_filthiest_log({TP: log}, {TP: log.log_end_offset}, 10_000)
    assert (target, ratio) == (None, 0.0)
    # Some new dirty data, but below the ratio: nothing to do.
    for i in range(3):
        append(log, (b"k%d" % i, b"w"))
    roll(log)
    target, ratio = grab_filthiest_log({TP: log}, {TP: log.log_end_offset}, 10_000)
    assert target is None and 0 < ratio <= 0.6
    log.update_config(config.merged(min_cleanable_dirty_ratio=0.0))
    assert grab_filthiest_log({TP: log}, {TP: log.log_end_offset}, 10_000)[0] is not None
    clean(log)
    assert grab_filthiest_log({TP: log}, {TP: log.log_end_offset}, 10_000)[0] is None


def test_logs_without_compaction_or_a_known_hw_are_not_candidates(tmp_path):
    plain = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=400), now_ms=0)
    for i in range(20):
        append(plain, (b"k", b"%d" % i))
    assert grab_filthiest_log({TP: plain}, {TP: 20}, 10_000) == (None, 0.0)
    plain.update_config(COMPACT)
    assert grab_filthiest_log({TP: plain}, {}, 10_000) == (None, 0.0)
    assert grab_filthiest_log({TP: plain}, {TP: 20}, 10_000)[0] is not None


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path):
    log = open_log(tmp_path, COMPACT.merged(min_compaction_lag_ms=5_000))
    for i in range(10):
        append(log, (b"k", b"old%d" % i), ts=1_000)
    roll(log)
    young = log.log_end_offset
    for i in range(10):
        append(log, (b"k", b"new%d" % i), ts=8_000)
    roll(log)
    target = log_to_clean(TP, log, 10_000, log.log_end_offset)
    assert target.first_uncleanable_offset == young
    clean(log, now_ms=10_000, hw=log.log_end_offset)
    values = [r[2] for r in read_all(log)]
    assert values == [b"old9"] + [b"new%d" % i for i in range(10)]
    clean(log, now_ms=13_001, hw=log.log_end_offset)  # now older than the lag
    assert [r[2] for r in read_all(log)] == [b"new9"]


def test_max_compaction_lag_forces_a_clean_below_the_ratio(tmp_path):
    config = COMPACT.merged(min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=60_000)
    log = open_log(tmp_path, config)
    for i in range(10):
        append(log, (b"k%d" % i, b"v"), ts=1_000)
    roll(log)
    clean(log)
    append(log, (b"k0", b"w"), ts=2_000)
    roll(log)
    hws = {TP: log.log_end_offset}
    assert grab_filthiest_log({TP: log}, hws, 30_000)[0] is None
    target, _ = grab_filthiest_log({TP: log}, hws, 70_000)
    assert target is not None and target.must_clean


def test_a_full_offset_map_cleans_part_and_leaves_the_rest_dirty(tmp_path):
    log = open_log(tmp_path)
    for i in range(30):
        append(log, (b"k%d" % (i % 10), b"v%d" % i))
    roll(log)
    before = read_all(log)
    job = clean(log, capacity=4)  # room for 4 keys: mapping stops at the 5th
    assert job.end_offset == 4 and log.cleaner_checkpoint == 4
    assert latest_per_key(read_all(log)) == latest_per_key(before)
    while log.cleaner_checkpoint < log.active_segment.base_offset:
        clean(log, capacity=4)
    assert sorted(read_all(log)) == sorted(
        (o, k, v) for k, (o, v) in latest_per_key(before).items()
    )


def test_compact_delete_also_applies_retention(tmp_path):
    config = COMPACT.merged(cleanup_policy="compact,delete", retention_ms=10_000)
    log = open_log(tmp_path, config)
    for i in range(10):
        append(log, (b"k%d" % i, b"old"), ts=1_000)
    roll(log)
    for i in range(10):
        append(log, (b"k%d" % (i % 2), b"new%d" % i), ts=50_000)
    roll(log)
    clean(log, now_ms=55_000)
    assert {r[1] for r in read_all(log)} == {b"k%d" % i for i in range(10)}
    assert log.delete_old_segments(now_ms=55_000) > 0  # the old segments are past retention
    assert [r[2] for r in read_all(log)] == [b"new8", b"new9"]


# -- a log that changes under the cleaner ------------------------------------------------------


def test_truncation_during_a_pass_aborts_it_and_lowers_the_checkpoint(tmp_path):
    log = open_log(tmp_path)
    for i in range(40):
        append(log, (b"k%d" % (i % 4), b"v%d" % i))
    roll(log)
    clean(log)
    assert log.cleaner_checkpoint == 40
    for i in range(40, 60):
        append(log, (b"k%d" % (i % 4), b"v%d" % i))
    roll(log)
    before = read_all(log)
    job = CleaningJob(log_to_clean(TP, log, 10_000, 60), now_ms=10_000, map_capacity=BIG_MAP)
    job.step(200)
    log.truncate_to(50)  # a follower truncating to its leader's epoch end
    job.run_to_end()
    assert job.aborted
    assert read_all(log) == [r for r in before if r[0] < log.log_end_offset]
    assert log.cleaner_checkpoint == 40
    assert not [p for p in log.directory.iterdir() if p.name.endswith(TEMP_SUFFIXES)]
    log.truncate_to(20)
    assert log.cleaner_checkpoint == log.log_end_offset <= 20


def test_retention_during_a_pass_aborts_it(tmp_path):
    config = COMPACT.merged(cleanup_policy="compact,delete", retention_ms=1_000)
    log = open_log(tmp_path, config)
    for i in range(40):
        append(log, (b"k%d" % (i % 4), b"v%d" % i), ts=1_000)
    roll(log)
    job = CleaningJob(log_to_clean(TP, log, 10_000, 40), now_ms=10_000, map_capacity=BIG_MAP)
    job.step(100)
    log.delete_old_segments(now_ms=10_000)
    job.run_to_end()
    assert job.aborted and read_all(log) == []


def test_cleaner_checkpoint_survives_a_restart(tmp_path):
    manager = LogManager.open(tmp_path, COMPACT, now_ms=0)
    log = manager.get_or_create_log(TP, now_ms=0)
    for i in range(20):
        append(log, (b"k%d" % (i % 3), b"v%d" % i))
    roll(log)
    clean(log)
    manager.checkpoint_cleaner_offsets()
    assert (tmp_path / "cleaner-offset-checkpoint").read_text().splitlines() == ["0", "1", "t 0 20"]
    manager.close()
    manager = LogManager.open(tmp_path, COMPACT, now_ms=0)
    assert manager.get_log(TP).cleaner_checkpoint == 20
    manager.close()


# -- followers ---------------------------------------------------------------------------------


def test_a_follower_copies_a_compacted_log_with_its_gaps(tmp_path):
    leader = open_log(tmp_path / "leader")
    for i in range(50):
        append(leader, (b"k%d" % (i % 5), b"v%d" % i if i % 7 else None))
    roll(leader)
    clean(leader)
    follower = open_log(tmp_path / "follower")
    while follower.log_end_offset < leader.log_end_offset:
        data = leader.read(follower.log_end_offset, 300).records
        follower.append_as_follower(data, now_ms=2_000)
    assert read_all(follower) == read_all(leader)
    assert follower.log_end_offset == leader.log_end_offset == 50


# -- crash safety --------------------------------------------------------------------------------


class Crash(Exception):
    """The process died here."""


class CrashingOps(FileOps):
    """Real file operations, until the `crash_at`-th one, which raises instead."""

    def __init__(self, crash_at: int) -> None:
        self.crash_at = crash_at
        self.count = 0

    def _tick(self) -> None:
        self.count += 1
        if self.count == self.crash_at:
            raise Crash(f"crash at file operation {self.count}")

    def append(self, segment, buffers, batches) -> None:
        self._tick()
        if len(buffers) > 1:  # a crash may tear the write: half of it reaches the file
            segment.append(buffers[: len(buffers) // 2], batches[: len(batches) // 2])
            self._tick()
        segment.append(buffers[len(buffers) // 2 :], batches[len(batches) // 2 :])

    def flush(self, segment) -> None:
        self._tick()
        super().flush(segment)

    def rename(self, source, target) -> None:
        self._tick()
        super().rename(source, target)

    def unlink(self, path) -> None:
        self._tick()
        super().unlink(path)

    def fsync_dir(self, directory) -> None:
        self._tick()
        super().fsync_dir(directory)


def abandon(log: Log, job: CleaningJob | None = None) -> None:
    """Drop the log's open files without writing anything, as a killed process does."""
    for segment in log.segments:
        segment.release()
    if job is not None and job.output is not None:
        job.output.release()


records_strategy = st.lists(
    st.tuples(
        st.sampled_from([b"a", b"b", b"c", b"d", b"e"]),
        st.one_of(st.none(), st.binary(min_size=1, max_size=30)),
    ),
    min_size=1,
    max_size=3,
)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    first=st.lists(records_strategy, min_size=1, max_size=25),
    second=st.lists(records_strategy, max_size=25),
    codec=st.sampled_from([Codec.NONE, Codec.GZIP]),
    crash_at=st.integers(min_value=1, max_value=200),
    recovery_crash_at=st.one_of(st.none(), st.integers(min_value=1, max_value=8)),
    group_bytes=st.sampled_from([400, 1_000, 3_000]),
)
def test_a_crash_anywhere_in_a_pass_recovers_to_the_old_or_the_new_log(
    first, second, codec, crash_at, recovery_crash_at, group_bytes
):
    with tempfile.TemporaryDirectory() as root:
        root = Path(root)
        log = Log.open(root / "run" / "t-0", COMPACT, now_ms=0)
        timestamp = 1_000
        for batches, clean_after in ((first, True), (second, False)):
            for records in batches:
                batch = build_batch([Record(k, v, timestamp) for k, v in records], codec=codec)
                log.append_as_leader(batch, leader_epoch=0, now_ms=timestamp)
                timestamp += 100
            log.roll(timestamp)
            if clean_after:  # a first, uninterrupted pass: a clean part with tombstones
                clean(log, now_ms=timestamp)
        old = read_all(log)
        now = timestamp + 5_000  # tombstones in the clean part may expire in this pass
        # A larger segment.bytes now: the pass merges several old segments into one.
        config = COMPACT.merged(segment_bytes=group_bytes)
        log.update_config(config)

        # The same pass, uninterrupted, on a copy: the "new" log and its segment groups.
        shutil.copytree(root / "run", root / "ref")
        reference = Log.open(root / "ref" / "t-0", config, now_ms=0)
        reference.update_cleaner_checkpoint(log.cleaner_checkpoint)
        ref_job = CleaningJob(
            log_to_clean(TP, reference, now, None), now_ms=now, map_capacity=BIG_MAP
        )
        while ref_job.phase.value == "map":
            ref_job.step(256)
        groups = ref_job.group_ranges
        ref_job.run_to_end(256)
        new = read_all(reference)
        note(f"groups {groups}\nold {old}\nnew {new}")

        job = CleaningJob(log_to_clean(TP, log, now, None), now_ms=now, map_capacity=BIG_MAP)
        job.ops = CrashingOps(crash_at)
        try:
            job.run_to_end(256)
            crashed = False
        except Crash:
            crashed = True
        abandon(log, job)
        directory = root / "run" / "t-0"
        if recovery_crash_at is not None:
            try:
                recover_interrupted_swaps(directory, CrashingOps(recovery_crash_at))
            except Crash:
                pass
        recovered_log = Log.open(directory, COMPACT, now_ms=0, recovery_point=0)
        recovered = read_all(recovered_log)
        note(f"crashed {crashed}, recovered {recovered}")

        assert not [p for p in directory.iterdir() if p.name.endswith(TEMP_SUFFIXES)]
        if not crashed:
            assert recovered == new
        for base, last in groups:
            part = [r for r in recovered if base <= r[0] <= last]
            assert part in (
                [r for r in old if base <= r[0] <= last],
                [r for r in new if base <= r[0] <= last],
            ), f"group [{base}, {last}] is a mix of old and new"
        covered = [r for r in recovered if not any(b <= r[0] <= last for b, last in groups)]
        assert covered == [r for r in old if not any(b <= r[0] <= la for b, la in groups)]
        # No key lost its newest value; nothing moved.
        assert set(recovered) <= set(old)
        expected = latest_per_key(new)
        assert {k: v for k, v in latest_per_key(recovered).items() if k in expected} == expected
        # Cleaning again from the checkpoint (not advanced by a crash) ends where the
        # uninterrupted pass did.
        recovered_log.update_cleaner_checkpoint(log.cleaner_checkpoint)
        CleaningJob(
            log_to_clean(TP, recovered_log, now, None), now_ms=now, map_capacity=BIG_MAP
        ).run_to_end(256)
        assert read_all(recovered_log) == new
        recovered_log.close()
        reference.close()


def test_startup_completes_a_committed_swap_and_drops_an_uncommitted_one(tmp_path):
    """The two sides of the commit point, played by crashing at each file step."""
    outcomes = set()
    for crash_at in range(1, 40):
        root = tmp_path / str(crash_at)
        log = Log.open(root / "t-0", COMPACT.merged(segment_bytes=10_000), now_ms=0)
        for i in range(20):
            append(log, (b"k%d" % (i % 2), b"v%d" % i))
            if i % 5 == 4:
                roll(log)
        old = read_all(log)
        job = CleaningJob(log_to_clean(TP, log, 10_000, None), now_ms=10_000, map_capacity=9)
        job.ops = CrashingOps(crash_at)
        try:
            job.run_to_end(1 << 20)
        except Crash:
            pass
        abandon(log, job)
        names = sorted(p.name for p in (root / "t-0").iterdir())
        recovered = read_all(Log.open(root / "t-0", COMPACT, now_ms=0))
        new = [(18, b"k0", b"v18"), (19, b"k1", b"v19")]
        assert recovered in (old, new)
        outcomes.add("new" if recovered == new else "old")
        if recovered == old:  # only before the commit point
            assert not any(n.endswith((".log.swap", ".deleted")) for n in names)
        if any(n.endswith(".deleted") for n in names):
            outcomes.add("deleted files seen")
        if any(n.endswith(".cleaned") for n in names):
            outcomes.add("cleaned files seen")
        if job.done:
            break
    assert outcomes == {"old", "new", "deleted files seen", "cleaned files seen"}


def test_a_damaged_swap_file_is_dropped_and_the_old_segments_kept(tmp_path, caplog):
    log = open_log(tmp_path)
    for i in range(10):
        append(log, (b"k", b"v%d" % i))
    roll(log)
    before = read_all(log)
    log.close()
    (tmp_path / "t-0" / "00000000000000000000.log.swap").write_bytes(b"\0" * 100)
    (tmp_path / "t-0" / "00000000000000000000.index.swap").write_bytes(b"junk")
    assert read_all(open_log(tmp_path)) == before
    assert "is damaged" in caplog.text
    assert not [p for p in (tmp_path / "t-0").iterdir() if p.name.endswith(TEMP_SUFFIXES)]


def test_decoding_a_cleaned_log_from_the_files(tmp_path):
    """Offline readers (the Spark job, `decode_batches`) read gapped batches too."""
    log = open_log(tmp_path)
    for i in range(20):
        append(log, (b"k%d" % (i % 3), b"v%d" % i), (b"x", b"%d" % i))
    roll(log)
    clean(log)
    on_disk = b"".join(s.log_path.read_bytes() for s in log.segments)
    assert [(r.offset, r.key, r.value) for r in decode_batches(on_disk)] == read_all(log)
