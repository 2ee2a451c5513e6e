"""The producer: records in, per-partition batches out, retried in order until acked.

How it works (Kafka 2.8's KafkaProducer, on Trio):
- `send()` picks the partition (client/producer/partitioner.py: explicit, key hash, or sticky),
  reserves buffer memory (waiting while `buffer_memory` is used up: backpressure) and
  appends the record to the partition's open batch in the `RecordAccumulator`. It returns
  a `DeliveryHandle` at once; `await handle` gives the `RecordMetadata` or raises.
  A batch keeps its records as columns (keys, values, timestamps, headers lists), so a
  record costs no object of its own, and is encoded by `build_column_batch`.
- `send_many()` takes many records at once (client/producer/record_columns.py converts and sizes
  them, all checked before any is queued) and gives the same result as one `send()` per
  record: keyed records are placed one by one as `send()` places them; keyless ones go
  a run at a time, as many as fit in the open batch and in the free buffer memory, into
  the explicit or sticky partition (which moves on whenever a batch is full, as with
  `send()`), waiting for memory between runs. It returns `DeliveryHandles`: a sequence
  of per-record handles made only when asked for, awaitable as a whole, grouped per
  batch by `runs()`. An error after some records were queued carries their handles as
  `error.queued`.
- The `RecordAccumulator` (sans-IO: plain data, times passed in as `now_ms`) holds a
  queue of batches per partition. A partition's first batch is *ready* when it is full,
  has lingered `linger_ms`, or a flush/close is under way, and it is not backing off
  after a failed attempt (`retry_backoff_ms`). `drain()` takes ready batches, grouped per
  leader broker, up to `max_request_size` per request, and *mutes* their partitions.
- One sender task loops: expire batches older than `delivery_timeout_ms`, ask the
  accumulator which leaders are ready, drain them into one Produce request per broker
  (at most `max_in_flight_requests_per_connection` outstanding per broker), sleep until
  the next batch can be ready or something wakes it (an append, a response, fresh
  metadata).
- Each response completes its batches (offsets = base offset + index), or re-queues a
  batch at the *front* of its partition's queue after a retriable error (after asking for
  fresh metadata when the error means our leader is stale), or fails its records.
  Ordering under retries: a partition stays muted while its batch is in flight, so at
  most one batch per partition is outstanding and a retried batch can never be overtaken
  (Kafka's "guarantee message order" muting, kept on whatever max_in_flight is).
- acks=0 writes the request and completes the records with offset -1.
- Leaders that stop answering: a request in flight longer than `STALLED_REQUEST_MS` makes
  the producer ask for fresh metadata (once per `STALLED_REQUEST_MS`); when a fresh view
  shows that a partition of a request in flight is now led by another broker (or by the
  same one at a newer leader epoch), that request is abandoned and its batches are
  re-queued at once, as after NOT_LEADER, instead of waiting out the request timeout for
  a paused or partitioned old leader. (Without idempotence a batch the old leader did
  append may then be written twice.)
- Idempotence (KIP-98, `enable_idempotence`, on by default as in Kafka 3.x): before its
  first batch the sender asks any broker for a producer id (InitProducerId). Each batch
  is stamped, when first drained, with the producer id, epoch and the partition's next
  sequence (wrapping at 2^31), and a retry resends the same bytes: the leader, or a new
  leader that replicated the state, answers a retry of a batch it already has with the
  original offsets instead of writing it twice. So re-queueing requests in flight to a
  moved leader creates no duplicates. OUT_OF_ORDER_SEQUENCE_NUMBER (the broker lost
  state it should have) fails that batch and bumps the epoch locally (Kafka's idempotent
  producer, KIP-360): sequences restart at 0; a batch that expires after being sent (its
  fate unknown) bumps it too; a batch stamped with an older epoch is restamped before it
  is sent again. DUPLICATE_SEQUENCE_NUMBER (an old retry the broker no longer caches)
  counts as written, with offset -1, as in Kafka. Like Kafka 3.x: `acks` defaults to
  all; idempotence requires acks=all, retries and at most 5 requests in flight; asked
  for explicitly with others it is a config error, and left at its default it is
  quietly turned off by them. (The first batch waits for the producer id, so it may
  gather more records than it would have otherwise.)
- `on_retry(tp, error)`, if given, hears about every retry as it is decided (the CLI
  prints one line per distinct reason).

`async with open_producer("host:port", acks="all") as producer:` builds one; leaving the
block flushes everything (`aclose()`). Timings use `trio.current_time()` (MockClock in
tests); record timestamps are wall-clock milliseconds.
"""

from __future__ import annotations

import enum
import logging
import math
import time
from bisect import bisect_right
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

import trio

from client.connection import BrokerConnectionError, ConnectionPool, Connector, open_connection_pool
from client.metadata import (
    DEFAULT_METADATA_MAX_AGE_MS,
    ClusterView,
    Metadata,
    UnknownTopicError,
    open_client_nursery,
    sleep_seconds,
)
from client.producer.partitioner import DefaultPartitioner, partition_for_key
from client.producer.record_columns import (
    NO_HEADERS,
    Headers,
    RecordColumns,
    header_list,
    record_size,
    to_bytes,
)
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.records import (
    BATCH_OVERHEAD,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    Codec,
    build_column_batch,
)
from client.protocol.types import TopicPartition

log = logging.getLogger(__name__)

