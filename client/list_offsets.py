"""One ListOffsets request to one broker, shared by the consumer and the admin client.

How it works: every partition asked for names the leader epoch the caller's metadata
knows (KIP-320, so a stale leader answers FENCED_LEADER_EPOCH instead of a wrong
offset); the answer comes back as (error, offset, timestamp) per partition. Retrying on
a stale leader is the caller's business (each has its own backoff and deadline).
"""

from __future__ import annotations

from client.connection import ConnectionPool
from client.metadata import ClusterView
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition


async def list_offsets_from(
    pool: ConnectionPool,
    address: tuple[str, int],
    cluster: ClusterView,
    timestamps: dict[TopicPartition, int],
    timeout_s: float,
    isolation_level: int = 0,
) -> dict[TopicPartition, tuple[ErrorCode, int, int]]:
    """Ask the broker at `address` for the offset of each partition at its timestamp
    (-2 earliest, -1 latest; with `isolation_level` 1, read_committed, latest is the
    last stable offset): (error, offset, timestamp) per partition."""
    by_topic: dict[str, list[m.ListOffsetsPartition]] = {}
    for tp, timestamp in timestamps.items():
        info = cluster.partition(tp)
        by_topic.setdefault(tp.topic, []).append(
            m.ListOffsetsPartition(
                partition=tp.partition,
                current_leader_epoch=info.leader_epoch if info is not None else -1,
                timestamp=timestamp,
            )
        )
    request = m.ListOffsetsRequest(
        isolation_level=isolation_level,
        topics=[m.ListOffsetsTopic(name=t, partitions=p) for t, p in by_topic.items()],
    )
    response = await pool.request(*address, request, timeout_s=timeout_s)
    return {
        TopicPartition(topic.name, p.partition): (
            ErrorCode.from_code(p.error_code),
            p.offset,
            p.timestamp,
        )
        for topic in response.topics
        for p in topic.partitions
    }
