"""DescribeLogDirs and VerifyLogDirs: what this broker's log directory holds, and checks.

How it works: DescribeLogDirs answers from the replica manager's partitions (size, log
start and end, high watermark, leadership) for the partitions asked for, or all, with the
log directory's file system size and free space.
VerifyLogDirs (`tributary log-dirs verify`) runs an on-demand scrub through the
broker's `LogScrubber` (broker/tasks/log_scrubber.py `verify`): every segment of the
topics asked for is checked, damaged ranges are repaired where they can be, and the
answer reports each range's fate; it waits at most `MAX_VERIFY_WAIT_MS`.
"""

from __future__ import annotations

import os

from broker.core.replica_manager import ReplicaManager
from broker.tasks.log_scrubber import LogScrubber
from broker.zookeeper.registration import BrokerIdentity
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition

# Longest VerifyLogDirs waits for repairs (the client's request timeout must cover it).
MAX_VERIFY_WAIT_MS = 300_000


def _disk_space(path: str) -> tuple[int, int]:
    """(total, usable) bytes of the file system holding `path`, as Kafka reports them for
    DescribeLogDirs v4+; (-1, -1) when it cannot be read."""
    try:
        stats = os.statvfs(path)
    except OSError:
        return -1, -1
    return stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize


class LogDirHandlers:
    def __init__(
        self,
        replica_manager: ReplicaManager,
        identity: BrokerIdentity,
        log_dir: str,
        scrubber: LogScrubber | None,
    ) -> None:
        self.rm = replica_manager
        self.identity = identity
        self.log_dir = log_dir
        self.scrubber = scrubber

    async def verify_log_dirs(self, request: m.VerifyLogDirsRequest) -> m.VerifyLogDirsResponse:
        """An on-demand scrub (broker/tasks/log_scrubber.py `verify`): check, repair, report."""
        if self.scrubber is None:
            return m.VerifyLogDirsResponse(
                error_code=ErrorCode.UNSUPPORTED_VERSION,
                error_message="this broker has no scrubber",
                broker_id=self.identity.broker_id,
                partitions=[],
            )
        topics = None if request.topics is None else set(request.topics)
        timeout_s = max(0, min(request.timeout_ms, MAX_VERIFY_WAIT_MS)) / 1000
        reports = await self.scrubber.verify(topics, timeout_s)
        return m.VerifyLogDirsResponse(
            error_code=ErrorCode.NONE,
            error_message=None,
            broker_id=self.identity.broker_id,
            partitions=[
                m.VerifyLogDirsPartition(
                    topic=report.topic_partition.topic,
                    partition=report.topic_partition.partition,
                    batches=report.batches,
                    bytes=report.bytes,
                    ranges=[
                        m.VerifyLogDirsRange(
                            first_offset=r.range.first_offset,
                            last_offset=r.range.last_offset,
                            segment_base_offset=r.range.segment_base_offset,
                            status=r.status,
                            detail=r.detail or r.range.reason,
                        )
                        for r in report.ranges
                    ],
                )
                for report in reports
            ],
        )

    async def describe_log_dirs(
        self, request: m.DescribeLogDirsRequest
    ) -> m.DescribeLogDirsResponse:
        wanted = None
        if request.topics is not None:
            wanted = {TopicPartition(t.topic, p) for t in request.topics for p in t.partitions}
        by_topic: dict[str, list[m.DescribeLogDirsResponsePartition]] = {}
        for tp, partition in sorted(self.rm.partitions.items()):
            if wanted is not None and tp not in wanted:
                continue
            by_topic.setdefault(tp.topic, []).append(
                m.DescribeLogDirsResponsePartition(
                    partition_index=tp.partition,
                    partition_size=partition.log.size_in_bytes,
                    offset_lag=max(0, partition.high_watermark - partition.log_end_offset),
                    log_start_offset=partition.log_start_offset,
                    log_end_offset=partition.log_end_offset,
                    high_watermark=partition.high_watermark,
                    is_leader=partition.is_leader,
                    leader_epoch=partition.leader_epoch,
                )
            )
        total, usable = _disk_space(self.log_dir)
        return m.DescribeLogDirsResponse(
            throttle_time_ms=0,
            results=[
                m.DescribeLogDirsResult(
                    error_code=ErrorCode.NONE,
                    log_dir=self.log_dir,
                    topics=[
                        m.DescribeLogDirsResponseTopic(name=name, partitions=parts)
                        for name, parts in by_topic.items()
                    ],
                    total_bytes=total,
                    usable_bytes=usable,
                )
            ],
        )
