"""Committed offsets on the wire (sans-IO): OffsetCommit and OffsetFetch requests from
`{TopicPartition: offset}` maps, and their answers back into maps. Shared by the group
consumer (client/consumer/group/coordinator.py) and the admin client.

How it works: requests group partitions by topic (topics and partitions sorted);
answers become `{TopicPartition: ErrorCode}` (commit) and `{TopicPartition:
CommittedOffset}` (fetch; committed offset -1 means none, Kafka's convention).
A consumer commits with its generation and member id; an admin with generation -1 and
member id "" (the coordinator accepts that only while the group is Empty).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition

NO_OFFSET = -1  # OffsetFetch's committed_offset when the group has none


class OffsetAndEpoch(NamedTuple):
    offset: int
    leader_epoch: int = -1  # of the last record consumed (KIP-320), -1 if unknown


class CommittedOffset(NamedTuple):
    offset: int | None  # None: the group has no committed offset there
    leader_epoch: int
    metadata: str | None
    error: ErrorCode


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(set(partitions)):
        out.setdefault(topic, []).append(partition)
    return out


def offset_commit_request(
    group_id: str,
    offsets: Mapping[TopicPartition, OffsetAndEpoch | int],
    *,
    generation_id: int = -1,
    member_id: str = "",
    group_instance_id: str | None = None,
    metadata: str = "",
) -> m.OffsetCommitRequest:
    values = {TopicPartition(*tp): OffsetAndEpoch(*_pair(v)) for tp, v in offsets.items()}
    return m.OffsetCommitRequest(
        group_id=group_id,
        generation_id=generation_id,
        member_id=member_id,
        group_instance_id=group_instance_id,
        topics=[
            m.OffsetCommitTopic(
                name=topic,
                partitions=[
                    m.OffsetCommitPartition(
                        partition_index=p,
                        committed_offset=values[TopicPartition(topic, p)].offset,
                        committed_leader_epoch=values[TopicPartition(topic, p)].leader_epoch,
                        committed_metadata=metadata,
                    )
                    for p in numbers
                ],
            )
            for topic, numbers in _by_topic(values).items()
        ],
    )


def _pair(value: OffsetAndEpoch | int) -> tuple[int, int]:
    if isinstance(value, tuple):
        return value[0], value[1]
    return value, -1


def offset_commit_errors(response: m.OffsetCommitResponse) -> dict[TopicPartition, ErrorCode]:
    return {
        TopicPartition(topic.name, p.partition_index): ErrorCode.from_code(p.error_code)
        for topic in response.topics
        for p in topic.partitions
    }


def offset_fetch_request(
    group_id: str, partitions: Iterable[TopicPartition] | None = None
) -> m.OffsetFetchRequest:
    """Committed offsets of `partitions`, or (None) of every partition the group has."""
    topics = None
    if partitions is not None:
        topics = [
            m.OffsetFetchTopic(name=t, partition_indexes=ps)
            for t, ps in _by_topic(TopicPartition(*tp) for tp in partitions).items()
        ]
    return m.OffsetFetchRequest(group_id=group_id, topics=topics)


def committed_offsets(response: m.OffsetFetchResponse) -> dict[TopicPartition, CommittedOffset]:
    return {
        TopicPartition(topic.name, p.partition_index): CommittedOffset(
            p.committed_offset if p.committed_offset >= 0 else None,
            p.committed_leader_epoch,
            p.metadata,
            ErrorCode.from_code(p.error_code),
        )
        for topic in response.topics
        for p in topic.partitions
    }
