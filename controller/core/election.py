"""Leader election strategies (seed 001, Kafka's PartitionLeaderElectionAlgorithms).

How it works: each strategy is a pure function over the assignment, the current ISR and
the brokers that may lead; it returns the first replica *in assignment order* that
qualifies, or None:

- offline partition: alive and in the ISR; otherwise, only if unclean leader election is
  enabled for the topic, any alive replica (an *unclean* election: committed records
  the new leader lacks are lost, so the caller counts it);
- reassignment: in the target replicas, alive and in the ISR;
- preferred replica: only the first assigned replica, if alive and in the ISR;
- controlled shutdown: alive, in the ISR and not shutting down.

The `elect_*` wrappers also compute the new ISR as Kafka does: offline clean -> ISR
restricted to live brokers; unclean -> just the new leader; preferred and reassignment
-> the ISR unchanged; controlled shutdown -> the ISR without the shutting-down brokers.
"Alive" is whatever set the caller passes: the context's `live_ids` leave shutting-down
brokers out, which is what every strategy but controlled shutdown wants.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass


def offline_partition_leader(
    assignment: Sequence[int],
    isr: Collection[int],
    live: Collection[int],
    unclean_enabled: bool,
) -> int | None:
    for replica in assignment:
        if replica in live and replica in isr:
            return replica
    if unclean_enabled:
        for replica in assignment:
            if replica in live:
                return replica
    return None


def reassignment_leader(
    target: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    for replica in target:
        if replica in live and replica in isr:
            return replica
    return None


def preferred_replica_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_leader(
    assignment: Sequence[int],
    isr: Collection[int],
    live: Collection[int],
    shutting_down: Collection[int],
) -> int | None:
    for replica in assignment:
        if replica in live and replica in isr and replica not in shutting_down:
            return replica
    return None


@dataclass(frozen=True)
class Election:
    """A successful election: the new leader and ISR; `unclean` if the leader was not in
    the ISR (possible data loss)."""

    leader: int
    isr: tuple[int, ...]
    unclean: bool = False


def elect_offline(
    assignment: Sequence[int],
    isr: Sequence[int],
    live: Collection[int],
    unclean_enabled: bool,
) -> Election | None:
    leader = offline_partition_leader(assignment, isr, live, unclean_enabled)
    if leader is None:
        return None
    if leader not in isr:
        return Election(leader, (leader,), unclean=True)
    return Election(leader, tuple(r for r in isr if r in live))


def elect_for_reassignment(
    target: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> Election | None:
    leader = reassignment_leader(target, isr, live)
    return None if leader is None else Election(leader, tuple(isr))


def elect_preferred(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> Election | None:
    leader = preferred_replica_leader(assignment, isr, live)
    return None if leader is None else Election(leader, tuple(isr))


def elect_for_controlled_shutdown(
    assignment: Sequence[int],
    isr: Sequence[int],
    live: Collection[int],
    shutting_down: Collection[int],
) -> Election | None:
    leader = controlled_shutdown_leader(assignment, isr, live, shutting_down)
    if leader is None:
        return None
    return Election(leader, tuple(r for r in isr if r not in shutting_down))