# Errors that mean our view of the leader is stale: refresh metadata before retrying
# (Kafka's InvalidMetadataException family, plus a lost connection).
_STALE_METADATA_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.REPLICA_NOT_AVAILABLE,
    }
)
# The broker answers an acks=all Produce with REQUEST_TIMED_OUT after the request's
# `timeout_ms` (= request_timeout_ms); we wait this much longer for that answer before
# giving up on the connection, which would also fail every other request in flight on it.
REQUEST_TIMEOUT_MARGIN_MS = 500
# Answers about an idempotent batch's sequence or epoch (module docstring).
_IDEMPOTENCE_ERRORS = frozenset(
    {
        ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.UNKNOWN_PRODUCER_ID,
    }
)
# A produce request without an answer after this long makes the producer check the
# metadata for a leader change (a healthy acks=all round trip takes milliseconds to a few
# hundred; checking costs one small Metadata request per interval while it lasts).
STALLED_REQUEST_MS = 1000
# Idempotence (Kafka's ProducerConfig): at most this many requests in flight per broker.
MAX_IN_FLIGHT_FOR_IDEMPOTENCE = 5
SEQUENCE_MODULUS = 1 << 31
_INT16_MAX = (1 << 15) - 1
_CODECS = {"none": Codec.NONE, "gzip": Codec.GZIP, "lz4": Codec.LZ4, "zstd": Codec.ZSTD}


# --- errors and results ------------------------------------------------------------------


class ProducerClosedError(RuntimeError):
    """`send()` after `aclose()`, or records abandoned by a cancelled close."""


class DeliveryTimeoutError(TributaryError):
    """The record was not acknowledged within `delivery_timeout_ms` (Kafka's
    TimeoutException "Expiring N record(s) for ...")."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message)

    @property
    def retriable(self) -> bool:  # the producer already retried for as long as allowed
        return False


class RecordTooLargeError(TributaryError):
    """One record is larger than `max_request_size` or `buffer_memory`."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.MESSAGE_TOO_LARGE, message)


class ProducerTimeoutError(TributaryError):
    """`send()` could not get metadata or buffer memory within `max_block_ms`."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message)

    @property
    def retriable(self) -> bool:
        return False


class InvalidPartitionError(TributaryError):
    """An explicit partition that the topic does not have."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message)

    @property
    def retriable(self) -> bool:
        return False


class RecordMetadata(NamedTuple):
    """Where an acknowledged record landed. `offset` is -1 with acks=0."""

    topic: str
    partition: int
    offset: int
    timestamp: int


# --- batches and the accumulator (sans-IO) ----------------------------------------------


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


class ReadyCheck(NamedTuple):
    nodes: set[int]  # leaders with at least one sendable batch
    next_check_ms: float  # when a batch that is not ready yet may become ready
    unknown_leaders: set[str]  # topics with batches but a partition without a leader


@dataclass
class AccumulatorConfig:
    batch_size: int = 16_384
    linger_ms: float = 0
    retry_backoff_ms: float = 100
    delivery_timeout_ms: float = 120_000
    buffer_memory: int = 32 * 1024 * 1024
    codec: Codec = Codec.NONE


