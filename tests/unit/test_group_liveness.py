"""Member liveness on the sans-IO group coordinator (Kafka 2.8's GroupCoordinator): every
member of a group is expired after its session timeout whatever it last sent (JoinGroup,
SyncGroup or a heartbeat), static members (KIP-345) included, and nobody is expired by
a deadline that is no longer theirs.

Driven by the manual clock and in-memory offsets log of `test_group_coordinator.py`.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.core.group.coordinator import GroupConfig
from client.protocol.errors import ErrorCode
from tests.unit.test_group_coordinator import REBALANCE, SESSION, Harness

DELAYED = GroupConfig(
    offsets_partitions=1, min_session_timeout_ms=100, initial_rebalance_delay_ms=100
)


def join_two(h: Harness, *, static: bool) -> tuple:
    """Two members join one generation (the initial delay gathers them); the first to
    join leads. Returns (leader's join answer, follower's join answer)."""
    if static:
        first, second = h.join(instance="b"), h.join(instance="a")
    else:
        first = h.join(h.new_member())
        second = h.join(h.new_member())
    while not first or not second:
        h.advance(100)
    [leader], [follower] = first, second
    assert leader.leader == leader.member_id and follower.leader == leader.member_id
    assert leader.generation_id == follower.generation_id == 1
    assert h.state() == "CompletingRebalance"
    return leader, follower


def instance_of(answer, static: bool) -> str | None:
    if not static:
        return None
    return {m.member_id: m.group_instance_id for m in answer.members}.get(answer.member_id)


@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
def test_a_leader_silent_after_its_join_is_expired_and_the_parked_sync_answered(static):
    # The leader (B) got its JoinGroup answer and then sent nothing: the follower's (A)
    # SyncGroup waits for an assignment that will not come, until B's session runs out.
    h = Harness(DELAYED)
    b, a = join_two(h, static=static)
    a_instance = "a" if static else None
    parked = h.sync(a.member_id, a.generation_id, instance=a_instance)
    # B's session restarted when the join phase ended (now): it ends one session later.
    h.advance(SESSION - 1)
    assert parked == [] and h.state() == "CompletingRebalance"
    h.advance(1)
    assert [answer.error_code for answer in parked] == [ErrorCode.REBALANCE_IN_PROGRESS]
    group = h.coordinator.groups["g"]
    assert list(group.members) == [a.member_id] and h.state() == "PreparingRebalance"
    # A rejoins and forms the next generation alone, as its leader.
    [rejoined] = h.join(a.member_id, instance=a_instance)
    assert rejoined.generation_id == 2 and rejoined.leader == a.member_id
    assert [m.member_id for m in rejoined.members] == [a.member_id]
    [synced] = h.sync(a.member_id, 2, {a.member_id: b"everything"}, instance=a_instance)
    assert synced.error_code == ErrorCode.NONE and synced.assignment == b"everything"


@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
def test_a_leader_silent_after_its_sync_is_expired(static):
    h = Harness()
    if static:
        [joined] = h.join(instance="i-1")
    else:
        [joined] = h.join(h.new_member())
    leader = joined.member_id
    instance = "i-1" if static else None
    [synced] = h.sync(leader, joined.generation_id, {leader: b"all"}, instance=instance)
    assert synced.assignment == b"all" and h.state() == "Stable"
    h.advance(SESSION + 1)
    assert h.state() == "Empty" and not h.coordinator.groups["g"].members


@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
def test_a_follower_silent_after_its_parked_sync_was_answered_is_expired(static):
    h = Harness(DELAYED)
    leader, follower = join_two(h, static=static)
    leader_instance = instance_of(leader, static)
    follower_sync = h.sync(follower.member_id, 1)
    assert follower_sync == []  # parked until the leader's assignment is stored
    h.sync(leader.member_id, 1, {follower.member_id: b"f", leader.member_id: b"l"})
    assert follower_sync[0].assignment == b"f" and h.state() == "Stable"
    # Only the leader carries on heartbeating.
    for _ in range(4):
        h.advance(SESSION // 3)
        h.heartbeat(leader.member_id, 1, leader_instance)
    assert list(h.coordinator.groups["g"].members) == [leader.member_id]
    assert h.heartbeat(leader.member_id, 1, leader_instance) == ErrorCode.REBALANCE_IN_PROGRESS


def test_a_restarted_static_member_is_not_expired_by_its_old_incarnations_deadline():
    h = Harness()
    [joined] = h.join(instance="i-1")
    old_id = joined.member_id
    h.sync(old_id, joined.generation_id, {old_id: b"mine"})
    generation = joined.generation_id
    assert h.heartbeat(old_id, generation, "i-1") == ErrorCode.NONE  # deadline: SESSION
    h.advance(SESSION // 2)
    [rejoined] = h.join(instance="i-1")  # restarted: a new member id, same assignment
    new_id = rejoined.member_id
    assert new_id != old_id and h.state() == "Stable"
    for _ in range(8):  # well past the old incarnation's deadline
        h.advance(SESSION // 3)
        assert h.heartbeat(new_id, generation, "i-1") == ErrorCode.NONE
    assert list(h.coordinator.groups["g"].members) == [new_id]


def test_a_static_member_restarting_while_the_leader_assigns_makes_the_group_rebalance():
    # As Kafka: the leader may be assigning to the old member id already, so the
    # generation is redone with the new one rather than answered at once.
    h = Harness(DELAYED)
    leader, follower = join_two(h, static=True)  # instances "b" (leader) and "a"
    parked = h.sync(follower.member_id, 1, instance="a")
    restarted = h.join(instance="a")  # "a" again, without its member id
    assert restarted == [] and h.state() == "PreparingRebalance"
    assert [x.error_code for x in parked] == [ErrorCode.FENCED_INSTANCE_ID]
    [rejoined] = h.join(leader.member_id, instance="b")
    [new_a] = restarted
    assert rejoined.generation_id == new_a.generation_id == 2
    assert {m.member_id for m in rejoined.members} == {leader.member_id, new_a.member_id}
    assert new_a.member_id != follower.member_id


def test_a_static_member_that_misses_a_rebalance_keeps_its_place_until_its_session_ends():
    # Kafka 2.8 (KIP-345): a rebalance drops the dynamic members that did not rejoin in
    # time, but a static member stays in the next generation; its session decides.
    h = Harness(DELAYED)
    dynamic = h.new_member()
    first = h.join(dynamic)
    second = h.join(instance="s")
    while not first or not second:
        h.advance(100)
    static = second[0].member_id
    h.sync(dynamic, 1, {dynamic: b"d", static: b"s"})
    h.sync(static, 1, instance="s")
    assert h.state() == "Stable"
    rejoin = h.join(dynamic, meta=b"changed")  # a new subscription: rebalance
    assert rejoin == [] and h.state() == "PreparingRebalance"
    # The static member is alive (heartbeats) but does not rejoin within the timeout.
    for _ in range(REBALANCE // 250):
        h.advance(250)
        h.heartbeat(static, 1, "s")
    [answer] = rejoin
    assert answer.generation_id == 2 and answer.leader == dynamic
    assert {m.member_id for m in answer.members} == {dynamic, static}
    # It learns of the new generation and rejoins with its id: no further rebalance.
    assert h.heartbeat(static, 1, "s") == ErrorCode.ILLEGAL_GENERATION
    [late] = h.join(static, instance="s")
    assert late.error_code == ErrorCode.NONE and late.generation_id == 2
    # Now it falls silent: its session, re-armed when the join completed, ends it.
    h.sync(dynamic, 2, {dynamic: b"d", static: b"s"})
    for _ in range(4):
        h.advance(SESSION // 3)
        h.heartbeat(dynamic, 2)
    assert list(h.coordinator.groups["g"].members) == [dynamic]


def test_a_rebalance_no_member_rejoined_waits_for_the_static_members():
    h = Harness()
    [joined] = h.join(instance="s")
    static = joined.member_id
    h.sync(static, 1, {static: b"all"}, instance="s")
    other = h.new_member()
    parked = h.join(other)  # a rebalance the static member does not rejoin ...
    h.coordinator.leave_group("g", [(other, None)], h.now)  # ... and the joiner leaves
    assert parked[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID
    for _ in range(2 * REBALANCE // 250):
        h.advance(250)
        assert h.heartbeat(static, 1, "s") == ErrorCode.REBALANCE_IN_PROGRESS
    assert h.state() == "PreparingRebalance"  # no generation without a member that joined
    [rejoined] = h.join(static, instance="s")
    assert rejoined.generation_id == 2 and rejoined.leader == static


@pytest.mark.parametrize(
    "leader_syncs", [True, False], ids=["follower-never-syncs", "leader-never-syncs"]
)
def test_a_member_that_heartbeats_but_never_syncs_is_removed_after_the_rebalance_timeout(
    leader_syncs,
):
    # KAFKA-12890 (Kafka 2.8.1): after the join phase every member must send SyncGroup
    # within the rebalance timeout, or it is removed and the group rebalances.
    h = Harness(DELAYED)
    leader, follower = join_two(h, static=False)
    if leader_syncs:
        silent, active = follower, leader
        [done] = h.sync(leader.member_id, 1, {leader.member_id: b"l", follower.member_id: b"f"})
        assert done.error_code == ErrorCode.NONE and h.state() == "Stable"
        parked: list = []
    else:
        silent, active = leader, follower
        parked = h.sync(follower.member_id, 1)
        assert parked == []
    for _ in range(REBALANCE // 250):
        h.advance(250)
        h.heartbeat(silent.member_id, 1)
        h.heartbeat(active.member_id, 1)
    assert list(h.coordinator.groups["g"].members) == [active.member_id]
    assert h.state() == "PreparingRebalance"
    if not leader_syncs:
        assert [a.error_code for a in parked] == [ErrorCode.REBALANCE_IN_PROGRESS]
    assert h.heartbeat(silent.member_id, 1) == ErrorCode.UNKNOWN_MEMBER_ID


# -- whatever happened before, members that fall silent are all gone in the end ----------

ops = st.lists(
    st.tuples(
        st.sampled_from(
            ["join", "join", "restart", "sync", "sync", "heartbeat", "leave", "advance"]
        ),
        st.integers(0, 3),  # which client
        st.integers(0, 4000),  # ms to advance
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(ops, st.lists(st.booleans(), min_size=4, max_size=4), st.sampled_from([0, 100]))
def test_members_that_fall_silent_are_all_expired(script, statics, delay):
    h = Harness(
        GroupConfig(
            offsets_partitions=1, min_session_timeout_ms=100, initial_rebalance_delay_ms=delay
        )
    )
    clients: dict[int, dict] = {i: {"id": "", "gen": -1, "joins": []} for i in range(4)}

    def learn(client: dict) -> None:
        for answer in client["joins"]:
            if answer.error_code in (ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED):
                client["id"] = answer.member_id
            if answer.error_code == ErrorCode.NONE:
                client["gen"] = answer.generation_id
        client["joins"] = []

    for op, who, ms in script:
        client = clients[who]
        instance = f"i-{who}" if statics[who] else None
        learn(client)
        if op in ("join", "restart"):  # a restarted client has lost its member id
            member = client["id"] if op == "join" else ""
            client["joins"] = h.join(member, instance=instance)
        elif op == "sync":
            h.sync(client["id"], client["gen"], {client["id"]: b"x"}, instance=instance)
        elif op == "heartbeat":
            h.heartbeat(client["id"], client["gen"], instance)
        elif op == "leave":
            h.coordinator.leave_group("g", [(client["id"], instance)], h.now)
        else:
            h.advance(ms)
        group = h.coordinator.groups.get("g")
        if group is not None:
            assert group.pending_sync <= set(group.members)
            assert set(group.static_members.values()) <= set(group.members)
    # Nobody sends anything any more: sessions, rebalances and syncs all run out.
    for _ in range(6):
        h.advance(REBALANCE + SESSION)
    group = h.coordinator.groups.get("g")
    assert group is None or not group.members, group
    # ... and nothing is left waiting for them.
    assert h.coordinator.heartbeat_purgatory.pending == 0
    assert h.coordinator.join_purgatory.pending == 0
