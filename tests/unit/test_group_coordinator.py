"""The sans-IO group coordinator: rebalances, liveness, static members, offsets, loading.

Driven by a manual clock and an in-memory `__consumer_offsets` (every write is kept, so
a second coordinator can load what the first wrote, as after a failover).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.core.group import offsets_topic as ot
from broker.core.group.coordinator import GroupConfig, GroupCoordinator, GroupLoader, JoinRequest
from client.protocol.consumer_protocol import Subscription, encode_subscription
from client.protocol.errors import ErrorCode

CONFIG = GroupConfig(
    offsets_partitions=1,
    min_session_timeout_ms=100,
    initial_rebalance_delay_ms=0,
    commit_timeout_ms=1000,
)
SESSION = 1000
REBALANCE = 3000


@dataclass
class OffsetsLog:
    records: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    fail_with: ErrorCode | None = None

    def append(self, partition, records, now_ms, done) -> None:
        if self.fail_with is not None:
            done(self.fail_with, now_ms)
            return
        self.records.extend(records)
        done(ErrorCode.NONE, now_ms)


class Harness:
    def __init__(self, config: GroupConfig = CONFIG, log: OffsetsLog | None = None):
        self.now = 0
        self.log = log or OffsetsLog()
        self.coordinator = GroupCoordinator(config, self.log.append)
        token = self.coordinator.begin_loading(0, self.now)
        loader = GroupLoader()
        for key, value in self.log.records:
            loader.add(key, value)
        self.coordinator.finish_loading(0, token, loader, self.now)

    def advance(self, ms: int) -> None:
        self.now += ms
        self.coordinator.expire_due(self.now)

    def join(
        self,
        member_id: str = "",
        *,
        instance: str | None = None,
        meta: bytes = b"m",
        skip_assignment: bool = False,
    ):
        answers: list = []
        self.coordinator.join_group(
            JoinRequest(
                group_id="g",
                member_id=member_id,
                group_instance_id=instance,
                client_id="c",
                client_host="h",
                rebalance_timeout_ms=REBALANCE,
                session_timeout_ms=SESSION,
                protocol_type="consumer",
                protocols=[("range", meta)],
                supports_skip_assignment=skip_assignment,
            ),
            self.now,
            answers.append,
        )
        return answers

    def new_member(self, instance: str | None = None) -> str:
        """Join with no id; dynamic members get MEMBER_ID_REQUIRED first (KIP-394)."""
        answers = self.join(instance=instance)
        if instance is None:
            assert answers[0].error_code == ErrorCode.MEMBER_ID_REQUIRED
            return answers[0].member_id
        return ""

    def sync(self, member_id: str, generation: int, assignments=None, instance=None):
        answers: list = []
        self.coordinator.sync_group(
            "g", generation, member_id, instance, assignments or {}, self.now, answers.append
        )
        return answers

    def heartbeat(self, member_id: str, generation: int, instance=None) -> ErrorCode:
        return self.coordinator.heartbeat("g", generation, member_id, instance, self.now)

    def commit(self, member_id: str, generation: int, offset: int, partition: int = 0):
        answers: list = []
        self.coordinator.commit_offsets(
            "g",
            generation,
            member_id,
            None,
            {("t", partition): ot.OffsetValue(offset, commit_timestamp_ms=self.now)},
            self.now,
            answers.append,
        )
        return answers[0][("t", partition)]

    def state(self) -> str:
        group = self.coordinator.groups.get("g")
        return group.state.value if group else "Dead"


def stable_single_member(h: Harness) -> tuple[str, int]:
    member = h.new_member()
    [joined] = h.join(member)
    assert joined.error_code == ErrorCode.NONE
    [synced] = h.sync(member, joined.generation_id, {member: b"all"})
    assert synced.assignment == b"all"
    return member, joined.generation_id


def test_first_join_needs_a_member_id_then_forms_a_generation_led_by_that_member():
    h = Harness()
    member = h.new_member()
    assert h.state() == "Empty"  # a pending member is not a member yet
    [joined] = h.join(member)
    assert joined.error_code == ErrorCode.NONE
    assert joined.generation_id == 1 and joined.leader == member
    assert [m.member_id for m in joined.members] == [member]
    assert h.state() == "CompletingRebalance"
    h.sync(member, 1, {member: b"a"})
    assert h.state() == "Stable"


def test_a_second_member_triggers_a_rebalance_that_waits_for_the_first_to_rejoin():
    h = Harness()
    first, gen = stable_single_member(h)
    second = h.new_member()
    parked = h.join(second)
    assert parked == []  # waits for the others
    assert h.heartbeat(first, gen) == ErrorCode.REBALANCE_IN_PROGRESS
    [first_join] = h.join(first)
    [second_join] = parked
    assert first_join.generation_id == second_join.generation_id == gen + 1
    leader = first_join if first_join.members else second_join
    assert {m.member_id for m in leader.members} == {first, second}
    follower_sync = h.sync(second_join.member_id if leader is first_join else first, gen + 1)
    assert follower_sync == []  # waits for the leader's assignment
    h.sync(leader.member_id, gen + 1, {first: b"1", second: b"2"})
    assert follower_sync[0].error_code == ErrorCode.NONE
    assert h.state() == "Stable"


def test_a_member_that_stops_heartbeating_is_removed_after_its_session_timeout():
    h = Harness()
    first, gen = stable_single_member(h)
    second = h.new_member()
    h.join(second)
    h.join(first)
    h.sync(first, gen + 1, {first: b"1", second: b"2"})
    h.sync(second, gen + 1)
    # Only `first` keeps heartbeating.
    for _ in range(5):
        h.advance(SESSION // 3)
        h.heartbeat(first, gen + 1)
    assert h.state() == "PreparingRebalance"
    assert second not in h.coordinator.groups["g"].members
    [rejoined] = h.join(first)
    assert rejoined.generation_id == gen + 2 and [m.member_id for m in rejoined.members] == [first]


def test_members_that_do_not_rejoin_within_the_rebalance_timeout_are_dropped():
    h = Harness()
    first, gen = stable_single_member(h)
    second = h.new_member()
    parked = h.join(second)
    h.advance(REBALANCE)
    [answer] = parked
    assert answer.error_code == ErrorCode.NONE and answer.generation_id == gen + 1
    assert [m.member_id for m in answer.members] == [second]  # `first` was dropped
    assert h.heartbeat(first, gen) == ErrorCode.UNKNOWN_MEMBER_ID


def test_initial_rebalance_delay_gathers_members_into_one_generation():
    h = Harness(
        GroupConfig(
            offsets_partitions=1, min_session_timeout_ms=100, initial_rebalance_delay_ms=500
        )
    )
    a = h.new_member()
    parked_a = h.join(a)
    h.advance(300)
    b = h.new_member()
    parked_b = h.join(b)
    h.advance(300)  # the delay restarts when a member arrives
    assert parked_a == [] and parked_b == []
    h.advance(500)
    assert parked_a[0].generation_id == parked_b[0].generation_id == 1


def test_a_returning_static_member_keeps_its_assignment_and_fences_its_old_id():
    h = Harness()
    h.join(instance="i-1")
    group = h.coordinator.groups["g"]
    [old_id] = group.members
    [joined] = h.join(old_id, instance="i-1")
    h.sync(old_id, joined.generation_id, {old_id: b"mine"})
    generation = group.generation
    [rejoined] = h.join(instance="i-1")  # restarted: no member id
    assert rejoined.error_code == ErrorCode.NONE
    assert rejoined.generation_id == generation and h.state() == "Stable"
    [synced] = h.sync(rejoined.member_id, generation, instance="i-1")
    assert synced.assignment == b"mine"
    assert h.heartbeat(old_id, generation, instance="i-1") == ErrorCode.FENCED_INSTANCE_ID


def test_a_returning_static_leader_does_not_reassign_a_stable_group():
    """KIP-814: a JoinGroup v9 leader is told it leads, with skip_assignment and the
    members; an older one is told the old leader id, so it does not think it leads (its
    assignment would not be propagated in a stable group)."""
    h = Harness()
    h.join(instance="i-1")
    group = h.coordinator.groups["g"]
    [first_id] = group.members
    [joined] = h.join(first_id, instance="i-1")
    h.sync(first_id, joined.generation_id, {first_id: b"mine"})
    [old_client] = h.join(instance="i-1")  # restarted, JoinGroup v8 or older
    assert (old_client.leader, old_client.members, old_client.skip_assignment) == (
        first_id,
        [],
        False,
    )
    assert group.leader == old_client.member_id != first_id
    [new_client] = h.join(instance="i-1", skip_assignment=True)  # restarted again, v9
    assert new_client.skip_assignment and new_client.leader == new_client.member_id
    assert [x.member_id for x in new_client.members] == [new_client.member_id]
    assert h.state() == "Stable" and new_client.generation_id == joined.generation_id


def test_offset_delete_spares_the_topics_a_live_consumer_group_subscribes_to():
    """KIP-496: a member subscribing to "t" keeps t's offsets (GROUP_SUBSCRIBED_TO_TOPIC)
    while u's go; once the group is empty everything may go, and with its last offset
    the group itself; an unknown group is GROUP_ID_NOT_FOUND."""
    h = Harness()
    member = h.new_member()
    [joined] = h.join(member, meta=encode_subscription(Subscription(["t"])))
    h.sync(member, joined.generation_id, {member: b""})
    generation = joined.generation_id
    for topic in ("t", "u"):
        answers: list = []
        h.coordinator.commit_offsets(
            "g",
            generation,
            member,
            None,
            {(topic, 0): ot.OffsetValue(5, commit_timestamp_ms=h.now)},
            h.now,
            answers.append,
        )
    answers = []
    h.coordinator.delete_offsets("g", [("t", 0), ("u", 0)], h.now, lambda *a: answers.append(a))
    assert answers == [
        (ErrorCode.NONE, {("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): ErrorCode.NONE})
    ]
    assert set(h.coordinator.groups["g"].offsets) == {("t", 0)}
    h.advance(SESSION + 1)  # the member's session ends: the group is Empty
    assert h.state() == "Empty"
    answers.clear()
    h.coordinator.delete_offsets("g", [("t", 0)], h.now, lambda *a: answers.append(a))
    assert answers == [(ErrorCode.NONE, {("t", 0): ErrorCode.NONE})]
    assert h.state() == "Dead"  # nothing left of it
    answers.clear()
    h.coordinator.delete_offsets("nope", [("t", 0)], h.now, lambda *a: answers.append(a))
    assert answers == [(ErrorCode.GROUP_ID_NOT_FOUND, {})]


def test_commits_are_checked_against_the_generation_and_membership():
    h = Harness()
    member, gen = stable_single_member(h)
    assert h.commit(member, gen, 10) == ErrorCode.NONE
    assert h.commit(member, gen - 1, 11) == ErrorCode.ILLEGAL_GENERATION
    assert h.commit("stranger", gen, 11) == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.commit("", -1, 12) == ErrorCode.UNKNOWN_MEMBER_ID  # admin, group not empty
    code, offsets = h.coordinator.fetch_offsets("g", [("t", 0), ("t", 1)])
    assert offsets[("t", 0)].offset == 10 and offsets[("t", 1)] is None


def test_a_failed_write_leaves_the_committed_offset_unchanged():
    h = Harness()
    member, gen = stable_single_member(h)
    h.commit(member, gen, 10)
    h.log.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS
    assert h.commit(member, gen, 20) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    h.log.fail_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert h.commit(member, gen, 20) == ErrorCode.NOT_COORDINATOR
    assert h.coordinator.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 10


def test_an_admin_may_commit_only_while_the_group_is_empty():
    h = Harness()
    assert h.commit("", -1, 7) == ErrorCode.NONE  # no such group yet: offsets-only group
    member, gen = stable_single_member(h)
    assert h.commit("", -1, 8) == ErrorCode.UNKNOWN_MEMBER_ID
    h.coordinator.leave_group("g", [(member, None)], h.now)
    assert h.state() == "Empty"
    assert h.commit("", -1, 9) == ErrorCode.NONE


def test_a_new_coordinator_loads_the_group_and_its_offsets_from_the_log():
    h = Harness()
    member, gen = stable_single_member(h)
    h.commit(member, gen, 42)
    h.commit(member, gen, 43, partition=1)
    successor = Harness(log=h.log)
    group = successor.coordinator.groups["g"]
    assert group.state.value == "Stable" and group.generation == gen
    assert group.members[member].assignment == b"all"
    offsets = successor.coordinator.fetch_offsets("g", None)[1]
    assert {tp: v.offset for tp, v in offsets.items()} == {("t", 0): 42, ("t", 1): 43}
    # The member carries on with the new coordinator, heartbeats and all.
    assert successor.heartbeat(member, gen) == ErrorCode.NONE
    # ... and had it died with the old coordinator, its session would run out here too.
    successor.advance(SESSION + 1)
    assert successor.state() == "Empty" and not successor.coordinator.groups["g"].members


def test_a_deleted_group_stays_deleted_after_a_reload():
    h = Harness()
    member, gen = stable_single_member(h)
    h.commit(member, gen, 5)
    answers: list = []
    h.coordinator.delete_groups(["g"], h.now, answers.append)
    assert answers[0]["g"] == ErrorCode.NON_EMPTY_GROUP
    h.coordinator.leave_group("g", [(member, None)], h.now)
    answers.clear()
    h.coordinator.delete_groups(["g", "nope"], h.now, answers.append)
    assert answers[0] == {"g": ErrorCode.NONE, "nope": ErrorCode.GROUP_ID_NOT_FOUND}
    assert "g" not in Harness(log=h.log).coordinator.groups


def test_unloading_answers_parked_requests_with_not_coordinator():
    h = Harness()
    first, gen = stable_single_member(h)
    second = h.new_member()
    parked = h.join(second)
    h.coordinator.unload(0, h.now)
    assert parked[0].error_code == ErrorCode.NOT_COORDINATOR
    assert h.heartbeat(first, gen) == ErrorCode.NOT_COORDINATOR


def test_offsets_of_a_group_empty_longer_than_the_retention_expire():
    config = GroupConfig(
        offsets_partitions=1,
        min_session_timeout_ms=100,
        initial_rebalance_delay_ms=0,
        offsets_retention_ms=10_000,
    )
    h = Harness(config)
    member, gen = stable_single_member(h)
    h.commit(member, gen, 5)
    h.coordinator.leave_group("g", [(member, None)], h.now)
    h.advance(5_000)
    assert h.coordinator.expire_offsets(h.now) == 0
    h.advance(5_000)
    assert h.coordinator.expire_offsets(h.now) == 1
    assert "g" not in h.coordinator.groups
    assert "g" not in Harness(config, log=h.log).coordinator.groups


def test_partition_placement_matches_kafka():
    # Java 17: "my-group".hashCode() == -1906497762, Kafka's Utils.abs -> 1906497762.
    assert ot.java_string_hash("my-group") == -1906497762
    assert ot.partition_for("my-group", 50) == 12
    assert ot.partition_for("", 50) == 0
    assert ot.java_string_hash("\u00e9\U0001f600") == 1996812  # UTF-16 code units
    assert ot.partition_for("console-consumer-12345", 50) == 6


# -- every request is answered exactly once, whatever the interleaving ---------------------

ops = st.lists(
    st.tuples(
        st.sampled_from(["join", "sync", "heartbeat", "leave", "commit", "advance"]),
        st.integers(0, 3),  # which client
        st.integers(0, 4000),  # ms to advance
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_every_join_and_sync_is_answered_exactly_once(script):
    h = Harness()
    clients: dict[int, dict] = {i: {"id": "", "gen": -1} for i in range(4)}
    outstanding: list[list] = []

    def learn(client: dict, answers: list) -> None:
        for answer in answers:
            if answer.error_code in (ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED):
                client["id"] = answer.member_id
            if answer.error_code == ErrorCode.NONE:
                client["gen"] = answer.generation_id
            elif answer.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                client["id"] = ""

    for op, who, ms in script:
        client = clients[who]
        if op == "join":
            answers = h.join(client["id"])
            outstanding.append(answers)
            learn(client, answers)
        elif op == "sync":
            answers = h.sync(client["id"], client["gen"], {client["id"]: b"x"})
            outstanding.append(answers)
        elif op == "heartbeat":
            h.heartbeat(client["id"], client["gen"])
        elif op == "leave":
            h.coordinator.leave_group("g", [(client["id"], None)], h.now)
        elif op == "commit":
            h.commit(client["id"], client["gen"], ms)
        else:
            h.advance(ms)
        group = h.coordinator.groups.get("g")
        if group is not None and group.state.value == "Stable":
            assert group.leader in group.members
    # Long enough for every rebalance and session to run out.
    for _ in range(4):
        h.advance(REBALANCE + SESSION)
    for answers in outstanding:
        assert len(answers) == 1, answers
