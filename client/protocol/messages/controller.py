"""What the controller sends brokers: LeaderAndIsr, StopReplica, UpdateMetadata, and
the ControlledShutdown a broker sends the controller.

How it works: messages declared with `schema.struct` (the conventions are in the package
docstring). Each carries the controller's epoch, so a broker can refuse a deposed
controller's requests; LeaderAndIsr makes a broker leader or follower of partitions,
StopReplica stops (and may delete) replicas, UpdateMetadata refreshes every broker's
metadata cache (topic ids included), ControlledShutdown asks the controller to move
leadership away first.
"""

from __future__ import annotations

from client.protocol.schema import empty_list, struct

# --- LeaderAndIsr (4) ----------------------------------------------------------------------


@struct
class LeaderAndIsrPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    zk_version: int
    replicas: list[int]
    adding_replicas: list[int] = empty_list()
    removing_replicas: list[int] = empty_list()
    is_new: bool = False


@struct
class LeaderAndIsrLiveLeader:
    broker_id: int
    host: str
    port: int


@struct
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int = -1
    type: int = 0
    partition_states: list[LeaderAndIsrPartitionState]
    live_leaders: list[LeaderAndIsrLiveLeader]


@struct
class LeaderAndIsrPartitionError:
    topic: str
    partition: int
    error_code: int


@struct
class LeaderAndIsrResponse:
    error_code: int
    partition_errors: list[LeaderAndIsrPartitionError]


# --- StopReplica (5) -----------------------------------------------------------------------


@struct
class StopReplicaPartition:
    topic: str
    partition: int
    leader_epoch: int = -1
    delete_partition: bool


@struct
class StopReplicaRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int = -1
    partitions: list[StopReplicaPartition]


@struct
class StopReplicaPartitionError:
    topic: str
    partition: int
    error_code: int


@struct
class StopReplicaResponse:
    error_code: int
    partition_errors: list[StopReplicaPartitionError]


# --- UpdateMetadata (6) --------------------------------------------------------------------


@struct
class UpdateMetadataPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    zk_version: int
    replicas: list[int]
    offline_replicas: list[int] = empty_list()


@struct
class UpdateMetadataEndpoint:
    listener: str
    host: str
    port: int


@struct
class UpdateMetadataBroker:
    id: int
    host: str  # the inter-broker listener's address
    port: int
    rack: str | None = None
    # Every advertised listener; a broker answers Metadata with the one the client used.
    endpoints: list[UpdateMetadataEndpoint] = empty_list()


@struct
class UpdateMetadataTopicId:
    topic: str
    topic_id: bytes  # 16 bytes (client/protocol/topic_ids.py)


@struct
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int = -1
    partition_states: list[UpdateMetadataPartitionState]
    live_brokers: list[UpdateMetadataBroker]
    # The id of each topic with a partition in `partition_states` that has one (Kafka's
    # UpdateMetadata v7 topic_id); absent from older controllers.
    topic_ids: list[UpdateMetadataTopicId] = empty_list()


@struct
class UpdateMetadataResponse:
    error_code: int


# --- ControlledShutdown (7) ----------------------------------------------------------------


@struct
class ControlledShutdownRequest:
    broker_id: int
    broker_epoch: int = -1


@struct
class ControlledShutdownRemainingPartition:
    topic: str
    partition: int


@struct
class ControlledShutdownResponse:
    error_code: int
    remaining_partitions: list[ControlledShutdownRemainingPartition]
