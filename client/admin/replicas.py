"""The admin client's leadership requests: preferred leader elections and partition
reassignments.

How it works: ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments
are one request each to any live broker (`_request_any`), which writes ZooKeeper for the
controller to act on (as Kafka 2.x's brokers did) and answers per partition: None
(success) or a `TributaryError`. ELECTION_NOT_NEEDED comes back as such an error value
(the preferred replica already leads); a request-level failure (e.g.
REASSIGNMENT_IN_PROGRESS) raises.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from client.admin.base import AdminBase, error_or_none
from client.admin.results import Reassignment
from client.metadata import UnknownTopicError
from client.protocol import messages as m
from client.protocol.errors import TributaryError
from client.protocol.types import TopicPartition


class ReplicaAdmin(AdminBase):
    """Leader elections and reassignments (a mixin of `client.admin.Admin`)."""

    async def elect_preferred_leaders(
        self,
        topic: str | None = None,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, TributaryError | None]:
        """Preferred leader election for `partitions`, or every partition of `topic`, or
        every partition of the cluster. ELECTION_NOT_NEEDED comes back as an error value
        (the preferred replica already leads); callers usually treat it as success."""
        timeout_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
        if partitions is not None:
            wanted: list[TopicPartition] | None = [TopicPartition(*tp) for tp in partitions]
        elif topic is not None:
            cluster = await self._fresh_cluster()
            parts = cluster.partitions_for(topic)
            if parts is None:
                raise UnknownTopicError(topic)
            wanted = [TopicPartition(topic, p) for p in parts]
        else:
            wanted = None
        by_topic: dict[str, list[int]] = {}
        for tp in wanted or ():
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = m.ElectLeadersRequest(
            election_type=m.PREFERRED_ELECTION,
            topic_partitions=None
            if wanted is None
            else [m.ElectLeadersTopic(topic=t, partitions=p) for t, p in by_topic.items()],
            timeout_ms=int(timeout_ms),
        )
        response = await self._request_any(request, timeout_ms)
        if response.error_code:
            raise TributaryError(response.error_code, "leader election failed")
        self.metadata.request_update()
        return {
            TopicPartition(t.topic, r.partition_id): error_or_none(r.error_code, r.error_message)
            for t in response.replica_election_results
            for r in t.partition_result
        }

    async def alter_partition_reassignments(
        self,
        plan: Mapping[TopicPartition, Sequence[int] | None],
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, TributaryError | None]:
        """Move partitions to new replica lists (None cancels). A request-level failure
        (e.g. REASSIGNMENT_IN_PROGRESS) raises."""
        timeout_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
        by_topic: dict[str, list[m.AlterPartitionReassignmentsPartition]] = {}
        for tp, replicas in plan.items():
            tp = TopicPartition(*tp)
            by_topic.setdefault(tp.topic, []).append(
                m.AlterPartitionReassignmentsPartition(
                    partition_index=tp.partition,
                    replicas=None if replicas is None else list(replicas),
                )
            )
        request = m.AlterPartitionReassignmentsRequest(
            timeout_ms=int(timeout_ms),
            topics=[
                m.AlterPartitionReassignmentsTopic(name=t, partitions=p)
                for t, p in by_topic.items()
            ],
        )
        response = await self._request_any(request, timeout_ms)
        if response.error_code:
            raise TributaryError(response.error_code, response.error_message)
        return {
            TopicPartition(t.name, p.partition_index): error_or_none(p.error_code, p.error_message)
            for t in response.responses
            for p in t.partitions
        }

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None, *, timeout_ms: float | None = None
    ) -> dict[TopicPartition, Reassignment]:
        """Reassignments in progress (of `partitions`, or all)."""
        timeout_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp[0], []).append(tp[1])
            topics = [
                m.ListPartitionReassignmentsTopic(name=t, partition_indexes=p)
                for t, p in by_topic.items()
            ]
        request = m.ListPartitionReassignmentsRequest(timeout_ms=int(timeout_ms), topics=topics)
        response = await self._request_any(request, timeout_ms)
        if response.error_code:
            raise TributaryError(response.error_code, response.error_message)
        return {
            TopicPartition(t.name, p.partition_index): Reassignment(
                tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas)
            )
            for t in response.topics
            for p in t.partitions
        }
