"""New and vanished topics (Kafka's TopicChange, onNewPartitionCreation).

How it works: re-read /brokers/topics and diff with the context. For each new topic read
its assignment and /config/topics/<t> (batched), then the state znodes its partitions may
already have (a previous controller may have created some), and repair them: partitions
without a state get their initial one (leader = first live assigned replica, ISR = the
live assigned replicas, leader epoch 0), created with a fenced create. LeaderAndIsr
(is_new) goes to the replicas, UpdateMetadata to every broker. Partitions with no live
replica stay uninitialized until one of their brokers registers (broker startup
initializes them). A topic whose znode vanished without our deletion is dropped.
"""

from __future__ import annotations

import logging

from controller.active import ActiveController
from controller.core.decisions import repair_partitions
from controller.handlers.common import send_changes

log = logging.getLogger(__name__)


async def on_topic_change(active: ActiveController, event: object = None) -> None:
    ctx = active.ctx
    names = set(await active.store.read_topic_names())
    known = set(ctx.topic_names())
    for topic in sorted(known - names):
        log.info("topic %s disappeared from ZooKeeper; forgetting it", topic)
        active.deletions.forget(topic)
        ctx.remove_topic(topic)
    added = sorted(names - known)
    if not added:
        return
    assignments, configs = await active.store.read_topics(added)
    new_partitions = []
    for topic, assignment in assignments.items():
        ctx.add_topic(assignment, configs.get(topic))
        new_partitions += ctx.partitions_of(topic)
        active.events.record("topic_created", topic=topic, partitions=len(assignment.partitions))
    for tp, state in (await active.store.read_states(new_partitions)).items():
        if state is not None:
            ctx.states[tp] = state
    applied = await active.apply_changes(
        repair_partitions(ctx, new_partitions), redo=lambda tps: repair_partitions(ctx, tps)
    )
    log.info(
        "new topics %s: %d partitions, %d initialized",
        ", ".join(assignments),
        len(new_partitions),
        sum(1 for c in applied if c.creates),
    )
    send_changes(active, applied)
