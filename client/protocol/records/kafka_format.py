"""Kafka's record format: the varint records inside a v2 batch, and conversion to it.

How it works: a Kafka-format batch (attributes bit 7 clear; see the package docstring
for the two payload formats) carries Kafka's records section after the 61-byte header
(`header.py`): per record a varint length, an int8 attributes, a varlong timestamp
delta, a varint offset delta, key and value (varint length, -1 for null), then
varint-counted headers (UTF-8 name, nullable bytes value), compressed as a whole by the
codec in attributes bits 0-2 (`compression.py`, the same codecs as for Tributary's
format). `batches.py` calls in here for Kafka-format batches:

- `decode_kafka_records` / `kafka_entries` read it, with aiokafka's record reader
  (`aiokafka.record.default_records`, a Cython extension);
- `encode_kafka_payload` writes it, with aiokafka's record builder;
- `to_kafka_format(buf)` serves Kafka clients: Kafka-format batches are passed through
  verbatim (their CRC is the producer's), Tributary-format ones re-encoded with the same
  header fields (bit 7 cleared) and a fresh CRC;
- `build_kafka_batch` makes the batch a Kafka client would send (tests, benchmarks).

Why aiokafka's codec, measured (one core; 100,000 records of 100-byte values, 12-byte
keys, 500 a batch, codec none; records/s into `DecodedRecord`, best of 5): kafka-python's
`DefaultRecordBatch` (pure Python) 0.31 M; a hand-written pure-Python decoder (one tight
loop, one- and two-byte varints inlined; a prototype, not kept) 0.78 M; aiokafka's Cython
`DefaultRecordBatch`, as used here (copy, padding, tuples) 2.95 M, three times our own
msgpack format's 0.97 M. Encoding (builder appends alone): kafka-python 0.62 M records/s,
aiokafka 5.3 M. The consumer, the Spark job and the broker's conversion for Kafka
consumers all run through here, so the C codec wins; it is maintained (aio-libs), and
with no C extension aiokafka falls back to a pure-Python twin of the same classes (tested
too). aiokafka is an asyncio client: importing its record module imports asyncio (nothing
runs on it), so it is imported on first use only; a process that never meets a Kafka-
format batch never loads it.

Two details of aiokafka's reader: its varint reads check bounds before a varint but not
inside one, so the reader always gets a fresh buffer with 16 zero bytes after the end it
is told (a zero byte ends a varint: an overrun stops in our padding, then fails its next
bounds check); and any exception it raises on damaged bytes becomes an
`InvalidRecordError`. Its builder counts timestamps from the first record appended, so
a converted or filtered batch's base timestamp is its first record's (as Kafka writes
it); record timestamps are kept exactly. Null header values stay None; header names must
be UTF-8 (as Kafka's Java client writes them), else the batch is an `InvalidRecordError`.

Conversion cost (`make bench BENCH_ARGS=kafka_records`, the same records, in records/s
and MB/s of input): Tributary -> Kafka 2.1 M / 260 MB/s uncompressed, 1.6 M / 34 MB/s
with lz4, 1.1 M / 13 MB/s with zstd (decompress, msgpack, encode, compress again); a
Kafka-format batch costs only a header read (and a fetch of `bytes` with nothing to
convert comes back as the same object).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

from client.protocol.records.compression import COMPRESS, decompress, known_codec, xerial_compress
from client.protocol.records.header import (
    ATTR_CONTROL,
    ATTR_MSGPACK_PAYLOAD,
    ATTR_TRANSACTIONAL,
    BATCH_OVERHEAD,
    CODEC_MASK,
    INT16,
    INT32,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    Codec,
    TimestampType,
    pack_batch,
    validate_batch,
)
from client.protocol.records.native import msgpack_entries
from client.protocol.records.types import DecodedRecord, InvalidRecordError, Record, RecordError

__all__ = [
    "build_kafka_batch",
    "decode_kafka_records",
    "encode_kafka_payload",
    "kafka_entries",
    "to_kafka_format",
]

# Zero bytes after the records handed to aiokafka's reader (see the module docstring).
_PAD = bytes(16)
# The reader's header: codec bits cleared (we decompress) and timestamp type too (we
# apply LogAppendTime ourselves, and `kafka_entries` needs the records' own timestamps).
_READER_CLEARED_BITS = ~(CODEC_MASK | TIMESTAMP_TYPE_BIT) & 0xFF
_ATTRIBUTES_LOW_BYTE = 22  # attributes is a big-endian int16 at 21; bits 0-7 live here
_ATTRIBUTES_END = 23  # a partial batch this long shows its attributes (its format)
_BUILDER_CAPACITY = 1 << 62  # the builder's "batch full" limit: never reached


@functools.cache
def _aiokafka() -> tuple[Any, Any]:
    from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

    return DefaultRecordBatch, DefaultRecordBatchBuilder


# --------------------------------------------------------------------------- reading


def _reader(view: memoryview, header: BatchHeader) -> Any:
    """aiokafka's reader over the (decompressed) records of the Kafka-format batch."""
    payload = decompress(view, header)
    head = bytearray(view[:BATCH_OVERHEAD])
    head[_ATTRIBUTES_LOW_BYTE] &= _READER_CLEARED_BITS
    buf = b"".join((head, payload, _PAD))
    return _aiokafka()[0](memoryview(buf)[: len(buf) - len(_PAD)])


