"""The broker's view of the cluster, filled by the controller's UpdateMetadata requests.

How it works: each UpdateMetadata carries partition states (leader, epoch, ISR,
replicas, offline replicas), the ids of their topics (KIP-516) and the full list of live
brokers; the cache replaces the brokers and merges the partitions and ids. A partition
whose leader is `LEADER_DURING_DELETE` is being deleted and leaves the cache; its topic's
id leaves with the topic's last partition, so a topic created again under the same name
shows the new id. Metadata requests, "is this partition known?"
checks and the CreateTopics/DeleteTopics waits all read from here.

Leaders named in LeaderAndIsr (`live_leaders`) may not be in an UpdateMetadata yet: their
addresses are remembered (`remember_endpoint`) so a new follower can reach its leader at
once; `endpoint(id)` prefers the live broker list and falls back to them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from client.protocol.topic_ids import ZERO_TOPIC_ID
from client.protocol.types import TopicPartition
from server_common.zkdata import LEADER_DURING_DELETE


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """A live broker: host/port of its inter-broker listener, plus every listener."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    listeners: tuple[tuple[str, str, int], ...] = ()

    def address_for(self, listener: str | None) -> tuple[str, int]:
        """The address a client that came in through `listener` should use."""
        for name, host, port in self.listeners:
            if name == listener:
                return host, port
        return self.host, self.port


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    zk_version: int = 0
    controller_epoch: int = 0


class MetadataCache:
    def __init__(self) -> None:
        self.controller_id = -1
        self.controller_epoch = -1
        self.brokers: dict[int, BrokerEndpoint] = {}
        self.topics: dict[str, dict[int, PartitionMetadata]] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self._topic_names: dict[uuid.UUID, str] = {}  # topic_ids inverted
        self.version = 0  # bumped on every update: waiters compare it
        self._remembered: dict[int, BrokerEndpoint] = {}

    def update(
        self,
        controller_id: int,
        controller_epoch: int,
        partitions: list[tuple[TopicPartition, PartitionMetadata]],
        live_brokers: list[BrokerEndpoint],
        topic_ids: Mapping[str, uuid.UUID] | None = None,
    ) -> list[TopicPartition]:
        """Apply an UpdateMetadata. Returns the partitions that were deleted."""
        self.controller_id = controller_id
        self.controller_epoch = controller_epoch
        self.brokers = {b.broker_id: b for b in live_brokers}
        self._remembered.update(self.brokers)
        deleted = []
        for tp, state in partitions:
            if state.leader == LEADER_DURING_DELETE:
                parts = self.topics.get(tp.topic)
                if parts is not None and parts.pop(tp.partition, None) is not None:
                    deleted.append(tp)
                    if not parts:
                        del self.topics[tp.topic]
                        self._topic_names.pop(self.topic_ids.pop(tp.topic, ZERO_TOPIC_ID), None)
                continue
            self.topics.setdefault(tp.topic, {})[tp.partition] = state
        for name, topic_id in (topic_ids or {}).items():
            if name in self.topics and topic_id != ZERO_TOPIC_ID:
                previous = self.topic_ids.get(name)
                if previous is not None and previous != topic_id:
                    self._topic_names.pop(previous, None)
                self.topic_ids[name] = topic_id
                self._topic_names[topic_id] = name
        self.version += 1
        return deleted

    def contains_topic(self, topic: str) -> bool:
        return topic in self.topics

    def topic_id(self, topic: str) -> uuid.UUID:
        """The topic's id; the zero id when it has none (or is unknown)."""
        return self.topic_ids.get(topic, ZERO_TOPIC_ID)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The topic with this id, None if none has it."""
        return self._topic_names.get(topic_id)

    def contains_partition(self, tp: TopicPartition) -> bool:
        return tp.partition in self.topics.get(tp.topic, {})

    def partition(self, tp: TopicPartition) -> PartitionMetadata | None:
        return self.topics.get(tp.topic, {}).get(tp.partition)

    def endpoint(self, broker_id: int) -> BrokerEndpoint | None:
        """Where to reach `broker_id`: a live broker, else the last address we were told."""
        return self.brokers.get(broker_id) or self._remembered.get(broker_id)

    def live_rack(self, broker_id: int) -> tuple[bool, str | None]:
        """(whether `broker_id` is live, its rack): what KIP-392's selector asks."""
        endpoint = self.brokers.get(broker_id)
        return (False, None) if endpoint is None else (True, endpoint.rack)

    def remember_endpoint(self, endpoint: BrokerEndpoint) -> None:
        self._remembered[endpoint.broker_id] = endpoint

    def topic_names(self) -> list[str]:
        return sorted(self.topics)

    def all_partitions(self) -> list[tuple[TopicPartition, PartitionMetadata]]:
        return [
            (TopicPartition(topic, p), state)
            for topic, parts in sorted(self.topics.items())
            for p, state in sorted(parts.items())
        ]

    def has_leaders(self, topic: str, partition_count: int) -> bool:
        """True when every partition of the topic is known with a live leader."""
        parts = self.topics.get(topic)
        if parts is None or len(parts) < partition_count:
            return False
        return all(state.leader >= 0 for state in parts.values())
