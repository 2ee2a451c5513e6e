"""Record batch format: what producers, the broker and readers rely on."""

from __future__ import annotations

import struct
import zlib

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client.protocol.records import (
    ATTR_MSGPACK_PAYLOAD,
    BATCH_OVERHEAD,
    Codec,
    CorruptRecordError,
    DecodedRecord,
    InvalidRecordError,
    Record,
    RecordError,
    TimestampType,
    assign_offsets,
    build_batch,
    build_kafka_batch,
    decode_batches,
    decode_records,
    filter_batch,
    iter_batches,
    read_header,
    record_keys,
    stamped_header,
    validate_batch,
    validate_batches,
)
from client.protocol.records.compression import xerial_compress

SUPPORTED = list(Codec)

headers_st = st.lists(
    st.tuples(st.text(max_size=8), st.binary(max_size=16)).map(tuple), max_size=3
).map(tuple)
record_st = st.builds(
    Record,
    key=st.none() | st.binary(max_size=32),
    value=st.none() | st.binary(max_size=200),
    timestamp_ms=st.integers(min_value=0, max_value=2**41),
    headers=headers_st,
)
records_st = st.lists(record_st, min_size=1, max_size=30)


def _expected(records: list[Record], base_offset: int = 0) -> list[DecodedRecord]:
    return [
        DecodedRecord(base_offset + i, r.timestamp_ms, r.key, r.value, tuple(r.headers))
        for i, r in enumerate(records)
    ]


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(records=records_st, codec=st.sampled_from(SUPPORTED), base=st.integers(0, 2**40))
def test_build_validate_decode_round_trip(records, codec, base):
    batch = build_batch(records, codec=codec, base_offset=base, producer_id=7, base_sequence=3)
    [header] = validate_batches(batch)
    assert header.codec == codec
    assert header.records_count == len(records)
    assert (header.base_offset, header.last_offset) == (base, base + len(records) - 1)
    assert header.size == len(batch)
    assert header.max_timestamp == max(r.timestamp_ms for r in records)
    assert (header.producer_id, header.base_sequence) == (7, 3)
    assert decode_records(batch) == _expected(records, base)


@settings(max_examples=40)
@given(records=records_st, codec=st.sampled_from(SUPPORTED), data=st.data())
def test_flipping_any_crc_covered_byte_is_detected(records, codec, data):
    batch = bytearray(build_batch(records, codec=codec))
    position = data.draw(st.integers(min_value=21, max_value=len(batch) - 1), label="position")
    bit = data.draw(st.integers(min_value=0, max_value=7), label="bit")
    batch[position] ^= 1 << bit
    with pytest.raises(RecordError):
        validate_batches(bytes(batch))


# Up to 5 batches of up to 30 records: drawing them is slow on a loaded 2-core machine
# (make test-fast failed the too_slow health check three times there, never alone).
@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(st.tuples(records_st, st.sampled_from(SUPPORTED)), min_size=1, max_size=5),
    base=st.integers(0, 2**40),
    epoch=st.integers(0, 2**31 - 1),
    append_time=st.none() | st.integers(0, 2**41),
)
def test_assign_offsets_patches_in_place_and_keeps_batches_valid(batches, base, epoch, append_time):
    buf = b"".join(build_batch(records, codec=codec) for records, codec in batches)
    patched, last_offset, max_ts = assign_offsets(buf, base, epoch, log_append_time_ms=append_time)
    headers = validate_batches(patched)  # CRC still right (recomputed only for append time)
    all_records = [r for records, _ in batches for r in records]
    assert last_offset == base + len(all_records) - 1
    assert [h.partition_leader_epoch for h in headers] == [epoch] * len(batches)
    decoded = decode_batches(patched)
    assert [d.offset for d in decoded] == list(range(base, base + len(all_records)))
    if append_time is None:
        assert max_ts == max(r.timestamp_ms for r in all_records)
        assert decoded == _expected(all_records, base)
        # Without LogAppendTime only the fields outside the CRC change.
        assert [h.crc for h in headers] == [h.crc for h in validate_batches(buf)]
    else:
        assert max_ts == append_time
        assert all(h.timestamp_type == TimestampType.LOG_APPEND_TIME for h in headers)
        assert [d.timestamp for d in decoded] == [append_time] * len(all_records)


