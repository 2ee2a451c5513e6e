"""Kafka's record format next to Tributary's: what Kafka clients and our readers rely on.

Batches written the way kafka-python's producer writes them must read back through our
readers unchanged (keys, values, headers, timestamps, CRC); what `to_kafka_format` hands
a Kafka client must parse with kafka-python's reader with a valid CRC; and no damaged
Kafka-format batch may raise anything but a `RecordError`.
"""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_codec
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

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
    kafka_format,
    read_header,
    record_keys,
    to_kafka_format,
    validate_batch,
    validate_batches,
)

# kafka-python writes snappy only with python-snappy installed; our side reads it anyway.
KAFKA_PYTHON_CODECS = [c for c in Codec if c != Codec.SNAPPY or kafka_codec.has_snappy()]

headers_st = st.lists(
    st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=16)), max_size=3
).map(tuple)
record_st = st.builds(
    Record,
    key=st.none() | st.binary(max_size=32),
    value=st.none() | st.binary(max_size=200),
    timestamp_ms=st.integers(min_value=0, max_value=2**41) | st.just(-1),
    headers=headers_st,
)
records_st = st.lists(record_st, min_size=1, max_size=30)


def _expected(records, base_offset: int = 0, append_time: int | None = None):
    return [
        DecodedRecord(
            base_offset + i,
            r.timestamp_ms if append_time is None else append_time,
            r.key,
            r.value,
            tuple(r.headers),
        )
        for i, r in enumerate(records)
    ]


