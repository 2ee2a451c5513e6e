"""DescribeProducers (KIP-664): the idempotent producers each partition's leader keeps
state for.

How it works: for each partition asked about, the replica manager answers from the
leader's log (`Log.active_producers`: the producer state the duplicate checks use):
each producer's id, epoch, last sequence and last timestamp, the coordinator epoch of
its last transaction marker and the first offset of its open transaction (-1: none).
A broker that does not lead the partition answers NOT_LEADER_OR_FOLLOWER for it, one it
does not know UNKNOWN_TOPIC_OR_PARTITION, as Kafka does; the client asks each leader.
"""

from __future__ import annotations

from broker.core.replica_manager import ReplicaManager
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition


class ProducerHandlers:
    def __init__(self, replica_manager: ReplicaManager) -> None:
        self.rm = replica_manager

    async def describe_producers(
        self, request: m.DescribeProducersRequest
    ) -> m.DescribeProducersResponse:
        topics = []
        for topic in request.topics:
            partitions = []
            for index in topic.partition_indexes:
                code, entries = self.rm.describe_producers(TopicPartition(topic.name, index))
                partitions.append(
                    m.DescribeProducersPartition(
                        partition_index=index,
                        error_code=code,
                        error_message=None if code == ErrorCode.NONE else code.description,
                        active_producers=[
                            m.ProducerStateDescription(
                                producer_id=e.producer_id,
                                producer_epoch=e.producer_epoch,
                                last_sequence=e.last_seq,
                                last_timestamp=e.last_timestamp,
                                coordinator_epoch=e.coordinator_epoch,
                                current_txn_start_offset=e.current_txn_first_offset,
                            )
                            for e in entries
                        ],
                    )
                )
            topics.append(m.DescribeProducersResponseTopic(name=topic.name, partitions=partitions))
        return m.DescribeProducersResponse(throttle_time_ms=0, topics=topics)
