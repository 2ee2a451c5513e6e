"""The consumer: assigned partitions, positions, long-poll fetches, records out of `poll()`.

How it works (Kafka 2.8's KafkaConsumer):
- Each assigned partition has a `_PartitionState`: its position (the next offset to hand
  out), a pending reset ("earliest"/"latest" from `auto_offset_reset` or
  `seek_to_beginning/end`), records fetched but not yet returned, a retry backoff and an
  error to raise from the next `poll()`. `seek()` bumps the state's generation, so the
  answer of a fetch sent before the seek is dropped instead of applied.
- A background fetcher task loops: partitions awaiting a reset get a ListOffsets to
  their leader (-2 earliest, -1 latest); partitions with a position and nothing buffered
  are fetched, one long-poll Fetch per leader broker at a time (`fetch_min_bytes`,
  `fetch_max_wait_ms`, `max_partition_fetch_bytes`, `fetch_max_bytes`), each partition
  naming the leader epoch from metadata (KIP-320). A partition is also fetched *ahead*
  while one answer's records are still buffered (from where that answer ended; at most
  one answer ahead), so the broker works on the next chunk while poll() hands out this
  one; an answer fetched ahead that fails is dropped and the error met again, and
  handled, once the buffer has drained. It sleeps until woken by a poll, a seek, an
  answer or fresh metadata.
- An answer's record batches come whole, so records below the position are skipped.
  The records are buffered as columns (a `ConsumerBatch` per partition: offsets,
  timestamps, keys, values, headers, leader epochs), each batch decoded and transposed
  in C (`decode_columns`), with no Python object per record.
  With `check_crcs` (Kafka's check.crcs, on by default) every batch at or above the
  position has its CRC-32C checked before it is decoded: the records of the batches
  before a damaged one are handed out, then `poll()` raises `CorruptBatchError` (a
  `CorruptRecordError`) naming the topic, partition, offset range and broker, and keeps
  raising it at that position until the application seeks past it. Damaged bytes are
  never decoded into records.
  OFFSET_OUT_OF_RANGE resets the position by `auto_offset_reset`, or with "none" makes
  the next `poll()` raise `OffsetOutOfRangeError`. A stale-leader error
  (NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH, ...) or a lost connection asks
  for fresh metadata and retries that partition after `retry_backoff_ms`.
- A fetch that stays unanswered `fetch_max_wait_ms` + `STALLED_FETCH_MS` makes the
  consumer look at fresh metadata; if that names another leader (or a newer leader
  epoch) for one of its partitions, the fetch is abandoned and the partitions are
  fetched from the new leader, instead of waiting out the request timeout for a paused
  or partitioned old leader.
- `poll(timeout_ms)` hands out up to `max_poll_records` buffered records (advancing the
  positions), else waits until the fetcher brings some or the timeout passes. On entry
  it notes each position as "consumed": what auto-commit may commit (Kafka commits in
  poll() what the previous poll() returned). `poll()` builds a `ConsumerRecord` per
  record from the columns; `poll_batches(timeout_ms)` is the same call (same records,
  `max_poll_records`, positions, errors, auto-commit and rebalance behaviour) handing
  out the columns themselves, one `ConsumerBatch` per partition: for callers that take
  many records at once (the CLI, `perf consume`), at a fraction of the cost per record.

Consumer groups (with a `group_id`; client/consumer/group/coordinator.py does the work):
`subscribe(topics)` makes the consumer a group member whose assignment the group's leader
decides; a rebalance marks the revoked partitions (no more records of them come out of
poll(), their buffers are dropped) before `on_revoked` runs, and new partitions start
with the position "committed" (`COMMITTED`): the coordinator's resolver looks the
group's committed offset up (else `auto_offset_reset` applies) while the fetcher leaves
them alone. `assign()` with a group id starts partitions the same way and commits with
no membership (generation -1). `commit()`, `commit_async()` and `committed()` go to the
group's coordinator. Leaving the `open_consumer` block commits (auto-commit on) and
leaves the group.

`async with open_consumer("host:port", auto_offset_reset="earliest") as consumer:`
builds one. Timings use `trio.current_time()` (MockClock in tests).
"""

from __future__ import annotations

import gc
import logging
import math
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from itertools import chain, compress, repeat
from typing import Any, NamedTuple

import trio

from client.connection import BrokerConnectionError, ConnectionPool, Connector, open_connection_pool
from client.consumer.group.coordinator import (
    CommitCallback,
    ConsumerCoordinator,
    GroupSettings,
    RebalanceCallback,
)
from client.consumer.group.membership import CommitFailedError as CommitFailedError
from client.consumer.group.membership import RebalanceInProgressError as RebalanceInProgressError
from client.consumer.group.offsets import CommittedOffset, OffsetAndEpoch
from client.list_offsets import list_offsets_from
from client.metadata import (
    DEFAULT_METADATA_MAX_AGE_MS,
    Metadata,
    open_client_nursery,
    sleep_seconds,
)
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.records import (
    CorruptRecordError,
    RecordColumns,
    RecordError,
    decode_columns,
    iter_batches,
    validate_batch,
)
from client.protocol.types import TopicPartition

log = logging.getLogger(__name__)

# How much longer than its long-poll wait a fetch may stay unanswered before the
# consumer checks the metadata for a leader change (once per this interval).
STALLED_FETCH_MS = 1000

EARLIEST = "earliest"
LATEST = "latest"
NONE = "none"
# A partition whose starting position is the group's committed offset, being looked up
# (never sent as a ListOffsets reset: the group coordinator's resolver handles it).
COMMITTED = "committed"
_RESET_TIMESTAMPS = {EARLIEST: m.EARLIEST_TIMESTAMP, LATEST: m.LATEST_TIMESTAMP}
# Partition errors after which the leader we know is stale: refresh metadata, retry.
_STALE_LEADER_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.OFFSET_NOT_AVAILABLE,
    }
)


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]  # a Kafka header value may be null
    leader_epoch: int  # the epoch of the leader that appended it (-1 if unknown)


