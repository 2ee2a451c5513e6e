"""Request handlers: one method per API, translating messages to core calls and back.

How it works: `RequestHandlers.handle(header, request, listener)` dispatches on the API
key. Data plane handlers (Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, Metadata)
call the sans-IO core synchronously, before any `await`, so requests of one connection
reach the core in the order they arrived; a response that has to wait comes back as a
`Reply` the core's callback fills. Controller requests (LeaderAndIsr, UpdateMetadata,
StopReplica) are fenced by controller epoch and broker epoch, then applied to the core.
Admin requests that write ZooKeeper live in `broker/handlers/topics.py`; the group APIs in
`broker/handlers/groups.py`.

The handlers see only what they use: the replica manager, the metadata cache (and
`MetadataChanges` to announce updates), the broker's identity (epoch fencing, cluster
id), the topic configs (loaded before LeaderAndIsr creates logs) and a clock. They never
wake a timer or a fetcher: the core reports those itself (`ReplicaManager`'s `wake_at`
and `followers_changed`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import trio

from broker.core.delayed_fetch import FetchParams, FetchPartitionRequest
from broker.core.metadata_cache import BrokerEndpoint, MetadataCache, PartitionMetadata
from broker.core.partition import PartitionStateUpdate
from broker.core.producer_ids import ProducerIdBlockError, ProducerIdGenerator
from broker.core.replica_manager import ReplicaManager
from broker.handlers.groups import GROUP_APIS, GroupHandlers
from broker.handlers.metadata_changes import MetadataChanges
from broker.handlers.topics import AdminHandlers
from broker.tasks.log_scrubber import LogScrubber
from broker.zookeeper.registration import BrokerIdentity
from broker.zookeeper.topic_configs import TopicConfigs
from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.codec import RequestHeader
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition
from server_common.network import NO_RESPONSE, Reply, error_answer
from server_common.zk import ZkError

log = logging.getLogger(__name__)

# Longest a fetch may wait in purgatory, whatever the client asks (Kafka has no cap but
# the client's request timeout; a cap keeps a confused client from pinning memory).
MAX_FETCH_WAIT_MS = 60_000
# Longest VerifyLogDirs waits for repairs (the client's request timeout must cover it).
MAX_VERIFY_WAIT_MS = 300_000


class RequestHandlers:
    def __init__(
        self,
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache,
        admin: AdminHandlers,
        *,
        identity: BrokerIdentity,
        topic_configs: TopicConfigs,
        metadata_changes: MetadataChanges,
        clock: Callable[[], int],
        log_dir: str,
        groups: GroupHandlers | None = None,
        scrubber: LogScrubber | None = None,
    ):
        self.rm = replica_manager
        self.groups = groups
        self.cache = metadata_cache
        self.identity = identity
        self.topic_configs = topic_configs
        self.metadata_changes = metadata_changes
        self.now_ms = clock
        self.log_dir = log_dir
        self.scrubber = scrubber
        self._dispatch = {
            ApiKey.API_VERSIONS: self.api_versions,
            ApiKey.PRODUCE: self.produce,
            ApiKey.FETCH: self.fetch,
            ApiKey.LIST_OFFSETS: self.list_offsets,
            ApiKey.DELETE_RECORDS: self.delete_records,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self.offset_for_leader_epoch,
            ApiKey.LEADER_AND_ISR: self.leader_and_isr,
            ApiKey.UPDATE_METADATA: self.update_metadata,
            ApiKey.STOP_REPLICA: self.stop_replica,
            ApiKey.DESCRIBE_LOG_DIRS: self.describe_log_dirs,
            ApiKey.VERIFY_LOG_DIRS: self.verify_log_dirs,
            ApiKey.CREATE_TOPICS: admin.create_topics,
            ApiKey.DELETE_TOPICS: admin.delete_topics,
            ApiKey.CREATE_PARTITIONS: admin.create_partitions,
            ApiKey.DESCRIBE_CONFIGS: admin.describe_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: admin.incremental_alter_configs,
            ApiKey.ELECT_LEADERS: admin.elect_leaders,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: admin.alter_partition_reassignments,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: admin.list_partition_reassignments,
            ApiKey.INIT_PRODUCER_ID: self.init_producer_id,
        }
        # Idempotent producers: ids from blocks claimed in ZooKeeper, one claim at a time.
        self._producer_id_gateway = admin.gateway
        self._producer_ids = ProducerIdGenerator()
        self._producer_id_lock = trio.Lock()

    async def handle(self, header: RequestHeader, request: Any, listener: str | None = None) -> Any:
        """Serve one request that arrived through `listener` (None: any/unknown)."""
        if header.api_key == ApiKey.METADATA:
            return await self.metadata(request, listener)
        if header.api_key in GROUP_APIS and self.groups is not None:
            return await self.groups.handle(header, request, listener)
        handler = self._dispatch.get(header.api_key)
        if handler is None:
            return error_answer(
                ErrorCode.UNSUPPORTED_VERSION,
                f"api {ApiKey(header.api_key).name} is not served by brokers",
            )
        return await handler(request)

    # -- idempotent producers (InitProducerId) ----------------------------------------
    async def init_producer_id(self, request: m.InitProducerIdRequest) -> m.InitProducerIdResponse:
        """A new producer id at epoch 0 (Kafka 2.8 without a transactional id: a producer
        asking to bump its epoch also gets a fresh id). Transactions are not supported:
        a transactional id is refused."""

        def answer(code: ErrorCode, pid: int = -1, epoch: int = -1) -> m.InitProducerIdResponse:
            return m.InitProducerIdResponse(
                throttle_time_ms=0, error_code=code, producer_id=pid, producer_epoch=epoch
            )

        if request.transactional_id is not None:
            return answer(ErrorCode.INVALID_REQUEST)
        async with self._producer_id_lock:
            if self._producer_ids.needs_block:
                try:
                    block = await self._producer_id_gateway.claim_producer_id_block(
                        self.identity.broker_id
                    )
                except ZkError as exc:
                    log.warning("could not claim a producer id block: %s", exc)
                    return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
                except ProducerIdBlockError as exc:
                    log.error("could not claim a producer id block: %s", exc)
                    return answer(ErrorCode.UNKNOWN_SERVER_ERROR)
                self._producer_ids.use_block(block)
            return answer(ErrorCode.NONE, self._producer_ids.next_id(), 0)

    # -- simple ---------------------------------------------------------------------
    async def api_versions(self, request: m.ApiVersionsRequest) -> m.ApiVersionsResponse:
        return m.api_versions_response()

    async def metadata(
        self, request: m.MetadataRequest, listener: str | None = None
    ) -> m.MetadataResponse:
        cache = self.cache
        names = cache.topic_names() if request.topics is None else list(request.topics)
        topics = []
        for name in names:
            parts = cache.topics.get(name)
            if parts is None:
                topics.append(
                    m.MetadataResponseTopic(
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        name=name,
                        is_internal=False,
                        partitions=[],
                    )
                )
                continue
            partitions = []
            for p, state in sorted(parts.items()):
                live = set(cache.brokers)
                error = ErrorCode.NONE if state.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE
                partitions.append(
                    m.MetadataResponsePartition(
                        error_code=error,
                        partition=p,
                        leader=state.leader,
                        leader_epoch=state.leader_epoch,
                        replicas=list(state.replicas),
                        isr=list(state.isr),
                        offline_replicas=[r for r in state.replicas if r not in live],
                    )
                )
            topics.append(
                m.MetadataResponseTopic(
                    error_code=ErrorCode.NONE,
                    name=name,
                    is_internal=name.startswith("__"),
                    partitions=partitions,
                )
            )
        return m.MetadataResponse(
            brokers=[
                m.MetadataResponseBroker(
                    node_id=b.broker_id,
                    host=b.address_for(listener)[0],
                    port=b.address_for(listener)[1],
                    rack=b.rack,
                )
                for b in sorted(cache.brokers.values(), key=lambda b: b.broker_id)
            ],
            cluster_id=self.identity.cluster_id,
            controller_id=cache.controller_id,
            topics=topics,
        )

    # -- produce --------------------------------------------------------------------
    async def produce(self, request: m.ProduceRequest) -> Any:
        entries: dict[TopicPartition, bytes] = {}
        for topic in request.topics:
            for part in topic.partitions:
                entries[TopicPartition(topic.name, part.partition)] = part.records
        now = self.now_ms()
        if request.acks == 0:
            self.rm.append_records(
                now, acks=0, timeout_ms=0, entries=entries, respond=lambda results: None
            )
            return NO_RESPONSE
        reply = Reply()

        def respond(results) -> None:
            reply.set(self._produce_response(results))

        self.rm.append_records(
            now,
            acks=request.acks,
            timeout_ms=request.timeout_ms,
            entries=entries,
            respond=respond,
        )
        return reply

    # -- DeleteRecords ----------------------------------------------------------------
    async def delete_records(self, request: m.DeleteRecordsRequest) -> Any:
        """The leader moves each partition's log start offset; the answer waits until the
        in-sync followers have too (core/delayed_delete_records.py)."""
        offsets: dict[TopicPartition, int] = {}
        for topic in request.topics:
            for part in topic.partitions:
                offsets[TopicPartition(topic.name, part.partition_index)] = part.offset
        reply = Reply()

        def respond(results) -> None:
            by_topic: dict[str, list[m.DeleteRecordsResponsePartition]] = {}
            for tp, result in results.items():
                by_topic.setdefault(tp.topic, []).append(
                    m.DeleteRecordsResponsePartition(
                        partition_index=tp.partition,
                        low_watermark=result.low_watermark,
                        error_code=self._not_hosted_code(tp, result.error_code),
                    )
                )
            reply.set(
                m.DeleteRecordsResponse(
                    throttle_time_ms=0,
                    topics=[
                        m.DeleteRecordsResponseTopic(name=name, partitions=parts)
                        for name, parts in by_topic.items()
                    ],
                )
            )

        self.rm.delete_records(
            self.now_ms(), timeout_ms=request.timeout_ms, offsets=offsets, respond=respond
        )
        return reply

    def _produce_response(self, results) -> m.ProduceResponse:
        by_topic: dict[str, list[m.ProduceResponsePartition]] = {}
        for tp, result in results.items():
            code = self._not_hosted_code(tp, result.error_code)
            by_topic.setdefault(tp.topic, []).append(
                m.ProduceResponsePartition(
                    partition=tp.partition,
                    error_code=code,
                    base_offset=result.base_offset,
                    log_append_time_ms=result.log_append_time_ms,
                    log_start_offset=result.log_start_offset,
                    error_message=result.error_message if code else None,
                )
            )
        return m.ProduceResponse(
            topics=[
                m.ProduceResponseTopic(name=name, partitions=parts)
                for name, parts in by_topic.items()
            ],
            throttle_time_ms=0,
        )

    def _not_hosted_code(self, tp: TopicPartition, code: int) -> ErrorCode:
        """A partition we don't host but the cluster has is a stale-metadata problem
        (retriable NOT_LEADER_OR_FOLLOWER), not an unknown partition (Kafka does this)."""
        code = ErrorCode.from_code(code)
        if code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and self.cache.contains_partition(tp):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return code

    # -- fetch ----------------------------------------------------------------------
    async def fetch(self, request: m.FetchRequest) -> Any:
        if request.max_wait_ms < 0 or request.min_bytes < 0 or request.max_bytes < 0:
            return error_answer(ErrorCode.INVALID_REQUEST, "negative wait or size")
        params = FetchParams(
            replica_id=request.replica_id,
            max_wait_ms=min(request.max_wait_ms, MAX_FETCH_WAIT_MS),
            min_bytes=request.min_bytes,
            max_bytes=request.max_bytes,
        )
        partitions: dict[TopicPartition, FetchPartitionRequest] = {}
        for topic in request.topics:
            for part in topic.partitions:
                if part.partition_max_bytes < 0:
                    return error_answer(ErrorCode.INVALID_REQUEST, "negative partition_max_bytes")
                partitions[TopicPartition(topic.topic, part.partition)] = FetchPartitionRequest(
                    fetch_offset=part.fetch_offset,
                    current_leader_epoch=part.current_leader_epoch,
                    partition_max_bytes=part.partition_max_bytes,
                    log_start_offset=part.log_start_offset,
                )
        reply = Reply()

        def respond(results) -> None:
            reply.set(self._fetch_response(results))

        self.rm.fetch_messages(self.now_ms(), params, partitions, respond)
        return reply

    def _fetch_response(self, results) -> m.FetchResponse:
        by_topic: dict[str, list[m.FetchResponsePartition]] = {}
        for tp, result in results.items():
            by_topic.setdefault(tp.topic, []).append(
                m.FetchResponsePartition(
                    partition=tp.partition,
                    error_code=self._not_hosted_code(tp, result.error_code),
                    high_watermark=result.high_watermark,
                    last_stable_offset=result.high_watermark,
                    log_start_offset=result.log_start_offset,
                    records=result.records,
                )
            )
        return m.FetchResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.NONE,
            topics=[
                m.FetchResponseTopic(topic=name, partitions=parts)
                for name, parts in by_topic.items()
            ],
        )

    # -- offsets --------------------------------------------------------------------
    async def list_offsets(self, request: m.ListOffsetsRequest) -> m.ListOffsetsResponse:
        topics = []
        for topic in request.topics:
            parts = []
            for part in topic.partitions:
                tp = TopicPartition(topic.name, part.partition)
                code, timestamp, offset, epoch = self.rm.list_offset(
                    tp,
                    part.timestamp,
                    part.current_leader_epoch,
                    from_consumer=request.replica_id < 0,
                )
                parts.append(
                    m.ListOffsetsResponsePartition(
                        partition=part.partition,
                        error_code=self._not_hosted_code(tp, code),
                        timestamp=timestamp,
                        offset=offset,
                        leader_epoch=epoch,
                    )
                )
            topics.append(m.ListOffsetsResponseTopic(name=topic.name, partitions=parts))
        return m.ListOffsetsResponse(topics=topics)

    async def offset_for_leader_epoch(
        self, request: m.OffsetForLeaderEpochRequest
    ) -> m.OffsetForLeaderEpochResponse:
        topics = []
        for topic in request.topics:
            parts = []
            for part in topic.partitions:
                tp = TopicPartition(topic.topic, part.partition)
                code, epoch, end = self.rm.last_offset_for_leader_epoch(
                    tp, part.current_leader_epoch, part.leader_epoch
                )
                parts.append(
                    m.OffsetForLeaderEpochResponsePartition(
                        error_code=self._not_hosted_code(tp, code),
                        partition=part.partition,
                        leader_epoch=epoch,
                        end_offset=end,
                    )
                )
            topics.append(m.OffsetForLeaderEpochResponseTopic(topic=topic.topic, partitions=parts))
        return m.OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)

    # -- controller requests -----------------------------------------------------------
    def _fence(self, controller_epoch: int, broker_epoch: int) -> ErrorCode:
        if controller_epoch < self.rm.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        if broker_epoch >= 0 and broker_epoch != self.identity.broker_epoch:
            # Meant for an earlier registration of this broker (before a session loss).
            if broker_epoch < self.identity.broker_epoch:
                return ErrorCode.STALE_BROKER_EPOCH
        return ErrorCode.NONE

    async def leader_and_isr(self, request: m.LeaderAndIsrRequest) -> m.LeaderAndIsrResponse:
        fenced = self._fence(request.controller_epoch, request.broker_epoch)
        if fenced is not ErrorCode.NONE:
            log.warning(
                "rejecting LeaderAndIsr from controller %d epoch %d: %s",
                request.controller_id,
                request.controller_epoch,
                fenced.name,
            )
            return m.LeaderAndIsrResponse(error_code=fenced, partition_errors=[])
        for leader in request.live_leaders:
            self.cache.remember_endpoint(BrokerEndpoint(leader.broker_id, leader.host, leader.port))
        # Topic configs (min.insync.replicas, retention...) must be known before the
        # partitions' logs are created.
        await self.topic_configs.ensure_loaded(s.topic for s in request.partition_states)
        states = [
            PartitionStateUpdate(
                topic=s.topic,
                partition=s.partition,
                controller_epoch=s.controller_epoch,
                leader=s.leader,
                leader_epoch=s.leader_epoch,
                isr=tuple(s.isr),
                zk_version=s.zk_version,
                replicas=tuple(s.replicas),
                is_new=s.is_new,
            )
            for s in request.partition_states
        ]
        result = self.rm.become_leader_or_follower(self.now_ms(), request.controller_epoch, states)
        return m.LeaderAndIsrResponse(
            error_code=result.error_code,
            partition_errors=[
                m.LeaderAndIsrPartitionError(topic=tp.topic, partition=tp.partition, error_code=c)
                for tp, c in result.partition_errors.items()
            ],
        )

    async def update_metadata(self, request: m.UpdateMetadataRequest) -> m.UpdateMetadataResponse:
        fenced = self._fence(request.controller_epoch, request.broker_epoch)
        if fenced is not ErrorCode.NONE or request.controller_epoch < self.cache.controller_epoch:
            return m.UpdateMetadataResponse(error_code=fenced or ErrorCode.STALE_CONTROLLER_EPOCH)
        brokers = [
            BrokerEndpoint(
                b.id,
                b.host,
                b.port,
                b.rack,
                tuple((e.listener, e.host, e.port) for e in b.endpoints),
            )
            for b in request.live_brokers
        ]
        partitions = [
            (
                TopicPartition(s.topic, s.partition),
                PartitionMetadata(
                    leader=s.leader,
                    leader_epoch=s.leader_epoch,
                    isr=tuple(s.isr),
                    replicas=tuple(s.replicas),
                    offline_replicas=tuple(s.offline_replicas),
                    zk_version=s.zk_version,
                    controller_epoch=s.controller_epoch,
                ),
            )
            for s in request.partition_states
        ]
        self.cache.update(request.controller_id, request.controller_epoch, partitions, brokers)
        self.metadata_changes.notify()
        return m.UpdateMetadataResponse(error_code=ErrorCode.NONE)

    async def stop_replica(self, request: m.StopReplicaRequest) -> m.StopReplicaResponse:
        fenced = self._fence(request.controller_epoch, request.broker_epoch)
        if fenced is not ErrorCode.NONE:
            return m.StopReplicaResponse(error_code=fenced, partition_errors=[])
        result = self.rm.stop_replicas(
            self.now_ms(),
            request.controller_epoch,
            [
                (TopicPartition(p.topic, p.partition), p.delete_partition, p.leader_epoch)
                for p in request.partitions
            ],
        )
        return m.StopReplicaResponse(
            error_code=result.error_code,
            partition_errors=[
                m.StopReplicaPartitionError(topic=tp.topic, partition=tp.partition, error_code=c)
                for tp, c in result.partition_errors.items()
            ],
        )

    # -- introspection -----------------------------------------------------------------
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
                )
            ],
        )
