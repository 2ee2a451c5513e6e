"""The encode side of `client.protocol.records`: `build_column_batch` (the producer's
encoder, ormsgpack inside) writes exactly the bytes msgpack and `build_batch`'s record
layout always gave, so every reader, the broker's CRC check and stored logs see no
change."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from client.protocol.records import (
    ATTR_MSGPACK_PAYLOAD,
    BATCH_OVERHEAD,
    Codec,
    InvalidRecordError,
    Record,
    build_batch,
    build_column_batch,
    decode_records,
    pack_batch,
    validate_batch,
)

record_lists = st.lists(
    st.builds(
        Record,
        st.one_of(st.none(), st.binary(max_size=20)),
        st.one_of(st.none(), st.binary(max_size=300)),
        st.integers(0, 2**45),
        st.lists(
            st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))),
            max_size=3,
        ),
    ),
    min_size=1,
    max_size=50,
)


def msgpack_reference(records: list[Record], producer_id: int) -> bytes:
    """The batch as build_batch wrote it before the column encoder: msgpack lists."""
    base = records[0].timestamp_ms
    entries = [
        [i, r.timestamp_ms - base, r.key, r.value, [[n, v] for n, v in r.headers]]
        for i, r in enumerate(records)
    ]
    return pack_batch(
        msgpack.packb(entries, use_bin_type=True),
        base_offset=0,
        leader_epoch=-1,
        attributes=ATTR_MSGPACK_PAYLOAD,
        last_offset_delta=len(records) - 1,
        base_timestamp=base,
        max_timestamp=max(r.timestamp_ms for r in records),
        producer_id=producer_id,
        producer_epoch=-1 if producer_id < 0 else 0,
        base_sequence=-1 if producer_id < 0 else 0,
        records_count=len(records),
    )


@given(records=record_lists, idempotent=st.booleans())
def test_the_same_bytes_as_msgpack_lists(records, idempotent):
    producer_id = 9 if idempotent else -1
    fields = {"producer_epoch": 0, "base_sequence": 0} if idempotent else {}
    expected = msgpack_reference(records, producer_id)
    assert build_batch(records, producer_id=producer_id, **fields) == expected
    keys, values, timestamps, headers = zip(*records, strict=True)
    columns = build_column_batch(
        list(keys), list(values), list(timestamps), list(headers), producer_id=producer_id, **fields
    )
    assert columns == expected
    validate_batch(columns)
    decoded = decode_records(columns)
    assert [(d.key, d.value, d.timestamp) for d in decoded] == [
        (r.key, r.value, r.timestamp_ms) for r in records
    ]


def test_compressed_columns_decode_to_the_records():
    values = [b"value %d" % i * 10 for i in range(100)]
    batch = build_column_batch([None] * 100, values, [5] * 100, [()] * 100, codec=Codec.ZSTD)
    assert [r.value for r in decode_records(batch)] == values
    assert len(batch) > BATCH_OVERHEAD


def test_bad_columns_are_refused():
    with pytest.raises(ValueError, match="at least one record"):
        build_column_batch([], [], [], [])
    with pytest.raises(ValueError, match="one entry per record"):
        build_column_batch([None], [b"a", b"b"], [0, 0], [(), ()])
    with pytest.raises(InvalidRecordError, match="cannot be encoded"):
        build_column_batch([None], [object()], [0], [()])  # type: ignore[list-item]
