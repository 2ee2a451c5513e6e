"""Records as the producer takes them in: converted to bytes, sized, and (for
`Producer.send_many`) held as columns.

How it works (sans-IO, no clock): the producer counts a record's size for `batch_size`
and `buffer_memory` as `RECORD_OVERHEAD` plus its key, its value and, per header, name +
value + 4 bytes (`record_size`). `send()` converts and sizes one record with `to_bytes`
and `header_list`. `RecordColumns.prepare` does the same for all the records handed to
one `send_many()` at once: the values, keys, timestamps and headers become lists (copies,
so the caller may reuse its own), `cumulative[i]` is the size of records `[0, i)` less
their `RECORD_OVERHEAD`s, and `largest` the size of the largest. How many records from
`start` fit in `limit` bytes is then a bisection (`fit`), and `copy_into` extends a
batch's columns with slices. When the values are all `bytes` and no keys or headers are
given, no Python code runs per record: types are checked with `set(map(type, ...))`,
lengths summed with `map`/`accumulate`, runs copied with slices.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate, repeat
from operator import add
from typing import Protocol, cast

# Estimated bytes a record costs in a batch beyond its key, value and headers (msgpack
# array, offset and timestamp deltas): used for batch_size and buffer_memory accounting.
RECORD_OVERHEAD = 16
# Estimated bytes of one header beyond its name and value.
HEADER_OVERHEAD = 4

Headers = Sequence[tuple[str, bytes]]
NO_HEADERS: Headers = ()


def to_bytes(data: bytes | bytearray | memoryview | str | None) -> bytes | None:
    """A key or value as bytes (str as UTF-8); TypeError for anything else."""
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode()
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"expected bytes, str or None, got {type(data).__name__}")


def header_list(headers: Sequence[tuple[str, bytes | str]]) -> tuple[Headers, int]:
    """Headers as `(name, bytes)` pairs (a None value becomes b""), and their size."""
    if not headers:
        return NO_HEADERS, 0
    pairs = [(str(name), to_bytes(data) or b"") for name, data in headers]
    return pairs, sum(len(name) + len(data) + HEADER_OVERHEAD for name, data in pairs)


def record_size(key: bytes | None, value: bytes | None, headers_size: int = 0) -> int:
    """The estimated size of one record (see the module docstring)."""
    size = RECORD_OVERHEAD + headers_size
    if key:
        size += len(key)
    if value:
        size += len(value)
    return size


class _Batch(Protocol):  # what copy_into fills: client.producer.batch.ProducerBatch
    keys: list[bytes | None]
    values: list[bytes | None]
    timestamps: list[int]
    headers: list[Headers]


class RecordColumns:
    """The records of one `send_many()` call (record i: `keys[i]`, `values[i]`,
    `timestamps[i]`, `headers[i]`; a column that is None holds no key, no headers, or one
    timestamp for all, `timestamp`)."""

    __slots__ = ("values", "keys", "headers", "timestamps", "timestamp", "cumulative", "largest")

    def __init__(
        self,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None,
        headers: list[Headers] | None,
        timestamps: list[int] | None,
        timestamp: int,
        lengths: list[int],
    ) -> None:
        """`lengths[i]`: record i's size without `RECORD_OVERHEAD`."""
        self.values = values
        self.keys = keys
        self.headers = headers
        self.timestamps = timestamps
        self.timestamp = timestamp
        self.cumulative = list(accumulate(lengths, initial=0))  # without RECORD_OVERHEAD
        self.largest = RECORD_OVERHEAD + max(lengths, default=0)  # the largest record's size

    @classmethod
    def prepare(
        cls,
        values: Sequence[bytes | str | None],
        keys: Sequence[bytes | str | None] | None,
        headers: Sequence[Sequence[tuple[str, bytes | str]]] | None,
        timestamp_ms: int | Sequence[int],
    ) -> RecordColumns:
        """Convert and size the records; ValueError if a column's length differs from the
        values', TypeError for a key or value that is not bytes, str or None."""
        value_list, lengths = _bytes_column(values)
        count = len(value_list)
        key_list: Sequence[bytes | None] | None = None
        if keys is not None:
            key_list, key_lengths = _bytes_column(_same_length(keys, count, "keys"))
            if any(key is not None for key in key_list):
                lengths = list(map(add, lengths, key_lengths))
            else:
                key_list = None
        header_lists = None
        if headers is not None:
            converted = [header_list(h) for h in _same_length(headers, count, "headers")]
            if any(size for _, size in converted):
                header_lists = [pairs for pairs, _ in converted]
                lengths = list(map(add, lengths, (size for _, size in converted)))
        timestamps = None
        timestamp = 0
        if isinstance(timestamp_ms, int):
            timestamp = timestamp_ms
        else:
            timestamps = _same_length(timestamp_ms, count, "timestamps")
        return cls(value_list, key_list, header_lists, timestamps, timestamp, lengths)

    def __len__(self) -> int:
        return len(self.values)

    def size(self, start: int, stop: int) -> int:
        """The estimated size of records `[start, stop)`."""
        return self.cumulative[stop] - self.cumulative[start] + RECORD_OVERHEAD * (stop - start)

    def fit(self, start: int, limit: int) -> int:
        """How many records from `start` on fit in `limit` bytes together (a bisection:
        their size grows with every record added)."""
        cumulative = self.cumulative
        first = cumulative[start]
        low, high = start, min(len(cumulative) - 1, start + max(limit, 0) // RECORD_OVERHEAD)
        while low < high:  # invariant: records [start, low) fit, [start, high + 1) do not
            middle = (low + high + 1) // 2
            if cumulative[middle] - first + RECORD_OVERHEAD * (middle - start) <= limit:
                low = middle
            else:
                high = middle - 1
        return low - start

    def record(self, i: int) -> tuple[bytes | None, bytes | None, int, Headers]:
        """Record i as (key, value, timestamp, headers)."""
        return (
            None if self.keys is None else self.keys[i],
            self.values[i],
            self.timestamp if self.timestamps is None else self.timestamps[i],
            NO_HEADERS if self.headers is None else self.headers[i],
        )

    def copy_into(self, batch: _Batch, start: int, stop: int) -> None:
        """Append records `[start, stop)` to `batch`'s columns."""
        count = stop - start
        batch.values += self.values[start:stop]
        batch.keys += repeat(None, count) if self.keys is None else self.keys[start:stop]
        if self.timestamps is None:
            batch.timestamps += repeat(self.timestamp, count)
        else:
            batch.timestamps += self.timestamps[start:stop]
        batch.headers += (
            repeat(NO_HEADERS, count) if self.headers is None else self.headers[start:stop]
        )


def _bytes_column(
    items: Sequence[bytes | str | None],
) -> tuple[Sequence[bytes | None], list[int]]:
    """`items` as a new list of bytes or None, and their lengths (0 for None); without a
    Python loop when all are bytes."""
    out = list(items)
    if set(map(type, out)) <= {bytes}:
        column = cast("list[bytes]", out)  # what the set of the items' types just said
        return column, list(map(len, column))
    converted = [to_bytes(item) for item in out]
    return converted, [len(item) if item is not None else 0 for item in converted]


def _same_length(column: Sequence, count: int, name: str) -> list:
    out = list(column)
    if len(out) != count:
        raise ValueError(f"send_many: {len(out)} {name} for {count} values")
    return out
