"""Subscription state (sans-IO): the assigned partitions, each one's position, pending
reset, buffered records and error. Kafka 2.8's SubscriptionState.

How it works: each assigned partition has a `PartitionState`: its position (the next
offset to hand out), a pending reset ("earliest"/"latest" from `auto_offset_reset` or
`seek_to_beginning/end`; "committed" while a group consumer looks the group's committed
offset up), the records fetched but not yet handed out (a `ConsumerBatch`, plus where
the fetch that brought them ended), a retry backoff and an error for the next `poll()`
to raise. `seek()` bumps the state's generation, so the answer of a fetch sent before
the seek is dropped instead of applied. A partition's buffer holds at most two fetch
answers: one being handed out and one fetched ahead (`wants_fetch`).

`SubscriptionState` holds the assignment: `assign` (kept partitions keep their state,
new ones start by the reset policy, or at the committed offset with a group id) or
`set_group_assignment` (a rebalance's; revoked partitions, marked by
`begin_revocation`, hand out and fetch nothing more). `drain` is poll()'s part: up to
`max_poll_records` buffered records, one batch per partition, starting with the next
partition each call so none starves, advancing the positions. For the group's commits
it gives the positions (`current_offsets`) and what counts as consumed (the positions
when poll() was last called: `note_consumed`, `consumed_offsets`), and it applies the
committed offsets the group coordinator looked up (`apply_committed`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

from client.consumer.batch import ConsumerBatch
from client.consumer.errors import ConsumerStateError, NoOffsetForPartitionError
from client.consumer.group.offsets import CommittedOffset, OffsetAndEpoch
from client.protocol.errors import TributaryError
from client.protocol.types import TopicPartition

EARLIEST = "earliest"
LATEST = "latest"
NONE = "none"
# A partition whose starting position is the group's committed offset, being looked up
# (never sent as a ListOffsets reset: the group coordinator's resolver handles it).
COMMITTED = "committed"


class PartitionState:
    """One assigned partition's position, pending reset, buffered records and error."""

    __slots__ = (
        "backoff_until_ms",
        "buffer",
        "buffer_index",
        "consumed",
        "error",
        "fetches_buffered",
        "fetching",
        "generation",
        "high_watermark",
        "log_start_offset",
        "next_fetch_offset",
        "position",
        "position_epoch",
        "preferred_read_replica",
        "preferred_until_ms",
        "reset",
        "resetting",
        "revoking",
    )

    def __init__(self) -> None:
        self.position: int | None = None
        self.position_epoch = -1  # leader epoch of the last record handed out
        self.reset: str | None = None
        self.resetting = False
        self.fetching = False
        self.generation = 0
        self.buffer: ConsumerBatch | None = None  # fetched, from buffer_index on not handed out
        self.buffer_index = 0
        self.next_fetch_offset: int | None = None  # where the buffered fetch ended
        self.fetches_buffered = 0  # fetch answers in the buffer (at most 2: one ahead)
        self.backoff_until_ms = -math.inf
        self.error: BaseException | None = None
        self.high_watermark = -1
        self.log_start_offset = -1
        # The position when poll() was last called: what auto-commit may commit.
        self.consumed: OffsetAndEpoch | None = None
        self.revoking = False  # being revoked: hand out and fetch nothing more
        # KIP-392: the replica the leader told us to fetch from (-1: the leader), until when.
        self.preferred_read_replica = -1
        self.preferred_until_ms = -math.inf

    def clear_buffer(self) -> None:
        self.buffer = None
        self.buffer_index = 0
        self.next_fetch_offset = None
        self.fetches_buffered = 0

    @property
    def wants_fetch(self) -> bool:
        """Nothing buffered, or one fetch's records buffered and none fetched ahead yet:
        the next fetch goes out while poll() hands those out (one fetch ahead)."""
        return not self.buffered or (
            self.fetches_buffered == 1 and self.next_fetch_offset is not None
        )

    @property
    def fetch_offset(self) -> int | None:
        """Where the next fetch starts: after the buffered records, else the position."""
        return self.next_fetch_offset if self.buffered else self.position

    @property
    def buffered(self) -> int:
        return 0 if self.buffer is None else len(self.buffer.offsets) - self.buffer_index

    def take(self, room: int) -> ConsumerBatch:
        """Up to `room` of the buffered records (at least one is buffered), marked as
        handed out; the whole buffer itself when it all fits (no copy)."""
        buffer = self.buffer
        assert buffer is not None
        start = self.buffer_index
        if start == 0 and room >= len(buffer.offsets):
            taken = buffer
        else:
            taken = buffer.slice(start, start + room)
        self.buffer_index += len(taken.offsets)
        return taken

    def set_position(self, offset: int | None, reset: str | None = None) -> None:
        self.position = offset
        self.reset = reset
        self.error = None
        self.generation += 1
        self.backoff_until_ms = -math.inf
        self.clear_buffer()


