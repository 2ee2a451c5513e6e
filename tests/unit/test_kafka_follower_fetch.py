"""KIP-392 on the Kafka listener: a Fetch v12 with `rack_id` (kio-encoded, over TCP, to
real brokers on racks a, b, c running the rack-aware selector) is answered by the leader
with `preferred_read_replica` and no records; the same fetch sent to that follower is
served there, up to its high watermark. A v12 fetch with an empty `rack_id` is no rack
to the selector: the leader serves it itself, with no preferred replica; it still
carries client metadata (Kafka 2.8's KafkaApis: every v11+ fetch does), so the follower
serves it too, as Kafka's does, while a v10 fetch (no client metadata) is refused there
(NOT_LEADER_OR_FOLLOWER)."""

from __future__ import annotations

import dataclasses
import datetime

import trio
from kio.schema.fetch.v10 import request as fetch_v10

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


def fetch_v10_request(topic: str, partition: int, offset: int):
    return fetch_v10.FetchRequest(
        replica_id=-1,
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            fetch_v10.FetchTopic(
                topic=topic,
                partitions=(
                    fetch_v10.FetchPartition(
                        partition=partition,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
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

        # No rack (rack_id ""): the leader serves it, names no other replica.
        from_leader = only_partition(await leader.call(plain))
        assert from_leader.error_code == 0 and from_leader.preferred_read_replica == -1
        assert len(read_records(from_leader.records)) == 3
        # A v11+ fetch has client metadata, rack or not: the follower serves it (Kafka's
        # fetchOnlyFromLeader is only for consumers without client metadata)...
        on_follower = only_partition(await follower.call(plain))
        assert on_follower.error_code == 0 and on_follower.preferred_read_replica == -1
        assert len(read_records(on_follower.records)) == 3
        # ...and refuses a v10 one, which has none.
        refused = only_partition(await follower.call(fetch_v10_request("t", 0, 0)))
        assert refused.error_code == NOT_LEADER_OR_FOLLOWER
        await leader.aclose()
        await follower.aclose()
