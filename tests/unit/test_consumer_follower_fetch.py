"""KIP-392 with Tributary's consumer against an in-process cluster of real brokers
(tests/support/cluster.py, in-memory network, Trio's MockClock): three brokers on racks
a, b, c running the rack-aware replica selector. A consumer with `client_rack` set reads
the partition from the replica in its rack (the brokers' counters show who served it),
follows the leader's answer again after its replica dies, and one without a rack reads
from the leader."""

from __future__ import annotations

import trio

from client.consumer import open_consumer
from client.protocol.types import TopicPartition
from tests.support.cluster import TestCluster, open_test_cluster

TP = TopicPartition("near", 0)
RACKS = ["a", "b", "c"]
SELECTOR = {"replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}


async def poll_values(consumer, count: int) -> list[bytes]:
    values: list[bytes] = []
    with trio.fail_after(60):
        while len(values) < count:
            values += [r.value for r in await consumer.poll(500)]
    return values


def served(cluster: TestCluster, broker: int) -> tuple[int, int]:
    """(bytes served to consumers as leader, as follower) by `broker`."""
    server = cluster.brokers[broker].server
    assert server is not None
    reads = server.replica_manager.consumer_reads
    return reads.bytes_as_leader, reads.bytes_as_follower


async def test_a_consumer_reads_from_the_replica_in_its_rack(autojump_clock) -> None:
    async with open_test_cluster(3, racks=RACKS, broker_settings=SELECTOR) as cluster:
        # Leader 1 (rack a); followers 2 (rack b) and 3 (rack c).
        await cluster.create_topic("near", assignment={0: [1, 2, 3]})
        for i in range(20):
            await cluster.append(TP, f"v{i}".encode())
        async with open_consumer(
            cluster.bootstrap,
            connector=cluster.connector(),
            auto_offset_reset="earliest",
            client_rack="b",
        ) as consumer:
            consumer.assign([TP])
            assert await poll_values(consumer, 20) == [f"v{i}".encode() for i in range(20)]
            assert served(cluster, 1) == (0, 0)  # the leader only named broker 2
            assert served(cluster, 2)[1] > 0 and served(cluster, 3) == (0, 0)
            assert cluster.brokers[
                1
            ].server.replica_manager.consumer_reads.preferred_replica_answers

            # Its replica gone, the consumer goes back to the leader, which now serves it
            # (no other replica in rack b).
            await cluster.stop_broker(2)
            for i in range(20, 30):
                await cluster.append(TP, f"v{i}".encode())
            assert await poll_values(consumer, 10) == [f"v{i}".encode() for i in range(20, 30)]
            assert served(cluster, 1)[0] > 0


async def test_without_a_rack_the_leader_serves(autojump_clock) -> None:
    async with open_test_cluster(3, racks=RACKS, broker_settings=SELECTOR) as cluster:
        await cluster.create_topic("near", assignment={0: [1, 2, 3]})
        for i in range(5):
            await cluster.append(TP, f"v{i}".encode())
        async with open_consumer(
            cluster.bootstrap, connector=cluster.connector(), auto_offset_reset="earliest"
        ) as consumer:
            consumer.assign([TP])
            assert await poll_values(consumer, 5) == [f"v{i}".encode() for i in range(5)]
        assert served(cluster, 1)[0] > 0
        assert served(cluster, 2) == (0, 0) and served(cluster, 3) == (0, 0)
