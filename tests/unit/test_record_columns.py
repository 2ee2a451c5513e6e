"""`client.producer.record_columns`: what `send_many` is handed, converted and sized as `send()`
sizes one record, and the run arithmetic (`size`, `fit`) the producer batches with."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client.producer.record_columns import RecordColumns, header_list, record_size, to_bytes

records = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=60), st.text(max_size=10)),
        st.one_of(st.none(), st.binary(max_size=8)),
        st.lists(st.tuples(st.sampled_from(["a", "bb"]), st.binary(max_size=5)), max_size=2),
    ),
    min_size=1,
    max_size=40,
)


def send_sizes(rows) -> list[int]:
    """Each record's size as `send()` counts it."""
    return [
        record_size(to_bytes(key), to_bytes(value), header_list(headers)[1])
        for value, key, headers in rows
    ]


@given(rows=records, with_keys=st.booleans(), with_headers=st.booleans(), data=st.data())
def test_sizes_and_runs_match_one_record_at_a_time(rows, with_keys, with_headers, data):
    if not with_keys:
        rows = [(value, None, headers) for value, _, headers in rows]
    if not with_headers:
        rows = [(value, key, []) for value, key, _ in rows]
    columns = RecordColumns.prepare(
        [value for value, _, _ in rows],
        [key for _, key, _ in rows] if with_keys else None,
        [headers for _, _, headers in rows] if with_headers else None,
        7,
    )
    sizes = send_sizes(rows)
    assert columns.largest == max(sizes)
    count = len(rows)
    start = data.draw(st.integers(0, count - 1))
    stop = data.draw(st.integers(start, count))
    assert columns.size(start, stop) == sum(sizes[start:stop])
    limit = data.draw(st.integers(-10, 800))
    fits = columns.fit(start, limit)
    assert fits == 0 or sum(sizes[start : start + fits]) <= limit
    assert start + fits == count or sum(sizes[start : start + fits + 1]) > limit
    key, value, timestamp, headers = columns.record(start)
    assert (key, value, timestamp) == (to_bytes(rows[start][1]), to_bytes(rows[start][0]), 7)
    assert list(headers) == list(header_list(rows[start][2])[0])


def test_columns_are_copies_and_extend_a_batch():
    values = [b"a", b"b", b"c"]
    columns = RecordColumns.prepare(values, None, None, [1, 2, 3])
    values[0] = b"changed"
    batch = SimpleNamespace(keys=[], values=[], timestamps=[], headers=[])
    columns.copy_into(batch, 1, 3)
    assert (batch.keys, batch.values, batch.timestamps, batch.headers) == (
        [None, None],
        [b"b", b"c"],
        [2, 3],
        [(), ()],
    )
    assert columns.record(0)[1] == b"a"


def test_mismatched_columns_and_bad_types_are_refused():
    with pytest.raises(ValueError, match="1 keys for 2 values"):
        RecordColumns.prepare([b"a", b"b"], [b"k"], None, 0)
    with pytest.raises(ValueError, match="3 timestamps for 2 values"):
        RecordColumns.prepare([b"a", b"b"], None, None, [1, 2, 3])
    with pytest.raises(TypeError, match="got int"):
        RecordColumns.prepare([b"a", 5], None, None, 0)
