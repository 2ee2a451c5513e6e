"""Record batches: Kafka's v2 batch header in front of one of two payload formats.

How it works: a batch is a 61-byte big-endian header (the exact field layout of Kafka's
`DefaultRecordBatch`, magic 2) followed by the records payload, compressed as a whole by
the codec in attributes bits 0-2 (none, gzip, snappy, lz4, zstd; snappy raw or in the
Java client's xerial framing, lz4 in the frame format as Kafka clients write it). The
payload comes in two formats, told apart by attributes bit 7 (`ATTR_MSGPACK_PAYLOAD`):

- **Tributary format** (bit 7 set; what `build_batch` and so Tributary's producer write):
  one msgpack array of `[offset_delta, timestamp_delta, key, value, headers]` records.
- **Kafka format** (bit 7 clear; what Kafka clients send): Kafka's varint records,
  decoded and encoded by `client.protocol.kafka_records`.

Why two: batches from Kafka clients are stored verbatim, so the CRC their producer
computed stays valid all the way to their consumers and nothing re-encodes them on the
produce path (the leader only patches base offset and leader epoch, which lie outside
the CRC). Tributary's own batches keep the msgpack payload they always had (measured
in `kafka_records`: with aiokafka's C codec Kafka's format now decodes faster, so the
producer could switch to it one day and the conversion go away). The marker bit is on
Tributary's format because Kafka clients never see that format (`to_kafka_format` in
`kafka_records` converts it for them, clearing the bit) and Kafka uses bits 0-6 itself
(codec 0-2, timestamp type 3, transactional 4, control 5, delete horizon 6). Every
reader here (`decode_records`, `decode_batches`, `record_keys`, `filter_batch`)
dispatches on the bit, so Tributary's consumer, CLI, Spark job, replica audit and log
cleaner read both formats; `filter_batch` writes the format it was given.

The CRC-32C covers the bytes from `attributes` to the end of the batch, so `base_offset`
and `partition_leader_epoch` (both before it) can be patched in place by the leader without
recomputing it: `assign_offsets` does exactly that, and only recomputes the CRC when
LogAppendTime rewrites the attributes and max timestamp.

Who uses what:
- the client calls `build_batch`, or `build_column_batch` for records held as columns
  (the producer; the same bytes);
- the broker calls `validate_batches` (header + CRC, no per-record work, either format;
  transactional and control batches refused on the produce path) and `assign_offsets`,
  then stores the bytes untouched;
- readers of the log (consumer, Spark) call `iter_batches`/`decode_records`; the
  consumer `decode_columns` (the same records as columns, no object per record);
- the log cleaner calls `record_keys` (offsets and keys, for its offset map) and
  `filter_batch`, which rewrites a batch keeping only some records: the batch keeps its
  base offset and offset span, so it may hold fewer records than offsets (gaps).

Errors are values of `RecordError` (a `ValueError`): `CorruptRecordError` when bytes are
damaged (bad CRC, torn or short data, impossible length), `InvalidRecordError` when bytes
are intact but not acceptable (wrong magic, unknown codec, transactions, inconsistent
counts, an undecodable payload).
"""

from __future__ import annotations

import enum
import operator
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import repeat
from typing import NamedTuple

import crc32c
import msgpack

# cramjam (snappy), lz4, zstandard and ormsgpack are imported where first used: a broker
# only checks and copies batches, and each of them costs its process memory (about 2.5 MB
# of RSS together) it would otherwise carry for nothing.

__all__ = [
    "ATTR_CONTROL",
    "ATTR_MSGPACK_PAYLOAD",
    "ATTR_TRANSACTIONAL",
    "BATCH_OVERHEAD",
    "CURRENT_MAGIC",
    "LOG_OVERHEAD",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "BatchHeader",
    "Codec",
    "CorruptRecordError",
    "DecodedRecord",
    "InvalidRecordError",
    "Record",
    "RecordColumns",
    "RecordError",
    "TimestampType",
    "assign_offsets",
    "build_batch",
    "build_column_batch",
    "decode_batches",
    "decode_columns",
    "decode_records",
    "filter_batch",
    "iter_batches",
    "pack_batch",
    "read_header",
    "record_keys",
    "snappy_raw",
    "stamped_header",
    "validate_batch",
    "validate_batches",
]

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
_BATCH_LENGTH_POS = 8
_LEADER_EPOCH_POS = 12
_MAGIC_POS = 16
_CRC_POS = 17
_ATTRIBUTES_POS = 21  # the CRC covers [_ATTRIBUTES_POS, end of batch)
_MAX_TIMESTAMP_POS = 35

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
assert _HEADER.size == BATCH_OVERHEAD

