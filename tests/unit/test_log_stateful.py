"""The log against a plain in-memory model, driven by hypothesis.

Rules: leader appends (1-3 batches of random records, random codecs, sometimes a new
leader epoch), reads at random offsets / max_bytes / upper bounds, truncation, explicit
rolls, retention by bytes and by time (with an advancing fake clock; limits often right at
a segment boundary; sometimes bounded by a high watermark), moving the log start offset,
flushes, clean reopens, and crashes: the open files are dropped unflushed, the last
segment is cut at a random byte after the recovery point, and the log is reopened with
the last recovery point. The model is then cut back to the last whole batch that
survived. Small segments and index intervals make rolls and sparse indexes happen all the
time. Every step checks offsets, segment layout, the leader-epoch cache, the recovery
point, and that reading the whole log gives exactly the model's bytes. The model states
retention its own way (see "Retention" below), not by replaying the log's loop.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from itertools import takewhile
from operator import and_
from pathlib import Path

import pytest
from hypothesis import HealthCheck, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from broker.core.log import Log, LogConfig, OffsetOutOfRangeError
from client.protocol.records import Codec, Record, assign_offsets, build_batch, iter_batches

SEGMENT_BYTES = 2048
SEGMENT_MS = 3_000
CONFIG = LogConfig(
    segment_bytes=SEGMENT_BYTES,
    segment_ms=SEGMENT_MS,
    index_interval_bytes=128,
    retention_ms=-1,
)
READ_SIZES = (1 << 20, 1, 150, 400, 1000, SEGMENT_BYTES)
# tmpfs when there is one: flushes and rolls are then nearly free.
TMP_ROOT = "/dev/shm" if Path("/dev/shm").is_dir() else None


@dataclass
class ModelBatch:
    base: int
    last: int
    data: bytes  # exactly what the log must return
    max_ts: int
    epoch: int
    timestamps: list[int]  # of each record, in offset order


@dataclass
class ModelSegment:
    base: int
    batches: list[ModelBatch] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(len(b.data) for b in self.batches)

    @property
    def next_offset(self) -> int:
        return self.batches[-1].last + 1 if self.batches else self.base


record_st = st.builds(
    lambda key, value, dt: (key, value, dt),
    st.none() | st.binary(max_size=8),
    st.binary(max_size=120),
    st.integers(-300, 300),
)
batches_st = st.lists(
    st.tuples(
        st.lists(record_st, min_size=1, max_size=5),
        st.sampled_from(list(Codec)[:2] + [Codec.LZ4, Codec.ZSTD]),
    ),
    min_size=1,
    max_size=3,
)


def around(values: list[int]) -> st.SearchStrategy[int]:
    """One of `values` or a neighbour (never below 0): limits right at a boundary."""
    near = {v + d for v in values for d in (-1, 0, 1) if v + d >= 0}
    return st.sampled_from(sorted(near or {0}))


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="log-stateful-", dir=TMP_ROOT))
        self.directory = self.root / "topic-0"
        self.now = 1_000_000
        self.base_config = self.config = CONFIG
        self.log = Log.open(self.directory, self.config, now_ms=self.now)
        self.segments = [ModelSegment(0)]
        self.log_start = 0
        self.recovery_point = 0
        self.epochs: list[tuple[int, int]] = []
        self.leader_epoch = 0
        self.invariant_reads = 0

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    # ------------------------------------------------------------------ model helpers

    @property
    def leo(self) -> int:
        return self.segments[-1].next_offset

    def model_truncate_epochs_from_end(self, end: int) -> None:
        self.epochs = [(e, s) for e, s in self.epochs if s < end]

    def model_truncate_epochs_from_start(self, start: int) -> None:
        removed = [(e, s) for e, s in self.epochs if s <= start]
        if removed and self.epochs[0][1] < start:
            self.epochs = [(removed[-1][0], start)] + [(e, s) for e, s in self.epochs if s > start]

    def model_assign_epoch(self, epoch: int, start: int) -> None:
        """Kafka's assign: a new epoch replaces entries it is not strictly after."""
        if not self.epochs or epoch > self.epochs[-1][0]:
            self.epochs = [(e, s) for e, s in self.epochs if e < epoch and s < start]
            self.epochs.append((epoch, start))

    def model_roll(self) -> None:
        if self.segments[-1].base != self.leo:
            self.segments.append(ModelSegment(self.leo))

    # Retention (Kafka's rule, stated on the model's segments). It removes whole segments,
    # oldest first: a segment stays if it is not "doomed" by the rule at hand, and so does
    # every newer one. Besides the rule, a segment may only go if it holds data (an empty
    # active segment stays) and, when the caller gives a high watermark, if all of its
    # offsets are below it. A non-empty active segment may go: the log then goes on in a
    # new empty segment at the LEO. The log start offset becomes the first kept segment's
    # base. `delete_old_segments` applies retention.ms, then retention.bytes, then drops
    # the segments wholly below the log start offset.

    def segment_ends(self) -> list[int]:
        """Each segment's end (exclusive): the next segment's base, or the LEO."""
        return [s.base for s in self.segments[1:]] + [self.leo]

    def model_retain(self, doomed: list[bool], high_watermark: int | None) -> int:
        """Drop the oldest segments while they are doomed and may go; how many went."""
        may_go = [
            bool(segment.batches) and (high_watermark is None or end <= high_watermark)
            for segment, end in zip(self.segments, self.segment_ends(), strict=True)
        ]
        gone = len(list(takewhile(bool, map(and_, doomed, may_go))))
        if gone:
            self.segments = self.segments[gone:] or [ModelSegment(self.leo)]
            self.model_advance_log_start(self.segments[0].base)
        return gone

    def model_retention_by_bytes(self, limit: int, high_watermark: int | None) -> int:
        """retention.bytes: a segment is doomed if the log still holds at least `limit`
        bytes without it and every older segment."""
        sizes = [s.size for s in self.segments]
        doomed = [sum(sizes[i + 1 :]) >= limit for i in range(len(sizes))]
        return self.model_retain(doomed, high_watermark)

    def model_retention_by_time(self, retention_ms: int, high_watermark: int | None) -> int:
        """retention.ms: a segment is doomed if its newest timestamp is more than
        `retention_ms` old."""
        doomed = [
            bool(s.batches) and self.now - max(b.max_ts for b in s.batches) > retention_ms
            for s in self.segments
        ]
        return self.model_retain(doomed, high_watermark)

    def model_below_log_start(self, high_watermark: int | None) -> int:
        """Segments that end at or below the log start offset (never the active one)."""
        ends = self.segment_ends()
        doomed = [end <= self.log_start for end in ends[:-1]] + [False]
        return self.model_retain(doomed, high_watermark)

    def model_advance_log_start(self, offset: int) -> None:
        if offset > self.log_start:
            self.log_start = offset
            self.recovery_point = max(self.recovery_point, offset)
            self.model_truncate_epochs_from_start(offset)

    def model_read(self, start: int, max_bytes: int, upper: int | None, min_one: bool) -> bytes:
        index = max(i for i, s in enumerate(self.segments) if s.base <= start or i == 0)
        for segment in self.segments[index:]:
            candidates = [b for b in segment.batches if b.last >= start]
            if not candidates:
                continue
            out: list[ModelBatch] = []
            total = 0
            for batch in candidates:
                if upper is not None and batch.last >= upper:
                    break
                if total + len(batch.data) > max_bytes:
                    if not out and min_one:
                        out.append(batch)
                    break
                out.append(batch)
                total += len(batch.data)
            return b"".join(b.data for b in out)
        return b""

    # ------------------------------------------------------------------ rules

    @initialize(interval=st.sampled_from([0, 64, 128, 1024, 4096]))
    def choose_index_interval(self, interval):
        """Dense indexes, sparse ones, and none at all (every lookup scans the segment)."""
        self.base_config = self.config = CONFIG.merged(index_interval_bytes=interval)
        self.log.update_config(self.config)

    @initialize(
        segments=st.lists(
            st.tuples(batches_st, st.booleans(), st.just(0) | st.integers(0, SEGMENT_MS)),
            max_size=6,
        )
    )
    def start_with_segments(self, segments):
        """Begin with a few small segments (or none), written up to segment.ms apart or at
        once (then a newer segment may hold older timestamps than an older one): retention
        has segments to choose among from the first step."""
        for batches, new_epoch, gap in segments:
            self.append(batches, new_epoch)
            self.roll()
            self.now += gap

    @rule(batches=batches_st, new_epoch=st.booleans())
    def append(self, batches, new_epoch):
        if new_epoch:
            self.leader_epoch += 1
        built = []
        for records, codec in batches:
            built.append(
                build_batch([Record(k, v, self.now + dt) for k, v, dt in records], codec=codec)
            )
        payload = b"".join(built)
        max_ts = max(self.now + dt for records, _ in batches for _, _, dt in records)
        active = self.segments[-1]
        if active.size > 0 and (
            active.size > SEGMENT_BYTES - len(payload)
            or max_ts - active.batches[0].max_ts > SEGMENT_MS
        ):
            self.model_roll()
        first = self.leo
        next_offset = first
        for (records, _), raw in zip(batches, built, strict=True):
            data, last, batch_max = assign_offsets(raw, next_offset, self.leader_epoch)
            stamps = [self.now + dt for _, _, dt in records]
            self.segments[-1].batches.append(
                ModelBatch(next_offset, last, bytes(data), batch_max, self.leader_epoch, stamps)
            )
            next_offset = last + 1
        self.model_assign_epoch(self.leader_epoch, first)

        info = self.log.append_as_leader(payload, self.leader_epoch, self.now)
        assert (info.first_offset, info.last_offset) == (first, next_offset - 1)
        assert info.max_timestamp == max_ts

    @rule(data=st.data(), count=st.integers(1, 8))
    def read(self, data, count):
        for _ in range(count):
            self.check_one_read(data)

    def check_one_read(self, data) -> None:
        start = data.draw(st.integers(max(0, self.log_start - 2), self.leo + 2), label="start")
        # Exact batch-boundary sizes (and one byte either side) catch off-by-one cuts.
        ahead = [len(b.data) for seg in self.segments for b in seg.batches if b.last >= start][:6]
        boundaries = [sum(ahead[: k + 1]) + d for k in range(len(ahead)) for d in (-1, 0, 1)]
        max_bytes = data.draw(
            st.integers(1, 3 * SEGMENT_BYTES) | st.sampled_from(boundaries or [1]),
            label="max_bytes",
        )
        max_bytes = max(1, max_bytes)
        upper = data.draw(st.none() | st.integers(self.log_start, self.leo), label="upper")
        min_one = data.draw(st.booleans(), label="min_one_batch")
        if start < self.log_start or start > self.leo:
            with pytest.raises(OffsetOutOfRangeError):
                self.log.read(start, max_bytes, upper, min_one)
            return
        fetched = self.log.read(start, max_bytes, upper, min_one)
        assert fetched.records == self.model_read(start, max_bytes, upper, min_one)

    @rule(data=st.data())
    def offset_for_timestamp(self, data):
        stamps = [
            t + d
            for s in self.segments
            for b in s.batches
            for t in b.timestamps
            for d in (-1, 0, 1)
        ]
        target = data.draw(
            st.integers(self.now - 4_000, self.now + 150) | st.sampled_from(stamps or [0]),
            label="timestamp",
        )
        expected = None
        for segment in self.segments:
            for batch in segment.batches:
                for i, ts in enumerate(batch.timestamps):
                    if expected is None and batch.base + i >= self.log_start and ts >= target:
                        expected = (batch.base + i, ts)
        assert self.log.offset_for_timestamp(target) == expected

    @rule(data=st.data())
    def truncate(self, data):
        offset = data.draw(st.integers(0, self.leo + 2), label="offset")
        acted = self.log.truncate_to(offset)
        assert acted == (offset < self.leo)
        if not acted:
            return
        if self.segments[0].base > offset:
            self.segments = [ModelSegment(offset)]
            self.log_start = self.recovery_point = offset
            self.epochs = []
            return
        self.segments = [s for s in self.segments if s.base <= offset]
        last = self.segments[-1]
        last.batches = [b for b in last.batches if b.last < offset]
        self.model_truncate_epochs_from_end(self.leo)
        self.log_start = min(self.log_start, self.leo)
        self.recovery_point = min(self.recovery_point, self.leo)

    @rule()
    def roll(self):
        self.log.roll(self.now)
        self.model_roll()

    # Retention limits are drawn at random or exactly at a segment boundary (and one
    # either side), where an off-by-one keeps or deletes one segment too many.

    def draw_high_watermark(self, data) -> int | None:
        """None (no limit) or an offset between the log start and the LEO."""
        ends = [end for end in self.segment_ends() if end >= self.log_start]
        return data.draw(
            st.none() | st.integers(self.log_start, self.leo) | st.sampled_from(ends),
            label="high watermark",
        )

    @rule(data=st.data())
    def retention_by_bytes(self, data):
        sizes = [s.size for s in self.segments]
        suffixes = [sum(sizes[i:]) for i in range(len(sizes))]
        limit = data.draw(
            st.integers(0, 4 * SEGMENT_BYTES) | around(suffixes), label="retention.bytes"
        )
        self.config = self.base_config.merged(retention_bytes=limit)
        self.log.update_config(self.config)
        hw = self.draw_high_watermark(data)
        expected = self.model_retention_by_bytes(limit, hw) + self.model_below_log_start(hw)
        assert self.log.delete_old_segments(self.now, high_watermark=hw) == expected

    @rule(advance=st.integers(0, 10_000), data=st.data())
    def retention_by_time(self, advance, data):
        self.now += advance
        ages = [self.now - max(b.max_ts for b in s.batches) for s in self.segments if s.batches]
        limit = data.draw(st.integers(0, 10_000) | around(ages), label="retention.ms")
        self.config = self.base_config.merged(retention_ms=limit)
        self.log.update_config(self.config)
        hw = self.draw_high_watermark(data)
        expected = self.model_retention_by_time(limit, hw) + self.model_below_log_start(hw)
        assert self.log.delete_old_segments(self.now, high_watermark=hw) == expected

    @rule(advance=st.integers(0, 2_000))
    def tick(self, advance):
        self.now += advance

    @rule(data=st.data())
    def increment_log_start(self, data):
        # Often a segment's base: the segments before it are then wholly below the start.
        bases = [s.base for s in self.segments if self.log_start <= s.base <= self.leo]
        offset = data.draw(
            st.integers(self.log_start, self.leo) | st.sampled_from(bases or [self.leo]),
            label="log start",
        )
        assert self.log.maybe_increment_log_start_offset(offset) == (offset > self.log_start)
        self.model_advance_log_start(offset)

    @rule()
    def flush(self):
        self.log.flush(now_ms=self.now)
        self.recovery_point = self.leo

    @rule()
    def clean_reopen(self):
        self.log.flush()
        self.log.close()
        self.recovery_point = self.leo
        # As Kafka on load: an epoch entry starting at the LEO (no data yet) is dropped.
        self.model_truncate_epochs_from_end(self.leo)
        self.log = Log.open(
            self.directory,
            self.config,
            now_ms=self.now,
            recovery_point=self.recovery_point,
            log_start_offset=self.log_start,
            had_clean_shutdown=True,
        )

    @precondition(lambda self: self.segments[-1].batches)
    @rule(data=st.data())
    def crash(self, data):
        last = self.segments[-1]
        kept_prefix = 0  # bytes that must survive: flushed, or holding the log start
        for batch in last.batches:
            if batch.last < self.recovery_point or batch.base < self.log_start:
                kept_prefix += len(batch.data)
            else:
                break
        cut = data.draw(st.integers(kept_prefix, last.size), label="cut at byte")
        note(f"crash: cutting segment {last.base} ({last.size} bytes) at {cut}")
        segment_path = self.log.active_segment.log_path
        for segment in self.log.segments:  # what the kernel does when a process dies
            segment._file.close()
            segment.offset_index.close()
            segment.time_index.close()
        with open(segment_path, "r+b") as file:
            file.truncate(cut)

        end, survivors = 0, []
        for batch in last.batches:
            end += len(batch.data)
            if end > cut:
                break
            survivors.append(batch)
        last.batches = survivors
        self.recovery_point = max(min(self.recovery_point, self.leo), self.log_start)
        # Recovery: the epoch cache is cut to the LEO, then every recovered batch (from
        # the segment holding the recovery point on) re-adds its epoch if it is new.
        self.model_truncate_epochs_from_end(self.leo)
        first = max(
            i for i, s in enumerate(self.segments) if s.base <= self.recovery_point or i == 0
        )
        for segment in self.segments[first:]:
            for batch in segment.batches:
                self.model_assign_epoch(batch.epoch, batch.base)
        self.model_truncate_epochs_from_start(self.log_start)
        self.log = Log.open(
            self.directory,
            self.config,
            now_ms=self.now,
            recovery_point=self.recovery_point,
            log_start_offset=self.log_start,
        )

    # ------------------------------------------------------------------ invariants

    @invariant()
    def offsets_and_layout_match(self):
        log = self.log
        assert (log.log_start_offset, log.log_end_offset) == (self.log_start, self.leo)
        assert [(s.base_offset, s.size) for s in log.segments] == [
            (s.base, s.size) for s in self.segments
        ]
        assert log.leader_epoch_cache.entries == tuple(self.epochs)
        assert log.recovery_point == self.recovery_point

    @invariant()
    def whole_log_reads_back(self):
        """Read everything from the log start, in fetches of a size that varies per step."""
        self.invariant_reads += 1
        max_bytes = READ_SIZES[self.invariant_reads % len(READ_SIZES)]
        expected = b"".join(
            b.data for s in self.segments for b in s.batches if b.last >= self.log_start
        )
        got, offset = [], self.log_start
        while offset < self.leo:
            records = self.log.read(offset, max_bytes).records
            assert records == self.model_read(offset, max_bytes, None, True)
            assert records, f"empty read at {offset} below the LEO {self.leo}"
            got.append(records)
            offset = [h.next_offset for _, h in iter_batches(records)][-1]
        assert b"".join(got) == expected


# About 10 s on an idle 2-core machine (up to ~20 s when it is busy): every step re-reads
# the whole log against the model, which is what makes this test worth having.
LogMachine.TestCase.settings = settings(
    max_examples=80,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestLogStateful = LogMachine.TestCase
