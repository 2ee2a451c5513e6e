"""A running broker keeps its offset checkpoints current: recovery points as rolled
segments reach the disk, log start offsets as retention deletes segments (both written
from a snapshot in a worker thread; see broker/tasks/background.py)."""

from __future__ import annotations

from broker.core.log.checkpoint import OffsetCheckpointFile
from client.protocol.types import TopicPartition
from tests.support.cluster import open_test_cluster

SETTINGS = {
    "log.flush.scheduler.interval.ms": "50",
    "log.flush.offset.checkpoint.interval.ms": "100",
    "replica.high.watermark.checkpoint.interval.ms": "50",
    "log.retention.check.interval.ms": "100",
}
TP = TopicPartition("old", 0)


async def test_retention_and_flushes_reach_the_checkpoint_files():
    async with open_test_cluster(1, transport="memory", broker_settings=SETTINGS) as cluster:
        # 1 KiB segments of records stamped in 1970: retention (7 days) deletes them
        # at its next check.
        await cluster.create_topic("old", configs={"segment.bytes": "1024"})
        for i in range(20):
            await cluster.append(TP, *[b"x" * 100 for _ in range(4)], key=str(i).encode())
        broker_dir = cluster.brokers[1].log_dir
        starts = OffsetCheckpointFile(broker_dir / "log-start-offset-checkpoint")
        points = OffsetCheckpointFile(broker_dir / "recovery-point-offset-checkpoint")
        log = cluster.brokers[1].server.log_manager.all_logs()[TP]

        def caught_up() -> bool:
            on_disk_start, on_disk_point = starts.read().get(TP, 0), points.read().get(TP, 0)
            return on_disk_start == log.log_start_offset > 0 and on_disk_point >= 40

        await cluster.until(caught_up, "the checkpoints show retention and the flushes")
        assert log.log_end_offset == 80  # offsets go on from where they were
