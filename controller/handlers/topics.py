"""New and vanished topics (Kafka's TopicChange, onNewPartitionCreation).

How it works: re-read /brokers/topics and diff with the context. For each new topic read
its assignment and /config/topics/<t> (batched), give it a topic id if its creator did
not (written back to the znode, as Kafka 2.8's controller does), then read the state
znodes its partitions may already have (a previous controller may have created some),
and repair them: partitions without a state get their initial one (leader = first live
assigned replica, ISR = the live assigned replicas, leader epoch 0), created with a
fenced create. LeaderAndIsr (is_new) goes to the replicas, UpdateMetadata to every
broker. Partitions with no live replica stay uninitialized until one of their brokers
registers (broker startup initializes them). A topic whose znode vanished without our
deletion is dropped.

Partitions added to an existing topic (Kafka's PartitionModificationsHandler): the
controller keeps a one-shot watch on every topic's /brokers/topics/<t> znode (armed when
the topic appears, at failover, and again each time it fires). When it fires, the
assignment is re-read and partitions the context does not know are added and brought
online exactly like a new topic's (`repair_partitions`, LeaderAndIsr is_new,
UpdateMetadata). A znode rewritten without its topic id (by a writer that knows none)
gets the id back. Other changes to the znode (reassignments, the controller's own writes
of a topic id) add nothing here.
"""

from __future__ import annotations

import functools
import logging

import trio

from client.protocol.types import TopicPartition
from controller import events as ev
from controller.active import ActiveController
from controller.core.decisions import repair_partitions
from controller.handlers.common import send_changes
from server_common import zkdata

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
    assignments.update(await active.store.set_topic_ids(assignments.values()))
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
    await watch_topics(active, list(assignments))


async def on_partition_modifications(
    active: ActiveController, event: ev.PartitionModifications
) -> None:
    await watch_topics(active, [event.topic])


async def watch_topics(active: ActiveController, topics: list[str]) -> None:
    """Arm the one-shot watch on each topic's znode and bring online any partition the
    znode has and the context does not (added while no watch was armed, or just now)."""
    ctx = active.ctx
    found: dict[str, tuple[bytes, int]] = {}

    async def arm(topic: str) -> None:
        result = await active.watch_topic(topic)
        if result is not None:
            found[topic] = (result[0], result[1].version)

    async with trio.open_nursery() as nursery:
        for topic in topics:
            if ctx.has_topic(topic) and not ctx.is_deleting(topic):
                nursery.start_soon(arm, topic)
    added: list[TopicPartition] = []
    lost_ids: list[zkdata.TopicAssignment] = []
    for topic, (data, version) in sorted(found.items()):
        if not ctx.has_topic(topic) or ctx.is_deleting(topic):
            continue
        try:
            assignment = zkdata.TopicAssignment.decode(topic, data, version)
        except zkdata.ZkDataError as exc:
            log.warning("topic %s: unreadable assignment: %s", topic, exc)
            continue
        if assignment.topic_id is None and topic in ctx.topic_ids:
            lost_ids.append(assignment)
        new = {
            p: replicas
            for p, replicas in assignment.partitions.items()
            if TopicPartition(topic, p) not in ctx.replicas
        }
        if not new:
            continue
        ctx.add_partitions(topic, new)
        added += [TopicPartition(topic, p) for p in sorted(new)]
        active.events.record(
            "partitions_added",
            topic=topic,
            partitions=len(ctx.partitions_of(topic)),  # the new count, as topic_created's
            added=len(new),
        )
    if lost_ids:
        await _restore_topic_ids(active, lost_ids)
    if not added:
        return
    for tp, state in (await active.store.read_states(added)).items():
        if state is not None:
            ctx.states[tp] = state
    applied = await active.apply_changes(
        repair_partitions(ctx, added), redo=lambda tps: repair_partitions(ctx, tps)
    )
    log.info(
        "partitions added: %s (%d initialized)",
        ", ".join(map(str, added)),
        sum(1 for c in applied if c.creates),
    )
    send_changes(active, applied)


async def _restore_topic_ids(
    active: ActiveController, assignments: list[zkdata.TopicAssignment]
) -> None:
    """Write back the ids of topics whose znode lost it (rewritten by a writer that knows
    no topic ids, such as a broker of an older version adding partitions): a topic keeps
    its id for as long as it lives."""
    for assignment in assignments:
        log.warning("topic %s: its znode lost its topic id; writing it back", assignment.topic)
        known = functools.partial(active.ctx.topic_ids.__getitem__, assignment.topic)
        await active.store.set_topic_ids([assignment], new_id=known)
