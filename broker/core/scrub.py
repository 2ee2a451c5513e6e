"""The scrubber's decisions: which bytes to check next, and how to repair what is damaged.

How it works (pure: values in, values out; the Trio task in `broker/tasks/log_scrubber.py` does
the reading, fetching and writing):

- Scheduling. Each partition has a scrub position: the offset below which the current
  pass has checked its closed segments (checkpointed in `scrub-offset-checkpoint`, so a
  restart continues there). `next_scrub_target` picks, round-robin over the partitions
  after the one scrubbed last, the first closed segment holding offsets at or above the
  position (clamped into [log start, ...)): the task reads it from the batch holding the
  position, checking every CRC. The active segment is never scrubbed (it is being
  written; recovery checks it after a crash). Nothing left: `None`, and the shell sleeps
  until segments close or `log.scrub.interval.ms` after the pass began, when every
  position goes back to the log start (`restart_pass`).

- Repair (`plan_repair`), for one partition with damaged ranges (`CorruptRange`, the
  offsets of a batch whose CRC failed, or from a broken length to the end of its
  segment). The bytes of a committed batch are the same on every replica (followers copy
  the leader's batches verbatim), so the cure is another replica's copy:
  - Case A, a follower: refetch exactly those ranges from the leader (a consumer fetch,
    bounded by the HW) and splice them into a rebuilt copy of the segment, swapped in
    with the crash-safe `.cleaned`/`.swap` protocol. Nothing else is removed: no
    truncation, so the LEO, the HW and the leader-epoch cache do not move, and good
    batches after the damage, possibly the only good copy of another replica's damaged
    range, stay. A range at or above the HW waits (the leader does not serve it yet).
  - Case B, the leader, with other ISR members: ask the controller to move leadership
    to the next ISR member (`StepDown`); once a follower, Case A applies. Consumers get
    `CorruptRecordError` meanwhile, never the damaged value. A leader that has led for
    less than `step_down_grace_ms` waits first: its followers may need its good copies
    (two replicas each damaged where the other is good would otherwise pass leadership
    back and forth without either repairing: the planner's property test found that).
  - Case C, the leader and the only ISR member: no other copy can be trusted, so nothing
    is changed (`Unrepairable`): the damaged range is reported and kept.
  - Case D, ranges wholly below the log start offset: retention removed them: `Drop`.
  The leader's copy of a range may be damaged too: the splice refuses it (CRC check of
  the fetched bytes), the follower retries later. Because leadership rotates through the
  ISR while leaders find damage, every range whose good copy sits on some ISR member is
  eventually served by it (`tests/unit/test_scrub_planner.py` checks this).

- `splice_segment` decides the rebuilt segment's batches: the segment's own good batches
  outside the damaged ranges, plus the fetched batches inside them, refusing fetched
  batches that straddle a range boundary or do not start exactly at its first offset.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from client.protocol.types import TopicPartition

__all__ = [
    "CorruptRange",
    "Drop",
    "Refetch",
    "ReplicaView",
    "ScrubTarget",
    "SegmentSpan",
    "SpliceError",
    "StepDown",
    "Unrepairable",
    "Wait",
    "merge_ranges",
    "next_scrub_target",
    "plan_repair",
    "restart_pass",
    "splice_segment",
]


class SegmentSpan(NamedTuple):
    """A closed segment: offsets [base_offset, end_offset) (end = next segment's base)."""

    base_offset: int
    end_offset: int
    size: int


class ScrubTarget(NamedTuple):
    topic_partition: TopicPartition
    segment_base_offset: int
    from_offset: int  # start at the batch holding this offset


class CorruptRange(NamedTuple):
    """Offsets [first_offset, last_offset] of damaged bytes in one segment."""

    first_offset: int
    last_offset: int
    segment_base_offset: int
    reason: str = ""


# -------------------------------------------------------------------------- scheduling


def next_scrub_target(
    segments: Mapping[TopicPartition, Sequence[SegmentSpan]],
    positions: Mapping[TopicPartition, int],
    log_starts: Mapping[TopicPartition, int],
    last: TopicPartition | None = None,
) -> ScrubTarget | None:
    """The next closed segment to check, round-robin after `last` (see module docstring)."""
    order = sorted(segments)
    if not order:
        return None
    start = 0
    if last is not None:
        start = next((i for i, tp in enumerate(order) if tp > last), 0)
    for tp in order[start:] + order[:start]:
        position = max(positions.get(tp, 0), log_starts.get(tp, 0))
        for span in segments[tp]:
            if span.end_offset > position and span.size > 0:
                return ScrubTarget(tp, span.base_offset, max(position, span.base_offset))
    return None


def restart_pass(
    positions: Mapping[TopicPartition, int], log_starts: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """Positions for a new pass: every partition back to its log start offset."""
    return {tp: log_starts.get(tp, 0) for tp in set(positions) | set(log_starts)}


def merge_ranges(ranges: Iterable[CorruptRange]) -> list[CorruptRange]:
    """Sorted, with overlapping or adjacent ranges of one segment merged."""
    merged: list[CorruptRange] = []
    for r in sorted(ranges):
        if (
            merged
            and merged[-1].segment_base_offset == r.segment_base_offset
            and r.first_offset <= merged[-1].last_offset + 1
        ):
            prev = merged[-1]
            merged[-1] = prev._replace(last_offset=max(prev.last_offset, r.last_offset))
        else:
            merged.append(r)
    return merged


# -------------------------------------------------------------------------- repair plans


@dataclass(frozen=True)
class ReplicaView:
    """What this broker knows of one partition when planning its repair."""

    broker_id: int
    leader: int  # -1: unknown
    isr: tuple[int, ...]
    high_watermark: int
    log_start_offset: int
    leader_for_ms: int = 0  # how long this broker has led (0 when it follows)
    step_down_grace_ms: int = 0  # lead at least this long before stepping down


@dataclass(frozen=True)
class Refetch:
    """Case A: fetch these ranges from `leader` and splice them in."""

    leader: int
    ranges: tuple[CorruptRange, ...]
    waiting: tuple[CorruptRange, ...] = ()  # at or above the HW: later


@dataclass(frozen=True)
class StepDown:
    """Case B: ask the controller to move leadership to another ISR member."""

    candidates: tuple[int, ...]


@dataclass(frozen=True)
class Unrepairable:
    """Case C: no other in-sync copy: keep the bytes, report."""

    reason: str


@dataclass(frozen=True)
class Drop:
    """Case D: the ranges are below the log start offset: nothing left to repair."""

    ranges: tuple[CorruptRange, ...]


@dataclass(frozen=True)
class Wait:
    """Nothing to do now (leader unknown, ranges not committed yet)."""

    reason: str


RepairPlan = Refetch | StepDown | Unrepairable | Drop | Wait


def plan_repair(view: ReplicaView, ranges: Sequence[CorruptRange]) -> RepairPlan | None:
    """What to do about `ranges` (this broker's damaged ranges of one partition); None
    when there is nothing to repair."""
    if not ranges:
        return None
    gone = tuple(r for r in ranges if r.last_offset < view.log_start_offset)
    live = [r for r in ranges if r.last_offset >= view.log_start_offset]
    if gone:
        return Drop(gone)  # Case D first: the rest is planned on the next round
    if view.leader < 0:
        return Wait("the partition has no leader")
    if view.leader == view.broker_id:
        others = tuple(b for b in view.isr if b != view.broker_id)
        if not others:  # Case C
            return Unrepairable(
                f"broker {view.broker_id} leads and is the only in-sync replica: "
                "no other copy to repair from"
            )
        if view.leader_for_ms < view.step_down_grace_ms:
            return Wait("leading for too short a time: followers may repair from us first")
        return StepDown(others)  # Case B
    committed = tuple(r for r in live if r.last_offset < view.high_watermark)  # Case A
    waiting = tuple(r for r in live if r.last_offset >= view.high_watermark)
    if not committed:
        return Wait(f"the damaged offsets are not below the high watermark {view.high_watermark}")
    return Refetch(view.leader, committed, waiting)


# -------------------------------------------------------------------------- splicing


class SpliceError(ValueError):
    """The fetched batches do not fit the damaged ranges exactly."""


class BatchSpan(NamedTuple):
    base_offset: int
    last_offset: int


def splice_segment(
    own: Sequence[BatchSpan],
    ranges: Sequence[CorruptRange],
    fetched: Sequence[BatchSpan],
    *,
    compacted: bool = False,
) -> list[tuple[str, int]]:
    """The rebuilt segment as (source, index) pairs in offset order: ("own", i) for the
    i-th good batch of the segment outside every range, ("fetched", j) for the j-th
    fetched batch. `own` must hold the segment's intact batches only (damaged ones left
    out). Raises `SpliceError` when a fetched batch crosses a range boundary, or a range
    is not covered exactly (its first batch must start at its first offset, its batches
    must run to its last offset without gaps) unless `compacted` (gaps are normal there).
    """

    def inside(span: BatchSpan) -> CorruptRange | None:
        for r in ranges:
            if span.base_offset >= r.first_offset and span.last_offset <= r.last_offset:
                return r
            if span.base_offset <= r.last_offset and span.last_offset >= r.first_offset:
                raise SpliceError(
                    f"batch {span.base_offset}..{span.last_offset} crosses the damaged range "
                    f"{r.first_offset}..{r.last_offset}"
                )
        return None

    out: list[tuple[int, str, int]] = []
    for i, span in enumerate(own):
        if _overlaps_any(span, ranges):
            continue
        out.append((span.base_offset, "own", i))
    covered: dict[CorruptRange, list[BatchSpan]] = {r: [] for r in ranges}
    for j, span in enumerate(fetched):
        r = inside(span)
        if r is None:
            raise SpliceError(
                f"fetched batch {span.base_offset}..{span.last_offset} is outside every "
                "damaged range"
            )
        covered[r].append(span)
        out.append((span.base_offset, "fetched", j))
    if not compacted:
        for r, spans in covered.items():
            expected = r.first_offset
            for span in sorted(spans):
                if span.base_offset != expected:
                    raise SpliceError(
                        f"range {r.first_offset}..{r.last_offset}: expected a batch at "
                        f"offset {expected}, got {span.base_offset}"
                    )
                expected = span.last_offset + 1
            if expected != r.last_offset + 1:
                raise SpliceError(
                    f"range {r.first_offset}..{r.last_offset} is covered only up to "
                    f"offset {expected - 1}"
                )
    out.sort()
    bases = [base for base, _, _ in out]
    if len(set(bases)) != len(bases):
        raise SpliceError("two batches of the rebuilt segment start at the same offset")
    return [(source, index) for _, source, index in out]


def _overlaps_any(span: BatchSpan, ranges: Sequence[CorruptRange]) -> bool:
    return any(
        span.base_offset <= r.last_offset and span.last_offset >= r.first_offset for r in ranges
    )
