"""Rack-aware replica assignment for new topics and partitions, as Kafka 2.8's AdminUtils
does it (`assignReplicasToBrokersRackAware`), and the choice between it and the
rack-unaware one (`core/assignment.py`).

How it works: brokers are arranged alternating racks (racks sorted, brokers of a rack
sorted: a1, b1, c1, a2, b2, ...). Partition i's first replica is the broker at
`(start + i) % n` of that list, so leaders spread round-robin over brokers and racks.
Each further replica walks on from the first at a distance `1 + (shift * racks + k) %
(n - 1)` (k counting every broker tried), skipping a broker whose rack already holds a
replica while some rack holds none, and a broker already holding one while some broker
holds none. So a partition's replicas are on min(RF, racks) distinct racks. `shift`
grows by one every n partitions. `choose_assignment` picks the algorithm as Kafka's
`assignReplicasToBrokers` does: no broker with a rack (or rack-awareness disabled) is
the rack-unaware algorithm; some brokers with a rack and others without is refused.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from broker.core.assignment import AssignmentError, assign_replicas, replica_index

MIXED_RACKS = "Not all brokers have rack information for replica rack aware assignment."


def rack_alternated_brokers(racks: Mapping[int, str]) -> list[int]:
    """Kafka's getRackAlternatedBrokerList: one broker of each rack in turn."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker)
    queues = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    result: list[int] = []
    depth = 0
    while len(result) < len(racks):
        result += [queue[depth] for queue in queues if depth < len(queue)]
        depth += 1
    return result


def _check(num_partitions: int, replication_factor: int, num_brokers: int) -> None:
    if num_partitions <= 0:
        raise AssignmentError("number of partitions must be larger than 0")
    if replication_factor <= 0:
        raise AssignmentError("replication factor must be larger than 0")
    if replication_factor > num_brokers:
        raise AssignmentError(
            f"replication factor {replication_factor} larger than available brokers {num_brokers}"
        )


def assign_replicas_rack_aware(
    num_partitions: int,
    replication_factor: int,
    racks: Mapping[int, str],
    *,
    start_index: int | None = None,
    replica_shift: int | None = None,
    first_partition_id: int = 0,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Assign replicas of partitions `first_partition_id..` to the brokers of `racks`
    (broker id -> rack). A fixed `start_index` also fixes the shift, as in Kafka,
    unless `replica_shift` is given."""
    _check(num_partitions, replication_factor, len(racks))
    arranged = rack_alternated_brokers(racks)
    n = len(arranged)
    num_racks = len(set(racks.values()))
    rng = rng or random.Random()
    start = start_index if start_index is not None else rng.randrange(n)
    if replica_shift is not None:
        shift = replica_shift
    else:
        shift = start_index if start_index is not None else rng.randrange(n)
    assignment: dict[int, list[int]] = {}
    for partition in range(first_partition_id, first_partition_id + num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {racks[leader]}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[replica_index(first, shift * num_racks, k, n)]
                k += 1
                rack = racks[broker]
                if (rack not in racks_used or len(racks_used) == num_racks) and (
                    broker not in replicas or len(replicas) == n
                ):
                    replicas.append(broker)
                    racks_used.add(rack)
                    break
        assignment[partition] = replicas
    return assignment


def choose_assignment(
    num_partitions: int,
    replication_factor: int,
    brokers: Mapping[int, str | None],
    *,
    rack_aware: bool = True,
    start_index: int | None = None,
    first_partition_id: int = 0,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Kafka's assignReplicasToBrokers over `brokers` (id -> rack or None): rack-aware
    when every broker has a rack, rack-unaware when none has (or `rack_aware` is off),
    an AssignmentError when only some have."""
    _check(num_partitions, replication_factor, len(brokers))
    with_rack = {b: r for b, r in brokers.items() if r}
    if not rack_aware or not with_rack:
        return assign_replicas(
            num_partitions,
            replication_factor,
            sorted(brokers),
            start_index=start_index,
            replica_shift=start_index,
            first_partition_id=first_partition_id,
            rng=rng,
        )
    if len(with_rack) < len(brokers):
        raise AssignmentError(MIXED_RACKS)
    return assign_replicas_rack_aware(
        num_partitions,
        replication_factor,
        with_rack,
        start_index=start_index,
        first_partition_id=first_partition_id,
        rng=rng,
    )
