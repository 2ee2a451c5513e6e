"""Group consumers: the membership state machine alone (client/consumer/group/membership.py), then
`subscribe()` consumers against an in-process cluster of real brokers running the real
group coordinator (tests/support/cluster.py), on Trio's MockClock.

Shown here: one subscriber gets every partition and a successor resumes at its commits;
members split the partitions with no overlap in any generation; a member that leaves
(or stops polling) hands its partitions over; auto-commit commits only what poll()
handed out; a static member comes back to its assignment without a rebalance; the
rebalance callbacks run revoked-before-assigned with the right sets and no record of a
revoked partition is returned afterwards; commits from a stale generation fail; a new
subscribed topic is picked up; the group survives losing its coordinator.
"""

from __future__ import annotations

import ast
import pathlib

import pytest
import trio

from client.consumer import (
    CommitFailedError,
    ConsumerStateError,
    RebalanceInProgressError,
    open_consumer,
)
from client.consumer.group.membership import (
    NO_GENERATION,
    Generation,
    GroupMembership,
    MemberState,
    Step,
)
from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.consumer_protocol import decode_assignment, decode_subscription
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.types import TopicPartition
from tests.support.cluster import TestCluster, open_test_cluster

# --- the state machine, without I/O ------------------------------------------------------


def joined(membership: GroupMembership, *, leader: bool = True) -> None:
    """Drive `membership` through a successful join and sync."""
    membership.coordinator_found(1, "h", 1, 0)
    membership.join_request([("range", b"")])
    response = m.JoinGroupResponse(
        throttle_time_ms=0,
        error_code=0,
        generation_id=3,
        protocol_name="range",
        leader="me" if leader else "other",
        member_id="me",
        members=[],
    )
    assert membership.on_join_response(ErrorCode.NONE, response, 0) is Step.OK
    assert membership.on_sync_response(ErrorCode.NONE, 0) is Step.OK


def test_member_id_required_rejoins_with_the_given_id():
    membership = GroupMembership("g")
    request = membership.join_request([("range", b"x")])
    assert request.member_id == "" and request.protocol_type == "consumer"
    answer = m.JoinGroupResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.MEMBER_ID_REQUIRED,
        generation_id=-1,
        protocol_name=None,
        leader="",
        member_id="m-1",
        members=[],
    )
    assert membership.on_join_response(ErrorCode.MEMBER_ID_REQUIRED, answer, 0) is Step.REJOIN
    assert membership.join_request([("range", b"x")]).member_id == "m-1"


def test_join_and_sync_make_a_stable_leader():
    membership = GroupMembership("g", group_instance_id="i")
    joined(membership)
    assert membership.state is MemberState.STABLE and membership.is_leader
    assert membership.generation == Generation(3, "me", "range")
    assert not membership.needs_join
    sync = membership.sync_request({"me": b"a"})
    assert (sync.generation_id, sync.member_id, sync.group_instance_id) == (3, "me", "i")


@pytest.mark.parametrize(
    ("code", "member_id_after"),
    [(ErrorCode.ILLEGAL_GENERATION, "me"), (ErrorCode.UNKNOWN_MEMBER_ID, "")],
)
def test_heartbeat_errors_reset_the_generation(code, member_id_after):
    membership = GroupMembership("g")
    joined(membership)
    request, sent = membership.heartbeat_request(0)
    assert (request.generation_id, request.member_id) == (3, "me")
    assert membership.on_heartbeat_response(code, sent, 0) is Step.REJOIN
    assert membership.generation == Generation(member_id=member_id_after)
    assert membership.generation_lost and membership.needs_join


def test_a_heartbeat_answer_about_an_old_generation_is_ignored():
    membership = GroupMembership("g")
    joined(membership)
    _, sent = membership.heartbeat_request(0)
    joined(membership)  # rejoined meanwhile (same ids here: make the sent one older)
    old = Generation(2, "me", "range")
    assert membership.on_heartbeat_response(ErrorCode.ILLEGAL_GENERATION, old, 0) is Step.OK
    assert membership.state is MemberState.STABLE and sent != old


