"""Preferred replica elections: on request and by the auto-rebalance timer.

How it works: /admin/preferred_replica_election lists partitions; for each whose
preferred (first assigned) replica is alive, in the ISR and not leading, the leadership
moves to it (new leader epoch, ISR unchanged), decided on freshly read states; then
the znode is deleted, done or not
(Kafka does the same; the admin tool reports what moved). The auto-rebalance timer does
the same for the partitions `rebalance.auto_rebalance_candidates` picks (brokers above
`leader.imbalance.per.broker.percentage`), when `auto.leader.rebalance.enable` is on.

Leader step-downs (Tributary's own): /admin/leader_step_down/<broker id> lists partitions
whose leader, that broker, found damaged bytes in its log (broker/tasks/log_scrubber.py);
`decisions.step_down_elections` moves each to the next live ISR member, then the znode
is deleted, done or not (the broker asks again while the damage stays).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import partial

from client.protocol.types import TopicPartition
from controller.active import ActiveController
from controller.core.decisions import preferred_elections, step_down_elections
from controller.core.rebalance import auto_rebalance_candidates
from controller.events import AutoRebalance
from controller.handlers.common import send_changes
from server_common import zkdata

log = logging.getLogger(__name__)


async def on_preferred_replica_election(active: ActiveController, event: object = None) -> None:
    path = zkdata.ADMIN_PREFERRED_REPLICA_ELECTION
    partitions = await active.store.read_partition_list(path)
    if partitions is None:
        return
    ctx = active.ctx
    tps = [TopicPartition(t, p) for t, p in partitions]
    unknown = [tp for tp in tps if tp not in ctx.replicas]
    if unknown:
        log.info("preferred election: ignoring unknown partitions %s", unknown)
    known = [tp for tp in tps if tp in ctx.replicas]
    # An ISR change may not have been announced yet (brokers throttle notifications):
    # decide on fresh states, they are cheap to read.
    for tp, state in (await active.store.read_states(known)).items():
        if state is not None:
            ctx.states[tp] = state
    await elect_preferred_leaders(active, known)
    await active.store.set_or_delete(path, None)


async def on_leader_step_down(active: ActiveController, event: object = None) -> None:
    parent = zkdata.ADMIN_LEADER_STEP_DOWN
    ctx = active.ctx
    for child in sorted(await active.store.zk.get_children_or_empty(parent)):
        path = f"{parent}/{child}"
        partitions = await active.store.read_partition_list(path)
        if partitions is None:
            continue
        try:
            broker_id = int(child)
        except ValueError:
            broker_id = -1
        tps = [TopicPartition(t, p) for t, p in partitions] if broker_id >= 0 else []
        known = [tp for tp in tps if tp in ctx.replicas]
        for tp, state in (await active.store.read_states(known)).items():
            if state is not None:
                ctx.states[tp] = state
        applied = await active.apply_changes(
            step_down_elections(ctx, broker_id, known),
            redo=partial(step_down_elections, ctx, broker_id),
        )
        log.info(
            "leader step-down asked by broker %d for %d partition(s): %d moved",
            broker_id,
            len(known),
            len(applied),
        )
        send_changes(active, applied)
        await active.store.set_or_delete(path, None)


async def on_auto_rebalance(active: ActiveController, event: AutoRebalance) -> None:
    if not active.config["auto.leader.rebalance.enable"]:
        return
    candidates = auto_rebalance_candidates(
        active.ctx, active.config["leader.imbalance.per.broker.percentage"]
    )
    if candidates:
        log.info("leader imbalance: preferred elections for %d partitions", len(candidates))
        await elect_preferred_leaders(active, candidates)


async def elect_preferred_leaders(active: ActiveController, tps: Sequence[TopicPartition]) -> None:
    ctx = active.ctx
    applied = await active.apply_changes(
        preferred_elections(ctx, tps), redo=lambda retry: preferred_elections(ctx, retry)
    )
    send_changes(active, applied)
