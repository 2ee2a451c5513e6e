"""Tributary's record format: a msgpack array of records after the v2 header.

How it works: a Tributary-format batch has attributes bit 7 set (`ATTR_MSGPACK_PAYLOAD`)
and carries, compressed as a whole by its codec (`compression.py`), one msgpack array of
`[offset_delta, timestamp_delta, key, value, headers]` records (headers as `[name,
value]` pairs). It is what Tributary's producer writes; Kafka clients send Kafka's
varint records instead (`kafka_format.py`), and `batches.py` reads either.

- writing: `build_batch`, or `build_column_batch` for records held as columns (the
  producer; the same bytes): the entries are tuples zipped from the columns, packed by
  ormsgpack (Rust) in one call, so no Python code runs per record; `encode_msgpack_payload`
  packs entries that a reader handed out (the log cleaner's kept records);
- reading: `msgpack_entries` / `msgpack_entry_tuples` unpack a batch's entries in one
  `msgpack` call; `decode_msgpack_records` makes `DecodedRecord`s of them and
  `msgpack_columns` transposes them into `RecordColumns` in C (one `map` per column, no
  object per record): the consumer's fast decoder.

Why msgpack: it is what Tributary always wrote (measured in `kafka_format.py`: with
aiokafka's C codec Kafka's format now decodes faster, so the producer could switch to it
one day). The marker bit is on this format because Kafka clients never see it
(`kafka_format.to_kafka_format` converts it for them, clearing the bit) and Kafka uses
bits 0-6 itself (codec 0-2, timestamp type 3, transactional 4, control 5, delete horizon 6).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from itertools import repeat
from typing import overload

import msgpack

from client.protocol.records.compression import COMPRESS, decompress, known_codec
from client.protocol.records.header import (
    ATTR_MSGPACK_PAYLOAD,
    ATTR_TRANSACTIONAL,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    Codec,
    TimestampType,
    pack_batch,
)
from client.protocol.records.types import (
    DecodedRecord,
    InvalidRecordError,
    Record,
    RecordColumns,
)

# ormsgpack is imported where first used (see compression.py: a broker never builds).

# --------------------------------------------------------------------------- writing


def build_batch(
    records: Iterable[Record],
    *,
    base_offset: int = 0,
    codec: Codec = Codec.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    transactional: bool = False,
) -> bytes:
    """Encode `records` as one Tributary-format batch (offset deltas 0, 1, 2, ...);
    `transactional` sets the attributes' transactional bit (a transaction's batch).

    Raises `ValueError` for an empty batch and `InvalidRecordError` for an unknown codec.
    """
    records = list(records)
    if not records:
        raise ValueError("a record batch needs at least one record")
    keys, values, timestamps, headers = zip(*records, strict=True)
    return build_column_batch(
        keys,
        values,
        timestamps,
        headers,
        base_offset=base_offset,
        codec=codec,
        timestamp_type=timestamp_type,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        leader_epoch=leader_epoch,
        transactional=transactional,
    )


def build_column_batch(
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    timestamps: Sequence[int],
    headers: Sequence[Sequence[tuple[str, bytes | None]]],
    *,
    base_offset: int = 0,
    codec: Codec = Codec.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    transactional: bool = False,
) -> bytes:
    """`build_batch` for records held as columns (record i is `keys[i]`, `values[i]`,
    `timestamps[i]`, `headers[i]`, a sequence of `(name, value)` pairs): the same bytes,
    without a `Record` per record. The producer keeps its batches this way.

    Each record's entry is a tuple zipped from the columns (msgpack writes tuples as the
    arrays a reader expects), so no Python code runs per record; ormsgpack (Rust) packs
    them into the same bytes as `msgpack.packb(..., use_bin_type=True)`, about four times
    faster (tests/unit/test_record_encoding.py checks the bytes are the same).
    """
    count = len(values)
    if not count:
        raise ValueError("a record batch needs at least one record")
    if not len(keys) == len(timestamps) == len(headers) == count:
        raise ValueError("every column of a record batch needs one entry per record")
    codec_id = known_codec(codec)
    base_timestamp = timestamps[0]
    max_timestamp = max(timestamps)
    if max_timestamp == base_timestamp == min(timestamps):
        deltas: Iterable[int] = repeat(0, count)
    else:
        deltas = [timestamp - base_timestamp for timestamp in timestamps]
    entries = list(zip(range(count), deltas, keys, values, headers, strict=True))
    return pack_batch(
        COMPRESS[codec_id](_pack_entries(entries)),
        base_offset=base_offset,
        leader_epoch=leader_epoch,
        attributes=ATTR_MSGPACK_PAYLOAD
        | codec_id
        | (TIMESTAMP_TYPE_BIT if timestamp_type else 0)
        | (ATTR_TRANSACTIONAL if transactional else 0),
        last_offset_delta=count - 1,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=count,
    )


def _pack_entries(entries: list[tuple]) -> bytes:
    """The msgpack array of a batch's record entries; `InvalidRecordError` for a value
    msgpack cannot hold (an integer beyond 64 bits, say)."""
    import ormsgpack

    try:
        return ormsgpack.packb(entries)
    except TypeError as exc:  # ormsgpack.MsgpackEncodeError
        raise InvalidRecordError(f"a record cannot be encoded: {exc}") from exc


def encode_msgpack_payload(entries: Sequence[Sequence], codec: int) -> bytes:
    """The records section of a Tributary-format batch holding `entries` (as
    `msgpack_entries` hands them out), compressed with `codec`."""
    return COMPRESS[codec](msgpack.packb(entries, use_bin_type=True))


# --------------------------------------------------------------------------- reading


def msgpack_entries(view: memoryview, header: BatchHeader) -> list:
    """A Tributary-format batch's entries `[offset_delta, timestamp_delta, key, value,
    headers]` (headers as `[name, value]` lists)."""
    return _unpack_entries(view, header, list)


def msgpack_entry_tuples(view: memoryview, header: BatchHeader) -> tuple:
    """`msgpack_entries` as tuples, headers as `((name, value), ...)`: for readers that only
    read them. Faster: small tuples come from CPython's free lists, so unpacking a batch
    neither allocates them afresh nor sets off garbage collections, as lists do."""
    return _unpack_entries(view, header, tuple)


@overload
def _unpack_entries(view: memoryview, header: BatchHeader, kind: type[list]) -> list: ...
@overload
def _unpack_entries(view: memoryview, header: BatchHeader, kind: type[tuple]) -> tuple: ...
def _unpack_entries(
    view: memoryview, header: BatchHeader, kind: type[list] | type[tuple]
) -> list | tuple:
    payload = decompress(view, header)
    try:
        entries = msgpack.unpackb(payload, raw=False, use_list=kind is list)
    except Exception as exc:  # msgpack raises several types
        raise InvalidRecordError(
            f"undecodable payload in batch at offset {header.base_offset}: {exc}"
        ) from exc
    if not isinstance(entries, kind) or len(entries) != header.records_count:
        raise InvalidRecordError(
            f"batch at offset {header.base_offset} says {header.records_count} records, "
            f"payload holds {len(entries) if isinstance(entries, kind) else 'no array'}"
        )
    return entries


_FIELD = [operator.itemgetter(i) for i in range(5)]  # an entry's fields, by position


def msgpack_columns(batch: memoryview, header: BatchHeader) -> RecordColumns:
    """The records of the Tributary-format batch in `batch` as columns (see
    `batches.decode_columns`): transposed in C, one `msgpack` call, then a `map` per
    column."""
    entries = msgpack_entry_tuples(batch, header)
    count = len(entries)
    base_offset = header.base_offset
    try:
        if list(map(len, entries)).count(5) != count:
            raise ValueError("a record is not [offset_delta, timestamp_delta, key, value, headers]")
        offsets = list(map(operator.add, repeat(base_offset, count), map(_FIELD[0], entries)))
        if header.attributes & TIMESTAMP_TYPE_BIT:  # LogAppendTime: the batch's time
            timestamps = [header.max_timestamp] * count
        else:
            timestamps = list(
                map(operator.add, repeat(header.base_timestamp, count), map(_FIELD[1], entries))
            )
        headers = list(map(_FIELD[4], entries))
        if headers.count(()) != count:  # as decode_records has them: (name, value) pairs
            headers = [tuple((name, data) for name, data in h) for h in headers]
    except (TypeError, ValueError, KeyError) as exc:
        raise InvalidRecordError(
            f"malformed record in batch at offset {base_offset}: {exc}"
        ) from exc
    keys = list(map(_FIELD[2], entries))
    values = list(map(_FIELD[3], entries))
    return RecordColumns(offsets, timestamps, keys, values, headers)


def decode_msgpack_records(view: memoryview, header: BatchHeader) -> list[DecodedRecord]:
    """The records of the Tributary-format batch in `view` (see `batches.decode_records`);
    with LogAppendTime every record carries the batch's max timestamp, as in Kafka."""
    entries = msgpack_entries(view, header)
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    append_time = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_BIT else None
    out = []
    try:
        for offset_delta, timestamp_delta, key, value, headers in entries:
            out.append(
                DecodedRecord(
                    base_offset + offset_delta,
                    append_time if append_time is not None else base_timestamp + timestamp_delta,
                    key,
                    value,
                    tuple((name, data) for name, data in headers),
                )
            )
    except (TypeError, ValueError) as exc:
        raise InvalidRecordError(
            f"malformed record in batch at offset {header.base_offset}: {exc}"
        ) from exc
    return out