def test_rebalance_in_progress_asks_a_stable_member_to_rejoin():
    membership = GroupMembership("g")
    joined(membership)
    _, sent = membership.heartbeat_request(0)
    assert membership.on_heartbeat_response(ErrorCode.REBALANCE_IN_PROGRESS, sent, 0) is (
        Step.REJOIN
    )
    assert membership.needs_join and not membership.generation_lost
    # Still Stable: the commit before rejoining goes out with the generation (the
    # coordinator takes commits of the current generation while preparing a rebalance).
    assert membership.commit_generation() == Generation(3, "me", "range")
    membership.join_request([])
    with pytest.raises(RebalanceInProgressError):
        membership.commit_generation()


def test_coordinator_errors_mark_the_coordinator_unknown():
    membership = GroupMembership("g")
    joined(membership)
    _, sent = membership.heartbeat_request(0)
    assert membership.on_heartbeat_response(ErrorCode.NOT_COORDINATOR, sent, 0) is (
        Step.FIND_COORDINATOR
    )
    assert membership.coordinator is None
    assert membership.state is MemberState.STABLE  # membership itself is not lost


def test_fatal_errors_stop_the_member():
    membership = GroupMembership("g")
    membership.join_request([])
    assert membership.on_join_response(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, None, 0) is (
        Step.FATAL
    )
    assert membership.fatal_error.code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    membership = GroupMembership("g", group_instance_id="i")
    joined(membership)
    _, sent = membership.heartbeat_request(0)
    assert membership.on_heartbeat_response(ErrorCode.FENCED_INSTANCE_ID, sent, 0) is Step.FATAL


def test_timers():
    membership = GroupMembership(
        "g", session_timeout_ms=1000, heartbeat_interval_ms=300, rebalance_timeout_ms=5000
    )
    joined(membership)
    membership.reset_timers(10_000)
    assert membership.time_to_next_heartbeat(10_100) == 200
    assert not membership.session_expired(11_000) and membership.session_expired(11_001)
    membership.poll_called(12_000)
    assert membership.time_to_poll_timeout(13_000) == 4000
    assert membership.poll_timeout_expired(17_001)


def test_leave_group_only_for_dynamic_members():
    dynamic = GroupMembership("g")
    joined(dynamic)
    leave = dynamic.leave_request()
    assert leave.members == [m.LeaveGroupMember(member_id="me")]
    assert dynamic.generation == NO_GENERATION and dynamic.state is MemberState.UNJOINED
    static = GroupMembership("g", group_instance_id="i")
    joined(static)
    assert static.leave_request() is None
    assert static.generation == NO_GENERATION


def test_commit_errors():
    membership = GroupMembership("g")
    joined(membership)
    tp = TopicPartition("t", 0)
    generation = membership.commit_generation()
    assert membership.commit_error({tp: ErrorCode.NONE}, generation) is None
    retriable = membership.commit_error({tp: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}, generation)
    assert retriable.retriable
    failed = membership.commit_error({tp: ErrorCode.ILLEGAL_GENERATION}, generation)
    assert isinstance(failed, CommitFailedError) and not failed.retriable
    assert membership.generation_lost
    with pytest.raises(CommitFailedError):
        membership.commit_generation()


