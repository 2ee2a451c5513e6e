"""The partition leader's answers to the offset queries: OffsetForLeaderEpoch, ListOffsets
and DescribeProducers, read from the leader's log, its epoch cache and producer state.

`LeaderQueries` is a mixin of `ReplicaManager` (broker/core/replica_manager.py): its
methods only need `leader_partition_or_error`, and they change nothing.
"""

from __future__ import annotations

from broker.core.errors import PartitionError
from broker.core.log.local_log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
)
from broker.core.log.producer_state import ProducerStateEntry
from broker.core.partition import Partition
from broker.core.truncation import UNDEFINED_EPOCH, UNDEFINED_OFFSET
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition


class LeaderQueries:
    """OffsetForLeaderEpoch, ListOffsets and DescribeProducers as the leader answers them."""

    def leader_partition_or_error(self, tp: TopicPartition) -> Partition:
        raise NotImplementedError  # ReplicaManager's

    def last_offset_for_leader_epoch(
        self, tp: TopicPartition, current_leader_epoch: int, requested_epoch: int
    ) -> tuple[ErrorCode, int, int]:
        """OffsetForLeaderEpoch: (error, epoch, end offset) from the leader's epoch cache."""
        try:
            partition = self.leader_partition_or_error(tp)
            partition.check_leader_epoch(current_leader_epoch)
        except PartitionError as exc:
            return exc.code, UNDEFINED_EPOCH, UNDEFINED_OFFSET
        epoch, end = partition.log.leader_epoch_cache.end_offset_for(
            requested_epoch, partition.log_end_offset
        )
        return ErrorCode.NONE, epoch, end

    def list_offset(
        self,
        tp: TopicPartition,
        timestamp: int,
        current_leader_epoch: int,
        *,
        from_consumer: bool,
        read_committed: bool = False,
    ) -> tuple[ErrorCode, int, int, int]:
        """ListOffsets: (error, timestamp, offset, leader_epoch): -1 latest, -2 (-4) earliest,
        -3 the largest timestamp (KIP-734); a consumer's below the HW (read_committed: LSO)."""
        try:
            partition = self.leader_partition_or_error(tp)
            partition.check_leader_epoch(current_leader_epoch)
        except PartitionError as exc:
            return exc.code, -1, -1, -1
        upper = partition.fetch_upper_bound(not from_consumer, read_committed)
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return ErrorCode.NONE, -1, partition.log_start_offset, partition.leader_epoch
        if timestamp == LATEST_TIMESTAMP:
            return ErrorCode.NONE, -1, upper, partition.leader_epoch
        found = partition.log.offset_for_timestamp(timestamp)
        if found is None or found[0] >= upper:
            return ErrorCode.NONE, -1, -1, partition.leader_epoch
        offset, found_ts = found
        return ErrorCode.NONE, found_ts, offset, partition.leader_epoch

    def describe_producers(self, tp: TopicPartition) -> tuple[ErrorCode, list[ProducerStateEntry]]:
        """DescribeProducers (KIP-664): the producers the leader keeps state for."""
        try:
            partition = self.leader_partition_or_error(tp)
        except PartitionError as exc:
            return exc.code, []
        return ErrorCode.NONE, partition.log.active_producers()
