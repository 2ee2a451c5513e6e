"""Fetch sessions (KIP-227) on real brokers (tests/support/cluster.py, in one Trio run):
a Kafka client's raw Fetch v12 sequence over TCP through the Kafka listener, and the
brokers' own followers replicating in incremental sessions (or without any when the
cache has no slots).
"""

from __future__ import annotations

import datetime

import pytest
from kio.schema.fetch.v12 import request as fetch_v12

from client.protocol.types import TopicPartition
from tests.support.cluster import open_test_cluster
from tests.unit.test_kafka_listener import (
    KAFKA_LISTENER,
    KafkaWire,
    kafka_batch,
    produce_request,
    read_records,
)

NONE = 0
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
PARTITIONS = 8


def fetch(
    offsets: dict[int, int],
    *,
    session_id: int = 0,
    epoch: int = 0,
    forgotten: tuple[int, ...] = (),
    topic: str = "t",
):
    """A v12 fetch of `topic`'s partitions at `offsets` ({partition: offset})."""
    return fetch_v12.FetchRequest(
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        session_id=session_id,
        session_epoch=epoch,
        topics=(
            fetch_v12.FetchTopic(
                topic=topic,
                partitions=tuple(
                    fetch_v12.FetchPartition(
                        partition=p, fetch_offset=offset, partition_max_bytes=1 << 20
                    )
                    for p, offset in offsets.items()
                ),
            ),
        )
        if offsets
        else (),
        forgotten_topics_data=(fetch_v12.ForgottenTopic(topic=topic, partitions=forgotten),)
        if forgotten
        else (),
    )


def answered(response) -> dict[int, object]:
    return {p.partition_index: p for t in response.responses for p in t.partitions}


async def test_a_kafka_client_fetches_in_an_incremental_session():
    async with open_test_cluster(
        1, topics={"t": PARTITIONS}, transport="tcp", broker_settings=dict(KAFKA_LISTENER)
    ) as cluster:
        sessions = cluster.brokers[1].server.handlers.fetch_sessions
        wire = await KafkaWire.open(cluster, 1)
        await wire.call(produce_request("t", 2, kafka_batch(b"before")))

        # A full fetch (epoch 0) creates a session and answers every partition.
        full = await wire.call(fetch(dict.fromkeys(range(PARTITIONS), 0)))
        assert full.error_code == NONE and full.session_id != 0
        session = full.session_id
        assert sorted(answered(full)) == list(range(PARTITIONS))
        assert [v for _, _, v, _ in read_records(answered(full)[2].records)] == [b"before"]

        # Incremental, partition 2 moved to offset 1: nothing new anywhere, no partitions.
        quiet = await wire.call(fetch({2: 1}, session_id=session, epoch=1))
        assert (quiet.error_code, quiet.session_id, quiet.responses) == (NONE, session, ())

        # A produce to partition 5: the next incremental fetch names nothing, and gets 5 only.
        await wire.call(produce_request("t", 5, kafka_batch(b"new")))
        news = answered(await wire.call(fetch({}, session_id=session, epoch=2)))
        assert list(news) == [5] and news[5].high_watermark == 1
        assert [v for _, _, v, _ in read_records(news[5].records)] == [b"new"]

        # Forgotten partitions are no longer read; the others still are.
        await wire.call(produce_request("t", 5, kafka_batch(b"unseen")))
        await wire.call(produce_request("t", 6, kafka_batch(b"seen")))
        later = answered(
            await wire.call(fetch({5: 1}, session_id=session, epoch=3, forgotten=(5,)))
        )
        assert list(later) == [6]

        # Session errors: a wrong epoch, an unknown id; the session survives the first.
        wrong = await wire.call(fetch({}, session_id=session, epoch=9))
        assert (wrong.error_code, wrong.responses) == (INVALID_FETCH_SESSION_EPOCH, ())
        unknown = 1 if session != 1 else 2
        missing = await wire.call(fetch({}, session_id=unknown, epoch=1))
        assert (missing.error_code, missing.session_id) == (FETCH_SESSION_ID_NOT_FOUND, 0)
        assert (await wire.call(fetch({6: 1}, session_id=session, epoch=4))).error_code == NONE

        # Epoch -1 closes it: a sessionless answer, and the session is gone.
        closed = await wire.call(fetch({0: 0}, session_id=session, epoch=-1))
        assert closed.session_id == 0 and list(answered(closed)) == [0]
        gone = await wire.call(fetch({}, session_id=session, epoch=5))
        assert gone.error_code == FETCH_SESSION_ID_NOT_FOUND
        assert len(sessions.cache) == 0
        assert sessions.served["incremental"] == 4 and sessions.served["error"] == 3
        await wire.aclose()


@pytest.mark.parametrize("slots", [1000, 0])
async def test_followers_replicate_every_partition_with_or_without_sessions(slots):
    settings = {"max.incremental.fetch.session.cache.slots": str(slots)}
    async with open_test_cluster(2, broker_settings=settings) as cluster:
        await cluster.create_topic("r", 40, assignment={p: [1, 2] for p in range(40)})
        leader = cluster.brokers[1].server
        sessions = leader.handlers.fetch_sessions
        for round_ in range(3):
            for p in range(0, 40, 3 + round_):
                await cluster.append(("r", p), b"v%d-%d" % (round_, p))
        follower = cluster.brokers[2].server.replica_manager

        def caught_up() -> bool:
            return all(
                follower.get_partition(TopicPartition("r", p)).log_end_offset
                == cluster.partition(("r", p)).log_end_offset
                for p in range(40)
            )

        await cluster.until(caught_up, "the follower has every record")
        for p in range(40):
            view = cluster.partition(("r", p))
            assert set(view.isr) == {1, 2}
        if slots:
            assert sessions.served["incremental"] > 0
            (session,) = sessions.cache.sessions.values()
            assert session.privileged and len(session.partitions) == 40
        else:
            assert sessions.served["incremental"] == 0 and len(sessions.cache) == 0
            assert sessions.served["full"] > 0