@pytest.mark.parametrize(
    "module",
    [
        "client/consumer/group/membership.py",
        "client/consumer/group/offsets.py",
        "client/consumer/group/assignors.py",
    ],
)
def test_the_decisions_are_sans_io(module):
    root = pathlib.Path(__file__).resolve().parents[2]
    tree = ast.parse((root / module).read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not {n.split(".")[0] for n in names} & {"trio", "socket", "time", "threading"}


# --- against the real coordinator ----------------------------------------------------------

# Small group settings (the broker defaults would make tests wait seconds of Trio time).
GROUP_BROKER_SETTINGS = {
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
}
FAST = {
    "session_timeout_ms": 3000,
    "heartbeat_interval_ms": 300,
    "max_poll_interval_ms": 20_000,
    "auto_offset_reset": "earliest",
}


def cluster_for_groups(brokers: int = 1, **kwargs):
    settings = dict(GROUP_BROKER_SETTINGS)
    settings.update(kwargs.pop("broker_settings", {}))
    return open_test_cluster(brokers, broker_settings=settings, **kwargs)


def group_consumer(cluster: TestCluster, group: str = "g", **config):
    return open_consumer(
        cluster.bootstrap,
        connector=cluster.connector(),
        group_id=group,
        **{**FAST, **config},
    )


def tps(topic: str, count: int) -> set[TopicPartition]:
    return {TopicPartition(topic, p) for p in range(count)}


async def fill(cluster: TestCluster, topic: str, partitions: int, count: int, start: int = 0):
    for p in range(partitions):
        await cluster.append((topic, p), *(f"{p}:{i}".encode() for i in range(start, count)))


async def poll_until(consumer, condition, *, into: list | None = None, timeout_s: float = 60):
    """Poll until `condition(records so far)` holds."""
    records = [] if into is None else into
    with trio.fail_after(timeout_s):
        while not condition(records):
            records += await consumer.poll(200)
    return records


async def wait_for(condition, timeout_s: float = 60) -> None:
    with trio.fail_after(timeout_s):
        while not condition():
            await trio.sleep(0.05)


class Member:
    """A consumer polling in the background, recording what it gets and its callbacks."""

    def __init__(self, consumer, name: str) -> None:
        self.consumer = consumer
        self.name = name
        self.records: list = []
        self.events: list[tuple[str, int, frozenset]] = []
        self.owned: set[TopicPartition] = set()
        self.violations: list = []
        self.polling = True

    def on_revoked(self, partitions: set[TopicPartition]) -> None:
        assert partitions == self.consumer.assignment()  # still assigned while revoking
        self.events.append(("revoked", self.generation, frozenset(partitions)))
        self.owned -= partitions

    def on_assigned(self, partitions: set[TopicPartition]) -> None:
        self.events.append(("assigned", self.generation, frozenset(partitions)))
        self.owned |= partitions

    @property
    def generation(self) -> int:
        return self.consumer.group.membership.generation.generation_id

    def subscribe(self, topics) -> None:
        self.consumer.subscribe(topics, on_revoked=self.on_revoked, on_assigned=self.on_assigned)

    async def run(self) -> None:
        while True:
            if not self.polling:
                await trio.sleep(0.1)
                continue
            batch = await self.consumer.poll(200)
            for record in batch:
                tp = TopicPartition(record.topic, record.partition)
                if tp not in self.owned:
                    self.violations.append((self.name, tp, record.offset))
            self.records += batch

    def assigned_in(self) -> dict[int, frozenset]:
        return {g: parts for kind, g, parts in self.events if kind == "assigned"}


async def test_a_subscriber_gets_every_partition_and_a_successor_resumes_at_its_commits(
    autojump_clock,
):
    async with cluster_for_groups(topics={"t": 3}) as cluster:
        await fill(cluster, "t", 3, 5)
        async with group_consumer(cluster, enable_auto_commit=False) as first:
            first.subscribe(["t"])
            records = await poll_until(first, lambda r: len(r) >= 15)
            assert first.assignment() == tps("t", 3)
            assert sorted((r.partition, r.offset) for r in records) == [
                (p, o) for p in range(3) for o in range(5)
            ]
            await first.commit()
            assert await first.committed(tps("t", 3)) == dict.fromkeys(tps("t", 3), 5)
            generation = first.group.membership.generation
            assert generation.generation_id >= 1 and first.group.membership.is_leader
        await fill(cluster, "t", 3, 7, start=5)
        async with group_consumer(cluster, enable_auto_commit=False) as second:
            second.subscribe("t")
            records = await poll_until(second, lambda r: len(r) >= 6)
            assert sorted((r.partition, r.offset) for r in records) == [
                (p, o) for p in range(3) for o in (5, 6)
            ]
        (join,) = {r.protocols[0].name for r in cluster.requests_of(m.JoinGroupRequest)}
        assert join == "range"
        subscription = decode_subscription(
            cluster.requests_of(m.JoinGroupRequest)[-1].protocols[0].metadata
        )
        assert subscription.topics == ("t",)


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "sticky"])
async def test_three_members_split_the_partitions_with_no_overlap_in_any_generation(
    autojump_clock, strategy
):
    async with cluster_for_groups(2, topics={"t": 6}) as cluster:
        await fill(cluster, "t", 6, 10)
        members: list[Member] = []
        async with trio.open_nursery() as nursery:

            async def run(name: str, ready: trio.Event, done: trio.Event):
                async with group_consumer(
                    cluster, partition_assignment_strategy=[strategy]
                ) as consumer:
                    member = Member(consumer, name)
                    members.append(member)
                    member.subscribe(["t"])
                    ready.set()
                    async with trio.open_nursery() as inner:
                        inner.start_soon(member.run)
                        await done.wait()
                        inner.cancel_scope.cancel()

            done = trio.Event()
            for name in ("a", "b", "c"):
                ready = trio.Event()
                nursery.start_soon(run, name, ready, done)
                await ready.wait()
                await trio.sleep(1)
            await wait_for(
                lambda: (
                    all(len(x.consumer.assignment()) == 2 for x in members)
                    and len({x.generation for x in members}) == 1
                )
            )
            await wait_for(
                lambda: (
                    {(r.partition, r.offset) for x in members for r in x.records}
                    >= {(p, o) for p in range(6) for o in range(10)}
                )
            )
            done.set()
        by_generation: dict[int, list[frozenset]] = {}
        for member in members:
            assert member.violations == []
            for generation, parts in member.assigned_in().items():
                by_generation.setdefault(generation, []).append(parts)
        for generation, shares in by_generation.items():
            given = [tp for share in shares for tp in share]
            assert len(given) == len(set(given)), f"overlap in generation {generation}"
        last = max(by_generation)
        assert sorted(len(s) for s in by_generation[last]) == [2, 2, 2]
        assert set().union(*by_generation[last]) == tps("t", 6)