def _kafka_python_batch(records, codec: Codec) -> bytes:
    """The batch kafka-python's producer would send for `records`."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for delta, r in enumerate(records):
        builder.append(delta, r.timestamp_ms, r.key, r.value, list(r.headers))
    return bytes(builder.build())


def _read_with_kafka_python(batch: bytes):
    """(header fields, records) as kafka-python's consumer reads the single `batch`."""
    reader = DefaultRecordBatch(bytearray(batch))
    assert reader.validate_crc()
    assert reader.attributes & ATTR_MSGPACK_PAYLOAD == 0
    records = [
        DecodedRecord(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in reader
    ]
    return reader, records


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("codec", list(Codec), ids=lambda c: c.name.lower())
@pytest.mark.parametrize("timestamp_type", list(TimestampType), ids=["create", "append"])
def test_kafka_batches_round_trip_through_our_readers(codec, timestamp_type):
    records = [
        Record(b"key-%d" % i, b"value %d " % i * 20, 1_700_000_000_000 + 7 * i, (("n", b"%d" % i),))
        for i in range(50)
    ] + [Record(None, None, 1_700_000_000_500, (("null", None), ("é", b"")))]
    batch = build_kafka_batch(
        records, codec=codec, base_offset=100, timestamp_type=timestamp_type, producer_id=9
    )
    [header] = validate_batches(batch)
    assert header.kafka_format and header.codec == codec
    assert (header.base_offset, header.records_count, header.producer_id) == (100, 51, 9)
    assert header.max_timestamp == 1_700_000_000_500
    append_time = header.max_timestamp if timestamp_type else None
    assert decode_records(batch) == _expected(records, 100, append_time)
    assert decode_batches(batch + batch) == 2 * _expected(records, 100, append_time)
    assert record_keys(batch) == [(100 + i, r.key) for i, r in enumerate(records)]


@pytest.mark.parametrize("codec", KAFKA_PYTHON_CODECS, ids=lambda c: c.name.lower())
def test_batches_from_kafka_pythons_producer_read_back_intact(codec):
    records = [
        Record(b"k%d" % i, bytes([i % 256]) * (i * 3), 1_600_000_000_000 + i * 1_000, ())
        for i in range(300)
    ] + [Record(b"hdr", b"v", 1_600_000_000_000, (("trace", b"abc"), ("empty", None)))]
    batch = _kafka_python_batch(records, codec)
    assert read_header(batch).codec == codec  # it did compress (smaller than plain)
    # What the broker does with it: validate, then stamp offsets and epoch (CRC untouched).
    [header] = validate_batches(batch)
    stamped, last, _ = assign_offsets(batch, 1_000, 3)
    assert last == 1_000 + len(records) - 1
    [stamped_header] = validate_batches(stamped)
    assert stamped_header.crc == header.crc
    assert decode_records(stamped) == _expected(records, 1_000)
    # And a Kafka consumer gets the stored bytes back verbatim.
    assert to_kafka_format(bytes(stamped)) == stamped


@pytest.mark.parametrize("codec", KAFKA_PYTHON_CODECS, ids=lambda c: c.name.lower())
def test_converted_tributary_batches_parse_with_kafka_python(codec):
    records = [
        Record(b"k%d" % i, b"v" * i, 1_700_000_000_000 + i, (("h", b"%d" % i), ("none", None)))
        for i in range(40)
    ]
    native = build_batch(
        records, codec=codec, producer_id=4, producer_epoch=2, base_sequence=17, leader_epoch=5
    )
    native, _, _ = assign_offsets(native, 500, 6)
    converted = to_kafka_format(bytes(native))
    reader, decoded = _read_with_kafka_python(converted)
    assert decoded == _expected(records, 500)
    old, new = read_header(native), read_header(converted)
    assert new.attributes == old.attributes & ~ATTR_MSGPACK_PAYLOAD
    for field in (
        "base_offset partition_leader_epoch magic last_offset_delta base_timestamp "
        "max_timestamp producer_id producer_epoch base_sequence records_count"
    ).split():
        assert getattr(new, field) == getattr(old, field), field
    assert reader.compression_type == codec
    assert decode_records(converted) == decode_records(native)


def test_snappy_conversion_reads_back():
    """kafka-python cannot read snappy here (no python-snappy): our reader checks it."""
    records = [Record(b"k", b"snappy " * 30, 5)] * 20
    converted = to_kafka_format(build_batch(records, codec=Codec.SNAPPY))
    [header] = validate_batches(converted)
    assert header.kafka_format and header.codec == Codec.SNAPPY
    assert decode_records(converted) == _expected(records)


def test_converted_log_append_time_batch_keeps_its_timestamps():
    records = [Record(b"a", b"1", 10), Record(b"b", b"2", 30)]
    native, _, _ = assign_offsets(build_batch(records), 0, 1, log_append_time_ms=99)
    reader, decoded = _read_with_kafka_python(to_kafka_format(bytes(native)))
    assert reader.timestamp_type == 1
    assert [r.timestamp for r in decoded] == [99, 99]
    assert decoded == decode_records(native)


def test_header_names_must_be_utf8():
    batch = bytearray(build_kafka_batch([Record(None, b"v", 1, (("ab", b"x"),))]))
    position = bytes(batch).index(b"ab")
    batch[position] = 0xFF
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    validate_batch(bytes(batch))  # the broker never opens records
    with pytest.raises(InvalidRecordError, match="malformed records"):
        decode_records(bytes(batch))


# --------------------------------------------------------------------------- to_kafka_format


def test_to_kafka_format_copies_kafka_batches_and_converts_ours():
    kafka_batch = build_kafka_batch([Record(b"k", b"kafka", 1)], codec=Codec.LZ4)
    native = build_batch([Record(b"n", b"native", 2)], base_offset=1, codec=Codec.ZSTD)
    tail_kafka = build_kafka_batch([Record(b"t", b"x" * 100, 3)], base_offset=2)
    tail_native = build_batch([Record(b"t", b"x" * 100, 3)], base_offset=2)
    converted = to_kafka_format(native)

    # No Tributary batch: the very same bytes object, nothing copied.
    assert to_kafka_format(kafka_batch) is kafka_batch
    assert to_kafka_format(kafka_batch + kafka_batch) == kafka_batch + kafka_batch
    # Mixed: Kafka batches verbatim around the converted one.
    mixed = kafka_batch + native + kafka_batch
    assert to_kafka_format(mixed) == kafka_batch + converted + kafka_batch
    assert to_kafka_format(bytearray(mixed)) == to_kafka_format(memoryview(mixed))
    # A partial trailing Kafka batch is kept as it is, a partial Tributary one dropped.
    for cut in (5, 30, 70, len(tail_kafka) - 1):
        assert to_kafka_format(native + tail_kafka[:cut]) == converted + tail_kafka[:cut]
    for cut in (30, 70, len(tail_native) - 1):
        assert to_kafka_format(native + tail_native[:cut]) == converted
    assert to_kafka_format(b"") == b""
    assert [h.base_offset for _, h in iter_batches(to_kafka_format(mixed))] == [0, 1, 0]


def test_to_kafka_format_refuses_a_damaged_tributary_batch():
    native = bytearray(build_batch([Record(b"k", b"value", 1)]))
    native[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        to_kafka_format(bytes(native))


def test_a_compacted_tributary_batch_converts_with_its_gaps():
    records = [Record(b"k%d" % i, b"%d" % i, 100 + i) for i in range(5)]
    native = filter_batch(build_batch(records, base_offset=10), lambda o, k, v: o in (11, 13))
    reader, decoded = _read_with_kafka_python(to_kafka_format(native))
    assert [(r.offset, r.timestamp, r.value) for r in decoded] == [(11, 101, b"1"), (13, 103, b"3")]
    assert reader.last_offset_delta == 4 and reader.base_offset == 10
    # An empty batch (kept for its offsets) converts to an empty Kafka batch.
    empty = filter_batch(build_batch(records), lambda *_: False, keep_empty=True)
    for codec in (Codec.NONE, Codec.LZ4):
        empty = filter_batch(build_batch(records, codec=codec), lambda *_: False, keep_empty=True)
        reader, decoded = _read_with_kafka_python(to_kafka_format(empty))
        assert decoded == [] and reader.last_offset_delta == 4


# --------------------------------------------------------------------------- properties


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(records=records_st, codec=st.sampled_from(list(Codec)), base=st.integers(0, 2**40))
def test_native_to_kafka_and_back_gives_the_same_records(records, codec, base):
    native = build_batch(records, codec=codec, base_offset=base)
    converted = to_kafka_format(native)
    [header] = validate_batches(converted)
    assert header.kafka_format and header.size == len(converted)
    assert decode_records(converted) == _expected(records, base) == decode_records(native)
    assert build_kafka_batch(records, codec=codec, base_offset=base) == converted


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=records_st,
    codec=st.sampled_from(list(Codec)),
    kafka=st.booleans(),
    append_time=st.none() | st.integers(0, 2**41),
    data=st.data(),
)
def test_filter_batch_keeps_format_offsets_and_records_in_both_formats(
    records, codec, kafka, append_time, data
):
    build = build_kafka_batch if kafka else build_batch
    batch, _, _ = assign_offsets(build(records, codec=codec), 50, 2, log_append_time_ms=append_time)
    batch = bytes(batch)
    keep = data.draw(st.sets(st.integers(50, 50 + len(records) - 1)), label="keep")
    keep_empty = data.draw(st.booleans(), label="keep_empty")
    everything = decode_records(batch)
    out = filter_batch(batch, lambda offset, key, value: offset in keep, keep_empty=keep_empty)
    if len(keep) == len(records):
        assert out is batch
        return
    if not keep and not keep_empty:
        assert out is None
        return
    [header] = validate_batches(out, strict=False)
    old = read_header(batch)
    assert header.kafka_format == kafka
    assert (header.base_offset, header.last_offset_delta) == (50, len(records) - 1)
    assert (header.attributes, header.partition_leader_epoch) == (old.attributes, 2)
    assert header.records_count == len(keep)
    assert decode_records(out) == [r for r in everything if r.offset in keep]
    if kafka and codec in KAFKA_PYTHON_CODECS:
        reader, decoded = _read_with_kafka_python(out)
        assert decoded == [r for r in everything if r.offset in keep]


def _mutations():
    position = st.integers(0, 10_000)
    return st.lists(
        st.one_of(
            st.tuples(st.just("set"), position, st.integers(0, 255)),
            st.tuples(st.just("flip"), position, st.integers(0, 7)),
            st.tuples(st.just("cut"), position, st.just(0)),
            st.tuples(st.just("insert"), position, st.binary(min_size=1, max_size=8)),
        ),
        min_size=1,
        max_size=4,
    )


def _mutate(batch: bytes, mutations, fix_crc: bool) -> bytes:
    out = bytearray(batch)
    for kind, position, arg in mutations:
        if not out:
            break
        # Mostly in the records, where the varint reader works.
        where = position % len(out)
        if kind == "set":
            out[where] = arg
        elif kind == "flip":
            out[where] ^= 1 << arg
        elif kind == "cut":
            del out[where:]
        else:
            out[where:where] = arg
    if fix_crc and len(out) >= BATCH_OVERHEAD:
        struct.pack_into(">i", out, 8, len(out) - 12)
        struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def _read_everything(data: bytes) -> None:
    """Every reader and the conversion over `data`."""
    for call in (
        lambda: validate_batches(data),
        lambda: validate_batches(data, strict=False),
        lambda: decode_batches(data),
        lambda: decode_records(data),
        lambda: record_keys(data),
        lambda: filter_batch(data, lambda offset, key, value: offset % 2 == 0),
        lambda: filter_batch(data, lambda *_: False, keep_empty=True),
        lambda: to_kafka_format(data),
    ):
        try:
            call()
        except RecordError:
            pass


@settings(max_examples=120, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=records_st,
    codec=st.sampled_from(list(Codec)),
    mutations=_mutations(),
    fix_crc=st.booleans(),
)
def test_damaged_kafka_batches_raise_only_record_errors(records, codec, mutations, fix_crc):
    # With the CRC and length fixed up, the damage reaches the record decoder itself.
    _read_everything(_mutate(build_kafka_batch(records, codec=codec), mutations, fix_crc))


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=records_st,
    codec=st.sampled_from(list(Codec)),
    mutations=_mutations(),
    fix_crc=st.booleans(),
)
def test_damaged_tributary_batches_convert_or_raise_record_errors(
    records, codec, mutations, fix_crc
):
    _read_everything(_mutate(build_batch(records, codec=codec), mutations, fix_crc))


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(
    count=st.integers(-3, 40),
    payload=st.binary(max_size=300),
    attributes=st.integers(0, 0x7F),
)
def test_random_records_sections_raise_only_record_errors(count, payload, attributes):
    header = build_kafka_batch([Record(None, b"v", 1)])[:BATCH_OVERHEAD]
    batch = bytearray(header + payload)
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">h", batch, 21, attributes)
    struct.pack_into(">i", batch, 57, count)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    _read_everything(bytes(batch))


def test_the_pure_python_codec_aiokafka_falls_back_to_works_too(monkeypatch):
    """Without aiokafka's C extension its pure-Python classes are used: same results."""
    from aiokafka.record import default_records as aiokafka_records

    python_classes = (
        aiokafka_records._DefaultRecordBatchPy,
        aiokafka_records._DefaultRecordBatchBuilderPy,
    )
    records = [Record(b"k%d" % i, b"v" * i, 1_000 + i, (("h", None),)) for i in range(30)]
    with_c = {codec: to_kafka_format(build_batch(records, codec=codec)) for codec in Codec}
    monkeypatch.setattr(kafka_format, "_aiokafka", lambda: python_classes)
    for codec in Codec:
        native = build_batch(records, codec=codec)
        assert to_kafka_format(native) == with_c[codec]
        assert decode_records(with_c[codec]) == _expected(records)
        damaged = bytearray(with_c[codec])
        damaged[-5:] = b"\xff" * 5
        _read_everything(bytes(damaged))
