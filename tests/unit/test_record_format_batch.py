"""`consume` renders a poll's records (or its column batches) in one call; whatever the
format and properties, the bytes are exactly those of rendering each record alone (the
fast path for the default layout changes nothing a user sees)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from client.consumer import ConsumerBatch, ConsumerRecord
from tools.commands.record_format import RecordFormatter

records = st.lists(
    st.builds(
        ConsumerRecord,
        st.just("t"),
        st.integers(0, 3),
        st.integers(0, 10**6),
        st.integers(0, 2**41),
        st.none() | st.binary(max_size=6),
        st.none() | st.binary(max_size=12) | st.text(max_size=6).map(str.encode),
        st.just(()),
        st.just(0),
    ),
    max_size=8,
)


@given(
    records,
    st.sampled_from(["text", "raw", "json", "base64"]),
    st.booleans(),
    st.sampled_from(["\n", "\0", "--"]),
)
def test_rendering_a_batch_equals_rendering_each_record(batch, fmt, print_key, separator):
    properties = {"print.key": str(print_key).lower(), "line.separator": separator}
    formatter = RecordFormatter(fmt, properties)
    assert formatter.render_all(batch) == b"".join(formatter.render(r) for r in batch)


def _as_batches(records: list[ConsumerRecord], split: int) -> list[ConsumerBatch]:
    """The records as column batches, as poll_batches hands them out: a batch per run of
    one partition, cut at `split` too."""
    out: list[ConsumerBatch] = []
    for i, r in enumerate(records):
        if not out or out[-1].partition != r.partition or i == split:
            out.append(ConsumerBatch(r.topic, r.partition))
        batch = out[-1]
        batch.offsets.append(r.offset)
        batch.timestamps.append(r.timestamp)
        batch.keys.append(r.key)
        batch.values.append(r.value)
        batch.headers.append(r.headers)
        batch.leader_epochs.append(r.leader_epoch)
    return out


@given(
    records,
    st.integers(0, 8),
    st.sampled_from(["text", "raw", "json", "base64"]),
    st.booleans(),
    st.sampled_from(["\n", "\0", "--", ""]),
)
def test_rendering_column_batches_equals_rendering_each_record(
    batch, split, fmt, print_key, separator
):
    """What `consume` prints from poll_batches: the same bytes, record for record."""
    properties = {"print.key": str(print_key).lower(), "line.separator": separator}
    formatter = RecordFormatter(fmt, properties)
    expected = b"".join(formatter.render(r) for r in batch)
    assert formatter.render_batches(_as_batches(batch, split)) == expected
