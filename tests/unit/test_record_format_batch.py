"""`consume` renders a poll's records in one call; whatever the format and properties,
the bytes are exactly those of rendering each record alone (the fast path for the
default layout changes nothing a user sees)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from client.consumer import ConsumerRecord
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
