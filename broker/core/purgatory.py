"""Delayed operations and the purgatory that holds them until they can complete.

How it works (after Kafka's `DelayedOperation.scala`, without its locks and timing
wheel, since the Trio core is single-threaded):

- A `DelayedOperation` is something a request is waiting for (enough replicas to reach an
  offset, enough bytes to fetch). It completes exactly once, either because
  `try_complete` found its condition met, or because its deadline passed
  (`on_expiration`, then `on_complete`), or because someone forced it.
- `Purgatory.try_complete_else_watch(op, keys, now_ms)` completes the operation now if
  it can; otherwise it watches it under each key (a partition) and schedules its expiry.
- `Purgatory.check_and_complete(key, now_ms)` is called when something changed for that
  key (an append, an HW move, a leadership change); every operation watching it is
  tried (`try_complete_key`: an operation over many keys may re-check that key alone).
  A completed operation is removed from *every* watch list at once (Kafka needed
  a reaper thread for this; we keep the back-references instead), so nothing leaks.
- Expiry uses one binary heap of [deadline, sequence, op] entries with lazy deletion: a
  completed operation's entry stays in the heap until popped, emptied (its op slot set
  to None, so the operation, its callbacks and its response are freed at once rather
  than promoted through the garbage collector's generations), and the heap is rebuilt
  when at least half of it is dead. `expire_due(now_ms)` pops what is due;
  `next_deadline_ms()` tells the shell when to wake up next, and `wake_at(deadline_ms)`
  (given by the shell) is called whenever a newly watched operation becomes the
  earliest deadline, so the shell's timer never has to be reminded by whoever added it.
  No task sleeps per request.

Only the purgatory calls `try_complete` and `force_complete`, so it always knows when an
operation finished and can unlink it.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition

# A heap entry, [deadline_ms, sequence, op or None]: a list (not a tuple or a class) so
# heapq compares entries in C and a completed operation's slot can be emptied in place.
_HeapEntry = list[Any]


class DelayedOperation:
    """A request waiting on a condition, with a deadline.

    Subclasses implement `try_complete(now_ms) -> bool` (return True when the condition
    holds; the purgatory then completes it), `on_complete()` (build and deliver the
    response: called exactly once) and optionally `on_expiration()`.
    """

    __slots__ = (
        "deadline_ms",
        "completed",
        "expired",
        "completed_ms",
        "_keys",
        "_purgatory",
        "_entry",
    )

    def __init__(self, deadline_ms: int):
        self.deadline_ms = deadline_ms
        self.completed = False
        self.expired = False
        self.completed_ms = -1  # when it completed (set before on_complete runs)
        self._keys: tuple[Hashable, ...] = ()
        self._purgatory: Purgatory | None = None
        self._entry: _HeapEntry | None = None  # its heap entry while watched

    def try_complete(self, now_ms: int) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def on_complete(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def try_complete_key(self, key: Hashable, now_ms: int) -> bool:
        """`try_complete` after something changed for `key` (`check_and_complete`); an
        operation over many keys may re-check that one alone. By default: all of it."""
        return self.try_complete(now_ms)

    def on_expiration(self) -> None:
        """Hook run just before `on_complete` when the deadline passed."""


class PartitionResult(Protocol):
    """What a partition's answer carries at least: its error code."""

    error_code: ErrorCode


PartitionT = TypeVar("PartitionT")  # what the operation needs of a partition (a Protocol)
ResultT = TypeVar("ResultT", bound=PartitionResult)  # the answer for one partition


class PartitionStatus(Protocol[ResultT]):
    """One partition of a `DelayedPartitionsOperation`: the offset it waits for, whether it
    is still pending, and its answer so far."""

    required_offset: int
    pending: bool
    result: ResultT


class DelayedPartitionsOperation(DelayedOperation, Generic[PartitionT, ResultT]):
    """A request over several partitions, each pending until it is decided (Kafka's
    DelayedProduce and DelayedDeleteRecords share this shape).

    `statuses` maps each partition to a `PartitionStatus` (`pending`, and a `result`
    carrying an `error_code`). `try_complete` asks `check_partition(partition, status)`
    about every pending one (the partition is None when this broker no longer hosts it)
    and completes when none is pending; on expiry the pending ones answer
    REQUEST_TIMED_OUT; `on_complete` hands every result to `respond` once. Subclasses
    implement `check_partition` and `clear_result` (what a failed result must not carry).
    """

    __slots__ = ("statuses", "_get_partition", "_respond")

    def __init__(
        self,
        deadline_ms: int,
        statuses: Mapping[TopicPartition, PartitionStatus[ResultT]],
        get_partition: Callable[[TopicPartition], PartitionT | None],
        respond: Callable[[dict[TopicPartition, ResultT]], None],
    ):
        super().__init__(deadline_ms)
        self.statuses = statuses
        self._get_partition = get_partition
        self._respond = respond

    def check_partition(
        self, partition: PartitionT | None, status: PartitionStatus[ResultT]
    ) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def clear_result(self, result: ResultT) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def try_complete(self, now_ms: int) -> bool:
        for tp, status in self.statuses.items():
            if status.pending:
                self.check_partition(self._get_partition(tp), status)
        return not any(s.pending for s in self.statuses.values())

    def on_expiration(self) -> None:
        for status in self.statuses.values():
            if status.pending:
                self.fail(status, ErrorCode.REQUEST_TIMED_OUT)

    def on_complete(self) -> None:
        self._respond({tp: s.result for tp, s in self.statuses.items()})

    def fail(self, status: PartitionStatus[ResultT], error: ErrorCode) -> None:
        status.pending = False
        status.result.error_code = error
        self.clear_result(status.result)


