"""Authorization of every request, with the operation Kafka 2.8's KafkaApis checks.

How it works: with `authorizer.class.name` set, `RequestHandlers.handle` hands each
request to `Authorization.handle` with the handler that serves it. A table (`_RULES`)
names each API's rule. A rule asks `Check` (the request's principal,
`server_common.security.principal.current_principal()`, and client host,
`server_common.network.client_host()`, against the `AclAuthorizer`) about the resources
the request names and then either:
- answers the whole request with Kafka's code (CLUSTER_AUTHORIZATION_FAILED for the
  inter-broker and controller requests and cluster-wide admin APIs,
  GROUP_AUTHORIZATION_FAILED for a group request; an error answer, which the Kafka
  listener turns into the API's own error response); or
- serves only the items it may (the handler sees a request without the others) and
  adds the refused ones to the answer with TOPIC_AUTHORIZATION_FAILED (Produce, Fetch,
  ListOffsets, OffsetForLeaderEpoch, DeleteRecords, CreateTopics, DeleteTopics,
  CreatePartitions, configs, OffsetCommit/Fetch/Delete, DescribeProducers), or leaves
  out what it may not see (Metadata for all topics, ListGroups, OffsetFetch of all the
  group's topics).
A request whose items are all refused never reaches the handler.

The operations (KafkaApis 2.8): Produce Write Topic (Write TransactionalId with a
transactional id); a consumer's Fetch Read Topic, a follower's ClusterAction Cluster;
ListOffsets, OffsetForLeaderEpoch (a follower's: ClusterAction) and Metadata Describe
Topic (auto-creation also needs Create on the Cluster or the Topic); CreateTopics Create
Cluster or Topic; DeleteTopics, DeleteRecords Delete Topic; CreatePartitions Alter
Topic; configs DescribeConfigs/AlterConfigs on the Topic or the Cluster (broker
resources); FindCoordinator, DescribeGroups, OffsetFetch Describe Group; Join, Sync,
Heartbeat, Leave, OffsetCommit Read Group (commits Read Topic too); ListGroups Describe
Cluster, or only the groups it may Describe; DeleteGroups, OffsetDelete Delete Group;
InitProducerId IdempotentWrite Cluster or Write on any topic (KIP-679, Kafka 3.0's
relaxation, chosen because Tributary's producer, like Kafka 3's, is idempotent by
default; so a Produce of idempotent batches needs only Write on its topics, as in
3.0); ElectLeaders, AlterPartitionReassignments Alter Cluster;
ListPartitionReassignments, DescribeLogDirs Describe Cluster; DescribeProducers Read
Topic; LeaderAndIsr, UpdateMetadata, StopReplica ClusterAction Cluster; Tributary's
VerifyLogDirs (a scrub that may repair) Alter Cluster; DescribeAcls Describe Cluster,
CreateAcls and DeleteAcls Alter Cluster; DescribeUserScramCredentials Describe Cluster,
AlterUserScramCredentials Alter Cluster.

Brokers and the controller authenticate on a SASL or mTLS inter-broker listener (their
principals belong in `super.users`, as in Kafka); for an inter-broker listener without
authentication, `authorizer.inter.broker.listener.super.user=true` makes a request on it
from a connection that did not authenticate (ANONYMOUS) a super user's.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from broker.core.metadata_cache import MetadataCache
from broker.handlers.authorization_check import (
    CLUSTER_DENIED,
    CONFIG_TOPIC,
    TOPIC_DENIED,
    TXN_DENIED,
    Call,
    Check,
    Denials,
    Op,
    by_topic,
    cluster,
    cluster_rule,
    replace,
    then,
)
from broker.handlers.authorization_groups import GROUP_RULES
from broker.handlers.authorization_transactions import TXN_RULES
from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.errors import ErrorCode
from server_common.network import NO_RESPONSE
from server_common.security.acls import CLUSTER_NAME, AclAuthorizer, AclOperation, ResourceType
from server_common.security.principal import ANONYMOUS, current_principal

TOPIC = ResourceType.TOPIC


class Authorization:
    def __init__(
        self,
        authorizer: AclAuthorizer,
        metadata_cache: MetadataCache,
        *,
        trusted_listener: str | None = None,
        auto_create_topics: bool = False,
        denials: Denials | None = None,
    ) -> None:
        self.denials = denials
        self.authorizer = authorizer
        self.cache = metadata_cache
        self.trusted_listener = trusted_listener
        self.auto_create_topics = auto_create_topics

    def check(self, listener: str | None) -> Check:
        trusted = (
            self.trusted_listener is not None
            and listener == self.trusted_listener
            and current_principal() == ANONYMOUS
        )
        return Check(
            self.authorizer,
            self.cache,
            trusted,
            auto_create_topics=self.auto_create_topics,
            denials=self.denials,
        )

    async def handle(self, api_key: int, request: Any, listener: str | None, call: Call) -> Any:
        rule = _RULES.get(api_key)
        if rule is None:
            return await call(request)
        return await rule(self.check(listener), request, call)


# -- data plane ------------------------------------------------------------------------
async def _produce(check: Check, request: m.ProduceRequest, call: Call) -> Any:
    txn_denied = request.transactional_id is not None and not check(
        Op.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    )

    def answer(topic: m.ProduceTopic) -> m.ProduceResponseTopic:
        code = TXN_DENIED if txn_denied else TOPIC_DENIED
        return m.ProduceResponseTopic(
            name=topic.name,
            partitions=[
                m.ProduceResponsePartition(
                    partition=p.partition,
                    error_code=code,
                    base_offset=-1,
                    log_append_time_ms=-1,
                    log_start_offset=-1,
                    error_message=None,
                )
                for p in topic.partitions
            ],
        )

    if txn_denied:
        if request.acks == 0:
            return NO_RESPONSE
        return m.ProduceResponse(topics=[answer(t) for t in request.topics], throttle_time_ms=0)
    return await by_topic(
        check,
        request,
        call,
        op=Op.WRITE,
        items="topics",
        name=lambda t: t.name,
        answer=answer,
        field="topics",
        empty=lambda refused: (
            NO_RESPONSE
            if request.acks == 0
            else m.ProduceResponse(topics=refused, throttle_time_ms=0)
        ),
    )


async def _fetch(check: Check, request: m.FetchRequest, call: Call) -> Any:
    if request.replica_id >= 0:
        if not check.cluster(Op.CLUSTER_ACTION):
            return m.FetchResponse(
                throttle_time_ms=0, error_code=CLUSTER_DENIED, topics=[], session_id=0
            )
        return await call(request)

    def name(topic: m.FetchTopic | m.FetchResponseTopic) -> str:
        if topic.topic or not any(topic.topic_id):
            return topic.topic
        # Named by id (Fetch v13+): an id no topic has is the handler's UNKNOWN_TOPIC_ID.
        return check.cache.topic_name(uuid.UUID(bytes=topic.topic_id)) or ""

    def answer(topic: m.FetchTopic) -> m.FetchResponseTopic:
        return m.FetchResponseTopic(
            topic=topic.topic,
            topic_id=topic.topic_id,
            partitions=[
                m.FetchResponsePartition(
                    partition=p.partition,
                    error_code=TOPIC_DENIED,
                    high_watermark=-1,
                    last_stable_offset=-1,
                    log_start_offset=-1,
                    records=b"",
                )
                for p in topic.partitions
            ],
        )

    outcome = await by_topic(
        check,
        request,
        call,
        op=Op.READ,
        items="topics",
        name=lambda t: name(t) or None,
        answer=answer,
        field="topics",
        empty=lambda refused: m.FetchResponse(
            throttle_time_ms=0, error_code=0, topics=refused, session_id=0
        ),
    )
    if request.session_epoch <= 0:
        return outcome

    # An incremental fetch also reads the session's other partitions: an ACL removed
    # since they joined it refuses them too (Kafka checks every partition of the session).
    def refuse_session_partitions(response: m.FetchResponse) -> m.FetchResponse:
        topics = [
            t
            if not name(t) or check.topic(Op.READ, name(t))
            else replace(
                t,
                partitions=[
                    replace(
                        p,
                        error_code=TOPIC_DENIED,
                        high_watermark=-1,
                        last_stable_offset=-1,
                        log_start_offset=-1,
                        records=b"",
                    )
                    for p in t.partitions
                ],
            )
            for t in response.topics
        ]
        return replace(response, topics=topics)

    return then(outcome, refuse_session_partitions)


async def _list_offsets(check: Check, request: m.ListOffsetsRequest, call: Call) -> Any:
    def answer(topic: m.ListOffsetsTopic) -> m.ListOffsetsResponseTopic:
        return m.ListOffsetsResponseTopic(
            name=topic.name,
            partitions=[
                m.ListOffsetsResponsePartition(
                    partition=p.partition,
                    error_code=TOPIC_DENIED,
                    timestamp=-1,
                    offset=-1,
                    leader_epoch=-1,
                )
                for p in topic.partitions
            ],
        )

    return await by_topic(
        check,
        request,
        call,
        op=Op.DESCRIBE,
        items="topics",
        name=lambda t: t.name,
        answer=answer,
        field="topics",
        empty=lambda refused: m.ListOffsetsResponse(topics=refused),
    )


async def _offset_for_leader_epoch(
    check: Check, request: m.OffsetForLeaderEpochRequest, call: Call
) -> Any:
    if request.replica_id >= 0:
        return await cluster_rule(Op.CLUSTER_ACTION, check, request, call)

    def answer(topic: m.OffsetForLeaderEpochTopic) -> m.OffsetForLeaderEpochResponseTopic:
        return m.OffsetForLeaderEpochResponseTopic(
            topic=topic.topic,
            partitions=[
                m.OffsetForLeaderEpochResponsePartition(
                    error_code=TOPIC_DENIED, partition=p.partition, leader_epoch=-1, end_offset=-1
                )
                for p in topic.partitions
            ],
        )

    return await by_topic(
        check,
        request,
        call,
        op=Op.DESCRIBE,
        items="topics",
        name=lambda t: t.topic,
        answer=answer,
        field="topics",
        empty=lambda refused: m.OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=refused),
    )


async def _delete_records(check: Check, request: m.DeleteRecordsRequest, call: Call) -> Any:
    def answer(topic: m.DeleteRecordsTopic) -> m.DeleteRecordsResponseTopic:
        return m.DeleteRecordsResponseTopic(
            name=topic.name,
            partitions=[
                m.DeleteRecordsResponsePartition(
                    partition_index=p.partition_index, low_watermark=-1, error_code=TOPIC_DENIED
                )
                for p in topic.partitions
            ],
        )

    return await by_topic(
        check,
        request,
        call,
        op=Op.DELETE,
        items="topics",
        name=lambda t: t.name,
        answer=answer,
        field="topics",
        empty=lambda refused: m.DeleteRecordsResponse(throttle_time_ms=0, topics=refused),
    )


async def _init_producer_id(check: Check, request: m.InitProducerIdRequest, call: Call) -> Any:
    if request.transactional_id is not None:
        allowed = check(Op.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
        code = TXN_DENIED
    else:  # KIP-679 (Kafka 3.0): IdempotentWrite on the cluster, or Write on any topic
        allowed = check.quietly(
            Op.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME
        ) or check.authorizer.authorize_by_resource_type(
            check.principal, check.host, Op.WRITE, ResourceType.TOPIC
        )
        if not allowed:
            check.cluster(Op.IDEMPOTENT_WRITE)  # counted and logged as the denial
        code = CLUSTER_DENIED
    if not allowed:
        return m.InitProducerIdResponse(
            throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1
        )
    return await call(request)


async def _describe_producers(check: Check, request: m.DescribeProducersRequest, call: Call):
    def answer(topic: m.DescribeProducersTopic) -> m.DescribeProducersResponseTopic:
        return m.DescribeProducersResponseTopic(
            name=topic.name,
            partitions=[
                m.DescribeProducersPartition(
                    partition_index=p,
                    error_code=TOPIC_DENIED,
                    error_message=None,
                    active_producers=[],
                )
                for p in topic.partition_indexes
            ],
        )

    return await by_topic(
        check,
        request,
        call,
        op=Op.READ,
        items="topics",
        name=lambda t: t.name,
        answer=answer,
        field="topics",
        empty=lambda refused: m.DescribeProducersResponse(throttle_time_ms=0, topics=refused),
    )


# -- Metadata ------------------------------------------------------------------------------
async def _metadata(check: Check, request: m.MetadataRequest, call: Call) -> Any:
    """Unauthorized topics are left out of an all-topics answer; a named one is answered
    TOPIC_AUTHORIZATION_FAILED; a missing one it may not Create is not auto-created."""
    if request.topics is None:
        return then(
            await call(request),
            lambda r: replace(
                r, topics=[t for t in r.topics if check.quietly(Op.DESCRIBE, TOPIC, t.name)]
            ),
        )
    refused: list[str] = []
    allowed: list[str] = []
    for name in request.topics:
        if not check.topic(Op.DESCRIBE, name):
            refused.append(name)
        elif (
            request.allow_auto_topic_creation
            and check.auto_create_topics
            and not check.cache.contains_topic(name)
            and not check.quietly(Op.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
            and not check.topic(Op.CREATE, name)
        ):
            refused.append(name)
        else:
            allowed.append(name)
    outcome = await call(replace(request, topics=allowed))

    def add(r: m.MetadataResponse) -> m.MetadataResponse:
        # Topics named by id come back named: hide the ones it may not Describe.
        shown = [t for t in r.topics if not t.name or check.quietly(Op.DESCRIBE, TOPIC, t.name)]
        denied = [
            m.MetadataResponseTopic(
                error_code=TOPIC_DENIED, name=name, is_internal=False, partitions=[]
            )
            for name in refused
        ]
        return replace(r, topics=[*shown, *denied])

    return then(outcome, add)


# -- topics and configs ----------------------------------------------------------------------
async def _create_topics(check: Check, request: m.CreateTopicsRequest, call: Call) -> Any:
    if check.quietly(Op.CREATE, ResourceType.CLUSTER, CLUSTER_NAME):
        return await call(request)
    return await by_topic(
        check,
        request,
        call,
        op=Op.CREATE,
        items="topics",
        name=lambda t: t.name,
        answer=lambda t: m.CreateTopicsResponseTopic(
            name=t.name,
            error_code=TOPIC_DENIED,
            error_message="Authorization failed.",
            num_partitions=-1,
            replication_factor=-1,
        ),
        field="topics",
        empty=lambda refused: m.CreateTopicsResponse(throttle_time_ms=0, topics=refused),
    )


async def _delete_topics(check: Check, request: m.DeleteTopicsRequest, call: Call) -> Any:
    def denied_name(name: str) -> bool:
        return not check.topic(Op.DELETE, name)

    def denied_id(topic_id: bytes) -> bool:
        name = check.cache.topic_name(uuid.UUID(bytes=topic_id))
        return name is not None and denied_name(name)

    names = [n for n in request.topic_names if not denied_name(n)]
    ids = [i for i in request.topic_ids if not denied_id(i)]
    refused = [
        m.DeleteTopicsResponseTopic(name=n, error_code=TOPIC_DENIED, error_message=None)
        for n in request.topic_names
        if denied_name(n)
    ] + [
        m.DeleteTopicsResponseTopic(
            name="", error_code=TOPIC_DENIED, error_message=None, topic_id=i
        )
        for i in request.topic_ids
        if denied_id(i)
    ]
    if not refused:
        return await call(request)
    if not names and not ids:
        return m.DeleteTopicsResponse(throttle_time_ms=0, responses=refused)
    outcome = await call(replace(request, topic_names=names, topic_ids=ids))
    return then(outcome, lambda r: replace(r, responses=[*r.responses, *refused]))


async def _create_partitions(check: Check, request: m.CreatePartitionsRequest, call: Call):
    return await by_topic(
        check,
        request,
        call,
        op=Op.ALTER,
        items="topics",
        name=lambda t: t.name,
        answer=lambda t: m.CreatePartitionsResponseTopic(
            name=t.name, error_code=TOPIC_DENIED, error_message=None
        ),
        field="results",
        empty=lambda refused: m.CreatePartitionsResponse(throttle_time_ms=0, results=refused),
    )


def _config_allowed(check: Check, op: AclOperation, resource_type: int, name: str) -> bool:
    if resource_type == CONFIG_TOPIC:
        return check.topic(op, name)
    return check.cluster(op)


def _config_code(resource_type: int) -> ErrorCode:
    return TOPIC_DENIED if resource_type == CONFIG_TOPIC else CLUSTER_DENIED


async def _configs(
    check: Check, request: Any, call: Call, *, op: AclOperation, field: str, empty: Callable
) -> Any:
    allowed: list[Any] = []
    refused: list[Any] = []
    for res in request.resources:
        if _config_allowed(check, op, res.resource_type, res.resource_name):
            allowed.append(res)
        elif op == Op.DESCRIBE_CONFIGS:
            refused.append(
                m.DescribeConfigsResponseResource(
                    error_code=_config_code(res.resource_type),
                    error_message=None,
                    resource_type=res.resource_type,
                    resource_name=res.resource_name,
                    configs=[],
                )
            )
        else:
            refused.append(
                m.AlterConfigsResourceResponse(
                    error_code=_config_code(res.resource_type),
                    error_message=None,
                    resource_type=res.resource_type,
                    resource_name=res.resource_name,
                )
            )
    if not refused:
        return await call(request)
    if not allowed:
        return empty(refused)
    outcome = await call(replace(request, resources=allowed))
    return then(outcome, lambda r: replace(r, **{field: [*getattr(r, field), *refused]}))


async def _describe_configs(check: Check, request: m.DescribeConfigsRequest, call: Call) -> Any:
    return await _configs(
        check,
        request,
        call,
        op=Op.DESCRIBE_CONFIGS,
        field="results",
        empty=lambda refused: m.DescribeConfigsResponse(throttle_time_ms=0, results=refused),
    )


async def _alter_configs(check: Check, request: m.AlterConfigsRequest, call: Call) -> Any:
    return await _configs(
        check,
        request,
        call,
        op=Op.ALTER_CONFIGS,
        field="responses",
        empty=lambda refused: m.AlterConfigsResponse(throttle_time_ms=0, responses=refused),
    )


async def _incremental_alter_configs(check: Check, request: Any, call: Call) -> Any:
    return await _configs(
        check,
        request,
        call,
        op=Op.ALTER_CONFIGS,
        field="responses",
        empty=lambda refused: m.IncrementalAlterConfigsResponse(
            throttle_time_ms=0, responses=refused
        ),
    )


_RULES: dict[int, Callable[[Check, Any, Call], Awaitable[Any]]] = {
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _list_offsets,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch,
    ApiKey.DELETE_RECORDS: _delete_records,
    ApiKey.INIT_PRODUCER_ID: _init_producer_id,
    ApiKey.DESCRIBE_PRODUCERS: _describe_producers,
    ApiKey.METADATA: _metadata,
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.CREATE_PARTITIONS: _create_partitions,
    ApiKey.DESCRIBE_CONFIGS: _describe_configs,
    ApiKey.ALTER_CONFIGS: _alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _incremental_alter_configs,
    ApiKey.LEADER_AND_ISR: cluster(Op.CLUSTER_ACTION),
    ApiKey.UPDATE_METADATA: cluster(Op.CLUSTER_ACTION),
    ApiKey.STOP_REPLICA: cluster(Op.CLUSTER_ACTION),
    ApiKey.ELECT_LEADERS: cluster(Op.ALTER),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: cluster(Op.ALTER),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: cluster(Op.DESCRIBE),
    ApiKey.DESCRIBE_LOG_DIRS: cluster(Op.DESCRIBE),
    ApiKey.VERIFY_LOG_DIRS: cluster(Op.ALTER),
    ApiKey.DESCRIBE_ACLS: cluster(Op.DESCRIBE),
    ApiKey.CREATE_ACLS: cluster(Op.ALTER),
    ApiKey.DELETE_ACLS: cluster(Op.ALTER),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: cluster(Op.DESCRIBE),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: cluster(Op.ALTER),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: cluster(Op.DESCRIBE_CONFIGS),
    ApiKey.ALTER_CLIENT_QUOTAS: cluster(Op.ALTER_CONFIGS),
    **GROUP_RULES,
    **TXN_RULES,
}
