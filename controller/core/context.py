"""The active controller's picture of the cluster (Kafka's ControllerContext).

How it works: one `ControllerContext` lives as long as this process is the active
controller; it is filled from ZooKeeper on election and then kept in step by the event
handlers, which are its only writers. It holds:

- the controller's own id, epoch and the `/controller_epoch` znode version that fences
  every write;
- live brokers (id -> endpoint and broker epoch, the czxid of /brokers/ids/<id>) and the
  ones in controlled shutdown: those count as alive for sending requests but not as
  candidates for leadership (Kafka's liveBrokerIds vs liveOrShuttingDownBrokerIds);
- per partition the assigned replicas (RS while a reassignment runs) and the state znode
  (`LeaderAndIsr` with its zk_version); partitions without a state znode are
  "uninitialized";
- per topic its id (KIP-516; the controller gives one to a topic loaded without one),
  its configs (`unclean.leader.election.enable`); topics queued for deletion, ongoing
  reassignments and the counters in `ControllerStats`.

Queries are plain loops over dicts: a few thousand partitions take well under a
millisecond, which is cheaper than keeping indexes consistent.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace

from client.protocol.types import TopicPartition
from controller.core.reassignment import Reassignment
from controller.core.state_change import StateChange
from server_common.zkdata import BrokerRegistration, LeaderAndIsr, TopicAssignment

UNCLEAN_CONFIG = "unclean.leader.election.enable"


@dataclass(frozen=True)
class BrokerInfo:
    """A live broker as the controller knows it."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    # The czxid of /brokers/ids/<id>: changes when the broker registers again (KIP-380).
    epoch: int = -1
    # Every advertised listener (name, host, port); host/port above is the inter-broker one.
    endpoints: tuple[tuple[str, str, int], ...] = ()

    @classmethod
    def from_registration(cls, registration: BrokerRegistration) -> BrokerInfo:
        return cls(
            broker_id=registration.broker_id,
            host=registration.host,
            port=registration.port,
            rack=registration.rack,
            epoch=registration.broker_epoch,
            endpoints=registration.endpoints,
        )


@dataclass
class ControllerStats:
    """Counters that outlive one term as controller (they feed the metrics)."""

    leader_elections: int = 0
    unclean_leader_elections: int = 0
    controlled_shutdowns: int = 0
    controller_elections: int = 0


