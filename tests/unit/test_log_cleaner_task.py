"""The log cleaner as a broker runs it (broker/tasks/log_cleaner.py): the background task over a
LogManager, and compacted topics through real brokers (tests/support/cluster.py).

A client of a compacted topic sees old values disappear while it keeps producing and
consuming; a consumer from the beginning reads an ordered log of each key's newest
values; a replica added later copies the compacted log, gaps included; a keyless record
is refused with INVALID_RECORD.
"""

from __future__ import annotations

import pytest
import trio

from broker.core.log import Log, LogConfig, LogManager
from broker.tasks.log_cleaner import CleanerSettings, LogCleanerTask
from client.consumer import open_consumer
from client.producer import open_producer
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.records import Record, build_batch, decode_records, iter_batches
from client.protocol.types import TopicPartition
from server_common.metrics import MetricsRegistry
from tests.support.cluster import ClusterBroker, TestCluster, open_test_cluster

TP = TopicPartition("c", 0)
COMPACT = LogConfig(cleanup_policy="compact", segment_bytes=500, min_cleanable_dirty_ratio=0.1)
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "1000",
    "min.cleanable.dirty.ratio": "0.1",
}


def trio_ms() -> int:
    return int(trio.current_time() * 1000)


def read_all(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).records
        for position, header in iter_batches(data):
            out += [
                (r.offset, r.key, r.value)
                for r in decode_records(data[position : position + header.size])
            ]
            offset = header.next_offset
    return out


def fill(log: Log, count: int, keys: int = 5) -> None:
    for i in range(count):
        batch = build_batch([Record(b"k%d" % (i % keys), b"v%d" % i, 1_000 + i)])
        log.append_as_leader(batch, leader_epoch=0, now_ms=1_000 + i)
    log.roll(2_000)


async def wait_for(predicate, timeout_s: float = 60.0) -> None:
    with trio.fail_after(timeout_s):
        while not predicate():
            await trio.sleep(0.05)


# -- the task over a LogManager ----------------------------------------------------------------


async def test_the_task_cleans_dirty_logs_checkpoints_and_counts(tmp_path, autojump_clock):
    manager = LogManager.open(tmp_path, COMPACT, now_ms=0)
    log = manager.get_or_create_log(TP, now_ms=0)
    fill(log, 60)
    metrics = MetricsRegistry()
    task = LogCleanerTask(
        manager,
        CleanerSettings(backoff_s=1.0),
        lambda: {TP: log.log_end_offset},
        trio_ms,
        metrics,
    )
    async with trio.open_nursery() as nursery:
        task.start(nursery)
        await wait_for(lambda: log.cleaner_checkpoint == 60)
        assert [r[2] for r in read_all(log)] == [b"v55", b"v56", b"v57", b"v58", b"v59"]
        # More dirty data is picked up after the backoff.
        fill(log, 30, keys=2)
        await wait_for(lambda: log.cleaner_checkpoint == 90)
        nursery.cancel_scope.cancel()
    assert (tmp_path / "cleaner-offset-checkpoint").read_text().endswith("c 0 90\n")
    snapshot = metrics.snapshot()
    assert snapshot["log_cleaner_passes_total"] == 2
    assert snapshot["log_cleaner_bytes_cleaned_total"] > 0
    assert 0 <= snapshot["log_cleaner_max_dirty_ratio"] <= 1
    manager.close()


async def test_the_byte_rate_limit_is_kept(tmp_path, autojump_clock):
    manager = LogManager.open(tmp_path, COMPACT, now_ms=0)
    log = manager.get_or_create_log(TP, now_ms=0)
    fill(log, 200)
    rate = 20_000
    metrics = MetricsRegistry()
    task = LogCleanerTask(
        manager,
        CleanerSettings(io_max_bytes_per_second=rate, step_bytes=1024),
        lambda: {TP: log.log_end_offset},
        trio_ms,
        metrics,
    )
    async with trio.open_nursery() as nursery:
        start = trio.current_time()
        task.start(nursery)
        await wait_for(lambda: task.passes == 1, timeout_s=600)
        elapsed = trio.current_time() - start
        nursery.cancel_scope.cancel()
    snapshot = metrics.snapshot()
    moved = (
        snapshot["log_cleaner_bytes_cleaned_total"] + snapshot["log_cleaner_bytes_written_total"]
    )
    assert moved > 10_000 and moved / rate * 0.9 <= elapsed <= moved / rate + 1
    manager.close()


async def test_stopping_mid_pass_leaves_the_log_as_it_was(tmp_path, autojump_clock):
    manager = LogManager.open(tmp_path, COMPACT, now_ms=0)
    log = manager.get_or_create_log(TP, now_ms=0)
    fill(log, 200)
    before = read_all(log)
    task = LogCleanerTask(
        manager,
        CleanerSettings(io_max_bytes_per_second=2_000, step_bytes=500),
        lambda: {TP: log.log_end_offset},
        trio_ms,
    )
    async with trio.open_nursery() as nursery:
        task.start(nursery)
        await wait_for(lambda: any(p.name.endswith(".cleaned") for p in log.directory.iterdir()))
        nursery.cancel_scope.cancel()
    assert not any(p.name.endswith(".cleaned") for p in log.directory.iterdir())
    after = read_all(log)
    assert set(after) <= set(before) and after[-5:] == before[-5:]
    manager.close()