@settings(max_examples=30)
@given(records=records_st, append_time=st.none() | st.integers(0, 2**41))
def test_stamped_header_matches_assign_offsets(records, append_time):
    batch = build_batch(records, codec=Codec.LZ4)
    [header] = validate_batches(batch)
    stamped = stamped_header(
        header, 42, 5, log_append_time_ms=append_time, body=memoryview(batch)[BATCH_OVERHEAD:]
    )
    patched, _, _ = assign_offsets(batch, 42, 5, log_append_time_ms=append_time)
    assert stamped + batch[BATCH_OVERHEAD:] == bytes(patched)


def test_assign_offsets_changes_a_bytearray_in_place():
    buf = bytearray(build_batch([Record(b"k", b"v", 1)]))
    patched, last, _ = assign_offsets(buf, 10, 2)
    assert patched is buf
    assert read_header(buf).base_offset == 10 and last == 10


def test_multiple_batches_iterate_with_positions():
    first = build_batch([Record(None, b"a", 1), Record(None, b"b", 2)])
    second = build_batch([Record(None, b"c", 3)], base_offset=2, codec=Codec.GZIP)
    buf = first + second
    assert [(pos, h.base_offset) for pos, h in iter_batches(buf)] == [(0, 0), (len(first), 2)]
    assert [r.value for r in decode_batches(buf)] == [b"a", b"b", b"c"]


@pytest.mark.parametrize(
    ("damage", "error", "words"),
    [
        (lambda b: b[:10], CorruptRecordError, "short length prefix"),
        (lambda b: b[:40], CorruptRecordError, "torn"),
        (lambda b: b[:-1], CorruptRecordError, "torn"),
        (lambda b: b[:8] + struct.pack(">i", 5) + b[12:], CorruptRecordError, "impossible"),
        (lambda b: b[:16] + b"\x01" + b[17:], InvalidRecordError, "magic"),
        (lambda b: b[:17] + b"\0\0\0\0" + b[21:], CorruptRecordError, "CRC"),
    ],
    ids=["short-prefix", "short-header", "torn-body", "bad-length", "bad-magic", "bad-crc"],
)
def test_damaged_batches_raise_clear_errors(damage, error, words):
    batch = build_batch([Record(b"key", b"value" * 20, 1000)] * 3)
    with pytest.raises(error, match=words):
        validate_batches(damage(batch))


def _with_attributes(batch: bytes, attributes: int) -> bytes:
    """`batch` with new attributes (its payload format bit kept) and a CRC that matches."""
    out = bytearray(batch)
    attributes |= struct.unpack_from(">h", out, 21)[0] & ATTR_MSGPACK_PAYLOAD
    struct.pack_into(">h", out, 21, attributes)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def test_build_batch_marks_the_msgpack_payload_with_bit_7():
    for codec in Codec:
        [header] = validate_batches(build_batch([Record(None, b"v", 1)], codec=codec))
        assert header.attributes == ATTR_MSGPACK_PAYLOAD | codec
        assert not header.kafka_format
    assert read_header(build_kafka_batch([Record(None, b"v", 1)])).kafka_format


@pytest.mark.parametrize("builder", [build_batch, build_kafka_batch], ids=["tributary", "kafka"])
def test_unknown_codecs_are_rejected_clearly(builder):
    batch = builder([Record(None, b"v", 1)])
    for codec in (5, 6, 7):
        with pytest.raises(InvalidRecordError, match=f"unknown compression codec {codec}"):
            validate_batches(_with_attributes(batch, codec))
        with pytest.raises(InvalidRecordError, match=f"unknown compression codec {codec}"):
            decode_records(_with_attributes(batch, codec))
    with pytest.raises(InvalidRecordError, match="unknown compression codec 6"):
        builder([Record(None, b"v", 1)], codec=6)


