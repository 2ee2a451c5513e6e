"""Fetched records: decoded from a fetch answer's bytes into `ConsumerBatch` columns,
handed out as they are or as a `ConsumerRecord` per record.

How it works (sans-IO): `decode_fetched` walks one partition's record batches. Batches
come whole, so records below the position are skipped. With `check_crcs` (Kafka's
check.crcs, on by default) every batch at or above the position has its CRC-32C checked
before it is decoded: decoding stops before a damaged batch and returns the records
before it with a `CorruptBatchError` naming the topic, partition, offset range and
broker; damaged bytes are never decoded into records. Each batch is decoded and
transposed in C (`decode_columns`) and appended to a `ConsumerBatch`: consecutive
records of one partition as columns (offsets, timestamps, keys, values, headers, leader
epochs), with no Python object per record. The fetcher buffers them so,
`poll_batches()` hands them out as they are, and `poll()` builds a `ConsumerRecord` per
record from them (`records()`, in C: `map` over `zip`). While many objects are built at
once, cyclic garbage collection is paused (`gc_paused`).

Transactions (Kafka's Fetcher): control batches (COMMIT/ABORT markers) are skipped,
whatever the isolation level. A read_committed fetch comes with the aborted
transactions of its range (producer id, first offset): walking the batches in order, a
producer becomes "aborted" once a batch reaches its first offset; its transactional
batches are dropped until its ABORT marker, which ends that.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import compress, repeat
from typing import NamedTuple

from client.consumer.errors import CorruptBatchError
from client.protocol.records import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    CorruptRecordError,
    RecordColumns,
    decode_columns,
    iter_batches,
    read_control_marker,
    validate_batch,
)
from client.protocol.types import TopicPartition

READ_UNCOMMITTED = 0
READ_COMMITTED = 1
_ISOLATION_LEVELS = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}


def isolation_level_of(name: str) -> int:
    """Kafka's isolation.level name as the protocol's number; ValueError otherwise."""
    try:
        return _ISOLATION_LEVELS[name]
    except KeyError:
        raise ValueError(
            f"isolation_level must be read_uncommitted or read_committed, not {name!r}"
        ) from None


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
def gc_paused() -> Iterator[None]:
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
        with gc_paused():
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


def decode_fetched(
    tp: TopicPartition,
    data: bytes,
    position: int,
    *,
    check_crcs: bool = True,
    broker: int = -1,
    aborted: list[tuple[int, int]] | None = None,
) -> tuple[ConsumerBatch, int, CorruptBatchError | None]:
    """The records of one partition's fetched `data` at or above `position` (whole
    batches come back, so records below it are skipped), the offset after the last, and
    (with `check_crcs`) the error for the first damaged batch: decoding stops before it,
    so the offset returned is where that batch starts. Control batches are skipped;
    `aborted` (read_committed: the answer's aborted transactions) drops their records."""
    with gc_paused():
        return _decode_batches(tp, memoryview(data), position, check_crcs, broker, aborted)


def _decode_batches(
    tp: TopicPartition,
    view: memoryview,
    position: int,
    check_crcs: bool,
    broker: int,
    aborted: list[tuple[int, int]] | None,
) -> tuple[ConsumerBatch, int, CorruptBatchError | None]:
    out = ConsumerBatch(*tp)
    next_offset = position
    pending = sorted(aborted, key=lambda txn: txn[1], reverse=True) if aborted else []
    aborted_producers: set[int] = set()
    for pos, header in iter_batches(view):
        attributes = header.attributes
        if aborted is not None and header.producer_id >= 0:
            while pending and pending[-1][1] <= header.last_offset:
                aborted_producers.add(pending.pop()[0])
            if header.producer_id in aborted_producers:
                if attributes & ATTR_CONTROL:
                    if not _is_commit(view[pos : pos + header.size]):
                        aborted_producers.discard(header.producer_id)
                elif attributes & ATTR_TRANSACTIONAL:
                    next_offset = max(next_offset, header.next_offset)
                    continue
        if header.next_offset <= position or attributes & ATTR_CONTROL:
            next_offset = max(next_offset, header.next_offset)
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


def _is_commit(batch: memoryview) -> bool:
    try:
        return read_control_marker(batch)[0]
    except CorruptRecordError:
        return False
    except ValueError:  # not a marker Tributary knows: treated as not ending the abort
        return True


def _at_or_after(columns: RecordColumns, position: int) -> RecordColumns:
    """The records of `columns` at or after offset `position`."""
    offsets, timestamps, keys, values, headers = columns
    keep = [offset >= position for offset in offsets]
    return RecordColumns(
        list(compress(offsets, keep)),
        list(compress(timestamps, keep)),
        list(compress(keys, keep)),
        list(compress(values, keep)),
        list(compress(headers, keep)),
    )
