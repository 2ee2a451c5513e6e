"""The values the record format hands in and out, and its errors.

How it works: plain `NamedTuple`s, built in C by the decoders (`tuple.__new__`, no
`__init__` per record): `Record` is what a producer hands in, `DecodedRecord` what a
reader gets back (with its absolute offset), `RecordColumns` the records of one batch as
columns (the consumer's fast path). Every module of the package raises `RecordError`s
(a `ValueError`): `CorruptRecordError` when bytes are damaged (bad CRC, torn or short
data, impossible length), `InvalidRecordError` when bytes are intact but not acceptable
(wrong magic, unknown codec, transactions, inconsistent counts, an undecodable payload).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple


class RecordError(ValueError):
    """Base of every record-format error."""


class CorruptRecordError(RecordError):
    """The bytes are damaged: bad CRC, short or torn data, an impossible length."""


class InvalidRecordError(RecordError):
    """The bytes are intact but not acceptable: magic, codec, counts, payload."""


class Record(NamedTuple):
    """One record as a producer hands it in."""

    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: Sequence[tuple[str, bytes | None]] = ()


class DecodedRecord(NamedTuple):
    """One record as a reader gets it back, with its absolute offset."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]  # a Kafka header's value may be null


class RecordColumns(NamedTuple):
    """The records of a batch as columns: the i-th record is
    `(offsets[i], timestamps[i], keys[i], values[i], headers[i])`."""

    offsets: Sequence[int]
    timestamps: Sequence[int]
    keys: Sequence[bytes | None]
    values: Sequence[bytes | None]
    headers: Sequence[tuple[tuple[str, bytes | None], ...]]
