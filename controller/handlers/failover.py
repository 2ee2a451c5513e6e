"""Becoming the active controller (Kafka's onControllerFailover).

How it works: read the whole cluster in batches (brokers, topics, configs, every
partition state), give each topic without a topic id one (written back to its znode,
as Kafka 2.8 does for topics created before ids existed), start a sender per live
broker, then repair every partition at once:
initialize those without a state znode, elect leaders where the leader is dead, drop
dead brokers from ISRs (`decisions.repair_partitions`). Then one batch goes out:
LeaderAndIsr for every partition to its live replicas and UpdateMetadata with every
partition to every live broker, all with the new controller epoch. Brokers already at a
partition's leader epoch ignore its LeaderAndIsr, so resending is safe. Finally resume
what the previous controller left: topic deletions, reassignments, a preferred replica
election, ISR change notifications.
"""

from __future__ import annotations

import logging

import trio

from controller.active import ActiveController
from controller.core.decisions import repair_partitions
from controller.core.requests import ALL_PARTITIONS
from controller.handlers import deletion, elections, isr, reassignment, topics

log = logging.getLogger(__name__)


async def on_become_active(active: ActiveController) -> None:
    ctx = active.ctx
    started = trio.current_time()
    snapshot = await active.store.read_cluster()
    snapshot.topics.update(await active.store.set_topic_ids(snapshot.topics.values()))
    for broker in snapshot.brokers.values():
        ctx.add_live_broker(broker)
        active.channel.add_broker(broker)
    for name, assignment in snapshot.topics.items():
        ctx.add_topic(assignment, snapshot.configs.get(name))
    for tp, state in snapshot.states.items():
        if tp in ctx.replicas:
            ctx.states[tp] = state
    for topic in snapshot.topics_to_delete:
        if ctx.has_topic(topic):
            active.deletions.enqueue(ctx, topic)  # never elect or initialize these
    loaded = trio.current_time()
    partitions = ctx.all_partitions()
    await active.refresh_configs_for_offline(partitions)
    applied = await active.apply_changes(
        repair_partitions(ctx, partitions), redo=lambda tps: repair_partitions(ctx, tps)
    )
    batch = active.batch()
    batch.add_leader_and_isr_to_replicas(partitions)
    for change in applied:
        if change.creates:
            batch.add_leader_and_isr_to_replicas([change.tp], is_new=True)
    batch.add_update_metadata_to_all(ALL_PARTITIONS)
    sent = active.send(batch)
    log.info(
        "controller %d active at epoch %d: %d brokers, %d topics, %d partitions "
        "(read in %.3fs), %d state changes, %d requests queued",
        ctx.controller_id,
        ctx.epoch,
        len(ctx.live_brokers),
        len(ctx.topic_names()),
        len(partitions),
        loaded - started,
        len(applied),
        sent,
    )
    await topics.watch_topics(active, ctx.topic_names())
    await deletion.on_topic_deletion(active)
    await reassignment.on_partition_reassignment(active, None)
    await elections.on_preferred_replica_election(active, None)
    await isr.on_isr_change_notification(active, None)
