"""Topic deletion bookkeeping (Kafka's TopicDeletionManager, simplified).

How it works: a topic queued for deletion (`enqueue`) remembers every replica of every
partition (broker, partition) that still has to delete its log. The shell:

1. announces the deletion once (`take_unannounced`): UpdateMetadata with leader -2 for
   its partitions to every broker, so clients and brokers stop using it;
2. sends StopReplica(delete_partition=True) for `take_sendable`: replicas whose broker is
   registered and that have no StopReplica in flight;
3. reports each answer (`on_stop_replica_result`); a successful one removes the replica,
   a failed one makes it *ineligible*: not sent again until `make_eligible` (on that
   broker's restart, or a new deletion request), so a broker that keeps failing is not
   asked in a tight loop;
4. on broker death (`on_broker_failure`) forgets what was in flight to it: those replicas
   wait until the broker returns (as in Kafka, deletion never skips a replica);
5. deletes the topic's znodes when `completed_topics` lists it, then `forget`s it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from client.protocol.types import TopicPartition
from controller.core.context import ControllerContext

Replica = tuple[TopicPartition, int]  # (partition, broker id)


class TopicDeletions:
    def __init__(self) -> None:
        self._remaining: dict[str, set[Replica]] = {}
        self._in_flight: set[Replica] = set()
        self._ineligible: set[Replica] = set()
        self._unannounced: list[str] = []

    def enqueue(self, ctx: ControllerContext, topic: str) -> bool:
        """Queue `topic` (marks it in the context); False if unknown or queued already."""
        if not ctx.has_topic(topic) or topic in self._remaining:
            return False
        ctx.topics_to_delete.add(topic)
        self._remaining[topic] = {
            (tp, broker) for tp in ctx.partitions_of(topic) for broker in ctx.replicas[tp]
        }
        self._unannounced.append(topic)
        return True

    def is_queued(self, topic: str) -> bool:
        return topic in self._remaining

    @property
    def topics(self) -> list[str]:
        return sorted(self._remaining)

    def take_unannounced(self) -> list[str]:
        topics, self._unannounced = self._unannounced, []
        return topics

    def take_sendable(self, registered: Collection[int]) -> list[Replica]:
        """Replicas to send StopReplica(delete) to now; they count as in flight."""
        sendable = sorted(
            replica
            for replicas in self._remaining.values()
            for replica in replicas
            if replica[1] in registered
            and replica not in self._in_flight
            and replica not in self._ineligible
        )
        self._in_flight.update(sendable)
        return sendable

    def on_stop_replica_result(self, tp: TopicPartition, broker_id: int, deleted: bool) -> None:
        replica = (tp, broker_id)
        self._in_flight.discard(replica)
        if tp.topic not in self._remaining:
            return
        if deleted:
            self._remaining[tp.topic].discard(replica)
        else:
            self._ineligible.add(replica)

    def make_eligible(self, brokers: Iterable[int] | None = None) -> None:
        """Let failed replicas (on `brokers`, or all) be sent StopReplica again."""
        if brokers is None:
            self._ineligible.clear()
        else:
            wanted = set(brokers)
            self._ineligible = {r for r in self._ineligible if r[1] not in wanted}

    def on_broker_failure(self, dead: Iterable[int]) -> None:
        gone = set(dead)
        self._in_flight = {r for r in self._in_flight if r[1] not in gone}

    def waiting_on(self, topic: str) -> set[int]:
        """Brokers that still have replicas of `topic` to delete."""
        return {broker for _, broker in self._remaining.get(topic, ())}

    def completed_topics(self) -> list[str]:
        return sorted(t for t, replicas in self._remaining.items() if not replicas)

    def forget(self, topic: str) -> None:
        self._remaining.pop(topic, None)
        self._in_flight = {r for r in self._in_flight if r[0].topic != topic}
        self._ineligible = {r for r in self._ineligible if r[0].topic != topic}
        if topic in self._unannounced:
            self._unannounced.remove(topic)
