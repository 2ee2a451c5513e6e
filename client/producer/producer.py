"""The public producer: records in, per-partition batches out, retried in order until
acked. Kafka 2.8's KafkaProducer, on Trio.

How it works: `Producer` wires the parts and holds the API; the work is theirs:
- `send()` picks the partition (client/producer/builtin_partitioner.py, KIP-794:
  explicit, key hash, or sticky; keyless records move to another partition after
  `batch_size` bytes, weighted away from leaders with long queues, and with
  `partitioner_availability_timeout_ms` > 0 away from leaders that cannot be drained:
  their never-sent keyless batches move too), reserves buffer memory (waiting while
  `buffer_memory` is used up: backpressure) and appends the record to the partition's
  open batch in the `RecordAccumulator` (client/producer/accumulator.py). It returns a
  `DeliveryHandle` at once; `await handle` gives the `RecordMetadata` or raises
  (client/producer/batch.py).
  A batch keeps its records as columns, so a record costs no object of its own.
- `send_many()` takes many records at once (client/producer/record_columns.py converts
  and sizes them, all checked before any is queued) and gives the same result as one
  `send()` per record: keyed records are placed one by one as `send()` places them;
  keyless ones go a run at a time, as many as fit in the open batch and in the free
  buffer memory, into the explicit or sticky partition (which moves on whenever a batch
  is full, as with `send()`), waiting for memory between runs. It returns
  `DeliveryHandles`: a sequence of per-record handles made only when asked for,
  awaitable as a whole, grouped per batch by `runs()`. An error after some records were
  queued carries their handles as `error.queued`.
- A new or full batch wakes the `Sender` (client/producer/sender.py), the task that
  drains ready batches into Produce requests, retries, expires and completes them, and
  abandons requests to a leader that moved (client/inflight.py). With idempotence (on by
  default, as in Kafka 3.x; client/producer/config.py says when it is on), the
  `IdempotenceManager` (client/producer/idempotence.py) gets the producer id and stamps
  every batch with its sequence, so that retries write nothing twice. (The first batch
  waits for the producer id, so it may gather more records than it would have
  otherwise.) Like Kafka 3.x, `acks` defaults to all.
- A topic that does not exist raises `UnknownTopicError` from `send()`, unless built
  with `allow_auto_create_topics=True`: then, as Kafka's producer does, the metadata
  request lets the broker create it (when its `auto.create.topics.enable` allows) with
  the broker's `num.partitions` and `default.replication.factor`. Off by default, so a
  misspelt topic is an error rather than a new topic.
- With a `transactional_id` (implying idempotence and acks=all) records are written in
  transactions: `init_transactions`, `begin_transaction`, `send_offsets_to_transaction`,
  `commit_transaction`, `abort_transaction` (client/producer/transactional.py), and
  `send()` raises outside a transaction.
- `flush()` makes every buffered batch ready at once and waits for the records sent
  before it; `aclose()` refuses new records, flushes and stops; `abort()` fails what is
  unfinished at once.

`async with open_producer("host:port", acks="all") as producer:` builds one; leaving the
block flushes everything (`aclose()`). Timings use `trio.current_time()` (MockClock in
tests); record timestamps are wall-clock milliseconds.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import trio

from client.connection import ConnectionPool, Connector, open_connection_pool
from client.metadata import (
    DEFAULT_METADATA_MAX_AGE_MS,
    Metadata,
    current_ms,
    open_client_nursery,
)
from client.producer.accumulator import AccumulatorConfig, RecordAccumulator
from client.producer.batch import DeliveryHandle, DeliveryHandles, ProducerBatch
from client.producer.builtin_partitioner import BuiltInPartitioner, PartitionerConfig
from client.producer.config import idempotence_enabled, parse_acks, parse_compression
from client.producer.errors import (
    InvalidPartitionError,
    ProducerClosedError,
    ProducerTimeoutError,
    RecordTooLargeError,
)
from client.producer.idempotence import IdempotenceManager
from client.producer.partitioner import DefaultPartitioner, partition_for_key
from client.producer.record_columns import (
    NO_HEADERS,
    Headers,
    RecordColumns,
    header_list,
    record_size,
    to_bytes,
)
from client.producer.sender import Sender, SenderConfig
from client.producer.transactional import TransactionsApi
from client.producer.transactions import TransactionManager
from client.producer.txn_requests import TxnRequests
from client.protocol.errors import TributaryError
from client.protocol.records import BATCH_OVERHEAD, Codec
from client.protocol.types import TopicPartition
from client.security.secure_connector import with_security


class Producer(TransactionsApi):
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
        allow_auto_create_topics: bool = False,
        partitioner_adaptive_partitioning_enable: bool = True,
        partitioner_availability_timeout_ms: float = 0,
        partitioner_ignore_keys: bool = False,
        partitioner: DefaultPartitioner | BuiltInPartitioner | None = None,
        on_retry: Callable[[TopicPartition, BaseException], None] | None = None,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60_000,
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
        if transactional_id is not None:  # client/producer/transactional.py
            if enable_idempotence is False:
                raise ValueError("a transactional_id requires idempotence (enable_idempotence)")
            enable_idempotence = True
        self.idempotent = idempotence_enabled(
            enable_idempotence, self.acks, retries, max_in_flight_requests_per_connection
        )
        self.codec = parse_compression(compression_type)
        self.max_request_size = max_request_size
        self.max_block_ms = max_block_ms
        self.buffer_memory = buffer_memory
        # The largest record (estimated size) a batch and the buffer can take.
        self._max_record_size = min(max_request_size - BATCH_OVERHEAD, buffer_memory)
        if partitioner_availability_timeout_ms < 0:
            raise ValueError("partitioner_availability_timeout_ms must not be negative")
        self.partitioner = partitioner or BuiltInPartitioner(
            PartitionerConfig(
                batch_size=batch_size,
                adaptive_partitioning_enable=partitioner_adaptive_partitioning_enable,
                availability_timeout_ms=partitioner_availability_timeout_ms,
                ignore_keys=partitioner_ignore_keys,
            )
        )
        builtin = self.partitioner if isinstance(self.partitioner, BuiltInPartitioner) else None
        self._builtin = builtin
        self._ignore_keys = builtin is not None and builtin.config.ignore_keys
        self.accumulator = RecordAccumulator(
            AccumulatorConfig(
                batch_size=batch_size,
                linger_ms=linger_ms,
                retry_backoff_ms=retry_backoff_ms,
                delivery_timeout_ms=delivery_timeout_ms,
                buffer_memory=buffer_memory,
                codec=self.codec,
                availability_timeout_ms=partitioner_availability_timeout_ms if builtin else 0,
            ),
            builtin,
        )
        self.metadata = Metadata(
            pool,
            bootstrap,
            max_age_ms=int(metadata_max_age_ms),
            retry_backoff_ms=int(retry_backoff_ms),
            request_timeout_ms=int(request_timeout_ms),
            allow_auto_create_topics=allow_auto_create_topics,
        )
        self.idempotence = IdempotenceManager(self.idempotent)
        if builtin is not None and builtin.load_source is None:
            builtin.load_source = self._queue_sizes
        self.sender = Sender(
            SenderConfig(
                acks=self.acks,
                codec=self.codec,
                retries=retries,
                request_timeout_ms=request_timeout_ms,
                max_in_flight=max_in_flight_requests_per_connection,
                max_request_size=max_request_size,
                transactional_id=transactional_id,
            ),
            self.accumulator,
            self.metadata,
            pool,
            self.idempotence,
            on_retry,
        )
        self.transactions = (
            None
            if transactional_id is None
            else TxnRequests(
                TransactionManager(transactional_id, transaction_timeout_ms),
                self.idempotence,
                pool,
                self.metadata,
                request_timeout_ms=request_timeout_ms,
                retry_backoff_ms=retry_backoff_ms,
                max_block_ms=max_block_ms,
            )
        )
        self.idempotence.transactional = self.transactions is not None
        self.sender.transactions = self.transactions
        self._closed = False
        # Each topic's TopicPartitions, made once (making one per record costs more than
        # the rest of finding its batch).
        self._topic_partitions: dict[str, list[TopicPartition]] = {}

    # --- lifecycle -------------------------------------------------------------------

    async def start(self, nursery: trio.Nursery) -> None:
        """Bootstrap (raises `NoBrokersAvailableError` if nobody answers), start tasks."""
        await self.metadata.refresh()
        await nursery.start(self.metadata.run)
        self.sender.start(nursery)

    async def flush(self) -> None:
        """Send everything buffered now (ignoring linger) and wait until every record sent
        before this call is acknowledged or failed."""
        acc = self.accumulator
        acc.flushes_in_progress += 1
        self.sender.wake()
        try:
            for batch in list(acc.incomplete):
                await batch.done.wait()
        finally:
            acc.flushes_in_progress -= 1

    async def aclose(self) -> None:
        """Refuse new records, deliver the buffered ones (flush), stop. Idempotent."""
        if self._closed:
            await self.sender.done.wait()
            return
        self._closed = True
        self.accumulator.closing = True
        self.sender.wake()
        await self.sender.done.wait()

    def abort(self, reason: str = "the producer was closed before delivering") -> None:
        """Fail every unfinished record now (a close that cannot wait)."""
        self._closed = True
        self.accumulator.closing = True
        self.sender.fail_all(partial(ProducerClosedError, reason))
        self.sender.wake()

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
        if self.transactions is not None:
            self.transactions.manager.check_send()
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
        if self.transactions is not None:
            self.transactions.manager.check_send()
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
            if partition is None and columns.keys is not None and not self._ignore_keys:
                await self._append_each(topic, num_partitions, columns, handles)
            else:
                await self._append_runs(topic, num_partitions, partition, columns, handles)
        except (ProducerTimeoutError, ProducerClosedError) as exc:  # waiting for memory
            exc.queued = handles
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
        if key is not None and not self._ignore_keys:
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
            if not sticky:
                batch.movable = False
            return batch
        if sticky:
            available = self.metadata.cluster.available_partitions(topic)
            if self._builtin is not None:  # KIP-794: moves on after batch_size bytes
                partition = self._builtin.on_batch_full(topic, partition, num_partitions, available)
            else:  # Kafka 2.8: a new batch moves on
                partition = self.partitioner.on_new_batch(
                    topic, partition, num_partitions, available
                )
            batch = acc.open_batch(tps[partition], size)
            if batch is not None:
                return batch
        self.sender.wake()
        batch = acc.new_batch(tps[partition], current_ms())
        batch.movable = sticky
        return batch

    def _queue_sizes(self, topic: str) -> tuple[list[tuple[int, int]], bool]:
        sizes, left_out = self.accumulator.queue_sizes(self.metadata.cluster, topic)
        return sizes, not left_out

    def _appended(self, topic: str, batch: ProducerBatch, before: int, num_partitions: int) -> None:
        """KIP-794: sticky keyless records went to `batch`'s partition (its size was
        `before`; a new batch's header counts too, as in Kafka)."""
        if self._builtin is not None:
            nbytes = batch.size - before + (BATCH_OVERHEAD if before == BATCH_OVERHEAD else 0)
            full = batch.size >= self.accumulator.config.batch_size  # Kafka's isFull
            available = self.metadata.cluster.available_partitions(topic)
            self._builtin.on_appended(
                topic, batch.tp.partition, nbytes, num_partitions, available, full
            )

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
        sticky = partition is None and (key is None or self._ignore_keys)
        if partition is None:
            partition = self._partition(topic, num_partitions, key)
        batch = self._batch_for(topic, partition, size, num_partitions, sticky)
        before = batch.size
        handle = self.accumulator.append(batch, key, value, timestamp_ms, headers, size)
        if sticky:
            self._appended(topic, batch, before, num_partitions)
        if batch.size >= self.accumulator.config.batch_size:
            self.sender.wake()
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
            if partition is None:  # sticky
                chosen = self._partition(topic, num_partitions, None)
            else:
                chosen = partition
            batch = self._batch_for(topic, chosen, size, num_partitions, sticky)
            limit = min(batch_size - batch.size, self.buffer_memory - acc.used_bytes)
            if sticky and self._builtin is not None:  # stop where send() would move on
                header = BATCH_OVERHEAD if not batch.values else 0
                limit = min(limit, self._builtin.sticky_bytes_left(topic) - header)
            stop = start + max(1, columns.fit(start, limit))
            before = batch.size
            handles._add(batch, acc.extend(batch, columns, start, stop), stop - start)
            if sticky:
                self._appended(topic, batch, before, num_partitions)
            start = stop
            if batch.size >= batch_size:
                self.sender.wake()
                if start < count:
                    await trio.lowlevel.checkpoint()

    async def _wait_for_topic(self, topic: str) -> list[int]:
        try:
            partitions = await self.metadata.partitions_or_error(topic, self.max_block_ms / 1000)
        except TributaryError:  # UnknownTopicError, TOPIC_AUTHORIZATION_FAILED
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
        self.sender.wake()  # everything becomes sendable while someone waits for memory
        try:
            with trio.move_on_after(self.max_block_ms / 1000):
                while acc.used_bytes + size > self.buffer_memory:
                    await self.sender.memory_freed.wait()
                self._check_open()  # closed while we waited
                return
        finally:
            acc.memory_waiters -= 1
        raise ProducerTimeoutError(
            f"failed to allocate {size} bytes of buffer memory within {self.max_block_ms:g} ms"
        )


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
    connector = with_security(connector, config)  # security_protocol, ssl_*, sasl_*
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
