"""A producer batch and the handles its records' senders wait on.

How it works: a `ProducerBatch` holds the records for one partition that travel, and
succeed or fail, together. It keeps them as columns (keys, values, timestamps, headers
lists), so a record costs no object of its own: `append` adds one (`send()`), `extend`
copies a slice of a `RecordColumns` (`send_many()`), and `encode` builds the wire bytes
once with `build_column_batch` (a retry resends the same bytes; `stamp` gives the batch
its idempotence fields first and drops bytes built with others). The sender moves it
through `BatchState` OPEN (in the accumulator) -> IN_FLIGHT -> DONE (`complete` or
`fail`, once), and its `done` event wakes the waiters.

`send()` returns a `DeliveryHandle` (batch, index): `await handle` gives the record's
`RecordMetadata` (offset = the batch's base offset + index) or raises its failure.
`send_many()` returns `DeliveryHandles`: runs of (batch, first index, count), with a
handle made per record only when asked for, awaitable as a whole, grouped per batch by
`runs()`.
"""

from __future__ import annotations

import enum
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import trio

from client.producer.record_columns import RecordColumns
from client.protocol.records import (
    BATCH_OVERHEAD,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    Codec,
    build_column_batch,
)
from client.protocol.types import TopicPartition


class RecordMetadata(NamedTuple):
    """Where an acknowledged record landed. `offset` is -1 with acks=0."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class BatchState(enum.Enum):
    OPEN = "open"  # in the accumulator, may still take records
    IN_FLIGHT = "in_flight"
    DONE = "done"


class ProducerBatch:
    """Records for one partition that travel (and succeed or fail) together.

    The records are kept as columns (record i is `keys[i]`, `values[i]`, `timestamps[i]`,
    `headers[i]`): appending one costs no object, and `send_many` extends a batch with
    slices of the caller's lists."""

    def __init__(self, tp: TopicPartition, created_ms: float) -> None:
        self.tp = tp
        self.created_ms = created_ms
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.timestamps: list[int] = []
        self.headers: list[Sequence[tuple[str, bytes]]] = []
        self.size = BATCH_OVERHEAD  # estimated bytes (uncompressed)
        self.attempts = 0
        self.last_attempt_ms = created_ms
        self.state = BatchState.OPEN
        self.closed = False  # no more appends once drained (retries resend the same bytes)
        # Only sticky keyless records so far: may move to another partition until sent.
        self.movable = False
        self.payload: bytes | None = None
        self.base_offset = -1
        self.log_append_time_ms = -1
        self.error: BaseException | None = None
        self.last_error: BaseException | None = None  # of the last failed attempt
        self.done = trio.Event()
        # Idempotence: stamped when first drained, kept by retries (same bytes).
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.base_sequence = NO_SEQUENCE
        self.transactional = False  # part of a transaction (the attributes' bit 4)

    def __repr__(self) -> str:
        return f"<batch {self.tp} records={len(self.values)} state={self.state.value}>"

    @property
    def record_count(self) -> int:
        return len(self.values)

    def is_full(self, batch_size: int) -> bool:
        return self.closed or self.size >= batch_size

    def append(
        self,
        key: bytes | None,
        value: bytes | None,
        timestamp_ms: int,
        headers: Sequence[tuple[str, bytes]],
        size: int,
    ) -> int:
        """Add one record of `size` estimated bytes; its index in the batch."""
        self.keys.append(key)
        self.values.append(value)
        self.timestamps.append(timestamp_ms)
        self.headers.append(headers)
        self.size += size
        return len(self.values) - 1

    def extend(self, columns: RecordColumns, start: int, stop: int, size: int) -> int:
        """Add records `start:stop` of `columns` (`size` estimated bytes in all); the index
        of the first in the batch."""
        first = len(self.values)
        columns.copy_into(self, start, stop)
        self.size += size
        return first

    def encode(self, codec: Codec) -> bytes:
        if self.payload is None:
            self.payload = build_column_batch(
                self.keys,
                self.values,
                self.timestamps,
                self.headers,
                codec=codec,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=self.base_sequence,
                transactional=self.transactional,
            )
        return self.payload

    def stamp(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Give the batch its idempotence fields (dropping bytes built with others)."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.payload = None

    def complete(self, base_offset: int, log_append_time_ms: int) -> bool:
        """Success; False if the batch was already done (expired meanwhile)."""
        if self.state is BatchState.DONE:
            return False
        self.base_offset = base_offset
        self.log_append_time_ms = log_append_time_ms
        self.state = BatchState.DONE
        self.done.set()
        return True

    def fail(self, error: BaseException) -> bool:
        if self.state is BatchState.DONE:
            return False
        self.error = error
        self.state = BatchState.DONE
        self.done.set()
        return True

    def metadata(self, index: int) -> RecordMetadata:
        """Where record `index` of this (successful) batch landed."""
        offset = self.base_offset + index if self.base_offset >= 0 else -1
        timestamp = self.log_append_time_ms
        if timestamp < 0:
            timestamp = self.timestamps[index]
        return RecordMetadata(self.tp.topic, self.tp.partition, offset, timestamp)


class DeliveryHandle:
    """The outcome of one `send()`: `await handle` -> RecordMetadata, or raises."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: ProducerBatch, index: int) -> None:
        self._batch = batch
        self._index = index

    @property
    def topic_partition(self) -> TopicPartition:
        return self._batch.tp

    def done(self) -> bool:
        return self._batch.state is BatchState.DONE

    def exception(self) -> BaseException | None:
        """The failure, None on success; `RuntimeError` if not done yet."""
        if not self.done():
            raise RuntimeError("the record has not been acknowledged yet")
        return self._batch.error

    def result(self) -> RecordMetadata:
        """The record's metadata (raises its failure); `RuntimeError` if not done yet."""
        error = self.exception()
        if error is not None:
            raise error
        return self._batch.metadata(self._index)

    async def wait(self) -> RecordMetadata:
        await self._batch.done.wait()
        return self.result()

    def __await__(self):
        return self.wait().__await__()


class DeliveryHandles(Sequence[DeliveryHandle]):
    """The outcome of one `send_many()`: a `DeliveryHandle` per record, in the order the
    records were given, each made only when asked for (the call itself creates none).

    `await handles` (or `wait()`) waits for every record and gives their `RecordMetadata`
    in order, raising the first failure; `done()` says whether every record has its
    outcome; `runs()` groups them by batch. Inside, the records are runs: (batch, index
    of the first in it, count).
    """

    __slots__ = ("_runs", "_starts", "_count")

    def __init__(self) -> None:
        self._runs: list[tuple[ProducerBatch, int, int]] = []
        self._starts: list[int] = []  # position (in the call) of each run's first record
        self._count = 0

    def _add(self, batch: ProducerBatch, first: int, count: int) -> None:
        """The next `count` records went to `batch` from index `first` on."""
        if self._runs:
            last, last_first, last_count = self._runs[-1]
            if last is batch and last_first + last_count == first:
                self._runs[-1] = (batch, last_first, last_count + count)
                self._count += count
                return
        self._runs.append((batch, first, count))
        self._starts.append(self._count)
        self._count += count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, position):
        if isinstance(position, slice):
            return [self[i] for i in range(*position.indices(self._count))]
        if position < 0:
            position += self._count
        if not 0 <= position < self._count:
            raise IndexError("send_many handle index out of range")
        run = bisect_right(self._starts, position) - 1
        batch, first, _ = self._runs[run]
        return DeliveryHandle(batch, first + position - self._starts[run])

    def __iter__(self) -> Iterator[DeliveryHandle]:
        for batch, first, count in self._runs:
            for index in range(first, first + count):
                yield DeliveryHandle(batch, index)

    def done(self) -> bool:
        return all(batch.state is BatchState.DONE for batch, _, _ in self._runs)

    def runs(self) -> list[tuple[DeliveryHandle, int]]:
        """The records as they travel: for each run of consecutive records in one batch
        (they succeed or fail together, at consecutive offsets), the handle of its first
        record and its length. Waiting per run instead of per record costs no object per
        record."""
        return [(DeliveryHandle(batch, first), count) for batch, first, count in self._runs]

    async def wait(self) -> list[RecordMetadata]:
        for batch, _, _ in self._runs:
            await batch.done.wait()
        return self.results()

    def results(self) -> list[RecordMetadata]:
        """Every record's metadata in order (raises the first failure); `RuntimeError`
        if not done yet."""
        if not self.done():
            raise RuntimeError("not every record has been acknowledged yet")
        out: list[RecordMetadata] = []
        for batch, first, count in self._runs:
            if batch.error is not None:
                raise batch.error
            out.extend(batch.metadata(index) for index in range(first, first + count))
        return out

    def __await__(self):
        return self.wait().__await__()