async def test_a_log_that_fails_to_clean_is_left_alone_and_the_task_goes_on(
    tmp_path, autojump_clock
):
    manager = LogManager.open(tmp_path, COMPACT, now_ms=0)
    bad = manager.get_or_create_log(TP, now_ms=0)
    good_tp = TopicPartition("d", 0)
    good = manager.get_or_create_log(good_tp, now_ms=0)
    fill(bad, 40)
    fill(good, 40)
    with open(bad.segments[0].log_path, "r+b") as file:  # bit rot in a closed segment
        file.seek(120)  # inside the second batch, where the CRC covers it
        file.write(b"\x00\x01")
    task = LogCleanerTask(
        manager,
        CleanerSettings(backoff_s=1.0),
        lambda: {TP: 40, good_tp: 40},
        trio_ms,
    )
    async with trio.open_nursery() as nursery:
        task.start(nursery)
        await wait_for(lambda: good.cleaner_checkpoint == 40 and task.uncleanable == {TP})
        await trio.sleep(5)
        nursery.cancel_scope.cancel()
    assert bad.cleaner_checkpoint == 0
    manager.close()


# -- through real brokers ----------------------------------------------------------------------


def cleaner_of(broker: ClusterBroker, nursery: trio.Nursery) -> LogCleanerTask:
    """The broker's own cleaner once the server starts one; until then, one started here
    on the broker's storage with its settings."""
    server = broker.server
    if server.background.log_cleaner is None:
        server.background.log_cleaner = LogCleanerTask.for_broker(
            server.config,
            server.log_manager,
            server.replica_manager.high_watermarks,
            server.now_ms,
            MetricsRegistry(),
        )
        server.background.log_cleaner.start(nursery)
    return server.background.log_cleaner


def leader_log(cluster: TestCluster, broker_id: int) -> Log:
    return cluster.brokers[broker_id].server.replica_manager.get_partition(TP).log


async def test_a_compacted_topic_loses_old_values_and_stays_readable(autojump_clock):
    settings = {"log.cleaner.backoff.ms": "200"}
    async with open_test_cluster(1, broker_settings=settings) as cluster:
        await cluster.create_topic("c", 1, configs=TOPIC_CONFIGS)
        async with trio.open_nursery() as nursery:
            cleaner = cleaner_of(cluster.brokers[1], nursery)
            produced = {}
            async with open_producer(
                cluster.bootstrap, connector=cluster.connector(), linger_ms=0, acks="all"
            ) as producer:
                for i in range(300):
                    key = b"key-%d" % (i % 7)
                    metadata = await (await producer.send("c", b"value-%d" % i, key=key))
                    produced[metadata.offset] = (key, b"value-%d" % i)
                with pytest.raises(TributaryError) as refused:
                    await (await producer.send("c", b"no key"))
                assert refused.value.code is ErrorCode.INVALID_RECORD
            log = leader_log(cluster, 1)
            await wait_for(lambda: cleaner.passes > 0 and len(read_all(log)) < 100)

            async with open_consumer(
                cluster.bootstrap, connector=cluster.connector(), auto_offset_reset="earliest"
            ) as consumer:
                consumer.assign([TP])
                seen = []
                with trio.fail_after(30):
                    while not seen or seen[-1].offset < 299:
                        seen += await consumer.poll(500)
            offsets = [r.offset for r in seen]
            assert offsets == sorted(set(offsets)) and len(seen) < 300
            for record in seen:  # every record is the one produced at its offset
                assert produced[record.offset] == (record.key, record.value)
            newest = {key: offset for offset, (key, _value) in sorted(produced.items())}
            assert set(newest.values()) <= set(offsets)  # each key's newest value is there
            nursery.cancel_scope.cancel()


async def test_a_replica_added_after_cleaning_copies_the_compacted_log(autojump_clock):
    async with open_test_cluster(2) as cluster:
        await cluster.create_topic("c", 1, assignment={0: [1]}, configs=TOPIC_CONFIGS)
        async with trio.open_nursery() as nursery:
            cleaner = cleaner_of(cluster.brokers[1], nursery)
            for i in range(120):
                await cluster.append(TP, b"v%d" % i if i % 11 else None, key=b"k%d" % (i % 6))
            leader = leader_log(cluster, 1)
            leader.roll(cluster.clock())
            cleaner.wake()
            await wait_for(lambda: leader.cleaner_checkpoint == 120)
            compacted = read_all(leader)
            assert len(compacted) < 20
            await cluster.reassign(TP, [1, 2])
            follower = leader_log(cluster, 2)
            await wait_for(lambda: follower.log_end_offset == leader.log_end_offset)
            assert read_all(follower) == compacted
            await cluster.move_leader(TP, 2)
            assert [(r.offset, r.key, r.value) for r in cluster.records(TP)] == compacted
            nursery.cancel_scope.cancel()
