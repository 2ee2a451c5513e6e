"""A group member's side of partition assignment: what it joins with, the leader's plan,
and when the leader must plan again. Kafka 2.8's ConsumerCoordinator (metadata(),
performAssignment(), the assignment snapshot of its metadata watch).

How it works: `GroupAssignment` holds the member's assignors (in preference order) and
its last assignment with its generation. `protocols` gives the JoinGroup protocols: per
assignor, the encoded `Subscription` (topics; the assignor's user data, for the sticky
assignor the last assignment and its generation; the partitions owned, which an eager
member has just given up). On the leader, `plan` decodes every member's subscription (an
unreadable one gets nothing), refreshes metadata for the union of their topics, keeps
each topic's partition count (the snapshot), runs the assignor the coordinator chose and
encodes every member's share. While the snapshot is kept, `changed_topics` compares it
with fresh metadata: the leader rejoins when a group topic's partition count changes or
a subscribed topic appears or goes. `completed` records the member's own share from
SyncGroup (a follower forgets the snapshot).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import trio

from client.consumer.group.assignors import PartitionAssignor, assignor_for
from client.metadata import ClusterView, Metadata, NoBrokersAvailableError
from client.protocol import messages as m
from client.protocol.consumer_protocol import (
    ConsumerProtocolError,
    Subscription,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.types import TopicPartition

log = logging.getLogger(__name__)


class GroupAssignment:
    """One member's assignors, last assignment and (on the leader) the partition counts
    it assigned from; see the module docstring."""

    def __init__(
        self,
        group_id: str,
        strategies: Iterable[str | PartitionAssignor],
        metadata: Metadata,
        *,
        request_timeout_ms: float,
    ) -> None:
        assignors = [assignor_for(a) for a in strategies]
        if not assignors:
            raise ValueError("partition_assignment_strategy names no assignor")
        self.group_id = group_id
        self.assignors: dict[str, PartitionAssignor] = {a.name: a for a in assignors}
        self.metadata = metadata
        self.request_timeout_ms = request_timeout_ms
        # The leader's: each group topic's partition count when it last assigned.
        self.snapshot: dict[str, int | None] | None = None
        self._last_assignment: tuple[TopicPartition, ...] = ()
        self._last_generation_id = -1

    def topics(self) -> set[str]:
        """The topics of the snapshot (the leader's: every member's)."""
        return set(self.snapshot) if self.snapshot is not None else set()

    def protocols(
        self, subscription: tuple[str, ...], owned: tuple[TopicPartition, ...]
    ) -> list[tuple[str, bytes]]:
        return [
            (
                name,
                encode_subscription(
                    Subscription(
                        subscription,
                        assignor.subscription_user_data(
                            self._last_assignment, self._last_generation_id
                        ),
                        owned,
                    )
                ),
            )
            for name, assignor in self.assignors.items()
        ]

    async def plan(
        self, response: m.JoinGroupResponse, subscription: tuple[str, ...]
    ) -> dict[str, bytes]:
        """The leader's part: every member's share, encoded."""
        assignor = self.assignors.get(response.protocol_name or "")
        if assignor is None:
            raise TributaryError(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                f"the coordinator chose assignor {response.protocol_name!r}, which this "
                f"consumer does not have ({', '.join(self.assignors)})",
            )
        subscriptions: dict[str, Subscription] = {}
        for member in response.members:
            try:
                decoded = decode_subscription(member.metadata, member.group_instance_id)
            except ConsumerProtocolError as exc:
                log.warning(
                    "group %s: member %s sent an unreadable subscription (%s); it gets nothing",
                    self.group_id,
                    member.member_id,
                    exc,
                )
                decoded = Subscription((), group_instance_id=member.group_instance_id)
            subscriptions[member.member_id] = decoded
        topics = {t for s in subscriptions.values() for t in s.topics}
        self.metadata.set_topics(set(subscription) | topics)
        self.metadata.request_update()
        try:
            with trio.move_on_after(self.request_timeout_ms / 1000):
                await self.metadata.refresh()
        except NoBrokersAvailableError as exc:
            log.warning("group %s: assigning with the metadata we have: %s", self.group_id, exc)
        cluster = self.metadata.cluster
        snapshot = {t: cluster.partition_count(t) for t in sorted(topics)}
        self.snapshot = snapshot
        counts = {t: n for t, n in snapshot.items() if n}
        plan = assignor.assign(counts, subscriptions)
        log.info(
            "group %s: generation %d, %s assigned %s",
            self.group_id,
            response.generation_id,
            assignor.name,
            {member: len(a.partitions) for member, a in plan.items()},
        )
        return {member: encode_assignment(a) for member, a in plan.items()}

    def changed_topics(self, cluster: ClusterView) -> list[str]:
        """The snapshot's topics whose partition count `cluster` gives differently."""
        snapshot = self.snapshot
        if snapshot is None:
            return []
        return sorted(t for t in snapshot if cluster.partition_count(t) != snapshot[t])

    def completed(
        self, partitions: Iterable[TopicPartition], generation_id: int, *, leader: bool
    ) -> None:
        """The member took `partitions` in generation `generation_id`."""
        self._last_assignment = tuple(sorted(partitions))
        self._last_generation_id = generation_id
        if not leader:
            self.snapshot = None