async def test_a_member_that_leaves_hands_its_partitions_over_at_its_commits(autojump_clock):
    async with cluster_for_groups(topics={"t": 4}) as cluster:
        async with group_consumer(cluster) as stays:
            survivor = Member(stays, "stays")
            survivor.subscribe(["t"])
            async with trio.open_nursery() as nursery:
                nursery.start_soon(survivor.run)
                async with group_consumer(cluster) as leaves:
                    leaver = Member(leaves, "leaves")
                    leaver.subscribe(["t"])
                    nursery.start_soon(leaver.run)
                    await wait_for(
                        lambda: len(stays.assignment()) == 2 and len(leaves.assignment()) == 2
                    )
                    # Records only now: whichever member joined first (alone for a
                    # generation) has nothing to read before the partitions are shared.
                    await fill(cluster, "t", 4, 10)
                    await wait_for(lambda: len(survivor.records) + len(leaver.records) >= 40)
                    handed_over = leaves.assignment()
                    leaver.polling = False
                    await trio.sleep(0.5)  # the last poll() returns
                assert len(cluster.requests_of(m.LeaveGroupRequest)) == 1
                await wait_for(lambda: stays.assignment() == tps("t", 4))
                before = len(survivor.records)
                await fill(cluster, "t", 4, 15, start=10)
                await wait_for(lambda: len(survivor.records) >= before + 20)
                nursery.cancel_scope.cancel()
        later = survivor.records[before:]
        # Closing committed everything the leaver had consumed: nothing is read twice.
        assert sorted((r.partition, r.offset) for r in later) == [
            (p, o) for p in range(4) for o in range(10, 15)
        ]
        assert {TopicPartition("t", r.partition) for r in leaver.records} == handed_over
        assert survivor.violations == leaver.violations == []


async def test_auto_commit_commits_only_what_poll_handed_out(autojump_clock):
    tp = TopicPartition("t", 0)
    async with cluster_for_groups(topics={"t": 1}) as cluster:
        await cluster.append(tp, *(str(i).encode() for i in range(20)))  # one batch
        async with group_consumer(
            cluster, max_poll_records=5, auto_commit_interval_ms=1000
        ) as consumer:
            consumer.subscribe(["t"])
            await poll_until(consumer, lambda r: len(r) >= 5)
            await trio.sleep(3)
            # The first poll's records count as consumed once poll() is called again.
            assert await consumer.committed([tp]) == {tp: None}
            assert len(await consumer.poll(1000)) == 5
            await trio.sleep(3)
            assert await consumer.committed([tp]) == {tp: 5}
            assert len(await consumer.poll(1000)) == 5
            await trio.sleep(3)
            assert await consumer.committed([tp]) == {tp: 10}  # 20 were fetched
        commits = [
            r.topics[0].partitions[0].committed_offset
            for r in cluster.requests_of(m.OffsetCommitRequest)
        ]
        assert max(commits) == 15  # closing commits what the last poll handed out
        assert all(offset in (5, 10, 15) for offset in commits)


