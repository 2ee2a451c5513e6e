"""The group coordinator's liveness rules, against a
real one-broker cluster (real ZooKeeper, controller and broker processes).

Group members are raw clients driven step by step, so that one of them can fall
silent at a chosen moment: Tributary's own connection (client/connection.py) with the
native group messages, and a minimal Kafka-protocol connection (kio-encoded requests,
`KafkaWire` of the Kafka listener tests) on the broker's Kafka listener. Both carry
`group_instance_id` (KIP-345 static members). A silent member must be expired after its
session timeout whatever it sent last (JoinGroup or SyncGroup), and the member still
there must learn of it and form the next generation alone.
"""

from __future__ import annotations

import datetime
import uuid
from contextlib import AsyncExitStack
from dataclasses import dataclass

import pytest
import trio
from kio.schema.heartbeat.v3 import request as heartbeat_v3
from kio.schema.join_group.v5 import request as join_v5
from kio.schema.sync_group.v3 import request as sync_v3
from kio.static.primitive import i32Timedelta

from client.connection import BrokerConnection, open_connection
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from tests.integration.conftest import running_cluster
from tests.unit.test_kafka_listener import KafkaWire
from tools.cluster.launcher import LocalCluster

pytestmark = pytest.mark.integration

SESSION_MS = 6000
REBALANCE_MS = 10_000
# How long past a session timeout an expiry may take to show (generous: a busy machine).
SLACK_S = 10
RETRY_CODES = {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("group-liveness"), brokers=1) as cluster:
        yield cluster


def address(servers: str) -> tuple[str, int]:
    host, port = servers.split(",")[0].rsplit(":", 1)
    return host, int(port)


@dataclass
class Joined:
    error: int
    generation: int
    leader: str
    member_id: str
    members: list[str]


class Member:
    """A static member: its group, instance id, and the id and generation it was given."""

    def __init__(self, group: str, instance: str) -> None:
        self.group, self.instance = group, instance
        self.member_id = ""
        self.generation = -1

    async def join(self) -> Joined:
        raise NotImplementedError

    async def sync(self, assignments: dict[str, bytes]) -> tuple[int, bytes]:
        raise NotImplementedError

    async def heartbeat(self) -> int:
        raise NotImplementedError


class NativeMember(Member):
    """Over Tributary's own protocol."""

    def __init__(self, conn: BrokerConnection, group: str, instance: str) -> None:
        super().__init__(group, instance)
        self.conn = conn

    async def join(self) -> Joined:
        r = await self.conn.request(
            m.JoinGroupRequest(
                group_id=self.group,
                session_timeout_ms=SESSION_MS,
                rebalance_timeout_ms=REBALANCE_MS,
                member_id=self.member_id,
                group_instance_id=self.instance,
                protocol_type="consumer",
                protocols=[m.JoinGroupProtocol(name="range", metadata=b"sub")],
            ),
            timeout_s=60,
        )
        return Joined(
            r.error_code, r.generation_id, r.leader, r.member_id, [x.member_id for x in r.members]
        )

    async def sync(self, assignments: dict[str, bytes]) -> tuple[int, bytes]:
        r = await self.conn.request(
            m.SyncGroupRequest(
                group_id=self.group,
                generation_id=self.generation,
                member_id=self.member_id,
                group_instance_id=self.instance,
                assignments=[
                    m.SyncGroupAssignment(member_id=k, assignment=v) for k, v in assignments.items()
                ],
            ),
            timeout_s=60,
        )
        return r.error_code, bytes(r.assignment)

    async def heartbeat(self) -> int:
        r = await self.conn.request(
            m.HeartbeatRequest(
                group_id=self.group,
                generation_id=self.generation,
                member_id=self.member_id,
                group_instance_id=self.instance,
            ),
            timeout_s=30,
        )
        return r.error_code


def _ms(value: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=value))


class KafkaMember(Member):
    """Over the Kafka wire protocol (JoinGroup v5, SyncGroup and Heartbeat v3: the first
    versions with group_instance_id)."""

    def __init__(self, wire: KafkaWire, group: str, instance: str) -> None:
        super().__init__(group, instance)
        self.wire = wire

    async def join(self) -> Joined:
        r = await self.wire.call(
            join_v5.JoinGroupRequest(
                group_id=self.group,
                session_timeout=_ms(SESSION_MS),
                rebalance_timeout=_ms(REBALANCE_MS),
                member_id=self.member_id,
                group_instance_id=self.instance,
                protocol_type="consumer",
                protocols=(join_v5.JoinGroupRequestProtocol(name="range", metadata=b"sub"),),
            )
        )
        return Joined(
            int(r.error_code),
            r.generation_id,
            r.leader,
            r.member_id,
            [x.member_id for x in r.members],
        )

    async def sync(self, assignments: dict[str, bytes]) -> tuple[int, bytes]:
        r = await self.wire.call(
            sync_v3.SyncGroupRequest(
                group_id=self.group,
                generation_id=self.generation,
                member_id=self.member_id,
                group_instance_id=self.instance,
                assignments=tuple(
                    sync_v3.SyncGroupRequestAssignment(member_id=k, assignment=v)
                    for k, v in assignments.items()
                ),
            )
        )
        return int(r.error_code), bytes(r.assignment)

    async def heartbeat(self) -> int:
        r = await self.wire.call(
            heartbeat_v3.HeartbeatRequest(
                group_id=self.group,
                generation_id=self.generation,
                member_id=self.member_id,
                group_instance_id=self.instance,
            )
        )
        return int(r.error_code)


