"""The controller's requests: LeaderAndIsr, UpdateMetadata and StopReplica.

How it works: each request is fenced first, by controller epoch (an older controller's
request is STALE_CONTROLLER_EPOCH) and broker epoch (a request meant for an earlier
registration of this broker, before a ZooKeeper session loss, is STALE_BROKER_EPOCH;
`BrokerIdentity` holds the current one), then applied to the core. LeaderAndIsr first
loads the topics' configs (min.insync.replicas, retention...) so the logs it creates
have them, then hands the partition states to `ReplicaManager.become_leader_or_follower`
(the core starts or stops fetchers itself through `followers_changed`). UpdateMetadata
(partition states, live brokers, topic ids) updates the `MetadataCache` and announces
the change (`MetadataChanges.notify`, what the admin handlers wait on). StopReplica
stops (and maybe deletes) replicas.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker.core.metadata_cache import BrokerEndpoint, MetadataCache, PartitionMetadata
from broker.core.partition import PartitionStateUpdate
from broker.core.replica_manager import ReplicaManager
from broker.handlers.metadata_changes import MetadataChanges
from broker.zookeeper.registration import BrokerIdentity
from broker.zookeeper.topic_configs import TopicConfigs
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.topic_ids import topic_id_of_bytes
from client.protocol.types import TopicPartition

log = logging.getLogger(__name__)


class ControllerRequestHandlers:
    def __init__(
        self,
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache,
        *,
        identity: BrokerIdentity,
        topic_configs: TopicConfigs,
        metadata_changes: MetadataChanges,
        clock: Callable[[], int],
    ) -> None:
        self.rm = replica_manager
        self.cache = metadata_cache
        self.identity = identity
        self.topic_configs = topic_configs
        self.metadata_changes = metadata_changes
        self.now_ms = clock

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
        topic_ids = {t.topic: topic_id_of_bytes(t.topic_id) for t in request.topic_ids}
        self.cache.update(
            request.controller_id, request.controller_epoch, partitions, brokers, topic_ids
        )
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