_new_record = tuple.__new__  # a NamedTuple built from a tuple, without its __new__'s call


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while the block builds many objects, as msgpack's
    documentation advises for large unpacks. The objects are looked at once, as young
    ones, at the first allocation after the block, instead of every 700 allocations
    within it: those collections promoted the live records to the older generations,
    whose full collections then traversed every object of the process again (measured:
    poll()'s client CPU per record 1.2 -> 0.9 us). A collector the application disabled
    stays disabled; one it switches on or off from another thread meanwhile may find
    itself switched back."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class ConsumerBatch:
    """Consecutive records of one partition as columns, in offset order: what
    `poll_batches()` hands out (the lists are the caller's then). The i-th record is
    `offsets[i]`, `timestamps[i]`, `keys[i]`, `values[i]`, `headers[i]`,
    `leader_epochs[i]`; `records()` gives the same records as `ConsumerRecord`s."""

    __slots__ = (
        "headers",
        "keys",
        "leader_epochs",
        "offsets",
        "partition",
        "timestamps",
        "topic",
        "values",
    )

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.headers: list[tuple[tuple[str, bytes | None], ...]] = []
        self.leader_epochs: list[int] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def __repr__(self) -> str:
        span = f"{self.offsets[0]}..{self.offsets[-1]}" if self.offsets else "empty"
        return f"<ConsumerBatch {self.topic}-{self.partition} {span}, {len(self)} records>"

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def records(self) -> list[ConsumerRecord]:
        """The records as `ConsumerRecord`s, built in C (`map` over `zip`)."""
        count = len(self.offsets)
        columns = zip(
            repeat(self.topic, count),
            repeat(self.partition, count),
            self.offsets,
            self.timestamps,
            self.keys,
            self.values,
            self.headers,
            self.leader_epochs,
            strict=True,
        )
        with _gc_paused():
            return list(map(_new_record, repeat(ConsumerRecord, count), columns))

    def add_columns(self, columns: RecordColumns, leader_epoch: int) -> None:
        """Append one decoded record batch's records."""
        self._append(*columns, [leader_epoch] * len(columns.offsets))

    def extend(self, other: ConsumerBatch) -> None:
        """Append `other`'s records (the partition's next ones)."""
        self._append(
            other.offsets,
            other.timestamps,
            other.keys,
            other.values,
            other.headers,
            other.leader_epochs,
        )

    def _append(self, offsets, timestamps, keys, values, headers, leader_epochs) -> None:
        self.offsets += offsets
        self.timestamps += timestamps
        self.keys += keys
        self.values += values
        self.headers += headers
        self.leader_epochs += leader_epochs

    def slice(self, start: int, stop: int) -> ConsumerBatch:
        """The records `start:stop` (a new batch; this one is left as it is)."""
        part = ConsumerBatch(self.topic, self.partition)
        part.offsets = self.offsets[start:stop]
        part.timestamps = self.timestamps[start:stop]
        part.keys = self.keys[start:stop]
        part.values = self.values[start:stop]
        part.headers = self.headers[start:stop]
        part.leader_epochs = self.leader_epochs[start:stop]
        return part


class ConsumerStateError(RuntimeError):
    """The call does not fit the consumer's state (nothing assigned, closed...)."""


class NoOffsetForPartitionError(ConsumerStateError):
    """A partition has no position and `auto_offset_reset` is "none": seek first."""

    def __init__(self, partitions: Iterable[TopicPartition]) -> None:
        self.partitions = sorted(partitions)
        names = ", ".join(str(tp) for tp in self.partitions)
        super().__init__(
            f"no position for partition(s) {names} and auto_offset_reset is 'none': "
            "seek to an offset first"
        )


class OffsetOutOfRangeError(TributaryError):
    """The position is outside the log and `auto_offset_reset` is "none".

    `offsets` maps each partition to the position the broker rejected.
    """

    def __init__(self, offsets: dict[TopicPartition, int], detail: str = "") -> None:
        self.offsets = dict(offsets)
        text = ", ".join(f"{tp} at offset {o}" for tp, o in sorted(offsets.items()))
        super().__init__(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"fetch position out of range for {text} and auto_offset_reset is 'none'"
            + (f" ({detail})" if detail else ""),
        )

    @property
    def retriable(self) -> bool:
        return False


class CorruptBatchError(CorruptRecordError):
    """A fetched batch failed its CRC check: the bytes the broker sent are damaged.

    `first_offset`/`last_offset` are the batch's offsets (as its header says: the header
    itself may be damaged), `broker` the broker that sent it.
    """

    def __init__(
        self, tp: TopicPartition, first_offset: int, last_offset: int, broker: int, detail: str
    ) -> None:
        self.topic, self.partition = tp
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.broker = broker
        super().__init__(
            f"corrupt record batch in {tp.topic}-{tp.partition} at offsets "
            f"{first_offset}..{last_offset} from broker {broker}: {detail}"
        )


class _PartitionState:
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


class Consumer:
    """Build with `open_consumer()`; see the module docstring for how it works."""

    def __init__(
        self,
        pool: ConnectionPool,
        bootstrap: str | Iterable[str],
        *,
        auto_offset_reset: str = LATEST,
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        max_partition_fetch_bytes: int = 1_048_576,
        fetch_max_bytes: int = 52_428_800,
        max_poll_records: int = 500,
        request_timeout_ms: float = 30_000,
        retry_backoff_ms: float = 100,
        check_crcs: bool = True,
        metadata_max_age_ms: float = DEFAULT_METADATA_MAX_AGE_MS,
        group_id: str | None = None,
        group_instance_id: str | None = None,
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5_000,
        session_timeout_ms: int = 10_000,
        heartbeat_interval_ms: int = 3_000,
        max_poll_interval_ms: int = 300_000,
        partition_assignment_strategy: Iterable[Any] | str = ("range",),
        coordinator_pool: ConnectionPool | None = None,
        client_id: str | None = None,
        connector: Connector | None = None,
    ) -> None:
        if auto_offset_reset not in (EARLIEST, LATEST, NONE):
            raise ValueError(
                f"auto_offset_reset must be earliest, latest or none, not {auto_offset_reset!r}"
            )
        if max_poll_records < 1:
            raise ValueError("max_poll_records must be at least 1")
        self.auto_offset_reset = auto_offset_reset
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.fetch_max_bytes = fetch_max_bytes
        self.max_poll_records = max_poll_records
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.check_crcs = check_crcs
        self.metadata = Metadata(
            pool,
            bootstrap,
            max_age_ms=int(metadata_max_age_ms),
            retry_backoff_ms=int(retry_backoff_ms),
            request_timeout_ms=int(request_timeout_ms),
        )
        self._pool = pool
        self._states: dict[TopicPartition, _PartitionState] = {}
        self._nodes_fetching: set[int] = set()
        # node -> (its fetch's cancel scope, sent at ms, leader epoch per partition)
        self._fetches: dict[int, tuple[trio.CancelScope, float, dict[TopicPartition, int]]] = {}
        self._nodes_resetting: set[int] = set()
        self._nursery: trio.Nursery | None = None
        self._wakeup = trio.Event()
        self._data = trio.Event()  # set when records or an error arrive for poll()
        self._positions_changed = trio.Event()
        self._poll_start = 0
        self._closed = False
        self._in_poll = 0  # poll() calls under way (a waiting poll counts as polling)
        self.group_id = group_id
        self._coordinator: ConsumerCoordinator | None = None
        if group_id is not None:
            if isinstance(partition_assignment_strategy, str):
                partition_assignment_strategy = (partition_assignment_strategy,)
            self._coordinator = ConsumerCoordinator(
                self,
                GroupSettings(
                    group_id=group_id,
                    group_instance_id=group_instance_id,
                    enable_auto_commit=enable_auto_commit,
                    auto_commit_interval_ms=auto_commit_interval_ms,
                    session_timeout_ms=session_timeout_ms,
                    heartbeat_interval_ms=heartbeat_interval_ms,
                    max_poll_interval_ms=max_poll_interval_ms,
                    partition_assignment_strategy=tuple(partition_assignment_strategy),
                    request_timeout_ms=request_timeout_ms,
                    retry_backoff_ms=retry_backoff_ms,
                ),
                pool=pool,
                coordinator_pool=coordinator_pool or pool,
                client_id=client_id,
                connector=connector,
            )
        elif group_instance_id is not None:
            raise ValueError("group_instance_id needs a group_id")

    # --- lifecycle -------------------------------------------------------------------

    async def start(self, nursery: trio.Nursery) -> None:
        """Bootstrap (raises `NoBrokersAvailableError` if nobody answers), start tasks."""
        await self.metadata.refresh()
        self._nursery = nursery
        await nursery.start(self.metadata.run)
        nursery.start_soon(self._wake_on_metadata)
        nursery.start_soon(self._watch_stalled_fetches)
        nursery.start_soon(self._fetcher_loop)
        if self._coordinator is not None:
            self._coordinator.start(nursery)

    async def aclose(self, *, graceful: bool = True) -> None:
        """Close: a group consumer first commits (auto-commit on; everything handed out,
        or with `graceful=False` only what poll() had handed out before its latest call),
        calls on_revoked and leaves the group (dynamic members), within
        `request_timeout_ms`; then the background tasks stop. Idempotent."""
        await self._close(graceful=graceful)

    async def _close(self, *, graceful: bool) -> None:
        # No checkpoint after cancelling the nursery: open_consumer closes from inside
        # it, and a Cancelled raised there would replace the exception leaving the block.
        if self._closed:
            return
        self._closed = True
        # Inside a cancelled scope the background tasks and connections (nested in it)
        # are being cancelled too: the goodbye then goes over a connection of its own.
        tasks_alive = trio.current_effective_deadline() != -math.inf
        try:
            if self._coordinator is not None:
                # Shielded: closing after a cancellation still says goodbye to the group.
                with trio.CancelScope(shield=True) as scope:
                    scope.deadline = trio.current_time() + self.request_timeout_ms / 1000
                    await self._coordinator.close(graceful=graceful, tasks_alive=tasks_alive)
            else:
                await trio.lowlevel.checkpoint()
        finally:
            if self._nursery is not None:
                self._nursery.cancel_scope.cancel()

    # --- assignment and positions ----------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Consume exactly these partitions (replacing the previous assignment). Positions
        of partitions kept are kept; new ones start at the group's committed offset (with
        a group_id), else by `auto_offset_reset`. Not while subscribed."""
        if self.subscription():
            raise ConsumerStateError(
                "assign() and subscribe() are mutually exclusive: unsubscribe() first"
            )
        wanted = [TopicPartition(*tp) for tp in partitions]
        states: dict[TopicPartition, _PartitionState] = {}
        for tp in wanted:
            state = self._states.get(tp)
            if state is None:
                state = _PartitionState()
                self._initial_position(state)
            states[tp] = state
        self._states = states
        self.metadata.set_topics({tp.topic for tp in wanted})
        self._wake()
        if self._coordinator is not None:
            self._coordinator.wake_resolver()

    def _initial_position(self, state: _PartitionState) -> None:
        if self._coordinator is not None:
            state.reset = COMMITTED
        else:
            state.reset = self._reset_policy()

    def _reset_policy(self) -> str | None:
        return None if self.auto_offset_reset == NONE else self.auto_offset_reset

    def assignment(self) -> set[TopicPartition]:
        return set(self._states)

    # --- consumer groups -------------------------------------------------------------

    @property
    def group(self) -> ConsumerCoordinator | None:
        """The group membership (None without a group_id): generation, member id, state
        in `group.membership`."""
        return self._coordinator

    def _group_or_error(self, what: str) -> ConsumerCoordinator:
        if self._coordinator is None:
            raise ConsumerStateError(f"{what} needs a group_id")
        return self._coordinator

    def subscription(self) -> set[str]:
        return set(self._coordinator.subscription) if self._coordinator is not None else set()

    def subscribe(
        self,
        topics: Iterable[str] | str,
        *,
        on_revoked: RebalanceCallback | None = None,
        on_assigned: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        """Consume these topics as a member of the group: the group's leader assigns the
        partitions; they change on every rebalance. The callbacks (plain or async
        functions of a set[TopicPartition]) run on the consumer's background task:
        `on_revoked` before a rebalance with the partitions being taken away (their
        records are no longer handed out; with auto-commit, what poll() had handed out
        before its latest call is committed first), `on_assigned` with the new ones,
        `on_lost` (default: on_revoked) when the membership was lost, so nothing could
        be committed. Subscribing again replaces the topics and the callbacks."""
        coordinator = self._group_or_error("subscribe()")
        if self._states and not coordinator.subscription:
            raise ConsumerStateError(
                "assign() and subscribe() are mutually exclusive: assign([]) first"
            )
        coordinator.subscribe(
            [topics] if isinstance(topics, str) else topics,
            on_revoked=on_revoked,
            on_assigned=on_assigned,
            on_lost=on_lost,
        )
        self._wake_pollers()

    async def unsubscribe(self) -> None:
        """Give the partitions back (on_revoked), leave the group, forget the topics."""
        if self._coordinator is not None:
            await self._coordinator.unsubscribe()
            self._wake_pollers()
        else:
            await trio.lowlevel.checkpoint()

    async def commit(
        self,
        offsets: dict[TopicPartition, int] | dict[TopicPartition, OffsetAndEpoch] | None = None,
    ) -> None:
        """Commit `offsets` (the next offset to read, per partition) or, by default, the
        positions of every assigned partition (everything poll() has handed out), and
        wait. Retries retriable errors for `request_timeout_ms`. Raises
        `CommitFailedError` when this member's generation is no longer the group's (the
        group rebalanced without it), `RebalanceInProgressError` during a rebalance."""
        coordinator = self._group_or_error("commit()")
        await coordinator.commit(self._current_offsets() if offsets is None else offsets)

    def commit_async(
        self,
        offsets: dict[TopicPartition, int] | dict[TopicPartition, OffsetAndEpoch] | None = None,
        callback: CommitCallback | None = None,
    ) -> None:
        """Commit in the background, once (no retries), after any commit asked for
        earlier; `callback(offsets, error_or_None)` (plain or async) when done."""
        coordinator = self._group_or_error("commit_async()")
        coordinator.commit_async(self._current_offsets() if offsets is None else offsets, callback)

    async def committed(
        self,
        partitions: Iterable[TopicPartition | tuple[str, int]],
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition (None: nothing committed)."""
        coordinator = self._group_or_error("committed()")
        found = await coordinator.fetch_committed(
            [TopicPartition(*tp) for tp in partitions], timeout_ms
        )
        return {tp: c.offset for tp, c in found.items()}

    # What the group coordinator calls (client/consumer/group/coordinator.py `AssignmentOwner`).

    def _current_offsets(self) -> dict[TopicPartition, OffsetAndEpoch]:
        return {
            tp: OffsetAndEpoch(s.position, s.position_epoch)
            for tp, s in self._states.items()
            if s.position is not None
        }

    def _consumed_offsets(self) -> dict[TopicPartition, OffsetAndEpoch]:
        return {tp: s.consumed for tp, s in self._states.items() if s.consumed is not None}

    def _note_consumed(self) -> None:
        """poll() was called: what it handed out so far counts as consumed."""
        for state in self._states.values():
            if state.position is not None and not state.revoking:
                state.consumed = OffsetAndEpoch(state.position, state.position_epoch)

    def _begin_revocation(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            state = self._states.get(tp)
            if state is not None:
                state.revoking = True
                state.clear_buffer()

    def _set_group_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        """The group's assignment: partitions kept keep their state; new ones start at the
        committed offset; the others (and their buffered records) are dropped."""
        states: dict[TopicPartition, _PartitionState] = {}
        for tp in partitions:
            state = self._states.get(tp)
            if state is None or state.revoking:
                state = _PartitionState()
                state.reset = COMMITTED
            states[tp] = state
        self._states = states
        self._wake()
        if self._coordinator is not None:
            self._coordinator.wake_resolver()

    def _awaiting_committed(self) -> dict[TopicPartition, int]:
        return {
            tp: s.generation
            for tp, s in self._states.items()
            if s.reset == COMMITTED and s.position is None and not s.revoking and s.error is None
        }

    def _apply_committed(
        self,
        wanted: dict[TopicPartition, int],
        found: dict[TopicPartition, CommittedOffset] | None,
        error: TributaryError | None,
    ) -> None:
        for tp, generation in wanted.items():
            state = self._states.get(tp)
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
                state.reset = self._reset_policy()
        if error is not None:
            self._data_arrived()
        self._positions_changed.set()
        self._positions_changed = trio.Event()
        self._wake()

    def _wake_pollers(self) -> None:
        self._data_arrived()

    def _state_or_error(self, tp: TopicPartition | tuple[str, int]) -> _PartitionState:
        state = self._states.get(TopicPartition(*tp))
        if state is None:
            raise ConsumerStateError(f"partition {TopicPartition(*tp)} is not assigned")
        return state

    def seek(self, tp: TopicPartition | tuple[str, int], offset: int) -> None:
        """The next `poll()` returns records of `tp` from `offset` on."""
        if offset < 0:
            raise ValueError(f"cannot seek to a negative offset ({offset})")
        self._state_or_error(tp).set_position(offset)
        self._wake()

    def seek_to_beginning(
        self, partitions: Iterable[TopicPartition | tuple[str, int]] | None = None
    ) -> None:
        """Start these partitions (default: all assigned) at their log start offset."""
        self._seek_to(EARLIEST, partitions)

    def seek_to_end(self, partitions: Iterable[TopicPartition | tuple[str, int]] | None = None):
        """Start these partitions (default: all assigned) at their end (the HW)."""
        self._seek_to(LATEST, partitions)

    def _seek_to(self, where: str, partitions) -> None:
        tps = list(self._states) if partitions is None else [TopicPartition(*p) for p in partitions]
        for tp in tps:
            self._state_or_error(tp).set_position(None, reset=where)
        self._wake()

    async def position(
        self, tp: TopicPartition | tuple[str, int], timeout_ms: float = 60_000
    ) -> int:
        """The offset of the next record `poll()` will return for `tp`, resolving a pending
        reset first (for at most `timeout_ms`, Kafka's default.api.timeout.ms). Raises
        `NoOffsetForPartitionError` with auto_offset_reset "none"."""
        tp = TopicPartition(*tp)
        with trio.move_on_after(timeout_ms / 1000):
            while True:
                state = self._state_or_error(tp)
                if state.position is not None:
                    return state.position
                if state.error is not None:
                    error, state.error = state.error, None
                    raise error
                if state.reset is None:
                    raise NoOffsetForPartitionError([tp])
                event = self._positions_changed
                self._wake()
                await event.wait()
        raise TributaryError(
            ErrorCode.REQUEST_TIMED_OUT, f"no position for {tp} within {timeout_ms:g} ms"
        )

    def highwater(self, tp: TopicPartition | tuple[str, int]) -> int | None:
        """The high watermark the last fetch of `tp` saw (None before any)."""
        hw = self._state_or_error(tp).high_watermark
        return hw if hw >= 0 else None

    async def partitions_for(self, topic: str) -> list[int]:
        """Partition numbers of `topic`; raises `UnknownTopicError`."""
        was_tracked = topic in self.metadata.topics
        try:
            return await self.metadata.partitions_or_error(topic, self.request_timeout_ms / 1000)
        finally:
            if not was_tracked and topic not in self._needed_topics():
                self.metadata.remove_topics(topic)

    def _needed_topics(self) -> set[str]:
        topics = {tp.topic for tp in self._states}
        if self._coordinator is not None:
            topics |= self._coordinator.group_topics()
        return topics

    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition | tuple[str, int]]
    ) -> dict[TopicPartition, int]:
        found = await self._list_offsets({TopicPartition(*tp): -2 for tp in partitions})
        return {tp: offset for tp, (offset, _) in found.items()}

    async def end_offsets(
        self, partitions: Iterable[TopicPartition | tuple[str, int]]
    ) -> dict[TopicPartition, int]:
        found = await self._list_offsets({TopicPartition(*tp): -1 for tp in partitions})
        return {tp: offset for tp, (offset, _) in found.items()}

    async def offsets_for_times(
        self, timestamps: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int] | None]:
        """The first (offset, timestamp) at or after each time, None if there is none."""
        found = await self._list_offsets({TopicPartition(*tp): ts for tp, ts in timestamps.items()})
        return {tp: (o, ts) if o >= 0 else None for tp, (o, ts) in found.items()}

    # --- polling ---------------------------------------------------------------------

    async def poll(self, timeout_ms: float = 0) -> list[ConsumerRecord]:
        """Up to `max_poll_records` records, waiting up to `timeout_ms` for some.

        Raises `OffsetOutOfRangeError` / `NoOffsetForPartitionError` (auto_offset_reset
        "none"), or a partition's unexpected broker error, once each.
        """
        batches = await self._poll(timeout_ms)
        if len(batches) == 1:
            return batches[0].records()
        return list(chain.from_iterable(batch.records() for batch in batches))

    async def poll_batches(self, timeout_ms: float = 0) -> list[ConsumerBatch]:
        """`poll()`'s records as one `ConsumerBatch` (columns) per partition: the same
        records, positions, errors and commit semantics, without an object per record."""
        return await self._poll(timeout_ms)

    async def _poll(self, timeout_ms: float) -> list[ConsumerBatch]:
        if self._closed:
            raise ConsumerStateError("the consumer is closed")
        # Checkpoint first: between draining the buffers and returning nothing may run
        # (a rebalance must not revoke a partition whose records are on their way out).
        await trio.lowlevel.checkpoint()
        group = self._coordinator
        if group is not None:
            group.poll_called()  # raises a fatal group error or a callback's exception
        if not self._states and not self.subscription():
            raise ConsumerStateError(
                "no partitions are assigned: call assign() or subscribe() first"
            )
        self._note_consumed()
        deadline = trio.current_time() + max(timeout_ms, 0) / 1000
        self._in_poll += 1
        try:
            while True:
                if group is not None:
                    group.raise_error()
                self._raise_pending_error()
                batches = self._drain_buffers()
                self._wake()
                if batches:
                    return batches
                if trio.current_time() >= deadline:
                    return []
                event = self._data
                with trio.move_on_at(deadline):
                    await event.wait()
        finally:
            self._in_poll -= 1

    def _raise_pending_error(self) -> None:
        missing = [
            tp
            for tp, s in self._states.items()
            if s.position is None and s.reset is None and s.error is None and not s.revoking
        ]
        if missing:
            raise NoOffsetForPartitionError(missing)
        for state in self._states.values():
            if state.error is not None:
                error, state.error = state.error, None
                if state.reset == COMMITTED and self._coordinator is not None:
                    self._coordinator.wake_resolver()  # look the committed offset up again
                raise error

    def _drain_buffers(self) -> list[ConsumerBatch]:
        """Up to `max_poll_records` buffered records, one batch per partition, starting
        with the next partition each call (so none starves); advances the positions."""
        out: list[ConsumerBatch] = []
        room = self.max_poll_records
        tps = list(self._states)
        if not tps:
            return out
        start = self._poll_start % len(tps)
        self._poll_start += 1
        for tp in tps[start:] + tps[:start]:
            state = self._states[tp]
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

    # --- the fetcher task ------------------------------------------------------------

    def _wake(self) -> None:
        self._wakeup.set()

    def _data_arrived(self) -> None:
        self._data.set()
        self._data = trio.Event()

    async def _wake_on_metadata(self) -> None:
        while True:
            await self.metadata.wait_for_update()
            self._abandon_moved_fetches()
            self._wake()

    def _abandon_moved_fetches(self) -> None:
        cluster = self.metadata.cluster
        for node, (scope, _, epochs) in self._fetches.items():
            for tp, epoch in epochs.items():
                info = cluster.partition(tp)
                if info is None or info.leader < 0:
                    continue
                if info.leader != node or info.leader_epoch > epoch:
                    log.info("abandoning a fetch from broker %d: %s has moved", node, tp)
                    scope.cancel()
                    break

    async def _watch_stalled_fetches(self) -> None:
        limit_ms = self.fetch_max_wait_ms + STALLED_FETCH_MS
        while True:
            await trio.sleep(STALLED_FETCH_MS / 1000)
            now = _now_ms()
            if any(now - sent_ms >= limit_ms for _, sent_ms, _ in self._fetches.values()):
                self.metadata.request_update()

    async def _fetcher_loop(self) -> None:
        assert self._nursery is not None
        while True:
            self._wakeup = trio.Event()
            now = _now_ms()
            cluster = self.metadata.cluster
            next_wake = math.inf
            resets: dict[int, dict[TopicPartition, str]] = {}
            fetches: dict[int, list[TopicPartition]] = {}
            stale = False
            for tp, state in self._states.items():
                if state.error is not None or state.fetching or state.resetting:
                    continue
                if state.revoking or state.reset == COMMITTED:
                    continue  # going away, or waiting for the group's committed offset
                if state.position is None and state.reset is None:
                    continue
                if state.position is not None and not state.wants_fetch:
                    continue
                if state.backoff_until_ms > now:
                    next_wake = min(next_wake, state.backoff_until_ms)
                    continue
                leader = cluster.leader_for(tp)
                if leader is None:
                    stale = True
                    continue
                if state.position is None:
                    assert state.reset is not None
                    resets.setdefault(leader.leader, {})[tp] = state.reset
                else:
                    fetches.setdefault(leader.leader, []).append(tp)
            if stale:
                self.metadata.request_update()
            for node, wanted in resets.items():
                broker = cluster.broker(node)
                if broker is None or node in self._nodes_resetting:
                    continue
                self._nodes_resetting.add(node)
                for tp in wanted:
                    self._states[tp].resetting = True
                # The generations as of this decision: a seek before the task even starts
                # must make its answer stale.
                generations = {tp: self._states[tp].generation for tp in wanted}
                self._nursery.start_soon(
                    self._reset_positions, node, broker.address, wanted, generations
                )
            for node, tps in fetches.items():
                broker = cluster.broker(node)
                if broker is None or node in self._nodes_fetching:
                    continue
                self._nodes_fetching.add(node)
                request, sent = self._build_fetch(tps)
                self._nursery.start_soon(self._fetch, node, broker.address, request, sent)
            if next_wake == math.inf:
                await self._wakeup.wait()
            else:
                with trio.move_on_after(sleep_seconds(next_wake - _now_ms())):
                    await self._wakeup.wait()

    def _back_off(self, state: _PartitionState, code: ErrorCode | None) -> None:
        state.backoff_until_ms = _now_ms() + self.retry_backoff_ms
        if code is None or code in _STALE_LEADER_ERRORS:
            self.metadata.request_update()

    def _build_fetch(
        self, tps: list[TopicPartition]
    ) -> tuple[m.FetchRequest, dict[TopicPartition, tuple[_PartitionState, int, int]]]:
        """The Fetch for these partitions at their positions, with what to check the
        answer against (state, generation, offset); marks them as being fetched."""
        cluster = self.metadata.cluster
        sent: dict[TopicPartition, tuple[_PartitionState, int, int]] = {}
        topics: dict[str, list[m.FetchPartition]] = {}
        for tp in tps:
            state = self._states[tp]
            offset = state.fetch_offset
            assert offset is not None
            info = cluster.partition(tp)
            epoch = info.leader_epoch if info is not None else -1
            sent[tp] = (state, state.generation, offset)
            state.fetching = True
            topics.setdefault(tp.topic, []).append(
                m.FetchPartition(
                    partition=tp.partition,
                    current_leader_epoch=epoch,
                    fetch_offset=offset,
                    partition_max_bytes=self.max_partition_fetch_bytes,
                )
            )
        request = m.FetchRequest(
            replica_id=m.CONSUMER_REPLICA_ID,
            max_wait_ms=self.fetch_max_wait_ms,
            min_bytes=self.fetch_min_bytes,
            max_bytes=self.fetch_max_bytes,
            topics=[m.FetchTopic(topic=t, partitions=p) for t, p in topics.items()],
        )
        return request, sent

    async def _fetch(
        self,
        node: int,
        address: tuple[str, int],
        request: m.FetchRequest,
        sent: dict[TopicPartition, tuple[_PartitionState, int, int]],
    ) -> None:
        cluster = self.metadata.cluster
        epochs = {}
        for tp in sent:
            info = cluster.partition(tp)
            epochs[tp] = -1 if info is None else info.leader_epoch
        scope = trio.CancelScope()
        self._fetches[node] = (scope, _now_ms(), epochs)
        try:
            timeout_s = (self.request_timeout_ms + self.fetch_max_wait_ms) / 1000
            response = None
            with scope:
                response = await self._pool.request(*address, request, timeout_s=timeout_s)
            if response is None:
                raise TributaryError(
                    ErrorCode.NOT_LEADER_OR_FOLLOWER, "abandoned: the leader moved"
                )
        except TributaryError as exc:
            log.info("fetch from broker %d failed: %s", node, exc)
            for state, generation, _ in sent.values():
                if state.generation == generation:
                    self._back_off(state, None)
            if isinstance(exc, BrokerConnectionError):
                self.metadata.request_update()
            return
        finally:
            self._fetches.pop(node, None)
            for state, _, _ in sent.values():
                state.fetching = False
            self._nodes_fetching.discard(node)
            self._wake()
        arrived = False
        for topic in response.topics:
            for part in topic.partitions:
                tp = TopicPartition(topic.topic, part.partition)
                entry = sent.get(tp)
                if entry is None:
                    continue
                state, generation, offset = entry
                if self._states.get(tp) is not state or state.generation != generation:
                    continue  # unassigned or sought while the fetch was out: drop the answer
                arrived |= self._apply_fetched(tp, state, offset, part, node)
        if arrived:
            self._data_arrived()

    def _apply_fetched(
        self,
        tp: TopicPartition,
        state: _PartitionState,
        offset: int,
        part: m.FetchResponsePartition,
        node: int = -1,
    ) -> bool:
        """Buffer one partition's answer; True if poll() has something new (records or
        an error to raise). An answer fetched ahead (records still buffered) is appended
        to the buffer; if it failed it is dropped, and the error comes again, and is
        handled, when the buffer has drained and the same offset is fetched."""
        code = ErrorCode.from_code(part.error_code)
        ahead = state.buffered > 0
        if ahead and code is not ErrorCode.NONE:
            self._back_off(state, code)
            return False
        if code is ErrorCode.NONE:
            state.high_watermark = part.high_watermark
            state.log_start_offset = part.log_start_offset
            if not part.records:
                return False
            try:
                batch, next_offset, corrupt = _decode(
                    tp, part.records, offset, check_crcs=self.check_crcs, broker=node
                )
            except RecordError as exc:
                state.error = TributaryError(
                    ErrorCode.CORRUPT_MESSAGE, f"{tp} at offset {offset}: {exc}"
                )
                return True
            if corrupt is not None and not batch:
                if ahead:  # raised once the records before it are handed out
                    self._back_off(state, None)
                    return False
                log.error("%s", corrupt)
                state.error = corrupt
                return True
            if ahead:
                assert state.buffer is not None
                state.buffer.extend(batch)
                state.next_fetch_offset = max(offset, next_offset)
                state.fetches_buffered += 1
                return bool(batch)
            state.buffer = batch
            state.buffer_index = 0
            state.next_fetch_offset = next_offset
            state.fetches_buffered = 1
            if not batch:  # everything was below the position: skip ahead
                state.position = max(offset, next_offset)
                state.clear_buffer()
                return False
            return True
        if code is ErrorCode.OFFSET_OUT_OF_RANGE:
            if self.auto_offset_reset == NONE:
                state.error = OffsetOutOfRangeError(
                    {tp: offset},
                    f"log is [{part.log_start_offset}, {part.high_watermark}]"
                    if part.high_watermark >= 0
                    else "",
                )
                return True
            log.info(
                "%s: offset %d is out of range; resetting to %s",
                tp,
                offset,
                self.auto_offset_reset,
            )
            state.set_position(None, reset=self.auto_offset_reset)
            return False
        if code in _STALE_LEADER_ERRORS or code.is_retriable:
            log.debug("%s: fetch answered %s; refreshing metadata", tp, code.name)
            self._back_off(state, code)
            return False
        state.error = TributaryError(code, f"fetching {tp} at offset {offset}")
        return True

    async def _reset_positions(
        self,
        node: int,
        address: tuple[str, int],
        wanted: dict[TopicPartition, str],
        generations: dict[TopicPartition, int],
    ) -> None:
        try:
            found = await self._list_offsets_from(
                address, {tp: _RESET_TIMESTAMPS[how] for tp, how in wanted.items()}
            )
        except TributaryError as exc:
            log.info("ListOffsets to broker %d failed: %s", node, exc)
            found = {}
            self.metadata.request_update()
        finally:
            for tp in wanted:
                state = self._states.get(tp)
                if state is not None:
                    state.resetting = False
            self._nodes_resetting.discard(node)
            self._wake()
        for tp in wanted:
            state = self._states.get(tp)
            if state is None or state.generation != generations[tp]:
                continue
            code, offset, _ = found.get(tp, (ErrorCode.NETWORK_EXCEPTION, -1, -1))
            if code is ErrorCode.NONE:
                state.position = offset
                state.reset = None
            elif code.is_retriable or code in _STALE_LEADER_ERRORS:
                self._back_off(state, code)
            else:
                state.error = TributaryError(code, f"looking up the {wanted[tp]} offset of {tp}")
                self._data_arrived()
        self._positions_changed.set()
        self._positions_changed = trio.Event()
        self._wake()

    # --- ListOffsets -----------------------------------------------------------------

    async def _list_offsets_from(
        self, address: tuple[str, int], timestamps: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[ErrorCode, int, int]]:
        """One ListOffsets request: (error, offset, timestamp) per partition."""
        return await list_offsets_from(
            self._pool,
            address,
            self.metadata.cluster,
            timestamps,
            self.request_timeout_ms / 1000,
        )

    async def _list_offsets(
        self, timestamps: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int]]:
        """(offset, timestamp) per partition from its leader, retrying retriable errors
        for up to `request_timeout_ms`. Raises `UnknownTopicError` for a missing topic."""
        for topic in {tp.topic for tp in timestamps}:
            await self.partitions_for(topic)  # UnknownTopicError, before waiting for leaders
        self.metadata.add_topics(*{tp.topic for tp in timestamps})
        result: dict[TopicPartition, tuple[int, int]] = {}
        remaining = dict(timestamps)
        last_error: BaseException | None = None
        with trio.move_on_after(self.request_timeout_ms / 1000):
            while True:
                cluster = self.metadata.cluster
                by_node: dict[int, dict[TopicPartition, int]] = {}
                for tp, ts in remaining.items():
                    leader = cluster.leader_for(tp)
                    if leader is not None:
                        by_node.setdefault(leader.leader, {})[tp] = ts
                for node, wanted in by_node.items():
                    broker = cluster.broker(node)
                    assert broker is not None
                    try:
                        found = await self._list_offsets_from(broker.address, wanted)
                    except TributaryError as exc:
                        last_error = exc
                        continue
                    for tp, (code, offset, ts) in found.items():
                        if tp not in remaining:
                            continue
                        if code is ErrorCode.NONE:
                            result[tp] = (offset, ts)
                            del remaining[tp]
                            continue
                        error = TributaryError(code, f"looking up offsets of {tp}")
                        if not (code.is_retriable or code in _STALE_LEADER_ERRORS):
                            raise error
                        last_error = error
                if not remaining:
                    return result
                await trio.sleep(self.retry_backoff_ms / 1000)
                self.metadata.request_update()
                await self.metadata.refresh()
        raise TributaryError(
            ErrorCode.REQUEST_TIMED_OUT,
            f"could not look up offsets of {', '.join(map(str, sorted(remaining)))} within "
            f"{self.request_timeout_ms:g} ms"
            + (f" (last error: {last_error})" if last_error else ""),
        )