async def test_a_static_member_comes_back_to_its_assignment_without_a_rebalance(
    autojump_clock,
):
    async with cluster_for_groups(topics={"t": 4}) as cluster:
        async with group_consumer(cluster, group_instance_id="b", session_timeout_ms=20_000) as b:
            stays = Member(b, "b")
            stays.subscribe(["t"])
            async with trio.open_nursery() as nursery:
                nursery.start_soon(stays.run)
                async with group_consumer(
                    cluster, group_instance_id="a", session_timeout_ms=20_000
                ) as a:
                    first = Member(a, "a")
                    first.subscribe(["t"])
                    nursery.start_soon(first.run)
                    await wait_for(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2)
                    await wait_for(lambda: first.generation == stays.generation)
                    had = a.assignment()
                    generation = stays.generation
                    events_of_b = list(stays.events)
                    first.polling = False
                    await trio.sleep(0.5)
                assert cluster.requests_of(m.LeaveGroupRequest) == []  # static: no leave
                async with group_consumer(
                    cluster, group_instance_id="a", session_timeout_ms=20_000
                ) as again:
                    back = Member(again, "a again")
                    back.subscribe(["t"])
                    nursery.start_soon(back.run)
                    await wait_for(lambda: bool(again.assignment()))
                    assert again.assignment() == had
                    assert back.generation == generation
                    await trio.sleep(2)
                    assert stays.generation == generation and stays.events == events_of_b
                    nursery.cancel_scope.cancel()


async def test_callbacks_revoke_before_assign_and_no_revoked_record_comes_out(autojump_clock):
    async with cluster_for_groups(topics={"t": 4}) as cluster:
        await fill(cluster, "t", 4, 50)
        async with group_consumer(cluster, max_poll_records=3) as a:
            first = Member(a, "a")
            first.subscribe(["t"])
            async with trio.open_nursery() as nursery:
                nursery.start_soon(first.run)
                await wait_for(lambda: a.assignment() == tps("t", 4) and len(first.records) > 5)
                async with group_consumer(cluster, max_poll_records=3) as b:
                    second = Member(b, "b")
                    second.subscribe(["t"])
                    nursery.start_soon(second.run)
                    await wait_for(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2)
                    await wait_for(lambda: len(first.records) + len(second.records) > 120)
                    a_share, b_share = set(a.assignment()), set(b.assignment())
                    nursery.cancel_scope.cancel()
        kinds = [(kind, set(parts)) for kind, _, parts in first.events]
        assert kinds == [
            ("assigned", tps("t", 4)),
            ("revoked", tps("t", 4)),
            ("assigned", a_share),
            ("revoked", a_share),  # closing
        ]
        assert len(a_share) == 2 and a_share | b_share == tps("t", 4)
        g1, g2 = first.events[0][1], first.events[2][1]
        assert g2 > g1
        assert [(k, g, set(p)) for k, g, p in second.events] == [
            ("assigned", g2, b_share),
            ("revoked", g2, b_share),  # closing
        ]
        assert first.violations == second.violations == []


async def test_a_member_that_stops_polling_leaves_and_its_commits_fail(autojump_clock):
    async with cluster_for_groups(topics={"t": 2}) as cluster:
        async with (
            group_consumer(cluster) as a,
            group_consumer(cluster, max_poll_interval_ms=4000) as slow,
        ):
            busy = Member(a, "a")
            busy.subscribe(["t"])
            lazy = Member(slow, "slow")
            lazy.subscribe(["t"])
            async with trio.open_nursery() as nursery:
                nursery.start_soon(busy.run)
                nursery.start_soon(lazy.run)
                await wait_for(lambda: len(a.assignment()) == 1 and len(slow.assignment()) == 1)
                lazy.polling = False
                await wait_for(lambda: a.assignment() == tps("t", 2))
                assert slow.group.membership.generation_lost
                assert len(cluster.requests_of(m.LeaveGroupRequest)) == 1
                with pytest.raises(CommitFailedError):
                    await slow.commit({TopicPartition("t", 0): 1})
                lazy.polling = True  # the next poll() rejoins
                await wait_for(lambda: len(a.assignment()) == 1 and len(slow.assignment()) == 1)
                nursery.cancel_scope.cancel()