class RecordAccumulator:
    """Per-partition batch queues, readiness, draining, expiry: no I/O and no clock (the
    caller passes `now_ms`); batches only carry a Trio event for their waiters."""

    def __init__(self, config: AccumulatorConfig) -> None:
        self.config = config
        self.queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self.muted: set[TopicPartition] = set()
        self.in_flight: set[ProducerBatch] = set()
        self.incomplete: set[ProducerBatch] = set()
        self.used_bytes = 0
        self.flushes_in_progress = 0
        self.closing = False
        self.memory_waiters = 0
        self._drain_start: dict[int, int] = {}

    # --- appending -------------------------------------------------------------------

    def open_batch(self, tp: TopicPartition, size: int) -> ProducerBatch | None:
        """The partition's open batch if it can take `size` more bytes, else None (the
        caller then opens a new batch with `new_batch`, or first moves a sticky
        partition). An empty open batch takes any record."""
        queue = self.queues.get(tp)
        if not queue:
            return None
        last = queue[-1]
        if last.closed or (last.values and last.size + size > self.config.batch_size):
            return None
        return last

    def new_batch(self, tp: TopicPartition, now_ms: float) -> ProducerBatch:
        """Open an empty batch at the end of the partition's queue."""
        queue = self.queues.get(tp)
        if queue is None:
            queue = self.queues[tp] = deque()
        batch = ProducerBatch(tp, now_ms)
        queue.append(batch)
        self.incomplete.add(batch)
        return batch

    def append(
        self,
        batch: ProducerBatch,
        key: bytes | None,
        value: bytes | None,
        timestamp_ms: int,
        headers: Headers,
        size: int,
    ) -> DeliveryHandle:
        """Add one record to `batch` (from `open_batch` or `new_batch`)."""
        self.used_bytes += size
        return DeliveryHandle(batch, batch.append(key, value, timestamp_ms, headers, size))

    def extend(self, batch: ProducerBatch, columns: RecordColumns, start: int, stop: int) -> int:
        """Add records `[start, stop)` of `columns` to `batch` (from `open_batch` or
        `new_batch`); the index of the first in it."""
        size = columns.size(start, stop)
        self.used_bytes += size
        return batch.extend(columns, start, stop, size)

    def has_undrained(self) -> bool:
        return any(self.queues.values())

    # --- readiness and draining ------------------------------------------------------

    def _backing_off(self, batch: ProducerBatch, now_ms: float) -> bool:
        return batch.attempts > 0 and now_ms < batch.last_attempt_ms + self.config.retry_backoff_ms

    def ready(self, cluster: ClusterView, now_ms: float) -> ReadyCheck:
        nodes: set[int] = set()
        unknown: set[str] = set()
        next_check = math.inf
        urgent = self.closing or self.flushes_in_progress > 0 or self.memory_waiters > 0
        config = self.config
        for tp, queue in self.queues.items():
            if not queue or tp in self.muted:
                continue
            leader = cluster.leader_for(tp)
            if leader is None:
                unknown.add(tp.topic)
                continue
            if leader.leader in nodes:
                continue
            batch = queue[0]
            # Absolute times, compared the same way everywhere (no float drift).
            if batch.attempts > 0:
                ready_at = batch.last_attempt_ms + config.retry_backoff_ms
                backing_off = now_ms < ready_at
            else:
                ready_at = batch.created_ms + config.linger_ms
                backing_off = False
            full = len(queue) > 1 or batch.is_full(config.batch_size)
            sendable = full or now_ms >= ready_at or urgent
            if sendable and not backing_off:
                nodes.add(leader.leader)
            else:
                next_check = min(next_check, ready_at)
        return ReadyCheck(nodes, next_check, unknown)

    def drain(
        self, cluster: ClusterView, node: int, max_request_size: int, now_ms: float
    ) -> list[ProducerBatch]:
        """Take one ready batch per partition led by `node`, up to `max_request_size`
        bytes (but at least one batch); mute those partitions."""
        tps = [tp for tp, queue in self.queues.items() if queue and tp not in self.muted]
        led = [tp for tp in tps if (info := cluster.leader_for(tp)) and info.leader == node]
        if not led:
            return []
        start = self._drain_start.get(node, 0) % len(led)  # fairness between partitions
        self._drain_start[node] = start + 1
        drained: list[ProducerBatch] = []
        total = 0
        for tp in led[start:] + led[:start]:
            queue = self.queues[tp]
            batch = queue[0]
            if self._backing_off(batch, now_ms):
                continue
            if drained and total + batch.size > max_request_size:
                break
            queue.popleft()
            batch.closed = True
            batch.state = BatchState.IN_FLIGHT
            self.in_flight.add(batch)
            self.muted.add(tp)
            total += batch.size
            drained.append(batch)
        return drained

    # --- after a response ------------------------------------------------------------

    def reenqueue(self, batch: ProducerBatch, now_ms: float) -> None:
        """Put a batch back at the front of its queue for a retry (after the backoff)."""
        self.in_flight.discard(batch)
        self.muted.discard(batch.tp)
        batch.attempts += 1
        batch.last_attempt_ms = now_ms
        batch.state = BatchState.OPEN
        self.queues.setdefault(batch.tp, deque()).appendleft(batch)

    def release(self, batch: ProducerBatch) -> None:
        """The batch is finished (acked, failed or expired): free its memory and unmute."""
        if batch in self.in_flight:
            self.in_flight.discard(batch)
            self.muted.discard(batch.tp)
        if batch in self.incomplete:
            self.incomplete.discard(batch)
            self.used_bytes -= batch.size - BATCH_OVERHEAD

    def unmute(self, tp: TopicPartition) -> None:
        self.muted.discard(tp)

    # --- expiry ----------------------------------------------------------------------

    def expired(self, now_ms: float) -> list[ProducerBatch]:
        """Batches (queued or in flight) older than `delivery_timeout_ms`; queued ones are
        removed from their queues. In-flight ones stay muted until their response."""
        limit = self.config.delivery_timeout_ms
        out: list[ProducerBatch] = []
        for queue in self.queues.values():
            while queue and now_ms - queue[0].created_ms >= limit:
                out.append(queue.popleft())
        for batch in self.in_flight:
            if batch.state is not BatchState.DONE and now_ms - batch.created_ms >= limit:
                out.append(batch)
        return out

    def next_expiry_ms(self) -> float:
        oldest = math.inf
        for queue in self.queues.values():
            if queue:
                oldest = min(oldest, queue[0].created_ms)
        for batch in self.in_flight:
            if batch.state is not BatchState.DONE:
                oldest = min(oldest, batch.created_ms)
        return oldest + self.config.delivery_timeout_ms

    def abandon_all(self) -> list[ProducerBatch]:
        """Every unfinished batch, removed from the queues (a forced close)."""
        out = [b for b in self.incomplete if b.state is not BatchState.DONE]
        for queue in self.queues.values():
            queue.clear()
        return out


# --- the producer (Trio) ------------------------------------------------------------------


def parse_acks(acks: int | str) -> int:
    """Kafka's acks values: 0, 1, all / -1."""
    if isinstance(acks, str):
        text = acks.strip().lower()
        if text == "all":
            return -1
        try:
            acks = int(text)
        except ValueError:
            raise ValueError(f"acks must be 0, 1 or all, not {acks!r}") from None
    if acks not in (0, 1, -1):
        raise ValueError(f"acks must be 0, 1 or all, not {acks!r}")
    return acks


def parse_compression(name: str | Codec) -> Codec:
    if isinstance(name, Codec):
        return name
    try:
        return _CODECS[name.strip().lower()]
    except KeyError:
        raise ValueError(
            f"compression_type must be one of {', '.join(_CODECS)}, not {name!r}"
        ) from None


def idempotence_enabled(
    enable_idempotence: bool | None, acks: int, retries: int, max_in_flight: int
) -> bool:
    """Kafka 3.x's rule: idempotence needs acks=all, retries > 0 and at most 5 requests
    in flight. Asked for explicitly (True) with others, ValueError; left at its default
    (None), it is on unless they conflict."""
    conflicts = []
    if acks != -1:
        conflicts.append(f"acks must be all (not {acks})")
    if retries <= 0:
        conflicts.append("retries must be greater than 0")
    if max_in_flight > MAX_IN_FLIGHT_FOR_IDEMPOTENCE:
        conflicts.append(
            f"max_in_flight_requests_per_connection must be at most "
            f"{MAX_IN_FLIGHT_FOR_IDEMPOTENCE} (not {max_in_flight})"
        )
    if enable_idempotence is None:
        return not conflicts
    if enable_idempotence and conflicts:
        raise ValueError("enable_idempotence requires: " + "; ".join(conflicts))
    return bool(enable_idempotence)


