"""Partition reassignment through /admin/reassign_partitions (Kafka's ZooKeeper-era steps).

How it works (see core/reassignment.py for the phases):
- `on_partition_reassignment` reads the plan. A partition unknown, being deleted, or
  already on its target is dropped from the plan. Each new one starts phase A: the
  assignment becomes RS = target + removed-to-be (written to /brokers/topics/<t> with
  adding/removing replicas), the leader epoch is bumped and LeaderAndIsr with RS goes to
  every replica (new ones start following), UpdateMetadata to every broker.
- `check_reassignments` runs phase B for partitions whose target replicas are all in the
  ISR: elect (reassignment strategy) if the leader is not in the target, drop the
  removed replicas from the ISR (one state write, new epoch), write the final assignment,
  LeaderAndIsr to the target replicas, StopReplica(delete) to the removed ones,
  UpdateMetadata to all, and take the partitions out of the admin znode (deleted when
  empty). It runs after ISR change notifications, broker startups and a one-shot watch
  on the state znode of each partition still waiting, so completion does not depend on
  the brokers' notification throttling.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from client.protocol.types import TopicPartition
from controller.active import ActiveController
from controller.core.decisions import epoch_bumps, reassignment_completions
from controller.core.reassignment import Reassignment, is_complete
from controller.core.state_change import Reason
from controller.events import ReassigningPartitionChanged
from controller.handlers.common import add_changes
from server_common import zkdata

log = logging.getLogger(__name__)


async def on_partition_reassignment(active: ActiveController, event: object = None) -> None:
    ctx = active.ctx
    plan = await active.store.read_reassignment_plan()
    dropped: list[TopicPartition] = []
    started: list[TopicPartition] = []
    rewritten: set[str] = set()
    for (topic, partition), target in sorted((plan or {}).items()):
        tp = TopicPartition(topic, partition)
        if tp not in ctx.replicas or ctx.is_deleting(topic):
            log.warning("reassignment of %s dropped: unknown partition or topic being deleted", tp)
            dropped.append(tp)
            continue
        current = ctx.reassignments.get(tp)
        if current is not None and current.target == tuple(target):
            continue  # in flight already
        # From what it has now (RS if another move is in flight: replicas that move added
        # and the new target does not want are then removed too).
        moving = Reassignment.start(ctx.replicas[tp], tuple(target))
        if moving is None:
            log.info("reassignment of %s: already on its target", tp)
            if ctx.reassignments.pop(tp, None) is not None:
                rewritten.add(topic)
            dropped.append(tp)
            continue
        ctx.reassignments[tp] = moving
        ctx.replicas[tp] = moving.full_replicas
        started.append(tp)
        active.events.record(
            "reassignment_started",
            topic=topic,
            partition=partition,
            original=list(moving.original),
            target=list(moving.target),
        )
    if started or rewritten:
        await _write_assignments(active, {tp.topic for tp in started} | rewritten)
    if started:
        applied = await active.apply_changes(
            epoch_bumps(ctx, started, Reason.REASSIGNMENT),
            redo=lambda tps: epoch_bumps(ctx, tps, Reason.REASSIGNMENT),
        )
        batch = active.batch()
        add_changes(batch, applied)
        active.send(batch)
        log.info("reassignment started for %s", ", ".join(map(str, started)))
    if dropped:
        await _remove_from_plan(active, dropped)
    await check_reassignments(active, list(ctx.reassignments))


async def check_reassignments(active: ActiveController, tps: Iterable[TopicPartition]) -> None:
    """Complete the reassignments of `tps` whose target replicas are all in the ISR."""
    ctx = active.ctx
    waiting = [tp for tp in tps if tp in ctx.reassignments]
    if not waiting:
        return
    ready = [tp for tp in waiting if is_complete(ctx.reassignments[tp], ctx.states.get(tp))]
    for tp in waiting:
        if tp not in ready:
            await _watch(active, tp)
    if not ready:
        return
    applied = await active.apply_changes(
        reassignment_completions(ctx, ready), redo=lambda t: reassignment_completions(ctx, t)
    )
    if not applied:
        return
    removed: dict[TopicPartition, tuple[int, ...]] = {}
    for change in applied:
        moving = ctx.reassignments.pop(change.tp)
        ctx.replicas[change.tp] = moving.target
        removed[change.tp] = moving.removing
    await _write_assignments(active, {c.tp.topic for c in applied})
    batch = active.batch()
    add_changes(batch, applied)
    for tp, replicas in removed.items():
        for broker in replicas:
            batch.add_stop_replica(broker, tp, delete=True)
    active.send(batch)
    for tp in removed:
        active.events.record(
            "reassignment_completed",
            topic=tp.topic,
            partition=tp.partition,
            target=list(ctx.replicas[tp]),
        )
    log.info("reassignment completed for %s", ", ".join(map(str, removed)))
    await _remove_from_plan(active, list(removed))


async def on_reassigning_partition_changed(
    active: ActiveController, event: ReassigningPartitionChanged
) -> None:
    active.watched_reassignments.discard(event.tp)
    if event.tp not in active.ctx.reassignments:
        return
    state = (await active.store.read_states([event.tp]))[event.tp]
    if state is not None:
        active.ctx.states[event.tp] = state
    await check_reassignments(active, [event.tp])


async def drop_reassignments(active: ActiveController, tps: Sequence[TopicPartition]) -> None:
    """Forget reassignments (of a topic being deleted); RS stays the assignment."""
    for tp in tps:
        active.ctx.reassignments.pop(tp, None)
    await _remove_from_plan(active, tps)


async def _watch(active: ActiveController, tp: TopicPartition) -> None:
    if tp not in active.watched_reassignments:
        active.watched_reassignments.add(tp)
        await active.watch_reassigning_partition(tp)


async def _write_assignments(active: ActiveController, topics: Iterable[str]) -> None:
    for topic in sorted(topics):
        if active.ctx.has_topic(topic):
            await active.store.write_topic_assignment(active.ctx.topic_assignment(topic))


async def _remove_from_plan(active: ActiveController, tps: Sequence[TopicPartition]) -> None:
    plan = await active.store.read_reassignment_plan()
    if plan is None:
        return
    done = set(tps)
    remaining = {key: r for key, r in plan.items() if TopicPartition(*key) not in done}
    if remaining == plan:
        return
    data = zkdata.encode_reassignment(remaining) if remaining else None
    await active.store.set_or_delete(zkdata.ADMIN_REASSIGN_PARTITIONS, data)
