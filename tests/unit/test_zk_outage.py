"""Every server loses ZooKeeper past its session timeout, then gets it back (Kafka's
behaviour, on the in-process cluster and its in-memory ZooKeeper, whose clients report
SUSPENDED, LOST and CONNECTED as kazoo does; trio's MockClock makes the outage instant):

- while ZooKeeper is unreachable the leader keeps serving acks=1 produce and fetch with
  the leaders and ISRs it has;
- when it comes back every session has expired: each broker registers again (a new broker
  epoch), the controller is elected again, the ISRs are full again, acks=all works, an
  election works, and nothing acknowledged was lost.

tests/integration/test_zk_ensemble.py runs the real thing (a three-server ensemble losing
its quorum), where ZooKeeper keeps the sessions alive instead.
"""

from __future__ import annotations

import trio

from client.connection import open_connection
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.records import Record, build_batch, decode_batches
from client.protocol.types import TopicPartition
from tests.support.cluster import TestCluster, open_test_cluster

TP = TopicPartition("t", 0)
SESSION_TIMEOUT_S = 6.0  # tests/support/cluster.py's brokers and controller


async def _request(cluster: TestCluster, broker_id: int, request):
    broker = cluster.brokers[broker_id]
    async with open_connection(broker.host, broker.port, connector=cluster.connector()) as conn:
        return await conn.request(request, timeout_s=10)


async def _produce(cluster: TestCluster, broker_id: int, value: bytes, acks: int) -> ErrorCode:
    batch = build_batch([Record(None, value, 1_000)])
    response = await _request(
        cluster,
        broker_id,
        m.ProduceRequest(
            acks=acks,
            timeout_ms=5_000,
            topics=[
                m.ProduceTopic(
                    name=TP.topic,
                    partitions=[m.ProducePartition(partition=TP.partition, records=batch)],
                )
            ],
        ),
    )
    return ErrorCode.from_code(response.topics[0].partitions[0].error_code)


async def _fetch(cluster: TestCluster, broker_id: int) -> list[bytes | None]:
    """The committed values of TP as a consumer fetching from `broker_id` sees them."""
    response = await _request(
        cluster,
        broker_id,
        m.FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1 << 20,
            topics=[
                m.FetchTopic(
                    topic=TP.topic,
                    partitions=[
                        m.FetchPartition(
                            partition=TP.partition, fetch_offset=0, partition_max_bytes=1 << 20
                        )
                    ],
                )
            ],
        ),
    )
    part = response.topics[0].partitions[0]
    assert part.error_code == ErrorCode.NONE, ErrorCode.from_code(part.error_code)
    return [r.value for r in decode_batches(part.records)]


async def test_a_zookeeper_outage_past_the_session_timeout(autojump_clock):
    async with open_test_cluster(3) as cluster:
        await cluster.create_topic("t", 1, 3)
        leader = cluster.partition(TP).leader
        epochs = {b.id: b.server.identity.broker_epoch for b in cluster.live()}
        controller_epoch = cluster.controller.context.epoch
        acknowledged = [b"before"]
        assert await _produce(cluster, leader, b"before", acks=-1) == ErrorCode.NONE

        clients = [b.server.gateway.zk for b in cluster.live()] + [cluster.controller.zk]
        for zk in clients:
            zk.disconnect()
        try:
            await trio.sleep(SESSION_TIMEOUT_S + 4)  # every session expires meanwhile
            for i in range(5):
                value = b"during-%d" % i
                assert await _produce(cluster, leader, value, acks=1) == ErrorCode.NONE
                acknowledged.append(value)
                await trio.sleep(0.5)
            partition = cluster.brokers[leader].server.replica_manager.get_partition(TP)
            # The followers keep fetching: the HW passes every record (the controller may
            # have resigned meanwhile; the leader does not need it).
            await cluster.until(lambda: partition.high_watermark == 6, "the HW moves")
            assert await _fetch(cluster, leader) == acknowledged
        finally:
            for zk in clients:
                zk.reconnect()

        def rejoined() -> bool:
            ctx = cluster.controller.context
            return (
                ctx is not None
                and ctx.epoch > controller_epoch
                and all(
                    b.server.identity.broker_epoch not in (-1, epochs[b.id]) for b in cluster.live()
                )
                and ctx.live_ids == {1, 2, 3}
                and set(cluster.partition(TP).isr) == {1, 2, 3}
            )

        await cluster.until(rejoined, "every broker registered again, the controller re-elected")
        assert await _produce(cluster, leader, b"after", acks=-1) == ErrorCode.NONE
        acknowledged.append(b"after")
        await cluster.stop_broker(leader)  # an election works again
        new_leader = cluster.partition(TP).leader
        assert new_leader not in (-1, leader)
        assert await _fetch(cluster, new_leader) == acknowledged
