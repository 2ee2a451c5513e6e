"""The group coordinator inside real brokers (in-process cluster): the offsets topic is
created on first use, requests to the wrong broker are refused, and a group with its
committed offsets survives the loss of its coordinator."""

from __future__ import annotations

import trio

from broker.core.group.offsets_topic import OFFSETS_TOPIC
from client.connection import open_connection
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from tests.support.cluster import open_test_cluster

GROUP_SETTINGS = {
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
}
RANGE = [m.JoinGroupProtocol(name="range", metadata=b"sub")]


async def find_coordinator(cluster, group: str) -> m.FindCoordinatorResponse:
    for _ in range(200):
        for broker in cluster.live():
            async with open_connection(
                broker.host, broker.port, connector=cluster.connector()
            ) as conn:
                answer = await conn.request(m.FindCoordinatorRequest(key=group), timeout_s=10)
            if answer.error_code == ErrorCode.NONE:
                return answer
        await trio.sleep(0.1)
    raise AssertionError(f"no coordinator for {group}")


async def ask(cluster, node_id: int, request):
    broker = cluster.brokers[node_id]
    async with open_connection(
        broker.host, broker.port, connector=cluster.connector(), client_id="t"
    ) as conn:
        return await conn.request(request, timeout_s=30)


async def join_stable(cluster, coordinator: int, group: str) -> tuple[str, int]:
    join = m.JoinGroupRequest(
        group_id=group,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id="",
        protocol_type="consumer",
        protocols=RANGE,
    )
    first = await ask(cluster, coordinator, join)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    member = first.member_id
    joined = await ask(
        cluster, coordinator, m.JoinGroupRequest(**{**vars_of(join), "member_id": member})
    )
    assert joined.error_code == ErrorCode.NONE
    synced = await ask(
        cluster,
        coordinator,
        m.SyncGroupRequest(
            group_id=group,
            generation_id=joined.generation_id,
            member_id=member,
            assignments=[m.SyncGroupAssignment(member_id=member, assignment=b"t:0")],
        ),
    )
    assert synced.error_code == ErrorCode.NONE and synced.assignment == b"t:0"
    return member, joined.generation_id


def vars_of(message) -> dict:
    return {name: getattr(message, name) for name in message.__dataclass_fields__}


def commit(group: str, member: str, generation: int, offset: int) -> m.OffsetCommitRequest:
    return m.OffsetCommitRequest(
        group_id=group,
        generation_id=generation,
        member_id=member,
        topics=[
            m.OffsetCommitTopic(
                name="t",
                partitions=[m.OffsetCommitPartition(partition_index=0, committed_offset=offset)],
            )
        ],
    )


async def test_the_offsets_topic_is_created_on_first_use_compacted_and_replicated(autojump_clock):
    async with open_test_cluster(3, topics={"t": 1}, broker_settings=GROUP_SETTINGS) as cluster:
        await find_coordinator(cluster, "g")
        config = await cluster.topic_config(OFFSETS_TOPIC)
        assert config["cleanup.policy"] == "compact"
        partitions = [cluster.partition((OFFSETS_TOPIC, p)) for p in range(3)]
        assert all(len(p.replicas) == 3 for p in partitions)


async def test_group_requests_to_another_broker_are_refused(autojump_clock):
    async with open_test_cluster(3, topics={"t": 1}, broker_settings=GROUP_SETTINGS) as cluster:
        found = await find_coordinator(cluster, "g")
        other = next(b.id for b in cluster.live() if b.id != found.node_id)
        answer = await ask(
            cluster, other, m.HeartbeatRequest(group_id="g", generation_id=1, member_id="x")
        )
        assert answer.error_code == ErrorCode.NOT_COORDINATOR


async def test_group_and_offsets_survive_the_loss_of_the_coordinator(autojump_clock):
    async with open_test_cluster(3, topics={"t": 1}, broker_settings=GROUP_SETTINGS) as cluster:
        found = await find_coordinator(cluster, "g")
        member, generation = await join_stable(cluster, found.node_id, "g")
        answer = await ask(cluster, found.node_id, commit("g", member, generation, 42))
        assert answer.topics[0].partitions[0].error_code == ErrorCode.NONE

        await cluster.stop_broker(found.node_id)
        successor = await find_coordinator(cluster, "g")
        assert successor.node_id != found.node_id
        for _ in range(100):  # loading may take a moment
            fetched = await ask(
                cluster, successor.node_id, m.OffsetFetchRequest(group_id="g", topics=None)
            )
            if fetched.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                break
            await trio.sleep(0.05)
        assert fetched.topics[0].partitions[0].committed_offset == 42
        described = await ask(cluster, successor.node_id, m.DescribeGroupsRequest(groups=["g"]))
        [group] = described.groups
        assert group.group_state == "Stable" and [x.member_id for x in group.members] == [member]
        # The member carries on with its generation at the new coordinator.
        beat = await ask(
            cluster,
            successor.node_id,
            m.HeartbeatRequest(group_id="g", generation_id=generation, member_id=member),
        )
        assert beat.error_code == ErrorCode.NONE
        answer = await ask(cluster, successor.node_id, commit("g", member, generation, 43))
        assert answer.topics[0].partitions[0].error_code == ErrorCode.NONE


async def test_a_member_silent_after_its_sync_is_expired_by_the_brokers_timer(autojump_clock):
    # The shell's reaper wakes for the session deadline the SyncGroup answer re-armed.
    async with open_test_cluster(3, topics={"t": 1}, broker_settings=GROUP_SETTINGS) as cluster:
        found = await find_coordinator(cluster, "g")
        member, generation = await join_stable(cluster, found.node_id, "g")
        await trio.sleep(10 + 1)  # its 10 s session, and nothing sent
        described = await ask(cluster, found.node_id, m.DescribeGroupsRequest(groups=["g"]))
        [group] = described.groups
        assert group.group_state == "Empty" and group.members == []
        beat = await ask(
            cluster,
            found.node_id,
            m.HeartbeatRequest(group_id="g", generation_id=generation, member_id=member),
        )
        assert beat.error_code == ErrorCode.UNKNOWN_MEMBER_ID


async def test_find_coordinator_refuses_unknown_key_types(autojump_clock):
    # Key type 1 (a transactional id): tests/unit/test_txn_broker.py.
    async with open_test_cluster(1, broker_settings=GROUP_SETTINGS) as cluster:
        odd = await ask(cluster, 1, m.FindCoordinatorRequest(key="x", key_type=7))
        assert odd.error_code == ErrorCode.INVALID_REQUEST