class SubscriptionState:
    """The assigned partitions and their `PartitionState`s; see the module docstring.
    `group`: the consumer has a group id (new partitions start at the committed offset).
    """

    def __init__(self, auto_offset_reset: str, *, group: bool) -> None:
        self.auto_offset_reset = auto_offset_reset
        self.group = group
        # Replaced (not changed in place) by a new assignment: read it anew each time.
        self.states: dict[TopicPartition, PartitionState] = {}
        self._poll_start = 0

    def reset_policy(self) -> str | None:
        """Where a partition without a position starts (None: it needs a seek)."""
        return None if self.auto_offset_reset == NONE else self.auto_offset_reset

    # --- the assignment --------------------------------------------------------------

    def assignment(self) -> set[TopicPartition]:
        return set(self.states)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Exactly these partitions: kept ones keep their state; new ones start at the
        group's committed offset (with a group id), else by the reset policy."""
        states: dict[TopicPartition, PartitionState] = {}
        for tp in partitions:
            state = self.states.get(tp)
            if state is None:
                state = PartitionState()
                state.reset = COMMITTED if self.group else self.reset_policy()
            states[tp] = state
        self.states = states

    def set_group_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        """The group's assignment: partitions kept keep their state; new ones start at the
        committed offset; the others (and their buffered records) are dropped."""
        states: dict[TopicPartition, PartitionState] = {}
        for tp in partitions:
            state = self.states.get(tp)
            if state is None or state.revoking:
                state = PartitionState()
                state.reset = COMMITTED
            states[tp] = state
        self.states = states

    def begin_revocation(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            state = self.states.get(tp)
            if state is not None:
                state.revoking = True
                state.clear_buffer()

    def state_or_error(self, tp: TopicPartition | tuple[str, int]) -> PartitionState:
        state = self.states.get(TopicPartition(*tp))
        if state is None:
            raise ConsumerStateError(f"partition {TopicPartition(*tp)} is not assigned")
        return state

    # --- positions -------------------------------------------------------------------

    def seek(self, tp: TopicPartition | tuple[str, int], offset: int) -> None:
        if offset < 0:
            raise ValueError(f"cannot seek to a negative offset ({offset})")
        self.state_or_error(tp).set_position(offset)

    def seek_to(
        self, where: str, partitions: Iterable[TopicPartition | tuple[str, int]] | None
    ) -> None:
        """Reset these partitions (default: all assigned) to `where` (earliest/latest)."""
        tps = list(self.states) if partitions is None else [TopicPartition(*p) for p in partitions]
        for tp in tps:
            self.state_or_error(tp).set_position(None, reset=where)

    def current_offsets(self) -> dict[TopicPartition, OffsetAndEpoch]:
        return {
            tp: OffsetAndEpoch(s.position, s.position_epoch)
            for tp, s in self.states.items()
            if s.position is not None
        }

    def consumed_offsets(self) -> dict[TopicPartition, OffsetAndEpoch]:
        return {tp: s.consumed for tp, s in self.states.items() if s.consumed is not None}

    def note_consumed(self) -> None:
        """poll() was called: what it handed out so far counts as consumed."""
        for state in self.states.values():
            if state.position is not None and not state.revoking:
                state.consumed = OffsetAndEpoch(state.position, state.position_epoch)

    def awaiting_committed(self) -> dict[TopicPartition, int]:
        """The partitions waiting for the group's committed offset, with their
        generations (an answer for an older generation is stale)."""
        return {
            tp: s.generation
            for tp, s in self.states.items()
            if s.reset == COMMITTED and s.position is None and not s.revoking and s.error is None
        }

    def apply_committed(
        self,
        wanted: Mapping[TopicPartition, int],
        found: Mapping[TopicPartition, CommittedOffset] | None,
        error: TributaryError | None,
    ) -> None:
        """Start the partitions of `wanted` (from `awaiting_committed`) at the committed
        offsets `found`, by the reset policy where the group has none, or give them
        `error` to raise; partitions revoked or sought meanwhile are left alone."""
        for tp, generation in wanted.items():
            state = self.states.get(tp)
            if state is None or state.generation != generation or state.reset != COMMITTED:
                continue  # revoked, or sought meanwhile
            committed = found.get(tp) if found is not None else None
            if error is not None:
                state.error = error
            elif committed is not None and committed.offset is not None:
                state.position = committed.offset
                state.position_epoch = committed.leader_epoch
                state.consumed = OffsetAndEpoch(committed.offset, committed.leader_epoch)
                state.reset = None
            else:
                state.reset = self.reset_policy()

    # --- poll() ----------------------------------------------------------------------

    def raise_pending_error(self, committed_lookup_failed: Callable[[], None]) -> None:
        """Raise `NoOffsetForPartitionError` for partitions with neither a position nor
        a way to get one, else the first partition's error (once; for a partition
        waiting for the group's committed offset, `committed_lookup_failed()` first)."""
        missing = [
            tp
            for tp, s in self.states.items()
            if s.position is None and s.reset is None and s.error is None and not s.revoking
        ]
        if missing:
            raise NoOffsetForPartitionError(missing)
        for state in self.states.values():
            if state.error is not None:
                error, state.error = state.error, None
                if state.reset == COMMITTED:
                    committed_lookup_failed()
                raise error

    def drain(self, max_records: int) -> list[ConsumerBatch]:
        """Up to `max_records` buffered records, one batch per partition, starting with
        the next partition each call (so none starves); advances the positions."""
        out: list[ConsumerBatch] = []
        room = max_records
        tps = list(self.states)
        if not tps:
            return out
        start = self._poll_start % len(tps)
        self._poll_start += 1
        for tp in tps[start:] + tps[:start]:
            state = self.states[tp]
            if not state.buffered or state.revoking:
                continue
            taken = state.take(room)
            out.append(taken)
            room -= len(taken.offsets)
            state.position = taken.offsets[-1] + 1
            state.position_epoch = taken.leader_epochs[-1]
            if not state.buffered:
                if state.next_fetch_offset is not None:
                    state.position = max(state.position, state.next_fetch_offset)
                state.clear_buffer()
            if room <= 0:
                break
        return out