_CODEC_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
# Attribute bits Kafka defines (bit 6, the delete horizon, is only ever set by a cleaner).
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
# Tributary's own: the payload is msgpack (Tributary format), not Kafka's varint records.
ATTR_MSGPACK_PAYLOAD = 0x80


class RecordError(ValueError):
    """Base of every record-format error."""


class CorruptRecordError(RecordError):
    """The bytes are damaged: bad CRC, short or torn data, an impossible length."""


class InvalidRecordError(RecordError):
    """The bytes are intact but not acceptable: magic, codec, counts, payload."""


class Codec(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


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
        return Codec(self.attributes & _CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes >> 3) & 1)

    @property
    def kafka_format(self) -> bool:
        """True when the payload is Kafka's varint records, False for Tributary's msgpack."""
        return not self.attributes & ATTR_MSGPACK_PAYLOAD


_new_header = tuple.__new__


# --------------------------------------------------------------------------- compression


def _gzip_compress(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=31)  # 31 = gzip container, as Kafka's GZIP codec
    return compressor.compress(data) + compressor.flush()


def _gzip_decompress(data: bytes | memoryview) -> bytes:
    return zlib.decompress(data, wbits=47)  # 47 = accept a gzip or zlib container


def _zstd_compress(data: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor().compress(data)


def _zstd_decompress(data: bytes | memoryview) -> bytes:
    import zstandard

    # decompressobj copes with frames that do not record their content size.
    return zstandard.ZstdDecompressor().decompressobj().decompress(bytes(data))


def _lz4_compress(data: bytes) -> bytes:
    import lz4.frame

    return lz4.frame.compress(data)


def _lz4_decompress(data: bytes | memoryview) -> bytes:
    import lz4.frame

    return lz4.frame.decompress(data)


def snappy_raw(data: bytes | memoryview, *, compress: bool) -> bytes:
    """Raw snappy (no framing) one way or the other."""
    import cramjam

    if compress:
        return bytes(cramjam.snappy.compress_raw(data))
    return bytes(cramjam.snappy.decompress_raw(data))


def _snappy_compress(data: bytes) -> bytes:
    # Raw snappy, as librdkafka writes it; Kafka's Java client reads it as well as its own
    # xerial framing.
    return snappy_raw(data, compress=True)


# The Java client's snappy (xerial's SnappyOutputStream): this magic, two int32 (version,
# compatible version), then blocks of int32 length + raw snappy.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = len(_XERIAL_MAGIC) + 8


def _snappy_decompress(data: bytes | memoryview) -> bytes:
    data = bytes(data)
    if not data.startswith(_XERIAL_MAGIC):
        return snappy_raw(data, compress=False)
    blocks = []
    pos = _XERIAL_HEADER
    end = len(data)
    while pos < end:
        (length,) = _INT32.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise ValueError(f"xerial snappy block of {length} bytes, {end - pos} left")
        blocks.append(snappy_raw(data[pos : pos + length], compress=False))
        pos += length
    return b"".join(blocks)


_COMPRESS: dict[int, Callable[[bytes], bytes]] = {
    Codec.NONE: bytes,
    Codec.GZIP: _gzip_compress,
    Codec.SNAPPY: _snappy_compress,
    Codec.LZ4: _lz4_compress,
    Codec.ZSTD: _zstd_compress,
}
# Each returns something msgpack and Kafka's record reader accept: NONE gives a view of
# the batch's own bytes (no copy), the others fresh bytes.
_DECOMPRESS: dict[int, Callable[[memoryview], bytes | memoryview]] = {
    Codec.NONE: memoryview,
    Codec.GZIP: _gzip_decompress,
    Codec.SNAPPY: _snappy_decompress,
    Codec.LZ4: _lz4_decompress,
    Codec.ZSTD: _zstd_decompress,
}


_SUPPORTED_CODECS = frozenset(int(codec) for codec in _DECOMPRESS)


def _check_codec(attributes: int) -> None:
    codec = attributes & _CODEC_MASK
    if codec not in _DECOMPRESS:
        raise InvalidRecordError(f"unknown compression codec {codec}")


def _decompress(view: memoryview, header: BatchHeader) -> bytes | memoryview:
    """The (uncompressed) records section of the batch in `view` (the whole batch)."""
    size = LOG_OVERHEAD + header[1]
    if size < BATCH_OVERHEAD or size > len(view):
        raise CorruptRecordError(f"batch claims {size} bytes, {len(view)} present")
    _check_codec(header.attributes)
    try:
        return _DECOMPRESS[header.attributes & _CODEC_MASK](view[BATCH_OVERHEAD:size])
    except Exception as exc:  # zlib/lz4/zstd/cramjam each raise their own types
        raise InvalidRecordError(
            f"undecodable payload in batch at offset {header.base_offset}: {exc}"
        ) from exc


# --------------------------------------------------------------------------- building


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
) -> bytes:
    """Encode `records` as one Tributary-format batch (offset deltas 0, 1, 2, ...).

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
    codec = _known_codec(codec)
    base_timestamp = timestamps[0]
    max_timestamp = max(timestamps)
    if max_timestamp == base_timestamp == min(timestamps):
        deltas: Iterable[int] = repeat(0, count)
    else:
        deltas = [timestamp - base_timestamp for timestamp in timestamps]
    entries = list(zip(range(count), deltas, keys, values, headers, strict=True))
    return pack_batch(
        _COMPRESS[codec](_pack_entries(entries)),
        base_offset=base_offset,
        leader_epoch=leader_epoch,
        attributes=ATTR_MSGPACK_PAYLOAD | codec | (_TIMESTAMP_TYPE_BIT if timestamp_type else 0),
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


def _known_codec(codec: int) -> int:
    if codec not in _COMPRESS:
        raise InvalidRecordError(f"unknown compression codec {codec}")
    return int(codec)


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
    crc = crc32c.crc32c(payload, value=crc32c.crc32c(header[_ATTRIBUTES_POS:]))
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
    batch_length = _INT32.unpack_from(buf, pos + _BATCH_LENGTH_POS)[0]
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
    a fresh producer batch must, and that the batch is neither transactional nor a control
    batch (Tributary has no transactions). Without it (replication, recovery) a count
    below the offset span is accepted, as Kafka's compaction leaves such batches behind.
    Reads the header only: no records.
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
    actual = crc32c.crc32c(view[pos + _ATTRIBUTES_POS : pos + size])
    if actual != fields[4]:
        raise CorruptRecordError(
            f"CRC mismatch at position {pos} (base offset {fields[0]}): "
            f"stored {fields[4]:#010x}, computed {actual:#010x}"
        )
    attributes = fields[5]
    if attributes & _CODEC_MASK not in _SUPPORTED_CODECS:
        _check_codec(attributes)
    if strict and attributes & (ATTR_TRANSACTIONAL | ATTR_CONTROL):
        kind = "control" if attributes & ATTR_CONTROL else "transactional"
        raise InvalidRecordError(f"{kind} batch at position {pos}: transactions are not supported")
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
    pack_i = _INT32.pack_into
    while pos < end:
        size = LOG_OVERHEAD + _INT32.unpack_from(out, pos + _BATCH_LENGTH_POS)[0]
        last_offset_delta = _INT32.unpack_from(out, pos + 23)[0]
        pack_q(out, pos, next_offset)
        pack_i(out, pos + _LEADER_EPOCH_POS, leader_epoch)
        if log_append_time_ms is not None:
            attributes = _INT16.unpack_from(out, pos + _ATTRIBUTES_POS)[0]
            _INT16.pack_into(out, pos + _ATTRIBUTES_POS, attributes | _TIMESTAMP_TYPE_BIT)
            pack_q(out, pos + _MAX_TIMESTAMP_POS, log_append_time_ms)
            crc = crc32c.crc32c(view[pos + _ATTRIBUTES_POS : pos + size])
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
    fields[5] |= _TIMESTAMP_TYPE_BIT
    fields[8] = log_append_time_ms
    packed = bytearray(_HEADER.pack(*fields))
    crc = crc32c.crc32c(body, value=crc32c.crc32c(packed[_ATTRIBUTES_POS:]))
    _UINT32.pack_into(packed, _CRC_POS, crc)
    return bytes(packed)


# --------------------------------------------------------------------------- decoding


def _kafka():
    """`client.protocol.kafka_records`, imported on first use: it builds on this module,
    and its record codec (aiokafka's) is only loaded once a Kafka-format batch shows up."""
    from client.protocol import kafka_records

    return kafka_records


def msgpack_entries(view: memoryview, header: BatchHeader) -> list:
    """A Tributary-format batch's entries `[offset_delta, timestamp_delta, key, value,
    headers]` (headers as `[name, value]` lists)."""
    return _unpack_entries(view, header, list)


def msgpack_entry_tuples(view: memoryview, header: BatchHeader) -> tuple:
    """`msgpack_entries` as tuples, headers as `((name, value), ...)`: for readers that only
    read them. Faster: small tuples come from CPython's free lists, so unpacking a batch
    neither allocates them afresh nor sets off garbage collections, as lists do."""
    return _unpack_entries(view, header, tuple)


def _unpack_entries(view: memoryview, header: BatchHeader, kind: type) -> list | tuple:
    payload = _decompress(view, header)
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


class RecordColumns(NamedTuple):
    """The records of a batch as columns: the i-th record is
    `(offsets[i], timestamps[i], keys[i], values[i], headers[i])`."""

    offsets: Sequence[int]
    timestamps: Sequence[int]
    keys: Sequence[bytes | None]
    values: Sequence[bytes | None]
    headers: Sequence[tuple[tuple[str, bytes | None], ...]]


_NO_COLUMNS = RecordColumns((), (), (), (), ())
_FIELD = [operator.itemgetter(i) for i in range(5)]  # an entry's fields, by position


def decode_columns(batch: memoryview, header: BatchHeader) -> RecordColumns:
    """The records of the single batch in `batch` (`header` its header), either format,
    as columns: the same records `decode_records` gives (not CRC-checked: validate first),
    without an object per record. A Tributary-format batch is transposed in C (one
    `msgpack` call, then a `map` per column), which makes this the consumer's fast
    decoder."""
    if not header.attributes & ATTR_MSGPACK_PAYLOAD:
        records = _kafka().decode_kafka_records(batch, header)
        return RecordColumns(*zip(*records, strict=True)) if records else _NO_COLUMNS
    entries = msgpack_entry_tuples(batch, header)
    count = len(entries)
    base_offset = header.base_offset
    try:
        if list(map(len, entries)).count(5) != count:
            raise ValueError("a record is not [offset_delta, timestamp_delta, key, value, headers]")
        offsets = list(map(operator.add, repeat(base_offset, count), map(_FIELD[0], entries)))
        if header.attributes & _TIMESTAMP_TYPE_BIT:  # LogAppendTime: the batch's time
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


def _entries(view: memoryview, header: BatchHeader) -> Sequence[Sequence]:
    """`(offset_delta, timestamp_delta, key, value, headers)` of each record, either format;
    the timestamp deltas are the records' own even under LogAppendTime."""
    if header.attributes & ATTR_MSGPACK_PAYLOAD:
        return msgpack_entries(view, header)
    return _kafka().kafka_entries(view, header)


def decode_records(batch: bytes | bytearray | memoryview) -> list[DecodedRecord]:
    """The records of the single batch `batch`, either format (not CRC-checked: validate
    first).

    With LogAppendTime every record carries the batch's max timestamp, as in Kafka.
    """
    view = batch if isinstance(batch, memoryview) else memoryview(batch)
    header = read_header(view)
    if not header.attributes & ATTR_MSGPACK_PAYLOAD:
        return _kafka().decode_kafka_records(view, header)
    entries = msgpack_entries(view, header)
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    append_time = header.max_timestamp if header.attributes & _TIMESTAMP_TYPE_BIT else None
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
        return [(base + entry[0], entry[2]) for entry in _entries(view, header)]
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
    entries = _entries(view, header)
    base_timestamp = header.base_timestamp
    max_timestamp = header.max_timestamp
    try:
        kept = [entry for entry in entries if keep(base + entry[0], entry[2], entry[3])]
        if kept and not header.attributes & _TIMESTAMP_TYPE_BIT:
            max_timestamp = base_timestamp + max(entry[1] for entry in kept)
    except (TypeError, IndexError) as exc:
        raise InvalidRecordError(f"malformed record in batch at offset {base}: {exc}") from exc
    if len(kept) == len(entries):
        return batch
    if not kept and not keep_empty:
        return None
    codec = header.attributes & _CODEC_MASK
    if header.attributes & ATTR_MSGPACK_PAYLOAD:
        payload = _COMPRESS[codec](msgpack.packb(kept, use_bin_type=True))
    else:
        payload, first_delta = _kafka().encode_kafka_payload(kept, codec)
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