async def wait_for_coordinator(cluster: LocalCluster, group: str) -> None:
    """Until the broker answers for `group` (the offsets topic is created on first use)."""
    host, port = address(cluster.state.bootstrap_servers)
    with trio.fail_after(60):
        async with open_connection(host, port) as conn:
            while True:
                r = await conn.request(m.FindCoordinatorRequest(key=group), timeout_s=10)
                if r.error_code == ErrorCode.NONE:
                    return
                await trio.sleep(0.2)


async def join(member: Member) -> Joined:
    """JoinGroup, retried while the coordinator is still loading; the member takes the
    id and generation it was given."""
    with trio.fail_after(60):
        while True:
            joined = await member.join()
            if joined.error not in RETRY_CODES:
                break
            await trio.sleep(0.2)
    assert joined.error == ErrorCode.NONE, joined
    member.member_id, member.generation = joined.member_id, joined.generation
    return joined


async def join_both(first: Member, second: Member) -> Member:
    """Both join one generation (the first one leads); returns the leader."""
    answers: dict[str, Joined] = {}

    async def run(member: Member) -> None:
        answers[member.instance] = await join(member)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, first)
        await trio.sleep(0.05)  # within group.initial.rebalance.delay.ms
        nursery.start_soon(run, second)
    a, b = answers[first.instance], answers[second.instance]
    assert a.generation == b.generation and a.leader == b.leader
    leader = first if a.leader == first.member_id else second
    assert sorted(answers[leader.instance].members) == sorted([a.member_id, b.member_id])
    return leader


async def rejoins_alone(member: Member, generation: int) -> None:
    joined = await join(member)
    assert joined.generation > generation
    assert joined.leader == member.member_id and joined.members == [member.member_id]
    assert await member.sync({member.member_id: b"all"}) == (ErrorCode.NONE, b"all")


async def open_members(
    cluster: LocalCluster, transport: str, stack: AsyncExitStack, group: str
) -> list[Member]:
    """Members "b" and "a" of `group`, each on a connection of its own."""
    if transport == "native":
        host, port = address(cluster.state.bootstrap_servers)
        conns = [await stack.enter_async_context(open_connection(host, port)) for _ in "ab"]
        return [NativeMember(c, group, name) for c, name in zip(conns, "ba", strict=True)]
    host, port = address(cluster.state.kafka_bootstrap_servers)
    members: list[Member] = []
    for name in "ba":
        wire = KafkaWire(await trio.open_tcp_stream(host, port))
        stack.push_async_callback(wire.aclose)
        members.append(KafkaMember(wire, group, name))
    return members


@pytest.mark.parametrize("transport", ["native", "kafka"])
def test_a_static_leader_silent_after_its_join_is_expired_and_the_parked_sync_answered(
    cluster, transport
):
    group = f"silent-leader-{transport}-{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        await wait_for_coordinator(cluster, group)
        async with AsyncExitStack() as stack:
            b, a = await open_members(cluster, transport, stack, group)
            leader = await join_both(b, a)
            silent, other = (b, a) if leader is b else (a, b)
            generation = other.generation
            # The leader never sends SyncGroup nor a heartbeat: the other member's
            # SyncGroup waits until the leader's session runs out.
            with trio.fail_after(SESSION_MS / 1000 + SLACK_S):
                code, assignment = await other.sync({})
            assert (code, assignment) == (ErrorCode.REBALANCE_IN_PROGRESS, b"")
            await rejoins_alone(other, generation)
            assert silent.member_id != other.member_id

    trio.run(scenario)


def test_a_static_member_silent_after_its_sync_is_expired(cluster):
    group = f"silent-after-sync-{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        await wait_for_coordinator(cluster, group)
        async with AsyncExitStack() as stack:
            b, a = await open_members(cluster, "native", stack, group)
            leader = await join_both(b, a)
            follower = a if leader is b else b
            everything = {leader.member_id: b"l", follower.member_id: b"f"}
            assert await leader.sync(everything) == (ErrorCode.NONE, b"l")
            assert await follower.sync({}) == (ErrorCode.NONE, b"f")
            generation = follower.generation
            # The leader got its assignment and died; the follower keeps heartbeating
            # until the coordinator tells it to rejoin.
            with trio.fail_after(SESSION_MS / 1000 + SLACK_S):
                while (code := await follower.heartbeat()) == ErrorCode.NONE:
                    await trio.sleep(0.5)
            assert code == ErrorCode.REBALANCE_IN_PROGRESS
            await rejoins_alone(follower, generation)

    trio.run(scenario)
