"""Kafka's v2 record batch header: its layout, attribute bits and CRC-32C.

How it works: a batch is a 61-byte big-endian header (the exact field layout of Kafka's
`DefaultRecordBatch`, magic 2) followed by the records payload; `BatchHeader` is every
field of it in wire order (read with one `struct` unpack, built without `__init__`).
The attributes say how the payload is compressed (bits 0-2, `Codec`, see
`compression.py`), the timestamp type (bit 3), transactional and control batches (bits
4 and 5) and, Tributary's own, bit 7 (`ATTR_MSGPACK_PAYLOAD`): the payload is Tributary's
msgpack records (`native.py`) rather than Kafka's varint records (`kafka_format.py`).
Nothing here reads a record: this module is what a broker needs on its produce path.

The CRC-32C covers the bytes from `attributes` to the end of the batch, so `base_offset`
and `partition_leader_epoch` (both before it) can be patched in place by the leader without
recomputing it: `assign_offsets` does exactly that, and only recomputes the CRC when
LogAppendTime rewrites the attributes and max timestamp; `stamped_header` is its
copy-free twin (the new header alone, written before the untouched body).

- `pack_batch` writes a header (fresh CRC) in front of a payload: both formats build
  their batches with it;
- `read_header` / `iter_batches` read headers trusting the lengths (no CRC check);
- `validate_batch` / `validate_batches` check length, magic, CRC and codec (and, on the
  produce path, the record count and a transactional batch's producer id and epoch);
- `assign_offsets` / `stamped_header` give validated batches their offsets and epoch.

Errors are the values of `types.py`: `CorruptRecordError` for damaged bytes,
`InvalidRecordError` for intact bytes that are not acceptable.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator
from typing import NamedTuple

import crc32c

from client.protocol.records.types import CorruptRecordError, InvalidRecordError

CURRENT_MAGIC = 2
# Kafka's "log overhead": base_offset (8) + batch_length (4); batch_length counts the rest.
LOG_OVERHEAD = 12
# The whole v2 header; a batch is never shorter than this.
BATCH_OVERHEAD = 61
NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

# Field positions inside the header (bytes from the start of the batch).
BATCH_LENGTH_POS = 8
_LEADER_EPOCH_POS = 12
_MAGIC_POS = 16
_CRC_POS = 17
ATTRIBUTES_POS = 21  # the CRC covers [ATTRIBUTES_POS, end of batch)
_MAX_TIMESTAMP_POS = 35

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
INT16 = struct.Struct(">h")
assert _HEADER.size == BATCH_OVERHEAD

CODEC_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
# Attribute bits Kafka defines (bit 6, the delete horizon, is only ever set by a cleaner).
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
# Tributary's own: the payload is msgpack (Tributary format), not Kafka's varint records.
ATTR_MSGPACK_PAYLOAD = 0x80


class Codec(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class BatchHeader(NamedTuple):
    """Every field of the v2 header, in wire order, plus derived values."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        """Bytes the whole batch takes, header included."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def codec(self) -> Codec:
        return Codec(self.attributes & CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes >> 3) & 1)

    @property
    def kafka_format(self) -> bool:
        """True when the payload is Kafka's varint records, False for Tributary's msgpack."""
        return not self.attributes & ATTR_MSGPACK_PAYLOAD


_new_header = tuple.__new__


# Every codec Kafka's v2 format defines; `compression.py` has one compressor and one
# decompressor for each.
SUPPORTED_CODECS = frozenset(int(codec) for codec in Codec)


def check_codec(attributes: int) -> None:
    """`InvalidRecordError` unless the codec bits of `attributes` name a known codec."""
    codec = attributes & CODEC_MASK
    if codec not in SUPPORTED_CODECS:
        raise InvalidRecordError(f"unknown compression codec {codec}")


# --------------------------------------------------------------------------- writing


