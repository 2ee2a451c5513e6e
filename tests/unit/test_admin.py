"""The admin client against an in-process cluster of real brokers and a real controller
(tests/support/cluster.py): topics, cluster, elections, moves."""

from __future__ import annotations

import pytest

from client.admin import NewTopic, open_admin
from client.metadata import NoBrokersAvailableError, UnknownTopicError
from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.types import TopicPartition
from tests.support.cluster import open_test_cluster


async def test_create_describe_list_delete(autojump_clock):
    async with (
        open_test_cluster(3) as cluster,
        open_admin(cluster.bootstrap, connector=cluster.connector()) as admin,
    ):
        results = await admin.create_topics(
            [
                NewTopic("a", 3, 2, {"retention.ms": "1000"}),
                NewTopic("b", 1, 5),
                NewTopic("c", assignment={0: [3, 1], 1: [1, 2]}),
                NewTopic("bad name!", 1, 1),
            ]
        )
        assert results["a"] is None and results["c"] is None
        assert results["b"].code is ErrorCode.INVALID_REPLICATION_FACTOR
        assert results["bad name!"].code is ErrorCode.INVALID_TOPIC_EXCEPTION
        assert await cluster.topic_config("a") == {"retention.ms": "1000"}

        assert await admin.list_topics() == ["a", "c"]
        (a, c) = await admin.describe_topics()
        assert (a.name, len(a.partitions), a.replication_factor) == ("a", 3, 2)
        assert [p.replicas for p in c.partitions] == [(3, 1), (1, 2)]
        assert [p.leader for p in c.partitions] == [3, 1]

        with pytest.raises(TributaryError) as exists:
            await admin.create_topic("a", 1, 1)
        assert exists.value.code is ErrorCode.TOPIC_ALREADY_EXISTS

        await admin.delete_topic("a")
        assert await admin.list_topics() == ["c"]
        with pytest.raises(UnknownTopicError, match="topic 'a' does not exist"):
            await admin.delete_topic("a")
        with pytest.raises(UnknownTopicError):
            await admin.describe_topics(["a"])


async def test_deleting_a_topic_the_metadata_no_longer_shows_is_unknown(autojump_clock):
    async with (
        open_test_cluster(2) as cluster,
        open_admin(cluster.bootstrap, connector=cluster.connector()) as admin,
    ):
        await cluster.create_topic("a", 1, 2)
        # The replicas answer StopReplica late: the controller's deletion takes a while.
        cluster.delay(ApiKey.STOP_REPLICA, 1, times=float("inf"), inter_broker=True)
        await admin.delete_topic("a")
        assert await admin.list_topics() == []
        with pytest.raises(UnknownTopicError, match="topic 'a' does not exist"):
            await admin.delete_topic("a")


async def test_describe_marks_offline_and_under_replicated_partitions(autojump_clock):
    async with (
        open_test_cluster(3) as cluster,
        open_admin(cluster.bootstrap, connector=cluster.connector()) as admin,
    ):
        # Partition 1 only on broker 2, so that no replica is left to lead it.
        await cluster.create_topic("t", assignment={0: [1, 2], 1: [2]})
        await cluster.stop_broker(2)
        (topic,) = await admin.describe_topics(["t"])
        p0, p1 = topic.partitions
        assert p0.leader == 1 and p0.offline_replicas == (2,) and p0.under_replicated
        assert p1.offline and p1.leader == -1
        cluster_info = await admin.describe_cluster()
        assert [b.node_id for b in cluster_info.brokers] == [1, 3]
        assert cluster_info.controller_id == cluster.controller_id
        assert cluster_info.cluster_id == cluster.cluster_id


async def test_elect_preferred_leaders(autojump_clock):
    async with (
        open_test_cluster(2) as cluster,
        open_admin(cluster.bootstrap, connector=cluster.connector()) as admin,
    ):
        await cluster.create_topic("t", 2, 2)  # t-0 on [1, 2], t-1 on [2, 1]
        # Broker 1 goes away and comes back in sync: broker 2 leads t-0, not its preferred 1.
        await cluster.stop_broker(1)
        await cluster.start_broker(1)
        assert cluster.partition(("t", 0)).leader == 2
        results = await admin.elect_preferred_leaders("t")
        assert results[TopicPartition("t", 0)] is None
        assert results[TopicPartition("t", 1)].code is ErrorCode.ELECTION_NOT_NEEDED
        assert cluster.partition(("t", 0)).leader == 1
        (request,) = cluster.requests_of(m.ElectLeadersRequest)
        assert request.topic_partitions[0].partitions == [0, 1]
        everything = await admin.elect_preferred_leaders()
        assert set(everything) == {TopicPartition("t", 0), TopicPartition("t", 1)}
        with pytest.raises(UnknownTopicError):
            await admin.elect_preferred_leaders("nope")


async def test_reassignments_are_started_and_listed(autojump_clock):
    async with (
        open_test_cluster(3) as cluster,
        open_admin(cluster.bootstrap, connector=cluster.connector()) as admin,
    ):
        await cluster.create_topic("t", assignment={0: [1, 2]})
        tp = TopicPartition("t", 0)
        # Its leader (broker 1) refuses the followers' fetches: the move cannot finish yet.
        cluster.fail(
            ApiKey.FETCH,
            ErrorCode.REPLICA_NOT_AVAILABLE,
            tp=tp,
            broker=1,
            times=float("inf"),
            inter_broker=True,
        )
        results = await admin.alter_partition_reassignments(
            {tp: [2, 3], TopicPartition("t", 9): [1]}
        )
        assert results[tp] is None
        assert results[TopicPartition("t", 9)].code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        ongoing = await admin.list_partition_reassignments()
        assert ongoing[tp].adding_replicas == (3,) and ongoing[tp].removing_replicas == (1,)
        cluster.clear_faults()  # the new replica catches up: the move finishes by itself
        await cluster.wait_for_reassignments()
        assert await admin.list_partition_reassignments() == {}
        (topic,) = await admin.describe_topics(["t"])
        assert topic.partitions[0].replicas == (2, 3)


async def test_describe_log_dirs_asks_every_broker(autojump_clock):
    async with (
        open_test_cluster(3) as cluster,
        open_admin(cluster.bootstrap, connector=cluster.connector()) as admin,
    ):
        await cluster.create_topic("t", 1, 2)
        await cluster.append(("t", 0), b"a", b"b")  # committed: on both replicas
        dirs = await admin.describe_log_dirs()
        assert set(dirs) == {1, 2, 3}
        (leader_dir,) = dirs[1]
        info = leader_dir.partitions[TopicPartition("t", 0)]
        assert (info.log_end_offset, info.high_watermark, info.is_leader) == (2, 2, True)
        assert info.size > 0
        assert not dirs[3][0].partitions  # broker 3 holds no replica
        await cluster.stop_broker(3)
        dirs = await admin.describe_log_dirs([1, 3])
        assert isinstance(dirs[3], TributaryError)


async def test_admin_fails_fast_without_a_broker(autojump_clock):
    async with open_test_cluster() as cluster:
        await cluster.stop_broker(1)
        with pytest.raises(NoBrokersAvailableError, match="cannot reach any broker at"):
            async with open_admin(cluster.bootstrap, connector=cluster.connector()):
                pass  # pragma: no cover