class LeaderMovedError(TributaryError):
    """A request in flight was abandoned because fresh metadata names another leader."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.NOT_LEADER_OR_FOLLOWER, message)


class _InFlightRequest:
    """One produce request on its way: where it went, since when, and how to abandon it."""

    __slots__ = ("node", "batches", "epochs", "sent_ms", "scope", "abandoned")

    def __init__(self, node: int, batches: list[ProducerBatch], cluster: ClusterView) -> None:
        self.node = node
        self.batches = batches
        self.epochs = {}
        for batch in batches:
            info = cluster.partition(batch.tp)
            self.epochs[batch.tp] = -1 if info is None else info.leader_epoch
        self.sent_ms = _now_ms()
        self.scope = trio.CancelScope()
        self.abandoned: str | None = None

    def moved(self, cluster: ClusterView) -> str | None:
        """Why this request's leader is stale in `cluster` (None: it is not)."""
        for batch in self.batches:
            info = cluster.partition(batch.tp)
            if info is None or info.leader < 0:
                continue  # no news of a new leader yet: keep waiting
            if info.leader != self.node or info.leader_epoch > self.epochs[batch.tp]:
                return (
                    f"the leader of {batch.tp} moved from broker {self.node} to broker "
                    f"{info.leader} (epoch {info.leader_epoch}) while a request was in flight"
                )
        return None