class ControllerContext:
    def __init__(
        self,
        controller_id: int,
        epoch: int,
        epoch_zk_version: int,
        *,
        default_unclean: bool = False,
        stats: ControllerStats | None = None,
    ):
        self.controller_id = controller_id
        self.epoch = epoch
        self.epoch_zk_version = epoch_zk_version
        self.default_unclean = default_unclean
        # The cluster-wide dynamic broker default (/config/brokers/<default>), when set:
        # it overrides the controller's own, as Kafka's controller applies it.
        self.dynamic_default_unclean: bool | None = None
        self.stats = stats if stats is not None else ControllerStats()
        self.live_brokers: dict[int, BrokerInfo] = {}
        self.shutting_down: set[int] = set()
        self.replicas: dict[TopicPartition, tuple[int, ...]] = {}
        self.states: dict[TopicPartition, LeaderAndIsr] = {}
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.topics_to_delete: set[str] = set()
        self.reassignments: dict[TopicPartition, Reassignment] = {}
        self._topics: dict[str, list[int]] = {}

    # -- brokers --------------------------------------------------------------------
    def add_live_broker(self, broker: BrokerInfo) -> None:
        self.live_brokers[broker.broker_id] = broker

    def remove_live_broker(self, broker_id: int) -> None:
        self.live_brokers.pop(broker_id, None)
        self.shutting_down.discard(broker_id)

    @property
    def live_ids(self) -> set[int]:
        """Brokers that may lead: alive and not shutting down."""
        return set(self.live_brokers) - self.shutting_down

    @property
    def live_or_shutting_down_ids(self) -> set[int]:
        """Brokers that are registered (requests still go to them)."""
        return set(self.live_brokers)

    def is_live(self, broker_id: int) -> bool:
        return broker_id in self.live_brokers and broker_id not in self.shutting_down

    def is_registered(self, broker_id: int) -> bool:
        return broker_id in self.live_brokers

    def broker_epoch(self, broker_id: int) -> int:
        broker = self.live_brokers.get(broker_id)
        return broker.epoch if broker is not None else -1

    # -- topics ---------------------------------------------------------------------
    def add_topic(self, assignment: TopicAssignment, config: dict[str, str] | None = None) -> None:
        """Add (or replace) a topic's assignment; a reassignment in flight recorded in the
        znode (adding/removing replicas) is picked up too."""
        topic = assignment.topic
        self.remove_topic(topic)
        self._topics[topic] = sorted(assignment.partitions)
        for partition, replicas in assignment.partitions.items():
            tp = TopicPartition(topic, partition)
            self.replicas[tp] = tuple(replicas)
            moving = Reassignment.from_znode(
                tuple(replicas),
                tuple(assignment.adding_replicas.get(partition, ())),
                tuple(assignment.removing_replicas.get(partition, ())),
            )
            if moving is not None:
                self.reassignments[tp] = moving
        self.topic_configs[topic] = dict(config or {})
        if assignment.topic_id is not None:
            self.topic_ids[topic] = assignment.topic_id

    def add_partitions(self, topic: str, partitions: dict[int, tuple[int, ...]]) -> None:
        """Partitions added to an existing topic (CreatePartitions); known ones are kept."""
        known = self._topics.setdefault(topic, [])
        for partition, replicas in partitions.items():
            tp = TopicPartition(topic, partition)
            if tp in self.replicas:
                continue
            known.append(partition)
            self.replicas[tp] = tuple(replicas)
        known.sort()

    def remove_topic(self, topic: str) -> None:
        for partition in self._topics.pop(topic, []):
            tp = TopicPartition(topic, partition)
            self.replicas.pop(tp, None)
            self.states.pop(tp, None)
            self.reassignments.pop(tp, None)
        self.topic_configs.pop(topic, None)
        self.topic_ids.pop(topic, None)
        self.topics_to_delete.discard(topic)

    def has_topic(self, topic: str) -> bool:
        return topic in self._topics

    def topic_names(self) -> list[str]:
        return sorted(self._topics)

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in self._topics.get(topic, [])]

    def all_partitions(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t in sorted(self._topics) for p in self._topics[t]]

    def topic_assignment(self, topic: str) -> TopicAssignment:
        """What /brokers/topics/<topic> should hold, reassignments in flight included."""
        partitions, adding, removing = {}, {}, {}
        for tp in self.partitions_of(topic):
            partitions[tp.partition] = self.replicas[tp]
            moving = self.reassignments.get(tp)
            if moving is not None:
                adding[tp.partition] = moving.adding
                removing[tp.partition] = moving.removing
        return TopicAssignment(topic, partitions, adding, removing, self.topic_ids.get(topic))

    def unclean_enabled(self, topic: str) -> bool:
        value = self.topic_configs.get(topic, {}).get(UNCLEAN_CONFIG)
        if value is None:
            if self.dynamic_default_unclean is not None:
                return self.dynamic_default_unclean
            return self.default_unclean
        return value.strip().lower() == "true"

    def is_deleting(self, topic: str) -> bool:
        return topic in self.topics_to_delete

    # -- partitions -----------------------------------------------------------------
    def partitions_on_brokers(self, broker_ids: Iterable[int]) -> list[TopicPartition]:
        wanted = set(broker_ids)
        return [tp for tp in self.all_partitions() if wanted.intersection(self.replicas[tp])]

    def partitions_led_by(self, broker_id: int) -> list[TopicPartition]:
        return [
            tp
            for tp in self.all_partitions()
            if (state := self.states.get(tp)) is not None and state.leader == broker_id
        ]

    def live_replicas(self, tp: TopicPartition) -> list[int]:
        """Replicas whose broker is registered (shutting-down ones included)."""
        return [r for r in self.replicas.get(tp, ()) if r in self.live_brokers]

    def apply(self, change: StateChange, zk_version: int) -> LeaderAndIsr:
        """Record a state change ZooKeeper accepted (at `zk_version`); count elections."""
        state = replace(change.new, zk_version=zk_version)
        self.states[change.tp] = state
        if change.leader_changed and state.leader >= 0:
            self.stats.leader_elections += 1
            if change.unclean:
                self.stats.unclean_leader_elections += 1
        return state

    # -- health -----------------------------------------------------------------------
    def offline_partitions(self) -> list[TopicPartition]:
        """Initialized partitions without a registered leader (Kafka's OfflinePartitionsCount
        counts the same: topics being deleted and uninitialized partitions are left out)."""
        return [
            tp
            for tp, state in self.states.items()
            if state.leader not in self.live_brokers and not self.is_deleting(tp.topic)
        ]

    def preferred_replica_imbalance_count(self) -> int:
        """Partitions not led by their preferred (first assigned) replica."""
        count = 0
        for tp, state in self.states.items():
            if self.is_deleting(tp.topic):
                continue
            moving = self.reassignments.get(tp)
            replicas = moving.target if moving is not None else self.replicas.get(tp, ())
            if replicas and state.leader != replicas[0]:
                count += 1
        return count
