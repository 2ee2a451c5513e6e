"""Replicas, leaders and log dirs: OffsetForLeaderEpoch, ElectLeaders,
AlterPartitionReassignments, ListPartitionReassignments, DescribeLogDirs,
DescribeProducers and VerifyLogDirs (Tributary's own).

How it works: messages declared with `schema.struct` (the conventions are in the package
docstring). Followers (and consumers after a leader change) send OffsetForLeaderEpoch to
find where their log diverges; the admin client sends elections
(`PREFERRED_ELECTION`, `UNCLEAN_ELECTION`) and reassignments to any broker and the log dir
requests to each broker; DescribeProducers (KIP-664) asks partition leaders for the
producers whose state they keep. VerifyLogDirs is an on-demand scrub whose damaged ranges end
`RANGE_REPAIRED`, `RANGE_PENDING`, `RANGE_UNREPAIRABLE` or `RANGE_DROPPED`.
"""

from __future__ import annotations

from client.protocol.messages.data import CONSUMER_REPLICA_ID
from client.protocol.schema import struct

# ElectLeaders election_type values.
PREFERRED_ELECTION = 0
UNCLEAN_ELECTION = 1


# --- OffsetForLeaderEpoch (23) -------------------------------------------------------------


@struct
class OffsetForLeaderEpochPartition:
    partition: int
    current_leader_epoch: int = -1
    leader_epoch: int


@struct
class OffsetForLeaderEpochTopic:
    topic: str
    partitions: list[OffsetForLeaderEpochPartition]


@struct
class OffsetForLeaderEpochRequest:
    replica_id: int = CONSUMER_REPLICA_ID
    topics: list[OffsetForLeaderEpochTopic]


@struct
class OffsetForLeaderEpochResponsePartition:
    error_code: int
    partition: int
    leader_epoch: int
    end_offset: int


@struct
class OffsetForLeaderEpochResponseTopic:
    topic: str
    partitions: list[OffsetForLeaderEpochResponsePartition]


@struct
class OffsetForLeaderEpochResponse:
    throttle_time_ms: int
    topics: list[OffsetForLeaderEpochResponseTopic]


# --- ElectLeaders (43) ---------------------------------------------------------------------


@struct
class ElectLeadersTopic:
    topic: str
    partitions: list[int]


@struct
class ElectLeadersRequest:
    election_type: int = PREFERRED_ELECTION
    topic_partitions: list[ElectLeadersTopic] | None  # None = all
    timeout_ms: int


@struct
class ElectLeadersPartitionResult:
    partition_id: int
    error_code: int
    error_message: str | None


@struct
class ElectLeadersResponseTopic:
    topic: str
    partition_result: list[ElectLeadersPartitionResult]


@struct
class ElectLeadersResponse:
    throttle_time_ms: int
    error_code: int
    replica_election_results: list[ElectLeadersResponseTopic]


# --- AlterPartitionReassignments (45) ------------------------------------------------------


@struct
class AlterPartitionReassignmentsPartition:
    partition_index: int
    replicas: list[int] | None  # None = cancel the reassignment


@struct
class AlterPartitionReassignmentsTopic:
    name: str
    partitions: list[AlterPartitionReassignmentsPartition]


@struct
class AlterPartitionReassignmentsRequest:
    timeout_ms: int
    topics: list[AlterPartitionReassignmentsTopic]


@struct
class AlterPartitionReassignmentsResponsePartition:
    partition_index: int
    error_code: int
    error_message: str | None


@struct
class AlterPartitionReassignmentsResponseTopic:
    name: str
    partitions: list[AlterPartitionReassignmentsResponsePartition]


@struct
class AlterPartitionReassignmentsResponse:
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    responses: list[AlterPartitionReassignmentsResponseTopic]


# --- ListPartitionReassignments (46) -------------------------------------------------------


@struct
class ListPartitionReassignmentsTopic:
    name: str
    partition_indexes: list[int]


@struct
class ListPartitionReassignmentsRequest:
    timeout_ms: int
    topics: list[ListPartitionReassignmentsTopic] | None  # None = all


@struct
class ListPartitionReassignmentsResponsePartition:
    partition_index: int
    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


@struct
class ListPartitionReassignmentsResponseTopic:
    name: str
    partitions: list[ListPartitionReassignmentsResponsePartition]


@struct
class ListPartitionReassignmentsResponse:
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    topics: list[ListPartitionReassignmentsResponseTopic]


# --- DescribeLogDirs (35) ------------------------------------------------------------------


@struct
class DescribeLogDirsTopic:
    topic: str
    partitions: list[int]


@struct
class DescribeLogDirsRequest:
    topics: list[DescribeLogDirsTopic] | None  # None = all


@struct
class DescribeLogDirsResponsePartition:
    partition_index: int
    partition_size: int
    offset_lag: int
    is_future_key: bool = False
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    is_leader: bool
    leader_epoch: int


@struct
class DescribeLogDirsResponseTopic:
    name: str
    partitions: list[DescribeLogDirsResponsePartition]


@struct
class DescribeLogDirsResult:
    error_code: int
    log_dir: str
    topics: list[DescribeLogDirsResponseTopic]
    total_bytes: int = -1  # the directory's file system size and free space (-1: unknown)
    usable_bytes: int = -1


@struct
class DescribeLogDirsResponse:
    throttle_time_ms: int
    results: list[DescribeLogDirsResult]


# --- DescribeProducers (61) ----------------------------------------------------------------
# The idempotent producers a partition's leader keeps state for (KIP-664): each one's
# epoch, last sequence and last timestamp, the coordinator epoch of its last transaction
# marker and the start offset of its open transaction (-1 when none).


@struct
class DescribeProducersTopic:
    name: str
    partition_indexes: list[int]


@struct
class DescribeProducersRequest:
    topics: list[DescribeProducersTopic]


@struct
class ProducerStateDescription:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int = -1
    current_txn_start_offset: int = -1


@struct
class DescribeProducersPartition:
    partition_index: int
    error_code: int
    error_message: str | None
    active_producers: list[ProducerStateDescription]


@struct
class DescribeProducersResponseTopic:
    name: str
    partitions: list[DescribeProducersPartition]


@struct
class DescribeProducersResponse:
    throttle_time_ms: int
    topics: list[DescribeProducersResponseTopic]


# --- VerifyLogDirs (1017, Tributary's own) -------------------------------------------------
# An on-demand scrub: the broker checks every batch's CRC in the logs asked for, repairs
# damaged ranges from an in-sync replica (waiting up to timeout_ms) and reports.

# Fates of a damaged range (VerifyLogDirsRange.status).
RANGE_REPAIRED = "repaired"
RANGE_PENDING = "pending"
RANGE_UNREPAIRABLE = "unrepairable"
RANGE_DROPPED = "dropped"


@struct
class VerifyLogDirsRequest:
    topics: list[str] | None  # None = all
    timeout_ms: int  # how long to wait for repairs


@struct
class VerifyLogDirsRange:
    first_offset: int
    last_offset: int
    segment_base_offset: int
    status: str
    detail: str


@struct
class VerifyLogDirsPartition:
    topic: str
    partition: int
    batches: int
    bytes: int
    ranges: list[VerifyLogDirsRange]


@struct
class VerifyLogDirsResponse:
    error_code: int
    error_message: str | None
    broker_id: int
    partitions: list[VerifyLogDirsPartition]
