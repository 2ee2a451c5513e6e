"""Partition state decisions: from the context to the `StateChange`s to write.

How it works: every function reads the context and returns values; none writes it. The
shell writes the changes (conditional sets fenced by the controller epoch), records the
accepted ones in the context, and on a version conflict re-reads the znode and calls the
same function again for just those partitions.

`repair_partition` is the workhorse (Kafka's OfflinePartition -> OnlinePartition and
OfflineReplica transitions rolled into one write per partition):

- Case A, uninitialized (no state znode): the initial state, if a replica is live:
  leader = first live assigned replica, ISR = the live assigned replicas, leader epoch 0.
- Case B, leader registered: remove replicas whose broker is gone from the ISR.
- Case C, leader gone (dead, or -1 already): offline election (clean, else unclean if
  the topic allows it).
- Case D, no candidate: leader -1, the ISR keeps its registered members or, if none, its
  last member (the old leader when it was in the ISR: the replica with the most data);
  the partition comes back when that member returns (Case C then elects it).

Topics queued for deletion are never touched.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from client.protocol.types import TopicPartition
from controller.core.context import ControllerContext
from controller.core.election import elect_for_reassignment, elect_offline, elect_preferred
from controller.core.reassignment import is_complete
from controller.core.state_change import Reason, StateChange, next_state
from server_common.zkdata import NO_LEADER, LeaderAndIsr


def initial_state(
    ctx: ControllerContext, tp: TopicPartition, live: Collection[int] | None = None
) -> StateChange | None:
    """The first state of a new partition; None while none of its replicas is live."""
    live = ctx.live_ids if live is None else live
    candidates = tuple(r for r in ctx.replicas.get(tp, ()) if r in live)
    if not candidates:
        return None
    state = LeaderAndIsr(
        leader=candidates[0],
        leader_epoch=0,
        isr=candidates,
        controller_epoch=ctx.epoch,
        zk_version=-1,
    )
    return StateChange(tp, None, state, Reason.NEW_PARTITION)


def on_new_partitions(ctx: ControllerContext, tps: Iterable[TopicPartition]) -> list[StateChange]:
    """Initial states for the partitions that have none yet and a live replica."""
    changes = []
    for tp in tps:
        if tp in ctx.states or ctx.is_deleting(tp.topic):
            continue
        if (change := initial_state(ctx, tp)) is not None:
            changes.append(change)
    return changes


def _last_member(state: LeaderAndIsr) -> tuple[int, ...]:
    if not state.isr:
        return ()
    if state.leader in state.isr:
        return (state.leader,)
    return (state.isr[0],)


def repair_partition(
    ctx: ControllerContext, tp: TopicPartition, dead: Collection[int] = ()
) -> StateChange | None:
    """What `tp` needs given which brokers are alive (`dead` ones count as gone even if the
    context still lists them); None if nothing."""
    if tp not in ctx.replicas or ctx.is_deleting(tp.topic):
        return None
    may_lead = ctx.live_ids.difference(dead)
    registered = ctx.live_or_shutting_down_ids.difference(dead)
    state = ctx.states.get(tp)
    if state is None:  # Case A
        return initial_state(ctx, tp, may_lead)
    if state.leader in registered:  # Case B
        isr = tuple(r for r in state.isr if r in registered) or _last_member(state)
        if isr == state.isr:
            return None
        new = next_state(state, leader=state.leader, isr=isr, controller_epoch=ctx.epoch)
        return StateChange(tp, state, new, Reason.ISR_REMOVAL)
    election = elect_offline(ctx.replicas[tp], state.isr, may_lead, ctx.unclean_enabled(tp.topic))
    if election is not None:  # Case C
        new = next_state(
            state, leader=election.leader, isr=election.isr, controller_epoch=ctx.epoch
        )
        reason = Reason.UNCLEAN_ELECTION if election.unclean else Reason.OFFLINE_ELECTION
        return StateChange(tp, state, new, reason, unclean=election.unclean)
    isr = tuple(r for r in state.isr if r in registered) or _last_member(state)  # Case D
    if state.leader == NO_LEADER and isr == state.isr:
        return None
    new = next_state(state, leader=NO_LEADER, isr=isr, controller_epoch=ctx.epoch)
    return StateChange(tp, state, new, Reason.PARTITION_OFFLINE)


def repair_partitions(
    ctx: ControllerContext, tps: Iterable[TopicPartition], dead: Collection[int] = ()
) -> list[StateChange]:
    return [c for tp in tps if (c := repair_partition(ctx, tp, dead)) is not None]


def on_broker_failure(ctx: ControllerContext, dead: Collection[int]) -> list[StateChange]:
    """New leaders for the partitions the dead brokers led, ISR removals (each a new leader
    epoch) for the partitions they followed."""
    return repair_partitions(ctx, ctx.partitions_on_brokers(dead), dead)


def on_broker_startup(ctx: ControllerContext, started: Collection[int]) -> list[StateChange]:
    """Partitions the new brokers can bring back: offline ones they can now lead and
    uninitialized ones that now have a live replica."""
    return repair_partitions(ctx, ctx.partitions_on_brokers(started))


def preferred_elections(ctx: ControllerContext, tps: Iterable[TopicPartition]) -> list[StateChange]:
    """Move leadership to the preferred replica where it is alive, in the ISR and not
    leading already. Partitions being reassigned or deleted are skipped."""
    changes = []
    for tp in tps:
        state = ctx.states.get(tp)
        replicas = ctx.replicas.get(tp, ())
        if state is None or not replicas or ctx.is_deleting(tp.topic):
            continue
        if tp in ctx.reassignments or state.leader == replicas[0]:
            continue
        election = elect_preferred(replicas, state.isr, ctx.live_ids)
        if election is None:
            continue
        new = next_state(
            state, leader=election.leader, isr=election.isr, controller_epoch=ctx.epoch
        )
        changes.append(StateChange(tp, state, new, Reason.PREFERRED_ELECTION))
    return changes


def step_down_elections(
    ctx: ControllerContext, broker_id: int, tps: Iterable[TopicPartition]
) -> list[StateChange]:
    """Move leadership away from `broker_id` where it leads (its scrubber found damaged
    bytes there): to the next live ISR member after it in assignment order, cyclically,
    so that repeated requests from successive leaders rotate through the whole ISR (each
    in-sync copy gets to serve the others' repairs). The ISR is unchanged: the old
    leader's log is complete, only some bytes of it are damaged, and it repairs them as a
    follower. No other live ISR member: nothing changes."""
    changes = []
    for tp in tps:
        state = ctx.states.get(tp)
        replicas = ctx.replicas.get(tp, ())
        if state is None or state.leader != broker_id or ctx.is_deleting(tp.topic):
            continue
        if tp in ctx.reassignments or broker_id not in replicas:
            continue
        start = replicas.index(broker_id)
        rotation = replicas[start + 1 :] + replicas[:start]
        leader = next((r for r in rotation if r in state.isr and r in ctx.live_ids), None)
        if leader is None:
            continue
        new = next_state(state, leader=leader, isr=state.isr, controller_epoch=ctx.epoch)
        changes.append(StateChange(tp, state, new, Reason.LEADER_STEP_DOWN))
    return changes


def epoch_bumps(
    ctx: ControllerContext, tps: Iterable[TopicPartition], reason: Reason
) -> list[StateChange]:
    """Same leader and ISR, next leader epoch (so brokers apply a new replica set)."""
    changes = []
    for tp in tps:
        state = ctx.states.get(tp)
        if state is None or ctx.is_deleting(tp.topic):
            continue
        new = next_state(state, leader=state.leader, isr=state.isr, controller_epoch=ctx.epoch)
        changes.append(StateChange(tp, state, new, reason))
    return changes


def reassignment_completion(ctx: ControllerContext, tp: TopicPartition) -> StateChange | None:
    """Phase B of a reassignment whose target replicas are all in the ISR: keep the leader
    if it is in the target and alive, else elect with the reassignment strategy; drop the
    removed replicas from the ISR. None while the reassignment cannot complete."""
    moving = ctx.reassignments.get(tp)
    state = ctx.states.get(tp)
    if moving is None or state is None or not is_complete(moving, state):
        return None
    leader = state.leader
    if leader not in moving.target or not ctx.is_live(leader):
        election = elect_for_reassignment(moving.target, state.isr, ctx.live_ids)
        if election is None:
            return None
        leader = election.leader
    isr = tuple(r for r in state.isr if r not in moving.removing)
    new = next_state(state, leader=leader, isr=isr, controller_epoch=ctx.epoch)
    return StateChange(tp, state, new, Reason.REASSIGNMENT)


def reassignment_completions(
    ctx: ControllerContext, tps: Iterable[TopicPartition]
) -> list[StateChange]:
    return [c for tp in tps if (c := reassignment_completion(ctx, tp)) is not None]
