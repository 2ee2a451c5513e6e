"""Automatic preferred-leader rebalancing (Kafka's checkAndTriggerAutoLeaderRebalance).

How it works: for each broker, look at the partitions whose preferred (first assigned)
replica it is; those it does not lead make up its imbalance ratio. When a broker's ratio
is above `leader.imbalance.per.broker.percentage`, each of those partitions whose
preferred replica can lead right now (alive, not shutting down, in the ISR) gets a
preferred replica election. Topics being deleted and partitions being reassigned are
left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from client.protocol.types import TopicPartition
from controller.core.context import ControllerContext


@dataclass(frozen=True)
class BrokerImbalance:
    broker_id: int
    preferred_count: int  # partitions whose preferred replica is this broker
    not_led: tuple[TopicPartition, ...]  # ... that it does not lead

    @property
    def ratio(self) -> float:
        return len(self.not_led) / self.preferred_count if self.preferred_count else 0.0


def imbalance_by_broker(ctx: ControllerContext) -> dict[int, BrokerImbalance]:
    preferred: dict[int, list[TopicPartition]] = {}
    not_led: dict[int, list[TopicPartition]] = {}
    for tp in ctx.all_partitions():
        state = ctx.states.get(tp)
        replicas = ctx.replicas.get(tp, ())
        if state is None or not replicas or ctx.is_deleting(tp.topic) or tp in ctx.reassignments:
            continue
        broker = replicas[0]
        preferred.setdefault(broker, []).append(tp)
        if state.leader != broker:
            not_led.setdefault(broker, []).append(tp)
    return {
        broker: BrokerImbalance(broker, len(tps), tuple(not_led.get(broker, ())))
        for broker, tps in sorted(preferred.items())
    }


def auto_rebalance_candidates(
    ctx: ControllerContext, imbalance_percentage: int
) -> list[TopicPartition]:
    """Partitions to hand back to their preferred replica."""
    threshold = imbalance_percentage / 100
    candidates = []
    for imbalance in imbalance_by_broker(ctx).values():
        if imbalance.ratio <= threshold or not ctx.is_live(imbalance.broker_id):
            continue
        for tp in imbalance.not_led:
            if imbalance.broker_id in ctx.states[tp].isr:
                candidates.append(tp)
    return candidates