def _undecodable(header: BatchHeader, exc: Exception) -> InvalidRecordError:
    return InvalidRecordError(f"malformed records in batch at offset {header.base_offset}: {exc}")


def decode_kafka_records(view: memoryview, header: BatchHeader) -> list[DecodedRecord]:
    """The records of the Kafka-format batch in `view` (the whole batch, `header` its
    header); `batches.decode_records` calls this for Kafka-format batches."""
    new = tuple.__new__
    record = DecodedRecord
    try:
        reader = _reader(view, header)
        if header.attributes & TIMESTAMP_TYPE_BIT:
            ts = header.max_timestamp
            return [new(record, (r.offset, ts, r.key, r.value, tuple(r.headers))) for r in reader]
        return [
            new(
                record,
                (
                    r.offset,
                    NO_TIMESTAMP if (ts := r.timestamp) is None else ts,
                    r.key,
                    r.value,
                    tuple(r.headers),
                ),
            )
            for r in reader
        ]
    except RecordError:
        raise
    except Exception as exc:  # whatever the reader raises on damaged bytes
        raise _undecodable(header, exc) from exc


def kafka_entries(view: memoryview, header: BatchHeader) -> list[tuple]:
    """`(offset_delta, timestamp_delta, key, value, headers)` of each record of the
    Kafka-format batch in `view`, timestamps the records' own (even with LogAppendTime)."""
    base = header.base_offset
    base_timestamp = header.base_timestamp
    try:
        return [
            (
                r.offset - base,
                (NO_TIMESTAMP if (ts := r.timestamp) is None else ts) - base_timestamp,
                r.key,
                r.value,
                r.headers,
            )
            for r in _reader(view, header)
        ]
    except RecordError:
        raise
    except Exception as exc:
        raise _undecodable(header, exc) from exc


# --------------------------------------------------------------------------- writing


# What aiokafka's builder raises for a value it cannot write (a str key, an int header...).
_ENCODE_ERRORS = (TypeError, ValueError, OverflowError, AttributeError, UnicodeError, IndexError)


def encode_kafka_payload(entries: Sequence[Sequence], codec: int) -> tuple[bytes, int]:
    """Kafka's records section for `entries` (`(offset_delta, timestamp_delta, key, value,
    headers)` each, headers as `(name, value)` pairs), compressed with `codec`; and the
    first record's timestamp delta, which the timestamps are now counted from: the batch's
    base timestamp moves by it.

    Keys, values and header values must be bytes or None, header names str; a text key or
    value (which msgpack hands back as str) is written as its UTF-8 bytes. Anything else
    is an `InvalidRecordError`.
    """
    compress = COMPRESS[known_codec(codec)]
    if not entries:
        return compress(b""), 0
    try:
        first = entries[0][1]
        section = _build(entries, first, normalise=False)
    except _ENCODE_ERRORS:
        try:  # once more, the slow way: text as UTF-8, bytearrays as bytes
            first = int(entries[0][1])
            section = _build(entries, first, normalise=True)
        except _ENCODE_ERRORS as exc:
            raise InvalidRecordError(f"record not encodable in Kafka's format: {exc}") from exc
    return compress(section), first


def _build(entries: Sequence[Sequence], first: int, *, normalise: bool) -> memoryview:
    """The uncompressed records section, written by aiokafka's builder."""
    builder = _aiokafka()[1](
        2, 0, 0, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE, _BUILDER_CAPACITY
    )
    append = builder.append
    if normalise:
        for offset_delta, timestamp_delta, key, value, headers in entries:
            append(
                int(offset_delta),
                int(timestamp_delta) - first,
                _as_bytes(key),
                _as_bytes(value),
                [(_as_str(name), _as_bytes(data)) for name, data in headers or ()],
            )
    else:
        for offset_delta, timestamp_delta, key, value, headers in entries:
            append(
                offset_delta,
                timestamp_delta - first,
                key,
                value,
                [(name, data) for name, data in headers] if headers else [],
            )
    return memoryview(builder.build())[BATCH_OVERHEAD:]