def pack_batch(
    payload: bytes | bytearray | memoryview,
    *,
    base_offset: int,
    leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    records_count: int,
) -> bytes:
    """A whole batch: the v2 header with these fields and a fresh CRC, then `payload` (the
    records section, already compressed as `attributes` say). `InvalidRecordError` if a
    field does not fit its type (a timestamp beyond int64, say)."""
    try:
        header = bytearray(
            _HEADER.pack(
                base_offset,
                BATCH_OVERHEAD - LOG_OVERHEAD + len(payload),
                leader_epoch,
                CURRENT_MAGIC,
                0,
                attributes,
                last_offset_delta,
                base_timestamp,
                max_timestamp,
                producer_id,
                producer_epoch,
                base_sequence,
                records_count,
            )
        )
    except struct.error as exc:
        raise InvalidRecordError(f"a batch header field out of range: {exc}") from exc
    crc = crc32c.crc32c(payload, value=crc32c.crc32c(header[ATTRIBUTES_POS:]))
    _UINT32.pack_into(header, _CRC_POS, crc)
    return b"".join((header, payload))


# --------------------------------------------------------------------------- reading headers


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header of the batch at `pos` (no CRC check); `CorruptRecordError` if short."""
    if len(buf) - pos < BATCH_OVERHEAD:
        raise CorruptRecordError(
            f"short batch header at position {pos}: {len(buf) - pos} of {BATCH_OVERHEAD} bytes"
        )
    return _new_header(BatchHeader, _HEADER.unpack_from(buf, pos))


def iter_batches(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each batch in `buf`, trusting the lengths (no CRC check).

    Stops with `CorruptRecordError` at a length that is impossible or runs past the end.
    """
    pos = 0
    end = len(buf)
    unpack = _HEADER.unpack_from
    while pos < end:
        if end - pos < BATCH_OVERHEAD:
            raise CorruptRecordError(f"short batch at position {pos}: {end - pos} bytes")
        header = _new_header(BatchHeader, unpack(buf, pos))
        size = LOG_OVERHEAD + header[1]
        if size < BATCH_OVERHEAD or pos + size > end:
            raise CorruptRecordError(
                f"batch at position {pos} claims {size} bytes, {end - pos} available"
            )
        yield pos, header
        pos += size


# --------------------------------------------------------------------------- validation


def _length_error(buf: bytes | bytearray | memoryview, pos: int) -> CorruptRecordError:
    """The error for a batch at `pos` whose header or body is not all there."""
    available = len(buf) - pos
    if available < LOG_OVERHEAD:
        return CorruptRecordError(f"short length prefix at position {pos}: {available} bytes")
    batch_length = INT32.unpack_from(buf, pos + BATCH_LENGTH_POS)[0]
    size = LOG_OVERHEAD + batch_length
    if size < BATCH_OVERHEAD:
        return CorruptRecordError(f"impossible batch length {batch_length} at position {pos}")
    return CorruptRecordError(
        f"torn batch at position {pos}: length says {size} bytes, {available} present"
    )


def validate_batch(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, strict: bool = True
) -> BatchHeader:
    """Check the single batch starting at `pos` (it may be followed by more bytes).

    Checks the length, the magic, the CRC and the codec, for either payload format; with
    `strict` (the produce path) also that the record count matches `last_offset_delta` as
    a fresh producer batch must, and that a transactional batch names its producer (id
    and epoch). Without it (replication, recovery) a count below the offset span is
    accepted, as Kafka's compaction leaves such batches behind. Whether a control batch
    may be appended is the log's decision (only the leader's markers may). Reads the
    header only: no records.
    """
    available = len(buf) - pos
    if available < BATCH_OVERHEAD:
        raise _length_error(buf, pos)
    fields = _HEADER.unpack_from(buf, pos)
    size = LOG_OVERHEAD + fields[1]
    if size < BATCH_OVERHEAD or size > available:
        raise _length_error(buf, pos)
    if fields[3] != CURRENT_MAGIC:
        raise InvalidRecordError(f"unsupported magic {fields[3]} at position {pos}")
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    actual = crc32c.crc32c(view[pos + ATTRIBUTES_POS : pos + size])
    if actual != fields[4]:
        raise CorruptRecordError(
            f"CRC mismatch at position {pos} (base offset {fields[0]}): "
            f"stored {fields[4]:#010x}, computed {actual:#010x}"
        )
    attributes = fields[5]
    if attributes & CODEC_MASK not in SUPPORTED_CODECS:
        check_codec(attributes)
    if strict and attributes & ATTR_TRANSACTIONAL and (fields[9] < 0 or fields[10] < 0):
        raise InvalidRecordError(
            f"transactional batch at position {pos} without a producer id and epoch"
        )
    count = fields[12]
    span = fields[6] + 1
    if (count < 1 or count != span) if strict else (count < 0 or span < 1 or count > span):
        raise InvalidRecordError(
            f"batch at position {pos} holds {count} records but spans {span} offsets"
        )
    return _new_header(BatchHeader, fields)