@pytest.mark.parametrize("builder", [build_batch, build_kafka_batch], ids=["tributary", "kafka"])
def test_snappy_reads_raw_and_xerial_framed_in_both_formats(builder):
    records = [Record(b"k%d" % i, b"value %d " % i * 50, 1_000 + i) for i in range(200)]
    raw = builder(records, codec=Codec.SNAPPY)
    uncompressed = builder(records)
    xerial = bytearray(uncompressed[:BATCH_OVERHEAD]) + xerial_compress(
        uncompressed[BATCH_OVERHEAD:], block_size=1024
    )
    struct.pack_into(">i", xerial, 8, len(xerial) - 12)
    xerial = _with_attributes(bytes(xerial), Codec.SNAPPY)
    assert xerial[BATCH_OVERHEAD:].startswith(b"\x82SNAPPY\x00")
    for batch in (raw, xerial):
        [header] = validate_batches(batch)
        assert header.codec == Codec.SNAPPY
        assert decode_records(batch) == _expected(records)


@pytest.mark.parametrize("builder", [build_batch, build_kafka_batch], ids=["tributary", "kafka"])
@pytest.mark.parametrize("bit", [0x10, 0x20, 0x30], ids=["transactional", "control", "both"])
def test_transactional_and_control_batches_are_refused_on_the_produce_path(builder, bit):
    batch = _with_attributes(builder([Record(None, b"v", 1)], codec=Codec.LZ4), Codec.LZ4 | bit)
    with pytest.raises(InvalidRecordError, match="transactions are not supported"):
        validate_batches(batch)
    assert validate_batches(batch, strict=False)[0].attributes & bit  # recovery: as it is


def test_readers_dispatch_on_the_format_bit():
    records = [Record(b"a", b"1", 5, (("h", b"x"),)), Record(None, None, 7)]
    for batch in (build_batch(records, codec=Codec.ZSTD), build_kafka_batch(records)):
        assert decode_records(batch) == _expected(records)
        assert record_keys(batch) == [(0, b"a"), (1, None)]
        kept = filter_batch(batch, lambda offset, key, value: key is None)
        assert read_header(kept).kafka_format == read_header(batch).kafka_format
    # A msgpack payload read as Kafka's records is undecodable, not misread.
    flipped = bytearray(build_batch(records))
    flipped[22] &= ~ATTR_MSGPACK_PAYLOAD & 0xFF
    with pytest.raises(InvalidRecordError):
        decode_records(bytes(flipped))


def test_count_must_match_offset_span_on_the_produce_path_only():
    batch = bytearray(build_batch([Record(None, b"v", 1)] * 3))
    struct.pack_into(">i", batch, 57, 2)  # records_count 2, last_offset_delta still 2
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    with pytest.raises(InvalidRecordError, match="holds 2 records but spans 3"):
        validate_batches(bytes(batch))
    # A compacted batch (fewer records than offsets) is fine when replicating.
    assert validate_batches(bytes(batch), strict=False)[0].records_count == 2


def test_undecodable_payload_with_a_good_crc_is_invalid_not_a_crash():
    batch = bytearray(build_batch([Record(None, b"v", 1)], codec=Codec.NONE))
    batch[BATCH_OVERHEAD:] = b"\xc1" * (len(batch) - BATCH_OVERHEAD)  # msgpack's "never used"
    batch = _with_attributes(bytes(batch), 1)  # claims gzip
    validate_batch(batch)  # the broker's check passes: it never opens the payload
    with pytest.raises(InvalidRecordError, match="undecodable"):
        decode_records(batch)


def test_gzip_payload_is_a_real_gzip_stream():
    batch = build_batch([Record(None, b"hello", 1)], codec=Codec.GZIP)
    payload = batch[BATCH_OVERHEAD:]
    assert payload[:2] == b"\x1f\x8b"
    assert zlib.decompress(payload, wbits=31)


def test_empty_batch_is_refused():
    with pytest.raises(ValueError, match="at least one record"):
        build_batch([])


def test_bad_input_never_crashes_validation():
    for junk in (b"", b"\0", b"\xff" * 100, bytes(range(256))):
        try:
            validate_batches(junk)
        except RecordError:
            pass