def _as_bytes(value: Any) -> bytes | None:
    if value is None or type(value) is bytes:
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"{type(value).__name__} where bytes belong")


def _as_str(name: Any) -> str:
    if isinstance(name, str):
        return name
    if isinstance(name, bytes | bytearray | memoryview):
        return bytes(name).decode("utf-8", "replace")
    raise TypeError(f"{type(name).__name__} as a header name")


def build_kafka_batch(
    records: Iterable[Record],
    *,
    codec: Codec = Codec.NONE,
    base_offset: int = 0,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    transactional: bool = False,
    control: bool = False,
    xerial_snappy: bool = False,
) -> bytes:
    """One Kafka-format batch of `records`, as a Kafka producer sends it (offset deltas
    0, 1, 2, ...; snappy raw as librdkafka writes it, or with `xerial_snappy` framed as
    the Java client does). `transactional`/`control` set those attribute bits (for tests
    of the broker refusing them)."""
    records = list(records)
    if not records:
        raise ValueError("a record batch needs at least one record")
    codec_id = known_codec(codec)
    base_timestamp = records[0].timestamp_ms
    entries = [
        (delta, r.timestamp_ms - base_timestamp, r.key, r.value, r.headers)
        for delta, r in enumerate(records)
    ]
    if codec_id == Codec.SNAPPY and xerial_snappy:
        section, _ = encode_kafka_payload(entries, Codec.NONE)
        payload = xerial_compress(section)
    else:
        payload, _ = encode_kafka_payload(entries, codec_id)
    attributes = codec_id | (TIMESTAMP_TYPE_BIT if timestamp_type else 0)
    attributes |= (ATTR_TRANSACTIONAL if transactional else 0) | (ATTR_CONTROL if control else 0)
    return pack_batch(
        payload,
        base_offset=base_offset,
        leader_epoch=leader_epoch,
        attributes=attributes,
        last_offset_delta=len(records) - 1,
        base_timestamp=base_timestamp,
        max_timestamp=max(r.timestamp_ms for r in records),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=len(records),
    )


# --------------------------------------------------------------------------- conversion


def _converted(view: memoryview, header: BatchHeader) -> bytes:
    """The Tributary-format batch in `view` (CRC checked) re-encoded in Kafka's format."""
    entries = msgpack_entries(view, header)
    payload, first_delta = encode_kafka_payload(entries, header.attributes & CODEC_MASK)
    return pack_batch(
        payload,
        base_offset=header.base_offset,
        leader_epoch=header.partition_leader_epoch,
        attributes=header.attributes & ~ATTR_MSGPACK_PAYLOAD,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=header.base_timestamp + first_delta,
        max_timestamp=header.max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records_count=len(entries),
    )


def to_kafka_format(buf: bytes | bytearray | memoryview) -> bytes:
    """The batches in `buf` (a fetch's records: whole batches, maybe a partial last one)
    as a Kafka client reads them.

    Kafka-format batches are copied verbatim, Tributary-format ones re-encoded (same base
    offset, leader epoch, offset span, max timestamp, producer fields, codec and
    timestamp type; bit 7 cleared; a fresh CRC, after checking the old one so damage is
    not laundered). A partial trailing Kafka-format batch is kept, as Kafka's own fetch
    returns one (clients skip it), and so is a tail too short to show its attributes; a
    partial Tributary-format one is dropped, and so is the rest of `buf` after a
    Tributary-format batch whose length cannot be trusted.
    `buf` itself comes back (no copy) when it is `bytes` and needs no conversion.

    Raises `RecordError` for a whole Tributary-format batch that is damaged or undecodable.
    """
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    end = len(view)
    out: list[bytes | memoryview] = []
    run = 0  # start of the current stretch of bytes copied verbatim
    pos = 0
    while pos < end:
        if end - pos < _ATTRIBUTES_END:
            break  # too short to tell the format: a partial batch, copied with the run
        attributes = INT16.unpack_from(view, pos + 21)[0]
        size = LOG_OVERHEAD + INT32.unpack_from(view, pos + 8)[0]
        if not attributes & ATTR_MSGPACK_PAYLOAD:
            if size < BATCH_OVERHEAD:
                break  # a length Kafka-format bytes cannot have: the rest verbatim
            pos += size
            continue
        if run < pos:
            out.append(view[run:pos])
        if size < BATCH_OVERHEAD or size > end - pos:
            run = end  # partial (or impossible) Tributary-format batch: dropped
            break
        header = validate_batch(view, pos, strict=False)
        out.append(_converted(view[pos : pos + size], header))
        pos += size
        run = pos
    if run == 0 and isinstance(buf, bytes):
        return buf
    if run < end:
        out.append(view[run:end])
    return b"".join(out)
