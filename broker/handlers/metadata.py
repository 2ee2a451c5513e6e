"""Metadata and ApiVersions: what a client asks a broker first.

How it works: both answer from memory. ApiVersions is the native protocol's fixed table
(`messages.api_versions_response`). Metadata answers from this broker's `MetadataCache`
(what the controller last sent with UpdateMetadata): every topic asked for (or all), with
its topic id, each partition's leader, leader epoch, replicas, ISR and offline replicas,
and the live brokers at their addresses on the listener the request came in on (Kafka's
multiple listeners). A topic not in the cache is UNKNOWN_TOPIC_OR_PARTITION, or, when the
client allows it and `auto.create.topics.enable` is on (Kafka's default), created with
the broker defaults and answered LEADER_NOT_AVAILABLE until its leaders are elected (as
Kafka 2.8's Metadata handler does); INVALID_TOPIC_EXCEPTION when its name could not be a
topic's (Kafka's
`Topic.validate`: empty, `.` or `..`, over 249 characters, a character outside
`[a-zA-Z0-9._-]`). Topics asked for by id are answered under their names; an id no topic
has is UNKNOWN_TOPIC_ID (the zero id is ignored, as Kafka does).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Awaitable, Callable

from broker.core.metadata_cache import MetadataCache
from broker.zookeeper.registration import BrokerIdentity
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.topic_ids import ZERO_TOPIC_ID, topic_id_bytes, topic_id_of_bytes
from client.protocol.types import topic_name_problem

# Creates topics with the broker defaults: each name's CreateTopics outcome.
AutoCreate = Callable[[list[str]], Awaitable[dict[str, ErrorCode]]]


class MetadataHandlers:
    def __init__(
        self,
        metadata_cache: MetadataCache,
        identity: BrokerIdentity,
        auto_create: AutoCreate | None = None,
    ) -> None:
        self.cache = metadata_cache
        self.identity = identity
        self.auto_create = auto_create  # None: auto.create.topics.enable=false

    async def api_versions(self, request: m.ApiVersionsRequest) -> m.ApiVersionsResponse:
        return m.api_versions_response()

    async def metadata(
        self, request: m.MetadataRequest, listener: str | None = None
    ) -> m.MetadataResponse:
        cache = self.cache
        names = cache.topic_names() if request.topics is None else list(request.topics)
        topics = [self._topic(name) for name in names]
        if request.allow_auto_topic_creation and self.auto_create is not None:
            topics = await self._auto_create(topics)
        if request.topic_ids:
            topics += self._topics_by_id(request.topic_ids)
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

    async def _auto_create(
        self, topics: list[m.MetadataResponseTopic]
    ) -> list[m.MetadataResponseTopic]:
        """Create the unknown (legally named) topics asked for; as Kafka, each one created
        (or created meanwhile by someone else) is answered LEADER_NOT_AVAILABLE, the
        client asking again once the controller has elected its leaders; a refusal
        (INVALID_REPLICATION_FACTOR with too few brokers...) is answered as it is."""
        unknown = [t.name for t in topics if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        if not unknown or self.auto_create is None:
            return topics
        outcomes = await self.auto_create(sorted(set(unknown)))
        created = (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS)

        def answer(topic: m.MetadataResponseTopic) -> m.MetadataResponseTopic:
            outcome = outcomes.get(topic.name)
            if outcome is None:
                return topic
            code = ErrorCode.LEADER_NOT_AVAILABLE if outcome in created else outcome
            return dataclasses.replace(topic, error_code=code)

        return [answer(topic) for topic in topics]

    def _topic(self, name: str) -> m.MetadataResponseTopic:
        cache = self.cache
        parts = cache.topics.get(name)
        if parts is None:
            invalid = topic_name_problem(name) is not None
            return m.MetadataResponseTopic(
                error_code=(
                    ErrorCode.INVALID_TOPIC_EXCEPTION
                    if invalid
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                ),
                name=name,
                is_internal=False,
                partitions=[],
            )
        live = set(cache.brokers)
        partitions = []
        for p, state in sorted(parts.items()):
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
        return m.MetadataResponseTopic(
            error_code=ErrorCode.NONE,
            name=name,
            is_internal=name.startswith("__"),
            partitions=partitions,
            topic_id=topic_id_bytes(cache.topic_id(name)),
        )

    def _topics_by_id(self, raw_ids: list[bytes]) -> list[m.MetadataResponseTopic]:
        by_id: dict[uuid.UUID, str] = {i: t for t, i in self.cache.topic_ids.items()}
        out = []
        for topic_id in dict.fromkeys(topic_id_of_bytes(raw) for raw in raw_ids):
            if topic_id == ZERO_TOPIC_ID:
                continue
            name = by_id.get(topic_id)
            if name is not None:
                out.append(self._topic(name))
                continue
            out.append(
                m.MetadataResponseTopic(
                    error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                    name="",
                    is_internal=False,
                    partitions=[],
                    topic_id=topic_id_bytes(topic_id),
                )
            )
        return out
