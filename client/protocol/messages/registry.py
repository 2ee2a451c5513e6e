"""The registry of every API Tributary speaks: (api key, version) -> request and response.

How it works: `REGISTRY` is one `ApiRegistry` (client/protocol/api.py) built from an
`ApiSpec` per API, naming the request and response classes of each message family
module; every API is at version 0 for now. The codec asks it which classes decode a
request header's (api_key, api_version) and which API a message belongs to; brokers
answer ApiVersions with `api_versions_response()`. A test checks that every `ApiKey`
is registered and that every request and response class of the package is.
"""

from __future__ import annotations

from client.protocol.api import ApiKey, ApiRegistry, ApiSpec
from client.protocol.messages.acls import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from client.protocol.messages.controller import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from client.protocol.messages.data import (
    FetchRequest,
    FetchResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ProduceRequest,
    ProduceResponse,
)
from client.protocol.messages.groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from client.protocol.messages.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    ApiVersionsResponseKey,
    MetadataRequest,
    MetadataResponse,
)
from client.protocol.messages.quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from client.protocol.messages.replicas import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    VerifyLogDirsRequest,
    VerifyLogDirsResponse,
)
from client.protocol.messages.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from client.protocol.messages.topics import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from client.protocol.messages.transactions import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    EndTxnRequest,
    EndTxnResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from client.protocol.messages.users import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)

REGISTRY = ApiRegistry(
    ApiSpec(api_key, 0, request_type, response_type)
    for api_key, request_type, response_type in [
        (ApiKey.PRODUCE, ProduceRequest, ProduceResponse),
        (ApiKey.FETCH, FetchRequest, FetchResponse),
        (ApiKey.LIST_OFFSETS, ListOffsetsRequest, ListOffsetsResponse),
        (ApiKey.METADATA, MetadataRequest, MetadataResponse),
        (ApiKey.LEADER_AND_ISR, LeaderAndIsrRequest, LeaderAndIsrResponse),
        (ApiKey.STOP_REPLICA, StopReplicaRequest, StopReplicaResponse),
        (ApiKey.UPDATE_METADATA, UpdateMetadataRequest, UpdateMetadataResponse),
        (ApiKey.CONTROLLED_SHUTDOWN, ControlledShutdownRequest, ControlledShutdownResponse),
        (ApiKey.OFFSET_COMMIT, OffsetCommitRequest, OffsetCommitResponse),
        (ApiKey.OFFSET_FETCH, OffsetFetchRequest, OffsetFetchResponse),
        (ApiKey.FIND_COORDINATOR, FindCoordinatorRequest, FindCoordinatorResponse),
        (ApiKey.JOIN_GROUP, JoinGroupRequest, JoinGroupResponse),
        (ApiKey.HEARTBEAT, HeartbeatRequest, HeartbeatResponse),
        (ApiKey.LEAVE_GROUP, LeaveGroupRequest, LeaveGroupResponse),
        (ApiKey.SYNC_GROUP, SyncGroupRequest, SyncGroupResponse),
        (ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest, DescribeGroupsResponse),
        (ApiKey.LIST_GROUPS, ListGroupsRequest, ListGroupsResponse),
        (ApiKey.DELETE_GROUPS, DeleteGroupsRequest, DeleteGroupsResponse),
        (ApiKey.OFFSET_DELETE, OffsetDeleteRequest, OffsetDeleteResponse),
        (ApiKey.API_VERSIONS, ApiVersionsRequest, ApiVersionsResponse),
        (ApiKey.ADD_PARTITIONS_TO_TXN, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse),
        (ApiKey.ADD_OFFSETS_TO_TXN, AddOffsetsToTxnRequest, AddOffsetsToTxnResponse),
        (ApiKey.END_TXN, EndTxnRequest, EndTxnResponse),
        (ApiKey.WRITE_TXN_MARKERS, WriteTxnMarkersRequest, WriteTxnMarkersResponse),
        (ApiKey.TXN_OFFSET_COMMIT, TxnOffsetCommitRequest, TxnOffsetCommitResponse),
        (ApiKey.DESCRIBE_TRANSACTIONS, DescribeTransactionsRequest, DescribeTransactionsResponse),
        (ApiKey.LIST_TRANSACTIONS, ListTransactionsRequest, ListTransactionsResponse),
        (ApiKey.CREATE_TOPICS, CreateTopicsRequest, CreateTopicsResponse),
        (ApiKey.DELETE_TOPICS, DeleteTopicsRequest, DeleteTopicsResponse),
        (ApiKey.DELETE_RECORDS, DeleteRecordsRequest, DeleteRecordsResponse),
        (ApiKey.CREATE_PARTITIONS, CreatePartitionsRequest, CreatePartitionsResponse),
        (ApiKey.OFFSET_FOR_LEADER_EPOCH, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
        (ApiKey.DESCRIBE_CONFIGS, DescribeConfigsRequest, DescribeConfigsResponse),
        (ApiKey.ALTER_CONFIGS, AlterConfigsRequest, AlterConfigsResponse),
        (ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequest, DescribeLogDirsResponse),
        (ApiKey.ELECT_LEADERS, ElectLeadersRequest, ElectLeadersResponse),
        (
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            IncrementalAlterConfigsRequest,
            IncrementalAlterConfigsResponse,
        ),
        (
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            AlterPartitionReassignmentsRequest,
            AlterPartitionReassignmentsResponse,
        ),
        (
            ApiKey.LIST_PARTITION_REASSIGNMENTS,
            ListPartitionReassignmentsRequest,
            ListPartitionReassignmentsResponse,
        ),
        (ApiKey.VERIFY_LOG_DIRS, VerifyLogDirsRequest, VerifyLogDirsResponse),
        (ApiKey.DESCRIBE_PRODUCERS, DescribeProducersRequest, DescribeProducersResponse),
        (ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest, InitProducerIdResponse),
        (ApiKey.DESCRIBE_ACLS, DescribeAclsRequest, DescribeAclsResponse),
        (ApiKey.CREATE_ACLS, CreateAclsRequest, CreateAclsResponse),
        (ApiKey.DELETE_ACLS, DeleteAclsRequest, DeleteAclsResponse),
        (ApiKey.SASL_HANDSHAKE, SaslHandshakeRequest, SaslHandshakeResponse),
        (ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequest, SaslAuthenticateResponse),
        (
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
            DescribeUserScramCredentialsRequest,
            DescribeUserScramCredentialsResponse,
        ),
        (
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
            AlterUserScramCredentialsRequest,
            AlterUserScramCredentialsResponse,
        ),
        (ApiKey.DESCRIBE_CLIENT_QUOTAS, DescribeClientQuotasRequest, DescribeClientQuotasResponse),
        (ApiKey.ALTER_CLIENT_QUOTAS, AlterClientQuotasRequest, AlterClientQuotasResponse),
    ]
)


def api_versions_response(registry: ApiRegistry = REGISTRY) -> ApiVersionsResponse:
    """What a broker answers to ApiVersions: every API it speaks, with its version range."""
    return ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersionsResponseKey(
                api_key=int(key),
                min_version=versions.min_version,
                max_version=versions.max_version,
            )
            for key, versions in registry.supported().items()
        ],
    )