class Producer:
    """Build with `open_producer()`; see the module docstring for how it works."""

    def __init__(
        self,
        pool: ConnectionPool,
        bootstrap: str | Iterable[str],
        *,
        acks: int | str | None = None,
        enable_idempotence: bool | None = None,
        batch_size: int = 16_384,
        linger_ms: float = 0,
        max_request_size: int = 1_048_576,
        compression_type: str | Codec = "none",
        retries: int = 2_147_483_647,
        retry_backoff_ms: float = 100,
        delivery_timeout_ms: float = 120_000,
        request_timeout_ms: float = 30_000,
        max_in_flight_requests_per_connection: int = 5,
        buffer_memory: int = 32 * 1024 * 1024,
        max_block_ms: float = 60_000,
        metadata_max_age_ms: float = DEFAULT_METADATA_MAX_AGE_MS,
        partitioner: DefaultPartitioner | None = None,
        on_retry: Callable[[TopicPartition, BaseException], None] | None = None,
    ) -> None:
        if delivery_timeout_ms < linger_ms + request_timeout_ms:
            raise ValueError(
                "delivery_timeout_ms should be equal to or larger than linger_ms + "
                "request_timeout_ms (as Kafka requires)"
            )
        if batch_size <= 0 or max_request_size <= 0 or buffer_memory <= 0:
            raise ValueError("batch_size, max_request_size and buffer_memory must be positive")
        if max_in_flight_requests_per_connection < 1:
            raise ValueError("max_in_flight_requests_per_connection must be at least 1")
        self.acks = parse_acks("all" if acks is None else acks)  # Kafka 3.x: acks=all
        self.idempotent = idempotence_enabled(
            enable_idempotence, self.acks, retries, max_in_flight_requests_per_connection
        )
        self.codec = parse_compression(compression_type)
        self.max_request_size = max_request_size
        self.retries = retries
        self.request_timeout_ms = request_timeout_ms
        self.max_in_flight = max_in_flight_requests_per_connection
        self.max_block_ms = max_block_ms
        self.buffer_memory = buffer_memory
        # The largest record (estimated size) a batch and the buffer can take.
        self._max_record_size = min(max_request_size - BATCH_OVERHEAD, buffer_memory)
        self.accumulator = RecordAccumulator(
            AccumulatorConfig(
                batch_size=batch_size,
                linger_ms=linger_ms,
                retry_backoff_ms=retry_backoff_ms,
                delivery_timeout_ms=delivery_timeout_ms,
                buffer_memory=buffer_memory,
                codec=self.codec,
            )
        )
        self.metadata = Metadata(
            pool,
            bootstrap,
            max_age_ms=int(metadata_max_age_ms),
            retry_backoff_ms=int(retry_backoff_ms),
            request_timeout_ms=int(request_timeout_ms),
        )
        self.partitioner = partitioner or DefaultPartitioner()
        self._pool = pool
        self._nursery: trio.Nursery | None = None
        self._in_flight_per_node: dict[int, int] = {}
        self._requests: set[_InFlightRequest] = set()
        self.on_retry = on_retry
        self._wakeup = trio.Event()
        self._memory_freed = trio.Event()
        self._closed = False
        self._sender_done = trio.Event()
        # Idempotence: this producer's id and epoch, and each partition's next sequence.
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self._next_sequence: dict[TopicPartition, int] = {}
        # Each topic's TopicPartitions, made once (making one per record costs more than
        # the rest of finding its batch).
        self._topic_partitions: dict[str, list[TopicPartition]] = {}

    # --- lifecycle -------------------------------------------------------------------

    async def start(self, nursery: trio.Nursery) -> None:
        """Bootstrap (raises `NoBrokersAvailableError` if nobody answers), start tasks."""
        await self.metadata.refresh()
        self._nursery = nursery
        await nursery.start(self.metadata.run)
        nursery.start_soon(self._wake_on_metadata)
        nursery.start_soon(self._watch_stalled_requests)
        nursery.start_soon(self._sender_loop)

    async def flush(self) -> None:
        """Send everything buffered now (ignoring linger) and wait until every record sent
        before this call is acknowledged or failed."""
        acc = self.accumulator
        acc.flushes_in_progress += 1
        self._wake()
        try:
            for batch in list(acc.incomplete):
                await batch.done.wait()
        finally:
            acc.flushes_in_progress -= 1

    async def aclose(self) -> None:
        """Refuse new records, deliver the buffered ones (flush), stop. Idempotent."""
        if self._closed:
            await self._sender_done.wait()
            return
        self._closed = True
        self.accumulator.closing = True
        self._wake()
        await self._sender_done.wait()

    def abort(self, reason: str = "the producer was closed before delivering") -> None:
        """Fail every unfinished record now (a close that cannot wait)."""
        self._closed = True
        self.accumulator.closing = True
        for batch in self.accumulator.abandon_all():
            self._finish(batch, error=ProducerClosedError(reason))
        self._wake()

    # --- sending ---------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: bytes | str | None,
        key: bytes | str | None = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes | str]] = (),
        timestamp_ms: int | None = None,
    ) -> DeliveryHandle:
        """Queue one record; returns a handle to `await` for its `RecordMetadata`.

        Waits only when it must: for the topic's metadata the first time, and while the
        buffer is full (both at most `max_block_ms`). Raises `UnknownTopicError`,
        `InvalidPartitionError`, `RecordTooLargeError`, `ProducerTimeoutError`,
        `NoBrokersAvailableError`, or `ProducerClosedError` after `aclose()`.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        self._check_open()
        key_bytes = key if key is None or type(key) is bytes else to_bytes(key)
        value_bytes = value if value is None or type(value) is bytes else to_bytes(value)
        header_pairs, headers_size = header_list(headers) if headers else (NO_HEADERS, 0)
        size = record_size(key_bytes, value_bytes, headers_size)
        if size > self._max_record_size:
            raise self._too_large(size)
        num_partitions = await self._admit(topic, partition, size)
        if timestamp_ms is None:
            timestamp_ms = time.time_ns() // 1_000_000
        return self._append(
            topic,
            num_partitions,
            partition,
            key_bytes,
            value_bytes,
            timestamp_ms,
            header_pairs,
            size,
        )

    async def send_many(
        self,
        topic: str,
        values: Sequence[bytes | str | None],
        keys: Sequence[bytes | str | None] | None = None,
        partition: int | None = None,
        headers: Sequence[Sequence[tuple[str, bytes | str]]] | None = None,
        timestamp_ms: int | Sequence[int] | None = None,
    ) -> DeliveryHandles:
        """Queue many records at once: record i is `values[i]` with `keys[i]` and
        `headers[i]` (if given) and `timestamp_ms` (one for all, default now, or one
        each). Returns their `DeliveryHandles`, in the order given.

        The same records, guarantees and errors as calling `send()` for each in turn
        (partitions, sticky moves as batches fill, buffer memory, ordering, retries,
        idempotence), at a fraction of the cost per record: keyless records are copied
        into batches a batch-sized run at a time. Every record is checked (types, sizes,
        topic, partition) before any is queued; if waiting for buffer memory then fails
        (`ProducerTimeoutError`) or the producer closes meanwhile (`ProducerClosedError`),
        the error's `queued` attribute holds the `DeliveryHandles` of the records queued
        before it (they are delivered as usual). Raises `ValueError` when `keys`,
        `headers` or timestamps are not one per value.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        self._check_open()
        if timestamp_ms is None:
            timestamp_ms = time.time_ns() // 1_000_000
        columns = RecordColumns.prepare(values, keys, headers, timestamp_ms)
        handles = DeliveryHandles()
        if not len(columns):
            return handles
        if columns.largest > self._max_record_size:
            raise self._too_large(columns.largest)
        num_partitions = await self._admit(topic, partition, columns.size(0, 1))
        try:
            if partition is None and columns.keys is not None:
                await self._append_each(topic, num_partitions, columns, handles)
            else:
                await self._append_runs(topic, num_partitions, partition, columns, handles)
        except (TributaryError, ProducerClosedError) as exc:
            exc.queued = handles  # type: ignore[attr-defined]
            raise
        return handles

    def _check_open(self) -> None:
        if self._closed:
            raise ProducerClosedError("cannot send: the producer is closed")

    def _too_large(self, size: int) -> RecordTooLargeError:
        return RecordTooLargeError(
            f"the record is {size + BATCH_OVERHEAD} bytes when serialized, larger than "
            f"max_request_size ({self.max_request_size}) or buffer_memory "
            f"({self.buffer_memory})"
        )

    async def _admit(self, topic: str, partition: int | None, size: int) -> int:
        """The topic's partition count, once `partition` (if given) is known to exist and
        `size` bytes of buffer memory are free: waits for metadata the first time, and for
        memory while the buffer is full (each at most `max_block_ms`)."""
        partitions = self.metadata.cluster.partitions_for(topic)
        if partitions is None:
            partitions = await self._wait_for_topic(topic)
        num_partitions = len(partitions)
        if partition is not None and not 0 <= partition < num_partitions:
            raise InvalidPartitionError(
                f"partition {partition} is not in topic '{topic}', which has "
                f"{num_partitions} partition(s)"
            )
        if self.accumulator.used_bytes + size > self.buffer_memory:
            await self._wait_for_memory(size)
        return num_partitions

    def _partition(self, topic: str, num_partitions: int, key: bytes | None) -> int:
        """The partition of a record without an explicit one: its key's, or the sticky."""
        if key is not None:
            return partition_for_key(key, num_partitions)
        available = self.metadata.cluster.available_partitions(topic)
        return self.partitioner.partition(topic, None, num_partitions, available)

    def _batch_for(
        self, topic: str, partition: int, size: int, num_partitions: int, sticky: bool
    ) -> ProducerBatch:
        """The batch a record of `size` bytes for `partition` goes into: the open one if
        it has room; else (KIP-480) a keyless record without an explicit partition first
        moves the topic's sticky partition on (and may fit in the batch open there); else
        a new batch, which wakes the sender."""
        acc = self.accumulator
        tps = self._topic_partitions.get(topic)
        if tps is None or len(tps) < num_partitions:
            tps = self._topic_partitions[topic] = [
                TopicPartition(topic, p) for p in range(num_partitions)
            ]
        batch = acc.open_batch(tps[partition], size)
        if batch is not None:
            return batch
        if sticky:
            available = self.metadata.cluster.available_partitions(topic)
            partition = self.partitioner.on_new_batch(topic, partition, num_partitions, available)
            batch = acc.open_batch(tps[partition], size)
            if batch is not None:
                return batch
        self._wakeup.set()
        return acc.new_batch(tps[partition], _now_ms())

    def _append(
        self,
        topic: str,
        num_partitions: int,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        timestamp_ms: int,
        headers: Headers,
        size: int,
    ) -> DeliveryHandle:
        """Queue one record (its buffer memory is free): `send()` after the waiting."""
        sticky = partition is None and key is None
        if partition is None:
            partition = self._partition(topic, num_partitions, key)
        batch = self._batch_for(topic, partition, size, num_partitions, sticky)
        handle = self.accumulator.append(batch, key, value, timestamp_ms, headers, size)
        if batch.size >= self.accumulator.config.batch_size:
            self._wakeup.set()
        return handle

    async def _append_each(
        self, topic: str, num_partitions: int, columns: RecordColumns, handles: DeliveryHandles
    ) -> None:
        """`send_many` with keys: each record partitioned on its own, as `send()` does."""
        acc = self.accumulator
        for i in range(len(columns)):
            size = columns.size(i, i + 1)
            if acc.used_bytes + size > self.buffer_memory:
                await self._wait_for_memory(size)
            key, value, timestamp_ms, headers = columns.record(i)
            handle = self._append(
                topic, num_partitions, None, key, value, timestamp_ms, headers, size
            )
            handles._add(handle._batch, handle._index, 1)

    async def _append_runs(
        self,
        topic: str,
        num_partitions: int,
        partition: int | None,
        columns: RecordColumns,
        handles: DeliveryHandles,
    ) -> None:
        """`send_many` without keys: to `partition`, or the sticky partition (moving on as
        batches fill), a run of records at a time: as many as fit both in the batch and
        in the free buffer memory (at least one). A filled batch lets the sender run."""
        acc = self.accumulator
        batch_size = acc.config.batch_size
        sticky = partition is None
        start, count = 0, len(columns)
        while start < count:
            size = columns.size(start, start + 1)
            if acc.used_bytes + size > self.buffer_memory:
                await self._wait_for_memory(size)
            chosen = self._partition(topic, num_partitions, None) if sticky else partition
            batch = self._batch_for(topic, chosen, size, num_partitions, sticky)
            limit = min(batch_size - batch.size, self.buffer_memory - acc.used_bytes)
            stop = start + max(1, columns.fit(start, limit))
            handles._add(batch, acc.extend(batch, columns, start, stop), stop - start)
            start = stop
            if batch.size >= batch_size:
                self._wakeup.set()
                if start < count:
                    await trio.lowlevel.checkpoint()

    async def _wait_for_topic(self, topic: str) -> list[int]:
        try:
            partitions = await self.metadata.partitions_or_error(topic, self.max_block_ms / 1000)
        except UnknownTopicError:
            self.metadata.remove_topics(topic)
            raise
        except trio.TooSlowError:
            raise ProducerTimeoutError(
                f"topic '{topic}' not present in metadata after {self.max_block_ms:g} ms"
            ) from None
        self._check_open()  # closed while we waited
        return partitions

    async def _wait_for_memory(self, size: int) -> None:
        acc = self.accumulator
        acc.memory_waiters += 1
        self._wake()  # everything becomes sendable while someone waits for memory
        try:
            with trio.move_on_after(self.max_block_ms / 1000):
                while acc.used_bytes + size > self.buffer_memory:
                    await self._memory_freed.wait()
                self._check_open()  # closed while we waited
                return
        finally:
            acc.memory_waiters -= 1
        raise ProducerTimeoutError(
            f"failed to allocate {size} bytes of buffer memory within {self.max_block_ms:g} ms"
        )

    # --- the sender ------------------------------------------------------------------

    def _wake(self) -> None:
        self._wakeup.set()

    async def _wake_on_metadata(self) -> None:
        while True:
            await self.metadata.wait_for_update()
            self._abandon_moved_requests()
            self._wake()

    def _abandon_moved_requests(self) -> None:
        cluster = self.metadata.cluster
        for request in list(self._requests):
            if request.abandoned is None and (reason := request.moved(cluster)) is not None:
                log.info("abandoning a produce request to broker %d: %s", request.node, reason)
                request.abandoned = reason
                request.scope.cancel()

    async def _watch_stalled_requests(self) -> None:
        """While a request waits longer than STALLED_REQUEST_MS, keep the metadata fresh
        so that a leader change is noticed (and the request abandoned) promptly."""
        while True:
            await trio.sleep(STALLED_REQUEST_MS / 1000)
            now = _now_ms()
            if any(now - r.sent_ms >= STALLED_REQUEST_MS for r in self._requests):
                self.metadata.request_update()

    async def _sender_loop(self) -> None:
        try:
            await self._run_sender()
        except BaseException as exc:
            # A bug or a cancellation: nobody may wait forever for a record's outcome.
            if not isinstance(exc, trio.Cancelled):
                log.exception("the producer's sender failed")
            for batch in self.accumulator.abandon_all():
                self._finish(batch, error=ProducerClosedError(f"the sender stopped: {exc!r}"))
            raise
        finally:
            self._sender_done.set()

    async def _run_sender(self) -> None:
        acc = self.accumulator
        assert self._nursery is not None
        while True:
            self._wakeup = trio.Event()
            now = _now_ms()
            for batch in acc.expired(now):
                self._expire(batch, now)
            if acc.closing and not acc.incomplete:
                return
            if self.idempotent and self.producer_id < 0 and acc.has_undrained():
                if not await self._init_producer_id():
                    self.metadata.request_update()
                    await trio.sleep(acc.config.retry_backoff_ms / 1000)
                continue  # expire what waited too long, then try again
            cluster = self.metadata.cluster
            check = acc.ready(cluster, now)
            if check.unknown_leaders:
                self.metadata.add_topics(*check.unknown_leaders)
                self.metadata.request_update()
            for node in sorted(check.nodes):
                if self._in_flight_per_node.get(node, 0) >= self.max_in_flight:
                    continue
                broker = cluster.broker(node)
                if broker is None:
                    continue
                batches = acc.drain(cluster, node, self.max_request_size, now)
                if batches and self.idempotent:
                    self._stamp(batches)
                if batches:
                    self._in_flight_per_node[node] = self._in_flight_per_node.get(node, 0) + 1
                    in_flight = _InFlightRequest(node, batches, cluster)
                    self._requests.add(in_flight)
                    self._nursery.start_soon(self._send_request, in_flight, broker.address)
            wake_at = min(check.next_check_ms, acc.next_expiry_ms())
            if wake_at == math.inf:
                await self._wakeup.wait()
            else:
                with trio.move_on_after(sleep_seconds(wake_at - _now_ms())):
                    await self._wakeup.wait()

    # --- idempotence -------------------------------------------------------------------

    async def _init_producer_id(self) -> bool:
        """Ask the known brokers in turn for a producer id (InitProducerId) until one
        gives it (sequences start over); False when none did (the sender retries after
        the backoff, expiring batches meanwhile)."""
        request = m.InitProducerIdRequest()
        for broker in list(self.metadata.cluster.brokers.values()):
            try:
                response = await self._pool.request(
                    broker.host,
                    broker.port,
                    request,
                    timeout_s=self.request_timeout_ms / 1000,
                )
            except TributaryError as exc:
                log.info("InitProducerId to broker %d failed: %s", broker.node_id, exc)
                continue
            code = ErrorCode.from_code(response.error_code)
            if code is ErrorCode.NONE:
                self.producer_id = response.producer_id
                self.producer_epoch = response.producer_epoch
                self._next_sequence.clear()
                log.info(
                    "idempotent producer id %d, epoch %d", self.producer_id, self.producer_epoch
                )
                return True
            if not code.is_retriable and code is not ErrorCode.COORDINATOR_NOT_AVAILABLE:
                error = TributaryError(code, "InitProducerId failed")
                for batch in self.accumulator.abandon_all():
                    self._finish(batch, error=error)
                return False
            log.info("InitProducerId: broker %d answered %s", broker.node_id, code.name)
        return False

    def _stamp(self, batches: list[ProducerBatch]) -> None:
        """Give fresh batches (and retries stamped under an older producer id or epoch)
        this producer's id, epoch and their partition's next sequences."""
        for batch in batches:
            if (
                batch.base_sequence >= 0
                and batch.producer_id == self.producer_id
                and batch.producer_epoch == self.producer_epoch
            ):
                continue  # a retry: the same bytes, the same sequence
            sequence = self._next_sequence.get(batch.tp, 0)
            batch.stamp(self.producer_id, self.producer_epoch, sequence)
            self._next_sequence[batch.tp] = (sequence + batch.record_count) % SEQUENCE_MODULUS

    def _bump_epoch(self, why: str) -> None:
        """Start a new sequence space (Kafka's idempotent epoch bump, KIP-360): the next
        epoch of the same id, or a new id when the epoch is exhausted."""
        if self.producer_id < 0:
            return
        log.warning(
            "idempotent producer %d: bumping epoch %d after %s",
            self.producer_id,
            self.producer_epoch,
            why,
        )
        if self.producer_epoch >= _INT16_MAX:
            self.producer_id = NO_PRODUCER_ID
            self.producer_epoch = NO_PRODUCER_EPOCH
        else:
            self.producer_epoch += 1
        self._next_sequence.clear()

    def _build_request(self, batches: list[ProducerBatch]) -> m.ProduceRequest:
        by_topic: dict[str, list[m.ProducePartition]] = {}
        for batch in batches:
            by_topic.setdefault(batch.tp.topic, []).append(
                m.ProducePartition(partition=batch.tp.partition, records=batch.encode(self.codec))
            )
        return m.ProduceRequest(
            acks=self.acks,
            timeout_ms=int(self.request_timeout_ms),
            topics=[
                m.ProduceTopic(name=name, partitions=parts) for name, parts in by_topic.items()
            ],
        )

    async def _send_request(self, in_flight: _InFlightRequest, address: tuple[str, int]) -> None:
        node, batches = in_flight.node, in_flight.batches
        try:
            request = self._build_request(batches)
            if self.acks == 0:
                connection = await self._pool.get(*address)
                await connection.send_no_response(request)
                for batch in batches:
                    self._finish(batch, base_offset=-1)
                return
            timeout_s = (self.request_timeout_ms + REQUEST_TIMEOUT_MARGIN_MS) / 1000
            response = None
            with in_flight.scope:
                response = await self._pool.request(*address, request, timeout_s=timeout_s)
            if response is None:  # abandoned: the leader moved
                raise LeaderMovedError(in_flight.abandoned or "the leader moved")
            self._handle_response(batches, response)
        except TributaryError as exc:  # connection failure or a request-level error
            if isinstance(exc, BrokerConnectionError):
                log.info("produce to broker %d failed: %s", node, exc)
                self.metadata.request_update()
            for batch in batches:
                self._retry_or_fail(batch, exc.code, exc)
        except Exception as exc:  # a bug: fail these records rather than hang them
            log.exception("producing to broker %d failed", node)
            for batch in batches:
                self._finish(batch, error=exc)
        finally:
            self._requests.discard(in_flight)
            self._in_flight_per_node[node] -= 1
            self._wake()

    def _handle_response(self, batches: list[ProducerBatch], response: m.ProduceResponse) -> None:
        answers = {
            (topic.name, part.partition): part
            for topic in response.topics
            for part in topic.partitions
        }
        for batch in batches:
            answer = answers.get(batch.tp)
            if answer is None:
                error = TributaryError(
                    ErrorCode.UNKNOWN_SERVER_ERROR, f"the response did not mention {batch.tp}"
                )
                self._finish(batch, error=error)
                continue
            code = ErrorCode.from_code(answer.error_code)
            if code is ErrorCode.NONE:
                self._finish(
                    batch, base_offset=answer.base_offset, log_append_time=answer.log_append_time_ms
                )
            elif batch.base_sequence >= 0 and code in _IDEMPOTENCE_ERRORS:
                self._idempotence_error(batch, code, answer.error_message)
            else:
                self._retry_or_fail(batch, code, TributaryError(code, answer.error_message))

    def _idempotence_error(self, batch: ProducerBatch, code: ErrorCode, message: str | None):
        if batch.state is BatchState.DONE:  # expired while in flight
            self.accumulator.release(batch)
            return
        if code is ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
            # Written before, but too long ago for the broker to say where: success with
            # an unknown offset (Kafka's Sender does the same).
            self._finish(batch, base_offset=-1)
            return
        stale = (batch.producer_id, batch.producer_epoch) != (
            self.producer_id,
            self.producer_epoch,
        )
        error = TributaryError(code, message)
        if code is ErrorCode.INVALID_PRODUCER_EPOCH and stale:
            self._retry_or_fail(batch, code, error, retriable=True)  # restamped when drained
            return
        if not stale:
            self._bump_epoch(f"{code.name} on {batch.tp}")
        log.warning("failed to deliver %d record(s) to %s: %s", batch.record_count, batch.tp, error)
        self._finish(batch, error=error)

    def _retry_or_fail(
        self,
        batch: ProducerBatch,
        code: ErrorCode,
        error: TributaryError,
        *,
        retriable: bool | None = None,
    ) -> None:
        now = _now_ms()
        if batch.state is BatchState.DONE:  # expired while in flight
            self.accumulator.release(batch)
            return
        if retriable is None:
            retriable = error.retriable
        in_time = now - batch.created_ms < self.accumulator.config.delivery_timeout_ms
        if retriable and batch.attempts < self.retries and in_time:
            log.info(
                "retrying %d record(s) for %s (attempt %d) after %s",
                batch.record_count,
                batch.tp,
                batch.attempts + 1,
                error,
            )
            if code in _STALE_METADATA_ERRORS:
                self.metadata.request_update()
            if self.on_retry is not None:
                self.on_retry(batch.tp, error)
            batch.last_error = error
            self.accumulator.reenqueue(batch, now)
            return
        if retriable and not in_time:
            self._expire(batch, now, cause=error)
            return
        log.warning("failed to deliver %d record(s) to %s: %s", batch.record_count, batch.tp, error)
        self._finish(batch, error=error)

    def _expire(self, batch: ProducerBatch, now: float, cause: BaseException | None = None) -> None:
        if (
            batch.base_sequence >= 0
            and batch.attempts + (batch.state is BatchState.IN_FLIGHT) > 0
            and (batch.producer_id, batch.producer_epoch) == (self.producer_id, self.producer_epoch)
        ):
            # Sent, fate unknown: later sequences could be out of order. Start over.
            self._bump_epoch(f"a batch for {batch.tp} expired")
        waited = now - batch.created_ms
        cause = cause or batch.last_error
        error = DeliveryTimeoutError(
            f"Expiring {batch.record_count} record(s) for {batch.tp}: {waited:.0f} ms has "
            "passed since batch creation" + (f" (last error: {cause})" if cause is not None else "")
        )
        if batch.state is BatchState.IN_FLIGHT:
            batch.fail(error)  # released (and unmuted) when its response arrives
            return
        self._finish(batch, error=error)

    def _finish(
        self,
        batch: ProducerBatch,
        *,
        base_offset: int = -1,
        log_append_time: int = -1,
        error: BaseException | None = None,
    ) -> None:
        if error is None:
            batch.complete(base_offset, log_append_time)
        else:
            batch.fail(error)
        self.accumulator.release(batch)
        self._memory_freed.set()
        self._memory_freed = trio.Event()


def _now_ms() -> float:
    return trio.current_time() * 1000


@asynccontextmanager
async def open_producer(
    bootstrap: str | Iterable[str],
    *,
    client_id: str | None = "tributary-producer",
    connector: Connector | None = None,
    **config: Any,
) -> AsyncIterator[Producer]:
    """A started producer; leaving the block flushes and closes it.

    `config` takes `Producer`'s keyword arguments (Kafka's names in snake_case). Raises
    `NoBrokersAvailableError` at once when no bootstrap broker answers.
    """
    async with (
        open_connection_pool(client_id=client_id, connector=connector) as pool,
        open_client_nursery() as nursery,
    ):
        producer = Producer(pool, bootstrap, **config)
        await producer.start(nursery)
        try:
            yield producer
        except BaseException:
            producer.abort("the producer's block raised before the records were delivered")
            raise
        else:
            await producer.aclose()
        finally:
            nursery.cancel_scope.cancel()