def _decode(
    tp: TopicPartition, data: bytes, position: int, *, check_crcs: bool = True, broker: int = -1
) -> tuple[ConsumerBatch, int, CorruptBatchError | None]:
    """Records at or above `position` in whole batches, the offset after the last, and
    (with `check_crcs`) the error for the first damaged batch: decoding stops before it,
    so the offset returned is where that batch starts."""
    with _gc_paused():
        return _decode_batches(tp, memoryview(data), position, check_crcs, broker)


def _decode_batches(
    tp: TopicPartition, view: memoryview, position: int, check_crcs: bool, broker: int
) -> tuple[ConsumerBatch, int, CorruptBatchError | None]:
    out = ConsumerBatch(*tp)
    next_offset = position
    for pos, header in iter_batches(view):
        if header.next_offset <= position:
            next_offset = header.next_offset
            continue
        if check_crcs:
            try:
                validate_batch(view, pos, strict=False)
            except CorruptRecordError as exc:
                first = max(header.base_offset, next_offset)
                error = CorruptBatchError(tp, first, header.last_offset, broker, str(exc))
                return out, max(position, header.base_offset), error
        next_offset = header.next_offset
        columns = decode_columns(view[pos : pos + header.size], header)
        if header.base_offset < position:
            columns = _at_or_after(columns, position)
        out.add_columns(columns, header.partition_leader_epoch)
    return out, next_offset, None