async def test_a_commit_refused_for_a_stale_generation_raises_and_the_member_rejoins(
    autojump_clock,
):
    async with cluster_for_groups(topics={"t": 1}) as cluster:
        await fill(cluster, "t", 1, 3)
        async with group_consumer(cluster, enable_auto_commit=False) as consumer:
            consumer.subscribe(["t"])
            await poll_until(consumer, lambda r: len(r) >= 3)
            before = consumer.group.membership.generation
            cluster.fail(ApiKey.OFFSET_COMMIT, ErrorCode.ILLEGAL_GENERATION)
            with pytest.raises(CommitFailedError):
                await consumer.commit()
            await poll_until(
                consumer,
                lambda r: (
                    consumer.group.membership.state is MemberState.STABLE
                    and consumer.group.membership.generation.generation_id > before.generation_id
                ),
            )
            assert consumer.group.membership.generation.member_id == before.member_id
            await consumer.commit()
            assert await consumer.committed([("t", 0)]) == {TopicPartition("t", 0): 3}


async def test_a_subscribed_topic_created_later_is_picked_up(autojump_clock):
    async with cluster_for_groups(topics={"t": 1}) as cluster:
        async with group_consumer(cluster, metadata_max_age_ms=1000) as consumer:
            consumer.subscribe(["t", "later"])
            await poll_until(consumer, lambda r: consumer.assignment() == tps("t", 1))
            await cluster.create_topic("later", 2)
            await cluster.append(("later", 1), b"hello")
            records = await poll_until(consumer, lambda r: len(r) >= 1)
            assert consumer.assignment() == tps("t", 1) | tps("later", 2)
            assert [(r.topic, r.value) for r in records] == [("later", b"hello")]


async def test_the_group_survives_losing_its_coordinator(autojump_clock):
    async with cluster_for_groups(
        3, broker_settings={"offsets.topic.replication.factor": "3"}
    ) as cluster:
        await cluster.create_topic("t", 2, replication_factor=3)
        await fill(cluster, "t", 2, 5)
        async with group_consumer(cluster, enable_auto_commit=False) as consumer:
            consumer.subscribe(["t"])
            await poll_until(consumer, lambda r: len(r) >= 10)
            await consumer.commit()
            coordinator = consumer.group.membership.coordinator
            generation = consumer.group.membership.generation
            await cluster.stop_broker(coordinator[0])
            await fill(cluster, "t", 2, 8, start=5)
            records = await poll_until(consumer, lambda r: len(r) >= 6)
            assert sorted((r.partition, r.offset) for r in records) == [
                (p, o) for p in range(2) for o in (5, 6, 7)
            ]
            # The next heartbeat finds the coordinator gone; the new one answers.
            await wait_for(
                lambda: (
                    consumer.group.membership.coordinator not in (None, coordinator)
                    and consumer.group.membership.state is MemberState.STABLE
                )
            )
            await consumer.commit()
            assert await consumer.committed(tps("t", 2)) == dict.fromkeys(tps("t", 2), 8)
            # The new coordinator loaded the group: still the same member.
            assert consumer.group.membership.generation.member_id == generation.member_id


async def test_assign_with_a_group_id_starts_at_committed_offsets(autojump_clock):
    tp = TopicPartition("t", 0)
    async with cluster_for_groups(topics={"t": 1}) as cluster:
        await fill(cluster, "t", 1, 6)
        async with group_consumer(cluster, group="manual", enable_auto_commit=False) as first:
            first.assign([tp])
            await poll_until(first, lambda r: len(r) >= 4)  # 6 arrive, at least 4
            await first.commit({tp: 4})
        async with group_consumer(cluster, group="manual") as second:
            second.assign([tp])
            assert await second.position(tp) == 4
            records = await poll_until(second, lambda r: len(r) >= 2)
            assert [r.offset for r in records] == [4, 5]
        (commit, *_) = cluster.requests_of(m.OffsetCommitRequest)
        assert (commit.generation_id, commit.member_id) == (-1, "")
        assert cluster.requests_of(m.JoinGroupRequest) == []


