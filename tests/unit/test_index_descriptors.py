"""Index files share a bounded number of open descriptors (broker/core/log/index.py
`OPEN_HANDLES`): a broker with many partitions does not run out of them, and an index
whose handle was closed for others keeps every entry it was given."""

from __future__ import annotations

import os

import pytest

from broker.core.log import index as index_module
from broker.core.log.index import OffsetIndex, TimeIndex

INDEXES = 60
LIMIT = 8


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def small_limit(monkeypatch):
    handles = index_module._OpenHandles(LIMIT)
    monkeypatch.setattr(index_module, "OPEN_HANDLES", handles)
    return handles


def test_many_indexes_hold_at_most_the_limit_and_keep_their_entries(tmp_path, small_limit):
    before = open_descriptors()
    offsets = [OffsetIndex.create(tmp_path / f"{i}.index", 100, 1 << 20) for i in range(INDEXES)]
    times = [TimeIndex.create(tmp_path / f"{i}.timeindex", 100, 1 << 20) for i in range(INDEXES)]
    for round_ in range(3):  # each index used again after others closed its handle
        for i in range(INDEXES):
            assert offsets[i].append(100 + round_ * 10, round_ * 4096)
            assert times[i].maybe_append(1_000 + round_, 100 + round_ * 10)
            assert open_descriptors() <= before + LIMIT
    assert len(small_limit) == LIMIT
    for i in range(INDEXES):
        offsets[i].flush()  # reopens a closed handle to fsync
        times[i].flush()
        assert open_descriptors() <= before + LIMIT
    for i in range(INDEXES):
        reopened = OffsetIndex.open(tmp_path / f"{i}.index", 100, 1 << 20, log_size=1 << 20)
        assert [reopened.lookup(100 + r * 10) for r in range(3)] == [
            (100 + r * 10, r * 4096) for r in range(3)
        ]
        assert TimeIndex.open(tmp_path / f"{i}.timeindex", 100, 1 << 20).last_entry == (
            1_002,
            120,
        )
    for index in (*offsets, *times):
        index.close()
    assert len(small_limit) == 0
    assert open_descriptors() == before


def test_truncation_after_the_handle_was_closed_for_others(tmp_path, small_limit):
    first = OffsetIndex.create(tmp_path / "first.index", 0, 1 << 20)
    for offset in range(5):
        first.append(offset * 10, offset * 100)
    others = [OffsetIndex.create(tmp_path / f"{i}.index", 0, 1 << 20) for i in range(LIMIT)]
    first.truncate_to(20)  # its handle was closed by the others' creation
    first.flush()
    reopened = OffsetIndex.open(tmp_path / "first.index", 0, 1 << 20, log_size=1000)
    assert len(reopened) == 2 and reopened.last_entry == (10, 100)
    for index in (first, *others):
        index.close()
