"""Topics and their records and configs: CreateTopics, DeleteTopics, CreatePartitions,
DeleteRecords, DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

How it works: messages declared with `schema.struct` (the conventions are in the package
docstring). The admin client sends the topic changes to any broker (which writes
ZooKeeper, as Kafka 2.x's brokers did) and DeleteRecords to each partition's leader.
Configs are addressed by resource type (`TOPIC_RESOURCE`, `BROKER_RESOURCE`: a broker id,
or "" for the cluster-wide default) and described with their source (`SOURCE_*`, Kafka's
ConfigSource), synonyms and type (Kafka's ConfigType ids); AlterConfigs replaces a
resource's dynamic configs, IncrementalAlterConfigs applies `CONFIG_SET`,
`CONFIG_DELETE`, `CONFIG_APPEND` and `CONFIG_SUBTRACT` operations.
"""

from __future__ import annotations

from client.protocol.schema import empty_list, struct
from client.protocol.topic_ids import ZERO_TOPIC_ID_BYTES

# --- CreateTopics (19) ---------------------------------------------------------------------


@struct
class CreateTopicsAssignment:
    partition_index: int
    broker_ids: list[int]


@struct
class CreateTopicsConfig:
    name: str
    value: str | None


@struct
class CreateTopicsTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: list[CreateTopicsAssignment] = empty_list()
    configs: list[CreateTopicsConfig] = empty_list()


@struct
class CreateTopicsRequest:
    topics: list[CreateTopicsTopic]
    timeout_ms: int
    validate_only: bool = False
    # kafka-topics.sh's --disable-rack-aware: assign as if no broker had a rack.
    disable_rack_aware: bool = False


@struct
class CreateTopicsResponseConfig:
    """One config of a created topic: its override, or the broker's default."""

    name: str
    value: str | None
    is_default: bool
    read_only: bool = False
    is_sensitive: bool = False


@struct
class CreateTopicsResponseTopic:
    name: str
    error_code: int
    error_message: str | None
    num_partitions: int
    replication_factor: int
    # The new topic's id (16 bytes, client/protocol/topic_ids.py; zeros when not created,
    # as for validate_only) and its every config (empty on error); both absent from
    # brokers older than topic ids.
    topic_id: bytes = ZERO_TOPIC_ID_BYTES
    configs: list[CreateTopicsResponseConfig] = empty_list()


@struct
class CreateTopicsResponse:
    throttle_time_ms: int
    topics: list[CreateTopicsResponseTopic]


# --- DeleteTopics (20) ---------------------------------------------------------------------


@struct
class DeleteTopicsRequest:
    topic_names: list[str]
    timeout_ms: int
    # Topics named by id instead (16 bytes each; Kafka's DeleteTopics v6).
    topic_ids: list[bytes] = empty_list()


@struct
class DeleteTopicsResponseTopic:
    name: str  # "" for an id no topic has
    error_code: int
    error_message: str | None
    topic_id: bytes = ZERO_TOPIC_ID_BYTES  # the id asked for (zeros when asked by name)


@struct
class DeleteTopicsResponse:
    throttle_time_ms: int
    responses: list[DeleteTopicsResponseTopic]


# --- CreatePartitions (37) -----------------------------------------------------------------


@struct
class CreatePartitionsAssignment:
    broker_ids: list[int]


@struct
class CreatePartitionsTopic:
    name: str
    count: int  # the new total number of partitions
    assignments: list[CreatePartitionsAssignment] | None = None  # one per added partition


@struct
class CreatePartitionsRequest:
    topics: list[CreatePartitionsTopic]
    timeout_ms: int
    validate_only: bool = False


@struct
class CreatePartitionsResponseTopic:
    name: str
    error_code: int
    error_message: str | None


@struct
class CreatePartitionsResponse:
    throttle_time_ms: int
    results: list[CreatePartitionsResponseTopic]


# --- DeleteRecords (21) --------------------------------------------------------------------


@struct
class DeleteRecordsPartition:
    partition_index: int
    offset: int  # delete every record below this offset; -1: the high watermark


@struct
class DeleteRecordsTopic:
    name: str
    partitions: list[DeleteRecordsPartition]


@struct
class DeleteRecordsRequest:
    topics: list[DeleteRecordsTopic]
    timeout_ms: int


@struct
class DeleteRecordsResponsePartition:
    partition_index: int
    low_watermark: int  # the partition's log start offset now (-1 with an error)
    error_code: int


@struct
class DeleteRecordsResponseTopic:
    name: str
    partitions: list[DeleteRecordsResponsePartition]


@struct
class DeleteRecordsResponse:
    throttle_time_ms: int
    topics: list[DeleteRecordsResponseTopic]


# --- DescribeConfigs (32) ------------------------------------------------------------------

# Resource types (Kafka's ConfigResource.Type).
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


@struct
class DescribeConfigsResource:
    resource_type: int
    resource_name: str
    configuration_keys: list[str] | None = None  # None = every key


@struct
class DescribeConfigsRequest:
    resources: list[DescribeConfigsResource]
    include_synonyms: bool = False
    include_documentation: bool = False


# Where a value comes from (Kafka's DescribeConfigsResponse.ConfigSource).
SOURCE_UNKNOWN = 0
SOURCE_DYNAMIC_TOPIC_CONFIG = 1
SOURCE_DYNAMIC_BROKER_CONFIG = 2
SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = 3
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5


@struct
class DescribeConfigsSynonym:
    name: str
    value: str | None
    source: int


@struct
class DescribeConfigsResult:
    name: str
    value: str | None
    read_only: bool
    is_default: bool
    is_sensitive: bool = False
    config_source: int = SOURCE_UNKNOWN
    # Every layer that sets it, highest precedence first (only when include_synonyms).
    synonyms: list[DescribeConfigsSynonym] = empty_list()
    config_type: int = 0  # Kafka's ConfigType id: 1 boolean, 2 string, 3 int, 5 long...
    documentation: str | None = None


@struct
class DescribeConfigsResponseResource:
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str
    configs: list[DescribeConfigsResult]


@struct
class DescribeConfigsResponse:
    throttle_time_ms: int
    results: list[DescribeConfigsResponseResource]


# --- AlterConfigs (33): a resource's dynamic configs replaced as a whole ------------------


@struct
class AlterConfigsRequestConfig:
    name: str
    value: str | None


@struct
class AlterConfigsRequestResource:
    resource_type: int
    resource_name: str
    configs: list[AlterConfigsRequestConfig]


@struct
class AlterConfigsRequest:
    resources: list[AlterConfigsRequestResource]
    validate_only: bool = False


# --- IncrementalAlterConfigs (44) -----------------------------------------------------------

# config_operation values (Kafka's AlterConfigOp.OpType); APPEND and SUBTRACT are for
# list configs only.
CONFIG_SET = 0
CONFIG_DELETE = 1
CONFIG_APPEND = 2
CONFIG_SUBTRACT = 3


@struct
class AlterableConfig:
    name: str
    config_operation: int
    value: str | None = None


@struct
class AlterConfigsResource:
    resource_type: int
    resource_name: str
    configs: list[AlterableConfig]


@struct
class IncrementalAlterConfigsRequest:
    resources: list[AlterConfigsResource]
    validate_only: bool = False


@struct
class AlterConfigsResourceResponse:
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str


@struct
class IncrementalAlterConfigsResponse:
    throttle_time_ms: int
    responses: list[AlterConfigsResourceResponse]


@struct
class AlterConfigsResponse:
    throttle_time_ms: int
    responses: list[AlterConfigsResourceResponse]
