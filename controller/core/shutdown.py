"""Controlled shutdown decisions (Kafka's KafkaController.doControlledShutdown).

How it works: a broker about to stop asks the controller first. `shutdown_request_error`
checks the request (the broker must be registered and the request must not come from an
earlier registration of it: a smaller broker epoch). The shell then marks the broker as
shutting down in the context and asks `controlled_shutdown_changes` what to write:

- Case A, partitions it leads (RF > 1): elect with the controlled-shutdown strategy (a
  live ISR member that is not shutting down); the new ISR leaves out every
  shutting-down broker. No candidate: the partition stays where it is.
- Case B, partitions it follows and whose ISR it is in: remove it from the ISR (never
  leaving the ISR empty). The shell also sends it StopReplica (no delete) for those.

`remaining_leaderships` is the answer: what it still leads among partitions with other
replicas. Single-replica partitions are left out as Kafka does: nothing can take them
over, so asking again would not help.
"""

from __future__ import annotations

from collections.abc import Iterable

from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition
from controller.core.context import ControllerContext
from controller.core.election import elect_for_controlled_shutdown
from controller.core.state_change import Reason, StateChange, next_state

# Broker epoch of a request that does not know its own (Kafka's UNKNOWN_BROKER_EPOCH).
UNKNOWN_BROKER_EPOCH = -1


def shutdown_request_error(ctx: ControllerContext, broker_id: int, broker_epoch: int) -> ErrorCode:
    """NONE if the controlled shutdown of `broker_id` may proceed, else why not."""
    if not ctx.is_registered(broker_id):
        return ErrorCode.BROKER_NOT_AVAILABLE
    if broker_epoch != UNKNOWN_BROKER_EPOCH and broker_epoch < ctx.broker_epoch(broker_id):
        return ErrorCode.STALE_BROKER_EPOCH
    return ErrorCode.NONE


def controlled_shutdown_changes(
    ctx: ControllerContext, broker_id: int, tps: Iterable[TopicPartition] | None = None
) -> list[StateChange]:
    """Leadership moves (Case A) and ISR removals (Case B) for a shutting-down broker."""
    if tps is None:
        tps = ctx.partitions_on_brokers([broker_id])
    changes = []
    for tp in tps:
        state = ctx.states.get(tp)
        replicas = ctx.replicas.get(tp, ())
        if state is None or ctx.is_deleting(tp.topic) or broker_id not in replicas:
            continue
        if state.leader == broker_id:  # Case A
            if len(replicas) <= 1:
                continue
            election = elect_for_controlled_shutdown(
                replicas, state.isr, ctx.live_or_shutting_down_ids, ctx.shutting_down
            )
            if election is None:
                continue
            new = next_state(
                state, leader=election.leader, isr=election.isr, controller_epoch=ctx.epoch
            )
            changes.append(StateChange(tp, state, new, Reason.CONTROLLED_SHUTDOWN))
        elif broker_id in state.isr:  # Case B
            isr = tuple(r for r in state.isr if r != broker_id)
            if not isr:
                continue
            new = next_state(state, leader=state.leader, isr=isr, controller_epoch=ctx.epoch)
            changes.append(StateChange(tp, state, new, Reason.CONTROLLED_SHUTDOWN))
    return changes


def followed_partitions(ctx: ControllerContext, broker_id: int) -> list[TopicPartition]:
    """Partitions the broker hosts but does not lead (they get StopReplica, no delete)."""
    return [
        tp
        for tp in ctx.partitions_on_brokers([broker_id])
        if not ctx.is_deleting(tp.topic)
        and (state := ctx.states.get(tp)) is not None
        and state.leader != broker_id
    ]


def remaining_leaderships(ctx: ControllerContext, broker_id: int) -> list[TopicPartition]:
    """Partitions with other replicas that the broker still leads."""
    return [
        tp
        for tp in ctx.partitions_led_by(broker_id)
        if len(ctx.replicas.get(tp, ())) > 1 and not ctx.is_deleting(tp.topic)
    ]
