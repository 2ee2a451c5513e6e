"""KIP-392's replica selectors: which replica a rack-aware consumer should fetch from.

How it works (Kafka 2.8's `ReplicaManager.findPreferredReadReplica` and
`RackAwareReplicaSelector`): `replica.selector.class` names the selector (`parse_selector`:
none, Kafka's default, means the leader only). For a consumer fetch that carries a rack
(`client.rack`), the leader builds a `ReplicaView` of itself and of each follower whose
log covers the fetch offset (log start <= offset <= LEO, as the leader last heard it,
in the ISR or not) and of a live broker (its rack from the metadata), and asks
`select_rack_aware`: with no rack, or no replica in the client's rack, the leader; the
leader if it is in that rack; else the same-rack replica with the highest LEO (then the
one caught up most recently, then the lowest id, so the answer is deterministic).
`preferred_read_replica` wraps both and answers the broker to name in the fetch
response, or None when the leader serves the read itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from broker.core.partition import Partition

# Kafka's class names, and Tributary's short forms.
RACK_AWARE = "rack-aware"
LEADER = "leader"
_SELECTOR_NAMES = {
    "": None,
    LEADER: None,
    "org.apache.kafka.common.replica.LeaderSelector": None,
    RACK_AWARE: RACK_AWARE,
    "org.apache.kafka.common.replica.RackAwareReplicaSelector": RACK_AWARE,
}
SELECTOR_CHOICES = tuple(name for name in _SELECTOR_NAMES if name)


def parse_selector(name: str) -> str | None:
    """`replica.selector.class` as the selector to use (None: leader only)."""
    try:
        return _SELECTOR_NAMES[name.strip()]
    except KeyError:
        raise ValueError(
            f"unknown replica selector {name!r}; one of {', '.join(SELECTOR_CHOICES)}"
        ) from None


class ReplicaView(NamedTuple):
    """What the selector knows of one replica (Kafka's ReplicaView)."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_caught_up_ms: int


def select_rack_aware(
    client_rack: str, leader: ReplicaView, replicas: Iterable[ReplicaView]
) -> ReplicaView:
    """Kafka's RackAwareReplicaSelector.select: the replica to read from (maybe the
    leader). `replicas` may or may not include the leader."""
    if not client_rack:
        return leader
    if leader.rack == client_rack:
        return leader
    same_rack = [r for r in replicas if r.rack == client_rack and r.broker_id != leader.broker_id]
    if not same_rack:
        return leader
    return max(
        same_rack, key=lambda r: (r.log_end_offset, -r.time_since_caught_up_ms, -r.broker_id)
    )


def preferred_read_replica(
    selector: str | None,
    partition: Partition,
    client_rack: str,
    fetch_offset: int,
    now_ms: int,
    live_rack: Callable[[int], tuple[bool, str | None]],
) -> int | None:
    """The replica a consumer in `client_rack` should fetch `partition` from, when it is
    not this leader (None: read here). `live_rack(broker)` is (alive, its rack)."""
    if selector is None or not client_rack or not partition.is_leader:
        return None
    leader_alive, leader_rack = live_rack(partition.local_broker_id)
    leader = ReplicaView(
        partition.local_broker_id,
        leader_rack if leader_alive else None,
        partition.log_end_offset,
        0,
    )
    candidates = []
    for follower in partition.followers.values():
        if not follower.log_start_offset <= fetch_offset <= follower.log_end_offset:
            continue  # its log does not cover the offset (or we have not heard from it)
        alive, rack = live_rack(follower.broker_id)
        if not alive:
            continue  # Kafka's Node.noNode(): never chosen
        candidates.append(
            ReplicaView(
                follower.broker_id,
                rack,
                follower.log_end_offset,
                max(0, now_ms - follower.last_caught_up_ms),
            )
        )
    chosen = select_rack_aware(client_rack, leader, candidates)
    return None if chosen.broker_id == leader.broker_id else chosen.broker_id
