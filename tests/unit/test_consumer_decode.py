"""The consumer's columnar decoder gives exactly the records the general decoder does:
offsets, timestamps (create and log-append time), keys, values, headers and epochs, from
either payload format, starting at any position inside a batch."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from client.consumer import ConsumerRecord
from client.consumer.batch import decode_fetched
from client.protocol.records import (
    Record,
    assign_offsets,
    build_batch,
    build_kafka_batch,
    decode_batches,
)
from client.protocol.types import TopicPartition

TP = TopicPartition("t", 3)

records = st.lists(
    st.builds(
        Record,
        st.none() | st.binary(max_size=8),
        st.none() | st.binary(max_size=32),
        st.integers(0, 2**41),
        st.lists(st.tuples(st.text(max_size=4), st.none() | st.binary(max_size=4)), max_size=2),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(records, min_size=1, max_size=4),
    st.booleans(),
    st.booleans(),
    st.integers(0, 100),
    st.integers(0, 60),
)
def test_one_pass_decoding_matches_the_general_decoder(
    batches, kafka_format, append_time, base, skip
):
    build = build_kafka_batch if kafka_format else build_batch
    data = bytearray(b"".join(build(batch) for batch in batches))
    data, last, _ = assign_offsets(
        data, base, leader_epoch=7, log_append_time_ms=1_700_000_000_000 if append_time else None
    )
    position = min(base + skip, last + 1)
    got, next_offset, error = decode_fetched(TP, bytes(data), position)
    got = got.records()
    expected = [
        ConsumerRecord(TP.topic, TP.partition, r.offset, r.timestamp, r.key, r.value,
                       r.headers, 7)
        for r in decode_batches(data)
        if r.offset >= position
    ]  # fmt: skip
    assert error is None
    assert got == expected
    assert next_offset == last + 1
