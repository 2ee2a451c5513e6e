"""Leader-epoch cache: OffsetForLeaderEpoch answers (KIP-101/279) and truncation."""

from __future__ import annotations

import pytest

from broker.core.log import (
    UNDEFINED_EPOCH,
    EpochEntry,
    LeaderEpochCache,
    LeaderEpochCheckpointFile,
    Log,
    LogConfig,
)
from client.protocol.records import Record, build_batch

UNDEFINED = (UNDEFINED_EPOCH, -1)


def cache(*entries: tuple[int, int]) -> LeaderEpochCache:
    return LeaderEpochCache(entries=entries)


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (UNDEFINED_EPOCH, UNDEFINED),  # a bootstrapping follower with no epoch
        (5, (5, 100)),  # the latest epoch is still being written: the LEO
        (4, (3, 60)),  # an epoch this leader never saw: the one before it, ends where 5 began
        (3, (3, 60)),
        (2, (1, 20)),
        (1, (1, 20)),
        (0, (0, 10)),  # below the first epoch: Kafka 2.8 answers the first start offset
        (6, UNDEFINED),  # above the latest: unknown
    ],
)
def test_end_offset_for(requested, expected):
    epochs = cache((1, 10), (3, 20), (5, 60))
    assert epochs.end_offset_for(requested, log_end_offset=100) == expected


def test_end_offset_for_on_an_empty_cache_is_undefined():
    assert cache().end_offset_for(0, 10) == UNDEFINED


def test_assign_keeps_entries_strictly_increasing():
    epochs = cache()
    assert epochs.assign(1, 0)
    assert not epochs.assign(1, 5)  # same epoch, later offset: nothing new
    assert epochs.assign(2, 5)
    assert epochs.assign(3, 9)
    assert epochs.assign(2, 7)  # an older epoch again: newer entries give way
    assert epochs.entries == (EpochEntry(1, 0), EpochEntry(2, 7))
    assert epochs.assign(4, 7)  # same start offset, higher epoch replaces
    assert epochs.entries == (EpochEntry(1, 0), EpochEntry(4, 7))
    assert epochs.latest_epoch == 4 and epochs.earliest_entry == EpochEntry(1, 0)
    assert epochs.epoch_for_offset(6) == 1 and epochs.epoch_for_offset(100) == 4
    with pytest.raises(ValueError):
        epochs.assign(-1, 3)


def test_truncate_from_end_and_start():
    epochs = cache((1, 0), (2, 10), (3, 20))
    assert not epochs.truncate_from_end(25)
    assert epochs.truncate_from_end(20)
    assert epochs.entries == (EpochEntry(1, 0), EpochEntry(2, 10))
    assert epochs.truncate_from_start(15)  # epoch 2 still covers offset 15
    assert epochs.entries == (EpochEntry(2, 15),)
    assert not epochs.truncate_from_start(15)
    epochs.clear()
    assert epochs.entries == () and epochs.latest_epoch is None


def test_every_change_is_persisted_in_kafka_format(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    epochs = LeaderEpochCache(LeaderEpochCheckpointFile(path))
    epochs.assign(0, 0)
    epochs.assign(4, 17)
    assert path.read_text() == "0\n2\n0 0\n4 17\n"
    epochs.truncate_from_end(17)
    assert path.read_text() == "0\n1\n0 0\n"
    assert LeaderEpochCheckpointFile(path).read() == [(0, 0)]


def _batch(value: bytes) -> bytes:
    return build_batch([Record(None, value, 0)])


def test_kip_101_divergent_logs_reconcile_by_epoch(tmp_path):
    """KIP-101 scenario 2: A has m1 m2 (epoch 0), B only m1. Both restart, B leads epoch 1
    and writes m3 at offset 1. A asks B where epoch 0 ends, truncates m2, copies m3."""
    config = LogConfig()
    a = Log.open(tmp_path / "a" / "t-0", config, now_ms=0)
    b = Log.open(tmp_path / "b" / "t-0", config, now_ms=0)
    a.append_as_leader(_batch(b"m1"), leader_epoch=0, now_ms=0)
    b.append_as_follower(a.read(0, 1 << 20).records, now_ms=0)
    a.append_as_leader(_batch(b"m2"), leader_epoch=0, now_ms=0)

    b.maybe_assign_epoch_start_offset(1, b.log_end_offset)
    b.append_as_leader(_batch(b"m3"), leader_epoch=1, now_ms=0)

    epoch, end_offset = b.leader_epoch_cache.end_offset_for(
        a.leader_epoch_cache.latest_epoch, b.log_end_offset
    )
    assert (epoch, end_offset) == (0, 1)
    a.truncate_to(min(end_offset, a.log_end_offset))
    a.append_as_follower(b.read(a.log_end_offset, 1 << 20).records, now_ms=0)
    assert a.read(0, 1 << 20).records == b.read(0, 1 << 20).records
    assert a.leader_epoch_cache.entries == b.leader_epoch_cache.entries
