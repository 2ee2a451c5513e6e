"""Partition-count limits for CreateTopics and CreatePartitions, checked before anything
is allocated.

How it works: a request names a partition count and a replication factor as two
32-bit integers, so one unauthenticated request could ask for 2^31-1 partitions; building
that assignment takes tens of gigabytes. `PartitionBudget` is made per request from the
limits and what the cluster holds now (partition replicas per broker, from the broker's
metadata cache), and is asked twice per topic:

- `problem_before_assignment(partitions, rf, live)`: arithmetic only (no allocation):
  A. the request's partitions so far plus these exceed `max.partitions.per.request`;
  B. the cluster's partitions plus these exceed `max.partitions` (KIP-578);
  C. the replicas of these cannot fit under `max.broker.partitions` (KIP-578) on the
     live brokers even if spread perfectly.
- `problem_after_assignment(assignment)`: with the (now bounded) assignment computed,
  D. some broker would hold more than `max.broker.partitions` replicas.
`take(assignment)` then counts the topic in, so later topics of the same request see it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PartitionLimits:
    max_partitions_per_request: int  # max.partitions.per.request (Tributary's)
    max_partitions: int  # max.partitions (KIP-578): partitions in the cluster
    max_broker_partitions: int  # max.broker.partitions (KIP-578): replicas per broker


@dataclass
class LimitProblem:
    """Why a request is refused; `per_request` tells INVALID_PARTITIONS (the request
    itself is too big) from POLICY_VIOLATION (the cluster has no room for it)."""

    message: str
    per_request: bool


@dataclass
class PartitionBudget:
    limits: PartitionLimits
    cluster_partitions: int
    replicas_per_broker: Counter = field(default_factory=Counter)
    requested: int = 0

    @classmethod
    def of_cluster(
        cls, limits: PartitionLimits, replica_lists: Iterable[Sequence[int]]
    ) -> PartitionBudget:
        per_broker: Counter = Counter()
        count = 0
        for replicas in replica_lists:
            count += 1
            per_broker.update(replicas)
        return cls(limits, count, per_broker)

    def problem_before_assignment(
        self, partitions: int, replication_factor: int, live: Sequence[int]
    ) -> LimitProblem | None:
        limits = self.limits
        if self.requested + partitions > limits.max_partitions_per_request:  # Case A
            asked = self.requested + partitions
            return LimitProblem(
                f"{asked} partitions in one request is more than "
                f"max.partitions.per.request={limits.max_partitions_per_request}",
                per_request=True,
            )
        if self.cluster_partitions + partitions > limits.max_partitions:  # Case B
            return LimitProblem(
                f"{partitions} more partitions would make {self.cluster_partitions + partitions} "
                f"in the cluster, more than max.partitions={limits.max_partitions}",
                per_request=False,
            )
        if live:  # Case C
            held = sum(self.replicas_per_broker[b] for b in live)
            room = limits.max_broker_partitions * len(live) - held
            if partitions * replication_factor > room:
                return LimitProblem(
                    f"{partitions} partitions with replication factor {replication_factor} "
                    f"need {partitions * replication_factor} replicas; the {len(live)} live "
                    f"broker(s) have room for {max(room, 0)} under "
                    f"max.broker.partitions={limits.max_broker_partitions}",
                    per_request=False,
                )
        return None

    def problem_after_assignment(
        self, assignment: Mapping[int, Sequence[int]]
    ) -> LimitProblem | None:
        adding: Counter = Counter()
        for replicas in assignment.values():
            adding.update(replicas)
        for broker, count in sorted(adding.items()):  # Case D
            total = self.replicas_per_broker[broker] + count
            if total > self.limits.max_broker_partitions:
                return LimitProblem(
                    f"broker {broker} would hold {total} partition replicas, more than "
                    f"max.broker.partitions={self.limits.max_broker_partitions}",
                    per_request=False,
                )
        return None

    def take(self, assignment: Mapping[int, Sequence[int]]) -> None:
        self.requested += len(assignment)
        self.cluster_partitions += len(assignment)
        for replicas in assignment.values():
            self.replicas_per_broker.update(replicas)