def validate_batches(
    buf: bytes | bytearray | memoryview, *, strict: bool = True
) -> list[BatchHeader]:
    """Validate every batch in `buf` (see `validate_batch`); their headers in order."""
    headers = []
    pos = 0
    end = len(buf)
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    while pos < end:
        header = validate_batch(view, pos, strict=strict)
        headers.append(header)
        pos += LOG_OVERHEAD + header[1]
    return headers


# --------------------------------------------------------------------------- leader patching


def assign_offsets(
    buf: bytes | bytearray | memoryview,
    base_offset: int,
    leader_epoch: int,
    *,
    log_append_time_ms: int | None = None,
) -> tuple[bytearray, int, int]:
    """Give the (already validated) batches in `buf` consecutive offsets from `base_offset`.

    Patches base offset and partition leader epoch in place (a `bytearray` is changed in
    place, anything else copied once). With `log_append_time_ms` the timestamp type and
    max timestamp are rewritten too and the CRC recomputed. Returns the patched buffer,
    the last offset assigned and the largest max timestamp.
    """
    out = buf if isinstance(buf, bytearray) else bytearray(buf)
    view = memoryview(out)
    pos = 0
    end = len(out)
    next_offset = base_offset
    max_timestamp = NO_TIMESTAMP
    pack_q = _INT64.pack_into
    pack_i = INT32.pack_into
    while pos < end:
        size = LOG_OVERHEAD + INT32.unpack_from(out, pos + BATCH_LENGTH_POS)[0]
        last_offset_delta = INT32.unpack_from(out, pos + 23)[0]
        pack_q(out, pos, next_offset)
        pack_i(out, pos + _LEADER_EPOCH_POS, leader_epoch)
        if log_append_time_ms is not None:
            attributes = INT16.unpack_from(out, pos + ATTRIBUTES_POS)[0]
            INT16.pack_into(out, pos + ATTRIBUTES_POS, attributes | TIMESTAMP_TYPE_BIT)
            pack_q(out, pos + _MAX_TIMESTAMP_POS, log_append_time_ms)
            crc = crc32c.crc32c(view[pos + ATTRIBUTES_POS : pos + size])
            _UINT32.pack_into(out, pos + _CRC_POS, crc)
            batch_max = log_append_time_ms
        else:
            batch_max = _INT64.unpack_from(out, pos + _MAX_TIMESTAMP_POS)[0]
        if batch_max > max_timestamp:
            max_timestamp = batch_max
        next_offset += last_offset_delta + 1
        pos += size
    view.release()
    return out, next_offset - 1, max_timestamp


def stamped_header(
    header: BatchHeader,
    base_offset: int,
    leader_epoch: int,
    *,
    log_append_time_ms: int | None = None,
    body: bytes | bytearray | memoryview | None = None,
) -> bytes:
    """The 61 header bytes of a validated batch with offsets and epoch assigned.

    The copy-free twin of `assign_offsets`: the leader writes this header followed by the
    batch's untouched body (`writev`), instead of copying the batch to patch it. With
    `log_append_time_ms`, the CRC is recomputed, which needs the `body` (the batch's bytes
    after the header).
    """
    fields = list(header)
    fields[0] = base_offset
    fields[2] = leader_epoch
    if log_append_time_ms is None:
        return _HEADER.pack(*fields)
    if body is None:
        raise ValueError("stamping LogAppendTime needs the batch body for the CRC")
    fields[5] |= TIMESTAMP_TYPE_BIT
    fields[8] = log_append_time_ms
    packed = bytearray(_HEADER.pack(*fields))
    crc = crc32c.crc32c(body, value=crc32c.crc32c(packed[ATTRIBUTES_POS:]))
    _UINT32.pack_into(packed, _CRC_POS, crc)
    return bytes(packed)
