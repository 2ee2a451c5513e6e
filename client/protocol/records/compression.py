"""The compression codecs of record batches: none, gzip, snappy, lz4 and zstd.

How it works: a batch's whole records section is compressed by the codec in attributes
bits 0-2 (`Codec`, in `header.py`). `COMPRESS[codec]` and `DECOMPRESS[codec]` are one
function per codec, looked up once per batch: gzip with zlib (written as a gzip
container, read as gzip or zlib), snappy raw as librdkafka writes it and read raw or in
the Java client's xerial framing (`xerial_compress` writes that framing, for tests),
lz4 in the frame format as Kafka clients write it, zstd whether or not its frames record
their content size. `decompress(view, header)` gives a batch's uncompressed records
section (a view of the batch itself for codec none: no copy), for either payload format;
a codec's failure becomes an `InvalidRecordError`.

cramjam (snappy), lz4 and zstandard are imported where first used: a broker only checks
and copies batches, and each of them costs its process memory (about 2.5 MB of RSS
together, with ormsgpack in `native.py`) it would otherwise carry for nothing.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

from client.protocol.records.header import (
    BATCH_OVERHEAD,
    CODEC_MASK,
    INT32,
    LOG_OVERHEAD,
    BatchHeader,
    Codec,
    check_codec,
)
from client.protocol.records.types import CorruptRecordError, InvalidRecordError


def _gzip_compress(data: bytes | memoryview) -> bytes:
    compressor = zlib.compressobj(wbits=31)  # 31 = gzip container, as Kafka's GZIP codec
    return compressor.compress(data) + compressor.flush()


def _gzip_decompress(data: bytes | memoryview) -> bytes:
    return zlib.decompress(data, wbits=47)  # 47 = accept a gzip or zlib container


def _zstd_compress(data: bytes | memoryview) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor().compress(data)


def _zstd_decompress(data: bytes | memoryview) -> bytes:
    import zstandard

    # decompressobj copes with frames that do not record their content size.
    return zstandard.ZstdDecompressor().decompressobj().decompress(bytes(data))


def _lz4_compress(data: bytes | memoryview) -> bytes:
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


def _snappy_compress(data: bytes | memoryview) -> bytes:
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
        (length,) = INT32.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise ValueError(f"xerial snappy block of {length} bytes, {end - pos} left")
        blocks.append(snappy_raw(data[pos : pos + length], compress=False))
        pos += length
    return b"".join(blocks)


def xerial_compress(data: bytes | memoryview, block_size: int = 32 * 1024) -> bytes:
    """Snappy in xerial's framing, as Kafka's Java client writes it."""
    data = bytes(data)
    parts = [_XERIAL_MAGIC, INT32.pack(1), INT32.pack(1)]
    for start in range(0, len(data), block_size):
        block = snappy_raw(data[start : start + block_size], compress=True)
        parts += (INT32.pack(len(block)), block)
    return b"".join(parts)


COMPRESS: dict[int, Callable[[bytes | memoryview], bytes]] = {
    Codec.NONE: bytes,
    Codec.GZIP: _gzip_compress,
    Codec.SNAPPY: _snappy_compress,
    Codec.LZ4: _lz4_compress,
    Codec.ZSTD: _zstd_compress,
}
# Each returns something msgpack and Kafka's record reader accept: NONE gives a view of
# the batch's own bytes (no copy), the others fresh bytes.
DECOMPRESS: dict[int, Callable[[memoryview], bytes | memoryview]] = {
    Codec.NONE: memoryview,
    Codec.GZIP: _gzip_decompress,
    Codec.SNAPPY: _snappy_decompress,
    Codec.LZ4: _lz4_decompress,
    Codec.ZSTD: _zstd_decompress,
}


def known_codec(codec: int) -> int:
    """`codec` as an int; `InvalidRecordError` if it is not one of `Codec`'s."""
    if codec not in COMPRESS:
        raise InvalidRecordError(f"unknown compression codec {codec}")
    return int(codec)


def decompress(view: memoryview, header: BatchHeader) -> bytes | memoryview:
    """The (uncompressed) records section of the batch in `view` (the whole batch)."""
    size = LOG_OVERHEAD + header[1]
    if size < BATCH_OVERHEAD or size > len(view):
        raise CorruptRecordError(f"batch claims {size} bytes, {len(view)} present")
    check_codec(header.attributes)
    try:
        return DECOMPRESS[header.attributes & CODEC_MASK](view[BATCH_OVERHEAD:size])
    except Exception as exc:  # zlib/lz4/zstd/cramjam each raise their own types
        raise InvalidRecordError(
            f"undecodable payload in batch at offset {header.base_offset}: {exc}"
        ) from exc
