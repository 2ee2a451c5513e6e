"""Controlled shutdown requests (Kafka's ControlledShutdown event).

How it works: the listener turns each ControlledShutdownRequest into an event with a
reply slot. A standby controller answers NOT_CONTROLLER; an unknown broker
BROKER_NOT_AVAILABLE; a request from an earlier registration STALE_BROKER_EPOCH. Otherwise
the broker is marked shutting down (no longer a leader candidate anywhere), its
leaderships move with the controlled-shutdown strategy and it leaves the ISRs it was in
(`core/shutdown.py`), each a fenced conditional set with a new leader epoch. LeaderAndIsr
goes to the replicas (moved partitions: to all, so the old leader becomes a follower;
ISR removals: to all but it), StopReplica (no delete) to it for the partitions it
followed, UpdateMetadata to everyone. The answer lists the partitions it still leads.
"""

from __future__ import annotations

import logging

from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from controller.active import ActiveController
from controller.core.shutdown import (
    controlled_shutdown_changes,
    followed_partitions,
    remaining_leaderships,
    shutdown_request_error,
)
from controller.events import ControlledShutdown

log = logging.getLogger(__name__)


def refuse(event: ControlledShutdown, code: ErrorCode) -> None:
    event.reply.set(m.ControlledShutdownResponse(error_code=code, remaining_partitions=[]))


async def on_controlled_shutdown(
    active: ActiveController | None, event: ControlledShutdown
) -> None:
    if active is None:
        refuse(event, ErrorCode.NOT_CONTROLLER)
        return
    ctx = active.ctx
    broker_id = event.request.broker_id
    code = shutdown_request_error(ctx, broker_id, event.request.broker_epoch)
    if code is not ErrorCode.NONE:
        log.info("controlled shutdown of broker %d refused: %s", broker_id, code.name)
        refuse(event, code)
        return
    ctx.shutting_down.add(broker_id)
    ctx.stats.controlled_shutdowns += 1
    followed = followed_partitions(ctx, broker_id)
    applied = await active.apply_changes(
        controlled_shutdown_changes(ctx, broker_id),
        redo=lambda tps: controlled_shutdown_changes(ctx, broker_id, tps),
    )
    batch = active.batch()
    for change in applied:
        exclude = () if change.leader_changed else (broker_id,)
        batch.add_leader_and_isr_to_replicas([change.tp], exclude=exclude)
    batch.add_update_metadata_to_all([c.tp for c in applied])
    for tp in followed:
        batch.add_stop_replica(broker_id, tp, delete=False)
    active.send(batch)
    remaining = remaining_leaderships(ctx, broker_id)
    log.info(
        "controlled shutdown of broker %d: %d partition(s) moved or shrunk, %d still led",
        broker_id,
        len(applied),
        len(remaining),
    )
    active.events.record(
        "controlled_shutdown", broker=broker_id, remaining=[str(tp) for tp in remaining]
    )
    event.reply.set(
        m.ControlledShutdownResponse(
            error_code=ErrorCode.NONE,
            remaining_partitions=[
                m.ControlledShutdownRemainingPartition(topic=tp.topic, partition=tp.partition)
                for tp in remaining
            ],
        )
    )