def _at_or_after(columns: RecordColumns, position: int) -> RecordColumns:
    """The records of `columns` at or after offset `position`."""
    keep = [offset >= position for offset in columns.offsets]
    return RecordColumns(*(list(compress(column, keep)) for column in columns))


def _now_ms() -> float:
    return trio.current_time() * 1000


@asynccontextmanager
async def open_consumer(
    bootstrap: str | Iterable[str],
    *,
    client_id: str | None = "tributary-consumer",
    connector: Connector | None = None,
    **config: Any,
) -> AsyncIterator[Consumer]:
    """A started consumer (assign or subscribe next); closed when the block ends (a group
    consumer commits, with auto-commit on, and leaves its group: see `Consumer.aclose`;
    when the block raises, it commits only what poll() had handed out before its latest
    call).

    Raises `NoBrokersAvailableError` at once when no bootstrap broker answers.
    """
    async with (
        open_connection_pool(client_id=client_id, connector=connector) as pool,
        open_connection_pool(client_id=client_id, connector=connector) as coordinator_pool,
        open_client_nursery() as nursery,
    ):
        consumer = Consumer(
            pool,
            bootstrap,
            coordinator_pool=coordinator_pool,
            client_id=client_id,
            connector=connector,
            **config,
        )
        await consumer.start(nursery)
        try:
            yield consumer
        except BaseException:
            await consumer._close(graceful=False)
            raise
        else:
            await consumer.aclose()
        finally:
            consumer._closed = True
            nursery.cancel_scope.cancel()
