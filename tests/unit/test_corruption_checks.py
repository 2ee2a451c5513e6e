"""Damaged batches on the client and follower paths (issue 17): the consumer checks every
batch's CRC before decoding (check_crcs), hands out the records before a damaged batch
and then raises CorruptBatchError naming topic, partition, offsets and broker; the CLI
prints one line and exits 1; a follower never appends a damaged fetch response, counts
it and backs off."""

from __future__ import annotations

import pytest

from broker.core.follower_fetch import FetchPhase, FollowerFetch, FollowerFetchPartition
from broker.core.log import Log, LogConfig
from broker.core.partition import Partition
from broker.core.replica_manager import FetchedPartition, ReplicaManagerStats, ReplicationConfig
from client.consumer import Consumer, CorruptBatchError
from client.consumer.batch import decode_fetched
from client.consumer.subscription import PartitionState
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.records import CorruptRecordError, Record, assign_offsets, build_batch
from client.protocol.types import TopicPartition

TP = TopicPartition("t", 0)


def batches(*values_per_batch: list[bytes], base: int = 0) -> bytes:
    out = bytearray()
    offset = base
    for values in values_per_batch:
        batch = build_batch([Record(None, v, 1_000) for v in values])
        patched, last, _ = assign_offsets(batch, offset, 0)
        out += patched
        offset = last + 1
    return bytes(out)


def flip(data: bytes, value: bytes, start: int = 0) -> bytes:
    """`data` with one bit of the first `value` after `start` flipped (a record value:
    the batch CRC fails, the payload still decodes)."""
    position = data.index(value, start)
    damaged = bytearray(data)
    damaged[position] ^= 0x01
    return bytes(damaged)


def test_decode_stops_before_a_damaged_batch_and_names_it():
    good = batches([b"a", b"b"], [b"c"], [b"d"])
    second = len(batches([b"a", b"b"]))
    damaged = flip(good, b"c", second)
    batch, next_offset, error = decode_fetched(TP, damaged, 0, broker=3)
    assert batch.values == [b"a", b"b"]
    assert next_offset == 2
    assert isinstance(error, CorruptBatchError) and isinstance(error, CorruptRecordError)
    assert (error.topic, error.partition, error.first_offset, error.last_offset) == ("t", 0, 2, 2)
    assert error.broker == 3
    assert "t-0" in str(error) and "2..2" in str(error) and "broker 3" in str(error)
    # Without the check the damaged value would be decoded (the payload still parses).
    batch, _, error = decode_fetched(TP, damaged, 0, check_crcs=False)
    assert error is None and len(batch) == 4 and batch.values[2] != b"c"


def test_batches_below_the_position_are_not_checked():
    damaged = flip(batches([b"a"], [b"b"]), b"a")
    batch, next_offset, error = decode_fetched(TP, damaged, 1)
    assert error is None and batch.values == [b"b"] and next_offset == 2


def test_poll_raises_for_the_damaged_batch_never_its_value():
    consumer = Consumer(pool=None, bootstrap="127.0.0.1:1")
    state = PartitionState()
    state.position = 0
    part = m.FetchResponsePartition(
        partition=0,
        error_code=0,
        high_watermark=1,
        last_stable_offset=1,
        log_start_offset=0,
        records=flip(batches([b"secret"]), b"secret"),
    )
    assert consumer.fetcher.apply_fetched(TP, state, 0, part, node=2)
    assert isinstance(state.error, CorruptBatchError) and state.error.broker == 2
    assert not state.buffered


def _follower(tmp_path, stats: ReplicaManagerStats) -> tuple[FollowerFetch, Partition]:
    log = Log.open(tmp_path / "t-0", LogConfig(), now_ms=0)
    partition = Partition(TP, 2, log)
    followers = FollowerFetch({TP: partition}, ReplicationConfig(), stats, lambda k, d: None)
    followers.start(TP, leader_id=1, leader_epoch=0)
    followers.states[TP].phase = FetchPhase.FETCHING
    return followers, partition


def test_a_follower_never_appends_a_damaged_fetch_and_backs_off(tmp_path, caplog):
    stats = ReplicaManagerStats()
    followers, partition = _follower(tmp_path, stats)
    sent = [FollowerFetchPartition(TP, 0, 0, 0, 1 << 20)]
    damaged = flip(batches([b"a"], [b"b"]), b"b")
    answer = {TP: FetchedPartition(ErrorCode.NONE, 2, 0, 2, damaged)}
    followers.apply_fetch(1, sent, answer, now_ms=1_000)
    state = followers.states[TP]
    assert partition.log_end_offset == 0  # not even the good batch before it
    assert stats.corrupt_fetches == 1
    assert state.phase is FetchPhase.FETCHING  # the same offset is fetched again...
    assert state.delayed_until_ms == 1_000 + ReplicationConfig().replica_fetch_backoff_ms
    assert followers.fetch_request(1, now_ms=1_001) == []  # ...after the back-off
    assert [p.fetch_offset for p in followers.fetch_request(1, now_ms=3_000)] == [0]
    assert any("corrupt batch" in r.message and r.levelname == "ERROR" for r in caplog.records)
    good = {TP: FetchedPartition(ErrorCode.NONE, 2, 0, 2, batches([b"a"], [b"b"]))}
    followers.apply_fetch(1, sent, good, now_ms=3_000)
    assert partition.log_end_offset == 2


def test_cli_consume_prints_one_line_and_exits_1(monkeypatch, capsys):
    from tools import cli
    from tools.commands import consume

    async def failing_poll(consumer, timeout_ms):
        raise CorruptBatchError(TP, 5, 7, 1, "CRC mismatch")

    async def fake_run(args):
        await consume._poll_or_fail(type("C", (), {"poll_batches": failing_poll})(), 10)

    monkeypatch.setattr(consume, "run_async", lambda fn: __import__("trio").run(fake_run, None))
    code = cli.main(["consume", "t", "--bootstrap-server", "127.0.0.1:1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len(err) == 1 and "t-0" in err[0] and "5..7" in err[0] and "broker 1" in err[0]


@pytest.mark.parametrize("check", [True, False])
def test_check_crcs_is_a_consumer_setting(check):
    assert Consumer(pool=None, bootstrap="x:1", check_crcs=check).check_crcs is check
    assert Consumer(pool=None, bootstrap="x:1").check_crcs is True
