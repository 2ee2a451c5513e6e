"""Replica assignment for new topics (rack-unaware), as Kafka 2.x's AdminUtils does it.

How it works: brokers are sorted; partition i's first replica goes to broker
`(start + i) % n` for a random `start`, so leaders spread round-robin. The other
replicas follow the first at a distance `1 + (shift + j) % (n - 1)`, where `shift` is
random and grows by one every n partitions, so the followers of a broker's partitions
are spread over all the other brokers instead of always being its neighbours.
`start` and `shift` may be fixed for reproducible tests.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence


class AssignmentError(ValueError):
    pass


def replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas(
    num_partitions: int,
    replication_factor: int,
    brokers: Sequence[int],
    *,
    start_index: int | None = None,
    replica_shift: int | None = None,
    first_partition_id: int = 0,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    if num_partitions <= 0:
        raise AssignmentError("number of partitions must be larger than 0")
    if replication_factor <= 0:
        raise AssignmentError("replication factor must be larger than 0")
    if replication_factor > len(brokers):
        raise AssignmentError(
            f"replication factor {replication_factor} larger than available brokers {len(brokers)}"
        )
    ordered = sorted(brokers)
    n = len(ordered)
    rng = rng or random.Random()
    start = start_index if start_index is not None else rng.randrange(n)
    shift = replica_shift if replica_shift is not None else rng.randrange(n)
    assignment: dict[int, list[int]] = {}
    for partition in range(first_partition_id, first_partition_id + num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        replicas = [ordered[first]]
        replicas += [
            ordered[replica_index(first, shift, j, n)] for j in range(replication_factor - 1)
        ]
        assignment[partition] = replicas
    return assignment


def validate_assignment(
    assignment: Mapping[int, Sequence[int]], live_brokers: set[int]
) -> str | None:
    """A problem with a user-given assignment, or None if it is usable."""
    if not assignment:
        return "empty replica assignment"
    partitions = sorted(assignment)
    if partitions != list(range(len(partitions))):
        return f"partitions must be numbered 0..{len(partitions) - 1}, got {partitions}"
    sizes = {len(r) for r in assignment.values()}
    if len(sizes) != 1:
        return "every partition must have the same number of replicas"
    for p, replicas in assignment.items():
        if not replicas:
            return f"partition {p} has no replicas"
        if len(set(replicas)) != len(replicas):
            return f"partition {p} lists a broker twice: {list(replicas)}"
        unknown = [b for b in replicas if b not in live_brokers]
        if unknown:
            return f"partition {p} names brokers that are not live: {unknown}"
    return None