async def test_assignment_bytes_on_the_wire_are_kafkas(autojump_clock):
    async with cluster_for_groups(topics={"t": 2}) as cluster:
        async with group_consumer(cluster) as consumer:
            consumer.subscribe(["t"])
            await poll_until(consumer, lambda r: consumer.assignment() == tps("t", 2))
        (sync,) = [r for r in cluster.requests_of(m.SyncGroupRequest) if r.assignments]
        (share,) = sync.assignments
        assert set(decode_assignment(share.assignment).partitions) == tps("t", 2)


async def test_misuse_is_refused(autojump_clock):
    async with cluster_for_groups(topics={"t": 1}) as cluster:
        async with open_consumer(cluster.bootstrap, connector=cluster.connector()) as plain:
            with pytest.raises(ConsumerStateError, match="group_id"):
                plain.subscribe(["t"])
            with pytest.raises(ConsumerStateError, match="group_id"):
                await plain.commit()
        async with group_consumer(cluster) as consumer:
            consumer.subscribe(["t"])
            with pytest.raises(ConsumerStateError, match="mutually exclusive"):
                consumer.assign([("t", 0)])
            await consumer.unsubscribe()
            consumer.assign([("t", 0)])
            with pytest.raises(ConsumerStateError, match="mutually exclusive"):
                consumer.subscribe(["t"])


async def test_a_fatal_group_error_is_raised_from_poll(autojump_clock):
    async with cluster_for_groups(topics={"t": 1}) as cluster:
        cluster.fail(ApiKey.JOIN_GROUP, ErrorCode.INVALID_SESSION_TIMEOUT)
        async with group_consumer(cluster) as consumer:
            consumer.subscribe(["t"])
            with pytest.raises(TributaryError) as failure:
                await poll_until(consumer, lambda r: False)
            assert failure.value.code is ErrorCode.INVALID_SESSION_TIMEOUT


def test_the_sync_consumer_subscribes_commits_and_calls_back_on_a_thread():
    from client.sync import SyncConsumer
    from tests.support.cluster import ClusterThread

    runner = ClusterThread(1, topics={"t": 2}, broker_settings=GROUP_BROKER_SETTINGS)
    with runner as cluster:
        for p in range(2):
            runner.call(cluster.append, ("t", p), b"x", b"y")
        events = []
        with SyncConsumer(cluster.bootstrap, group_id="g", enable_auto_commit=False, **FAST) as c:

            def on_revoked(partitions):
                c.commit()  # the facade works from inside a callback
                events.append(("revoked", partitions))

            c.subscribe(
                "t", on_assigned=lambda p: events.append(("assigned", p)), on_revoked=on_revoked
            )
            assert c.subscription() == {"t"}
            records = []
            while len(records) < 4:
                records += c.poll(1000)
            done = []
            c.commit_async({TopicPartition("t", 0): 1}, lambda offsets, error: done.append(error))
            c.commit()  # after the asynchronous one
            assert done == [None]
            assert c.committed(tps("t", 2)) == dict.fromkeys(tps("t", 2), 2)
            c.unsubscribe()
            assert c.subscription() == set()
        assert events == [("assigned", tps("t", 2)), ("revoked", tps("t", 2))]


async def test_unsubscribe_revokes_leaves_and_a_new_subscription_joins_again(autojump_clock):
    async with cluster_for_groups(topics={"t": 2, "u": 1}) as cluster:
        async with group_consumer(cluster) as consumer:
            member = Member(consumer, "m")
            member.subscribe(["t"])
            await poll_until(consumer, lambda r: consumer.assignment() == tps("t", 2))
            await consumer.unsubscribe()
            assert consumer.assignment() == set() and consumer.subscription() == set()
            assert [kind for kind, _, _ in member.events] == ["assigned", "revoked"]
            assert len(cluster.requests_of(m.LeaveGroupRequest)) == 1
            with pytest.raises(ConsumerStateError, match="assign"):
                await consumer.poll(10)
            member.subscribe(["u"])
            await poll_until(consumer, lambda r: consumer.assignment() == tps("u", 1))
            assert member.events[-1][0] == "assigned"


