"""Metadata and ApiVersions: what a client asks a broker first.

How it works: both answer from memory. ApiVersions is the native protocol's fixed table
(`messages.api_versions_response`). Metadata answers from this broker's `MetadataCache`
(what the controller last sent with UpdateMetadata): every topic asked for (or all), each
partition's leader, leader epoch, replicas, ISR and offline replicas, and the live brokers
at their addresses on the listener the request came in on (Kafka's multiple listeners);
a topic not in the cache is UNKNOWN_TOPIC_OR_PARTITION (never auto-created).
"""

from __future__ import annotations

from broker.core.metadata_cache import MetadataCache
from broker.zookeeper.registration import BrokerIdentity
from client.protocol import messages as m
from client.protocol.errors import ErrorCode


class MetadataHandlers:
    def __init__(self, metadata_cache: MetadataCache, identity: BrokerIdentity) -> None:
        self.cache = metadata_cache
        self.identity = identity

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
