"""KIP-392 on the Kafka listener: a Fetch v12 with `rack_id` (kio-encoded, over TCP, to
real brokers on racks a, b, c running the rack-aware selector) is answered by the leader
with `preferred_read_replica` and no records; the same fetch sent to that follower is
served there, up to its high watermark; without a rack the follower refuses it
(NOT_LEADER_OR_FOLLOWER) and the leader serves it."""

from __future__ import annotations

import dataclasses

import trio

from tests.support.cluster import open_test_cluster
from tests.unit.test_kafka_listener import (
    KAFKA_LISTENER,
    NOT_LEADER_OR_FOLLOWER,
    KafkaWire,
    fetch_request,
    kafka_batch,
    only_partition,
    produce_request,
    read_records,
)

SETTINGS = {
    **KAFKA_LISTENER,
    "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector",
}


async def test_a_v12_fetch_with_a_rack_is_sent_to_and_served_by_the_rack_replica():
    async with open_test_cluster(
        3, transport="tcp", racks=["a", "b", "c"], broker_settings=SETTINGS
    ) as cluster:
        await cluster.create_topic("t", assignment={0: [1, 2, 3]})  # leader 1, rack a
        leader = await KafkaWire.open(cluster, 1)
        for i in range(3):
            await leader.call(produce_request("t", 0, kafka_batch(b"v%d" % i)))
        plain = fetch_request("t", 0, 0)
        racked = dataclasses.replace(plain, rack_id="b")

        sent_away = only_partition(await leader.call(racked))
        assert sent_away.error_code == 0
        assert sent_away.preferred_read_replica == 2
        assert sent_away.records is None or read_records(sent_away.records) == []
        assert sent_away.high_watermark == 3

        follower = await KafkaWire.open(cluster, 2)
        with trio.fail_after(30):
            while True:  # the follower learns the HW from its next fetch of the leader
                served = only_partition(await follower.call(racked))
                assert served.error_code == 0 and served.preferred_read_replica == -1
                if served.high_watermark == 3:
                    break
                await trio.sleep(0.05)
        assert [v for _, _, v, _ in read_records(served.records)] == [b"v0", b"v1", b"v2"]

        refused = only_partition(await follower.call(plain))
        assert refused.error_code == NOT_LEADER_OR_FOLLOWER
        from_leader = only_partition(await leader.call(plain))
        assert len(read_records(from_leader.records)) == 3
        await leader.aclose()
        await follower.aclose()