async def test_sticky_members_keep_their_partitions_when_one_joins(autojump_clock):
    """Eager members give everything back before rejoining; the sticky assignor still sees
    what each had (its user data) and moves only what the newcomer needs."""
    async with cluster_for_groups(topics={"t": 6}) as cluster:
        sticky = {"partition_assignment_strategy": ["sticky"]}
        async with group_consumer(cluster, **sticky) as a, group_consumer(cluster, **sticky) as b:
            members = [Member(a, "a"), Member(b, "b")]
            for member in members:
                member.subscribe(["t"])
            async with trio.open_nursery() as nursery:
                for member in members:
                    nursery.start_soon(member.run)
                await wait_for(lambda: len(a.assignment()) == len(b.assignment()) == 3)
                before = {"a": a.assignment(), "b": b.assignment()}
                async with group_consumer(cluster, **sticky) as c:
                    newcomer = Member(c, "c")
                    newcomer.subscribe(["t"])
                    nursery.start_soon(newcomer.run)
                    await wait_for(
                        lambda: (
                            len(a.assignment()) == len(b.assignment()) == len(c.assignment()) == 2
                        )
                    )
                    assert a.assignment() < before["a"] and b.assignment() < before["b"]
                    nursery.cancel_scope.cancel()


async def test_a_moved_coordinator_is_found_again_and_the_member_stays(autojump_clock):
    async with cluster_for_groups(
        2, broker_settings={"offsets.topic.replication.factor": "2"}
    ) as cluster:
        await cluster.create_topic("t", 1, replication_factor=2)
        await fill(cluster, "t", 1, 3)
        async with group_consumer(cluster, enable_auto_commit=False) as consumer:
            consumer.subscribe(["t"])
            await poll_until(consumer, lambda r: len(r) >= 3)
            await consumer.commit()
            old = consumer.group.membership.coordinator[0]
            generation = consumer.group.membership.generation
            partition = cluster.brokers[old].server.groups.coordinator.partition_for("g")
            await cluster.move_leader(("__consumer_offsets", partition), 3 - old)
            # The next heartbeat hears NOT_COORDINATOR and looks the coordinator up again.
            await wait_for(
                lambda: (
                    (consumer.group.membership.coordinator or (old,))[0] == 3 - old
                    and consumer.group.membership.state is MemberState.STABLE
                )
            )
            assert consumer.group.membership.generation == generation  # no rebalance
            assert cluster.requests_of(m.HeartbeatRequest, broker=3 - old)
            assert await consumer.committed([("t", 0)]) == {TopicPartition("t", 0): 3}
            await consumer.commit({TopicPartition("t", 0): 2})
            assert await consumer.committed([("t", 0)]) == {TopicPartition("t", 0): 2}


async def test_members_without_a_common_assignor_are_refused(autojump_clock):
    async with cluster_for_groups(topics={"t": 1}) as cluster:
        async with (
            group_consumer(cluster) as first,
            group_consumer(cluster, partition_assignment_strategy=["roundrobin"]) as second,
        ):
            first.subscribe(["t"])
            await poll_until(first, lambda r: first.assignment() == tps("t", 1))
            second.subscribe(["t"])
            with pytest.raises(TributaryError) as refused:
                await poll_until(second, lambda r: False)
            assert refused.value.code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


async def test_a_static_member_replaced_by_another_with_its_instance_id_is_fenced(
    autojump_clock,
):
    async with cluster_for_groups(topics={"t": 2}) as cluster:
        async with group_consumer(cluster, group_instance_id="same") as first:
            first.subscribe(["t"])
            await poll_until(first, lambda r: first.assignment() == tps("t", 2))
            async with group_consumer(cluster, group_instance_id="same") as second:
                second.subscribe(["t"])
                await poll_until(second, lambda r: second.assignment() == tps("t", 2))
                with pytest.raises(TributaryError) as fenced:
                    await poll_until(first, lambda r: False)
                assert fenced.value.code is ErrorCode.FENCED_INSTANCE_ID
                with pytest.raises(TributaryError):  # for good: every poll raises it
                    await first.poll(0)
