"""The admin client's group methods against an in-process cluster running the real group
coordinator (tests/support/cluster.py): list, describe (assignments decoded), committed
offsets, altering them (only while the group is empty), deleting groups, and
ListOffsets for lag."""

from __future__ import annotations

import pytest
import trio

from client.admin import GroupOffsetsError, open_admin
from client.metadata import UnknownTopicError
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition
from tests.unit.test_group_consumer import (
    cluster_for_groups,
    fill,
    group_consumer,
    poll_until,
    wait_for,
)

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def admin_for(cluster):
    return open_admin(cluster.bootstrap, connector=cluster.connector())


async def test_list_and_describe_groups(autojump_clock):
    async with cluster_for_groups(2, topics={"t": 2}) as cluster, admin_for(cluster) as admin:
        assert await admin.list_groups() == []
        async with (
            group_consumer(cluster, group="a", client_id="app-1") as one,
            group_consumer(cluster, group="a", group_instance_id="i-2") as two,
            group_consumer(cluster, group="b", partition_assignment_strategy="sticky") as other,
        ):
            for consumer in (one, two, other):
                consumer.subscribe(["t"])

            async def polled() -> None:
                while True:
                    for consumer in (one, two, other):
                        await consumer.poll(10)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(polled)
                await wait_for(
                    lambda: (
                        len(one.assignment()) == len(two.assignment()) == 1
                        and len(other.assignment()) == 2
                    )
                )
                await wait_for(
                    lambda: (
                        one.group.membership.generation.generation_id
                        == two.group.membership.generation.generation_id
                    )
                )
                listings = await admin.list_groups()
                assert [(g.group_id, g.protocol_type, g.state) for g in listings] == [
                    ("a", "consumer", "Stable"),
                    ("b", "consumer", "Stable"),
                ]
                assert await admin.list_groups(states=["Empty"]) == []
                a, b, ghost = await admin.describe_groups(["a", "b", "ghost"])
                coordinator = one.group.membership.coordinator[0]
                generation = one.group.membership.generation
                second_id = two.group.membership.generation.member_id
                nursery.cancel_scope.cancel()
        assert next(g for g in listings if g.group_id == "a").coordinator_id == coordinator
        assert (a.state, a.protocol_type, a.protocol, a.coordinator_id) == (
            "Stable",
            "consumer",
            "range",
            coordinator,
        )
        assert a.generation == generation.generation_id
        by_id = {member.member_id: member for member in a.members}
        first, second = by_id[generation.member_id], by_id[second_id]
        assert first.client_id == "app-1" and first.group_instance_id is None
        assert second.group_instance_id == "i-2"
        assert first.assignment | second.assignment == {T0, T1}
        assert len(first.assignment) == len(second.assignment) == 1
        assert first.host  # the client's address as the broker saw it ("?" in memory)
        assert b.protocol == "sticky" and [x.assignment for x in b.members] == [{T0, T1}]
        assert (ghost.state, ghost.members) == ("Dead", [])
        # The consumers closed: "b" is empty; "a" still waits for its static member, which
        # did not leave (Kafka's static membership), until its session times out.
        states = {g.group_id: g.state for g in await admin.list_groups()}
        assert states["b"] == "Empty" and states["a"] != "Empty"
        await trio.sleep(4)  # the session timeout is 3 s
        assert {g.state for g in await admin.list_groups()} == {"Empty"}


async def test_group_offsets_listed_altered_only_when_empty_and_deleted(autojump_clock):
    async with cluster_for_groups(topics={"t": 2}) as cluster, admin_for(cluster) as admin:
        await fill(cluster, "t", 2, 6)
        async with group_consumer(cluster, enable_auto_commit=False) as consumer:
            consumer.subscribe(["t"])
            await poll_until(consumer, lambda r: len(r) >= 12)
            await consumer.commit({T0: 6, T1: 2})
            assert await admin.list_group_offsets("g") == {T0: 6, T1: 2}
            assert await admin.list_group_offsets("g", [T1, ("t", 5)]) == {T1: 2}
            with pytest.raises(GroupOffsetsError, match="not empty") as busy:
                await admin.alter_group_offsets("g", {T0: 0})
            assert busy.value.code is ErrorCode.UNKNOWN_MEMBER_ID
            assert busy.value.errors == {T0: ErrorCode.UNKNOWN_MEMBER_ID}
            (refused,) = (await admin.delete_groups(["g"])).values()
            assert refused.code is ErrorCode.NON_EMPTY_GROUP
        (described,) = await admin.describe_groups(["g"])
        assert described.state == "Empty"
        await admin.alter_group_offsets("g", {T0: 1, T1: 0})
        assert await admin.list_group_offsets("g") == {T0: 1, T1: 0}
        async with group_consumer(cluster, enable_auto_commit=False) as again:
            again.subscribe(["t"])
            records = await poll_until(again, lambda r: len(r) >= 11)
            assert sorted((r.partition, r.offset) for r in records) == [
                *((0, o) for o in range(1, 6)),
                *((1, o) for o in range(6)),
            ]
        results = await admin.delete_groups(["g", "never"])
        assert results["g"] is None
        assert results["never"].code is ErrorCode.GROUP_ID_NOT_FOUND
        assert await admin.list_group_offsets("g") == {}
        assert await admin.list_groups() == []


async def test_offsets_only_groups_can_be_altered_from_scratch(autojump_clock):
    async with cluster_for_groups(topics={"t": 1}) as cluster, admin_for(cluster) as admin:
        await admin.alter_group_offsets("fresh", {T0: 3})
        assert await admin.list_group_offsets("fresh") == {T0: 3}
        (listing,) = await admin.list_groups()
        assert (listing.group_id, listing.state) == ("fresh", "Empty")
        (commit,) = cluster.requests_of(m.OffsetCommitRequest)
        assert (commit.generation_id, commit.member_id) == (-1, "")


async def test_list_offsets_earliest_latest_and_by_time(autojump_clock):
    async with cluster_for_groups(2, topics={"t": 2}) as cluster, admin_for(cluster) as admin:
        await fill(cluster, "t", 2, 5)
        cluster.delete_records(T1, 2)
        assert await admin.list_offsets([T0, T1], "earliest") == {T0: 0, T1: 2}
        assert await admin.list_offsets([T0, T1]) == {T0: 5, T1: 5}
        # cluster.append stamps records 1000, 1001, ... within each batch.
        assert await admin.list_offsets([T0], 1003) == {T0: 3}
        await cluster.move_leader(T0, 2)  # the admin's metadata is stale now: it retries
        assert await admin.list_offsets([T0], "latest") == {T0: 5}
        with pytest.raises(UnknownTopicError):
            await admin.list_offsets([("nope", 0)])
        with pytest.raises(ValueError, match="spec"):
            await admin.list_offsets([T0], "newest")