class Purgatory:
    """Watch lists keyed by partition plus one expiry heap."""

    # Rebuild the heap once this many entries are dead and they are over half of it.
    _MIN_DEAD_FOR_PURGE = 1024

    def __init__(self, name: str, wake_at: Callable[[int], None] | None = None):
        self.name = name
        self._wake_at = wake_at
        self._watchers: dict[Hashable, dict[int, DelayedOperation]] = {}
        # [deadline, sequence, op] (op None once completed: a dead entry).
        self._heap: list[_HeapEntry] = []
        self._dead_in_heap = 0
        self._sequence = itertools.count()
        self._pending = 0
        self.completed_count = 0
        self.expired_count = 0

    # -- queries -------------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Operations watched and not yet completed (Kafka's purgatory size)."""
        return self._pending

    def watched_keys(self) -> int:
        return len(self._watchers)

    def watchers_for(self, key: Hashable) -> int:
        return len(self._watchers.get(key, ()))

    def next_deadline_ms(self) -> int | None:
        self._drop_dead_heads()
        return self._heap[0][0] if self._heap else None

    # -- operations ----------------------------------------------------------------
    def try_complete_else_watch(
        self, op: DelayedOperation, keys: Iterable[Hashable], now_ms: int
    ) -> bool:
        """Complete `op` now if possible (True); else watch it under every key (False)."""
        if op.completed:
            raise ValueError("operation already completed")
        if op.try_complete(now_ms):
            self._finish(op, now_ms, expired=False)
            return True
        keys = tuple(dict.fromkeys(keys))
        op._keys = keys
        op._purgatory = self
        oid = id(op)
        for key in keys:
            self._watchers.setdefault(key, {})[oid] = op
        entry = [op.deadline_ms, next(self._sequence), op]
        op._entry = entry
        heapq.heappush(self._heap, entry)
        self._pending += 1
        if self._wake_at is not None and self._heap[0] is entry:
            self._wake_at(op.deadline_ms)
        return False

    def check_and_complete(self, key: Hashable, now_ms: int) -> int:
        """Try every operation watching `key`; return how many completed."""
        watchers = self._watchers.get(key)
        if not watchers:
            return 0
        done = 0
        for op in list(watchers.values()):
            if not op.completed and op.try_complete_key(key, now_ms):
                self._finish(op, now_ms, expired=False)
                done += 1
        return done

    def expire_due(self, now_ms: int) -> int:
        """Expire every operation whose deadline is <= now_ms; return how many."""
        expired = 0
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            op = heapq.heappop(heap)[2]
            if op is None:
                self._dead_in_heap -= 1
                continue
            self._finish(op, now_ms, expired=True, popped=True)
            expired += 1
        self._maybe_purge_heap()
        return expired

    def force_complete_all(self, now_ms: int) -> int:
        """Complete everything now (shutdown), as if each had expired."""
        done = 0
        for watchers in list(self._watchers.values()):
            for op in list(watchers.values()):
                if not op.completed:
                    self._finish(op, now_ms, expired=True)
                    done += 1
        return done

    # -- internals -----------------------------------------------------------------
    def _finish(
        self, op: DelayedOperation, now_ms: int, *, expired: bool, popped: bool = False
    ) -> None:
        op.completed = True
        op.expired = expired
        op.completed_ms = now_ms
        if op._purgatory is self:
            oid = id(op)
            for key in op._keys:
                watchers = self._watchers.get(key)
                if watchers is not None:
                    watchers.pop(oid, None)
                    if not watchers:
                        del self._watchers[key]
            op._keys = ()
            op._purgatory = None
            self._pending -= 1
            entry, op._entry = op._entry, None
            assert entry is not None  # set whenever it is watched
            if not popped:  # its heap entry is now dead until popped or purged
                entry[2] = None
                self._dead_in_heap += 1
                self._maybe_purge_heap()
        if expired:
            self.expired_count += 1
            op.on_expiration()
        else:
            self.completed_count += 1
        op.on_complete()

    def _drop_dead_heads(self) -> None:
        heap = self._heap
        while heap and heap[0][2] is None:
            heapq.heappop(heap)
            self._dead_in_heap -= 1

    def _maybe_purge_heap(self) -> None:
        # Purge once the dead are at least as many as the living: amortized O(1) per
        # completion (dead entries hold no operation, only three slots).
        dead = self._dead_in_heap
        if dead >= self._MIN_DEAD_FOR_PURGE and dead * 2 >= len(self._heap):
            self._heap = [entry for entry in self._heap if entry[2] is not None]
            heapq.heapify(self._heap)
            self._dead_in_heap = 0
