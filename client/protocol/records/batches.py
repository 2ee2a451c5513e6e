"""Reading and rewriting whole batches of either payload format.

How it works: a batch's attributes bit 7 (`ATTR_MSGPACK_PAYLOAD`, see `header.py`) tells
its payload format: Tributary's msgpack records (`native.py`) or Kafka's varint records
(`kafka_format.py`). Every function here reads the header once and hands the batch to
that format's decoder, so Tributary's consumer, CLI, Spark job, replica audit and log
cleaner read both formats:

- `decode_records` / `decode_batches`: `DecodedRecord`s (with LogAppendTime every record
  carries the batch's max timestamp, as in Kafka);
- `decode_columns`: the same records as `RecordColumns` (the consumer's decoder);
- `record_entries`: `(offset_delta, timestamp_delta, key, value, headers)` per record,
  timestamps the records' own (the Spark job's reader);
- `record_keys` (offsets and keys, for the log cleaner's offset map) and `filter_batch`,
  which rewrites a batch keeping only some records, in the format it was given: the
  batch keeps its base offset and offset span, so it may hold fewer records than
  offsets (gaps).

None of them checks the CRC: validate first (`header.validate_batch`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from client.protocol.records.header import (
    ATTR_MSGPACK_PAYLOAD,
    CODEC_MASK,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    iter_batches,
    pack_batch,
    read_header,
)
from client.protocol.records.kafka_format import (
    decode_kafka_records,
    encode_kafka_payload,
    kafka_entries,
)
from client.protocol.records.native import (
    decode_msgpack_records,
    encode_msgpack_payload,
    msgpack_columns,
    msgpack_entries,
)
from client.protocol.records.types import (
    DecodedRecord,
    InvalidRecordError,
    RecordColumns,
)

_NO_COLUMNS = RecordColumns((), (), (), (), ())


def decode_columns(batch: memoryview, header: BatchHeader) -> RecordColumns:
    """The records of the single batch in `batch` (`header` its header), either format,
    as columns: the same records `decode_records` gives (not CRC-checked: validate first),
    without an object per record. A Tributary-format batch is transposed in C
    (`native.msgpack_columns`), which makes this the consumer's fast decoder."""
    if header.attributes & ATTR_MSGPACK_PAYLOAD:
        return msgpack_columns(batch, header)
    records = decode_kafka_records(batch, header)
    return RecordColumns(*zip(*records, strict=True)) if records else _NO_COLUMNS


def record_entries(view: memoryview, header: BatchHeader) -> Sequence[Sequence]:
    """`(offset_delta, timestamp_delta, key, value, headers)` of each record, either format;
    the timestamp deltas are the records' own even under LogAppendTime."""
    if header.attributes & ATTR_MSGPACK_PAYLOAD:
        return msgpack_entries(view, header)
    return kafka_entries(view, header)


def decode_records(batch: bytes | bytearray | memoryview) -> list[DecodedRecord]:
    """The records of the single batch `batch`, either format (not CRC-checked: validate
    first).

    With LogAppendTime every record carries the batch's max timestamp, as in Kafka.
    """
    view = batch if isinstance(batch, memoryview) else memoryview(batch)
    header = read_header(view)
    if header.attributes & ATTR_MSGPACK_PAYLOAD:
        return decode_msgpack_records(view, header)
    return decode_kafka_records(view, header)


def decode_batches(buf: bytes | bytearray | memoryview) -> list[DecodedRecord]:
    """The records of every batch in `buf`, in order, either format (no CRC check)."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    out: list[DecodedRecord] = []
    for pos, header in iter_batches(view):
        out.extend(decode_records(view[pos : pos + header.size]))
    return out


# --------------------------------------------------------------------------- compaction


def record_keys(batch: bytes | bytearray | memoryview) -> list[tuple[int, bytes | None]]:
    """(offset, key) of every record of the single batch `batch`, either format (not
    CRC-checked)."""
    view = batch if isinstance(batch, memoryview) else memoryview(batch)
    header = read_header(view)
    base = header.base_offset
    try:
        return [(base + entry[0], entry[2]) for entry in record_entries(view, header)]
    except (TypeError, IndexError) as exc:
        raise InvalidRecordError(f"malformed record in batch at offset {base}: {exc}") from exc


def filter_batch(
    batch: bytes | bytearray | memoryview,
    keep: Callable[[int, bytes | None, bytes | None], bool],
    *,
    keep_empty: bool = False,
) -> bytes | bytearray | memoryview | None:
    """The single batch `batch` with only the records for which `keep(offset, key, value)`.

    Returns `batch` itself when every record is kept, and None when none is (unless
    `keep_empty`: then a batch with no records). Otherwise a new batch as Kafka's cleaner
    writes one, in the input's payload format: the same base offset, offset span
    (`last_offset_delta`), leader epoch, producer fields, codec and timestamp type, holding
    fewer records than offsets; its max timestamp is that of the records kept (the
    header's, for LogAppendTime or when empty). Records keep their offsets and timestamps.
    A Kafka-format batch's base timestamp becomes that of its first record kept, as
    Kafka's record builder writes it; a Tributary-format batch keeps its own.
    """
    view = batch if isinstance(batch, memoryview) else memoryview(batch)
    header = read_header(view)
    base = header.base_offset
    entries = record_entries(view, header)
    base_timestamp = header.base_timestamp
    max_timestamp = header.max_timestamp
    try:
        kept = [entry for entry in entries if keep(base + entry[0], entry[2], entry[3])]
        if kept and not header.attributes & TIMESTAMP_TYPE_BIT:
            max_timestamp = base_timestamp + max(entry[1] for entry in kept)
    except (TypeError, IndexError) as exc:
        raise InvalidRecordError(f"malformed record in batch at offset {base}: {exc}") from exc
    if len(kept) == len(entries):
        return batch
    if not kept and not keep_empty:
        return None
    codec = header.attributes & CODEC_MASK
    if header.attributes & ATTR_MSGPACK_PAYLOAD:
        payload = encode_msgpack_payload(kept, codec)
    else:
        payload, first_delta = encode_kafka_payload(kept, codec)
        base_timestamp += first_delta
    return pack_batch(
        payload,
        base_offset=base,
        leader_epoch=header.partition_leader_epoch,
        attributes=header.attributes,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=base_timestamp if kept else max_timestamp,
        max_timestamp=max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records_count=len(kept),
    )
