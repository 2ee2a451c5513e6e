"""Client quotas through real brokers (tests/support/cluster.py, real TCP in one Trio run):
AlterClientQuotas and DescribeClientQuotas natively (the admin client) and on the Kafka
listener (kio requests), the znodes Kafka 2.8 writes, a user's SCRAM credentials and
quotas side by side in one znode, every broker applying a change live, a Kafka
client over its quota answered with `throttle_time` (broker/quota_gate.py) in every
response that has the field, and a throttled consumer fetch answered empty, as Kafka
2.8 answers it, on both listeners."""

from __future__ import annotations

import datetime
import json

import trio
from kio.schema.alter_client_quotas.v1 import request as alter_v1
from kio.schema.describe_client_quotas.v1 import request as describe_v1

from broker.core.quota_entities import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE
from client.admin import UserScramCredentialUpsertion, open_admin
from client.admin.quotas import ANY
from client.connection import open_connection
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.records import Record, build_batch
from tests.support.cluster import open_test_cluster
from tests.unit.test_kafka_listener import (
    KAFKA_LISTENER,
    KafkaWire,
    fetch_request,
    kafka_batch,
    list_offsets_request,
    metadata_request,
    only_partition,
    produce_request,
)


async def wait_for(predicate, timeout_s: float = 20) -> None:
    with trio.fail_after(timeout_s):
        while not predicate():
            await trio.sleep(0.02)


def applied(cluster, quota: str, user: str, client_id: str) -> set[float]:
    """The bound each broker applies to (user, client_id) for `quota`."""
    return {
        broker.server.quotas.configs.find(quota, user, client_id).bound
        for broker in cluster.brokers.values()
    }


async def test_quotas_are_altered_described_and_applied_on_every_broker():
    async with (
        open_test_cluster(2, transport="tcp") as cluster,
        open_admin(cluster.bootstrap, connector=cluster.connector()) as admin,
    ):
        # A user's SCRAM credential first: its quota goes into the same znode beside it.
        scram = await admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("alice", "SCRAM-SHA-512", "secret")]
        )
        assert scram == {"alice": None}
        assert (
            await admin.alter_client_quotas({"user": "alice"}, {PRODUCER_BYTE_RATE: 2048}) is None
        )
        assert (
            await admin.alter_client_quotas(
                {"user": "alice", "client-id": None}, {REQUEST_PERCENTAGE: 12.5}
            )
            is None
        )
        assert (
            await admin.alter_client_quotas({"client-id": None}, {PRODUCER_BYTE_RATE: 1e6}) is None
        )

        zk = cluster.brokers[1].server.gateway.zk
        data, _ = await zk.get("/config/users/alice")
        config = json.loads(data)["config"]
        assert config[PRODUCER_BYTE_RATE] == "2048" and "SCRAM-SHA-512" in config
        data, _ = await zk.get("/config/users/alice/clients/<default>")
        assert json.loads(data)["config"] == {REQUEST_PERCENTAGE: "12.5"}
        data, _ = await zk.get("/config/clients/<default>")
        assert json.loads(data)["config"] == {PRODUCER_BYTE_RATE: "1000000"}

        # The SCRAM credential is untouched, and describes still show it.
        described = await admin.describe_user_scram_credentials(["alice"])
        assert [c.mechanism for c in described["alice"]] == ["SCRAM-SHA-512"]

        everything = await admin.describe_client_quotas()
        assert everything == {
            (("user", "alice"),): {PRODUCER_BYTE_RATE: 2048.0},
            (("client-id", None), ("user", "alice")): {REQUEST_PERCENTAGE: 12.5},
            (("client-id", None),): {PRODUCER_BYTE_RATE: 1e6},
        }
        only_users = await admin.describe_client_quotas([("user", ANY)], strict=True)
        assert list(only_users) == [(("user", "alice"),)]
        default_clients = await admin.describe_client_quotas([("client-id", None)])
        assert len(default_clients) == 2  # strict=False: alice's user+client too

        # Every broker applies them live, with Kafka's precedence.
        await wait_for(lambda: applied(cluster, PRODUCER_BYTE_RATE, "alice", "app") == {2048})
        await wait_for(lambda: applied(cluster, PRODUCER_BYTE_RATE, "bob", "app") == {1e6})
        await wait_for(lambda: applied(cluster, REQUEST_PERCENTAGE, "alice", "x") == {12.5})

        # Removing a quota lifts it everywhere; the SCRAM credential stays.
        assert (
            await admin.alter_client_quotas({"user": "alice"}, remove=[PRODUCER_BYTE_RATE]) is None
        )
        await wait_for(lambda: applied(cluster, PRODUCER_BYTE_RATE, "alice", "app") == {1e6})
        data, _ = await zk.get("/config/users/alice")
        assert list(json.loads(data)["config"]) == ["SCRAM-SHA-512"]


async def test_bad_alterations_are_refused_with_invalid_request():
    async with (
        open_test_cluster(1, transport="tcp") as cluster,
        open_admin(cluster.bootstrap, connector=cluster.connector()) as admin,
    ):
        for entity, values in [
            ({"client-id": "c"}, {"no_such_quota": 1}),
            ({"client-id": "c"}, {PRODUCER_BYTE_RATE: 1.5}),  # byte rates are whole numbers
            ({"client-id": "c"}, {PRODUCER_BYTE_RATE: -1}),
            ({"ip": "1.2.3.4"}, {PRODUCER_BYTE_RATE: 1}),
            ({}, {PRODUCER_BYTE_RATE: 1}),
        ]:
            error = await admin.alter_client_quotas(entity, values)
            assert error is not None and error.code == ErrorCode.INVALID_REQUEST, (entity, error)
        assert await admin.describe_client_quotas() == {}
        # validate_only checks and writes nothing.
        assert (
            await admin.alter_client_quotas(
                {"client-id": "c"}, {PRODUCER_BYTE_RATE: 5}, validate_only=True
            )
            is None
        )
        assert await admin.describe_client_quotas() == {}


async def test_the_kafka_listener_alters_describes_and_throttles():
    async with open_test_cluster(
        1, topics={"t": 1}, transport="tcp", broker_settings=dict(KAFKA_LISTENER)
    ) as cluster:
        wire = await KafkaWire.open(cluster, 1)
        altered = await wire.call(
            alter_v1.AlterClientQuotasRequest(
                entries=(
                    alter_v1.EntryData(
                        entity=(
                            alter_v1.EntityData(
                                entity_type="client-id", entity_name="kafka-wire-test"
                            ),
                        ),
                        ops=(alter_v1.OpData(key=PRODUCER_BYTE_RATE, value=1000.0, remove=False),),
                    ),
                ),
                validate_only=False,
            )
        )
        assert [e.error_code.value for e in altered.entries] == [0]
        described = await wire.call(
            describe_v1.DescribeClientQuotasRequest(
                components=(
                    describe_v1.ComponentData(
                        entity_type="client-id", match_type=0, match="kafka-wire-test"
                    ),
                ),
                strict=False,
            )
        )
        assert described.error_code.value == 0
        (entry,) = described.entries
        assert [(e.entity_type, e.entity_name) for e in entry.entity] == [
            ("client-id", "kafka-wire-test")
        ]
        assert [(v.key, v.value) for v in entry.values] == [(PRODUCER_BYTE_RATE, 1000.0)]

        await wait_for(
            lambda: applied(cluster, PRODUCER_BYTE_RATE, "ANONYMOUS", "kafka-wire-test") == {1000}
        )
        # 11 kB at once against 1000 B/s (measured over 10 s at first: Kafka's): answered
        # (the records are written) with the time the client must wait, about a second,
        # and the broker holds the answer that long.
        response = await wire.call(produce_request("t", 0, kafka_batch(b"x" * 11_000), acks=1))
        assert only_partition(response).error_code.value == 0
        assert response.throttle_time > datetime.timedelta(0)
        await wire.aclose()


CLIENT = "kafka-wire-test"  # the client-id KafkaWire sends


def native_batch(size: int) -> bytes:
    return build_batch([Record(key=b"k", value=b"x" * size, timestamp_ms=0)])


def fetch_rate(cluster, client_id: str) -> float:
    """The consumer byte rate broker 1 measures for `client_id`'s quota."""
    server = cluster.brokers[1].server
    (sensor,) = [s for s in server.quotas.fetch.snapshot(server.now_ms()) if s.client_id]
    assert sensor.client_id == client_id
    return sensor.rate


async def test_a_throttled_kafka_fetch_is_answered_empty_and_not_counted():
    async with open_test_cluster(
        1, topics={"t": 1}, transport="tcp", broker_settings=dict(KAFKA_LISTENER)
    ) as cluster:
        async with open_admin(cluster.bootstrap) as admin:
            await admin.alter_client_quotas({"client-id": CLIENT}, {CONSUMER_BYTE_RATE: 1000})
        await wait_for(lambda: applied(cluster, CONSUMER_BYTE_RATE, "ANONYMOUS", CLIENT) == {1000})
        wire = await KafkaWire.open(cluster, 1)
        response = await wire.call(produce_request("t", 0, kafka_batch(b"x" * 6000), acks=1))
        assert only_partition(response).error_code.value == 0
        # About 6 kB against 1000 B/s, measured over 10 s at first: within the quota,
        # answered with the records.
        first = await wire.call(fetch_request("t", 0, 0))
        assert first.throttle_time == datetime.timedelta(0)
        assert len(only_partition(first).records) > 6000
        # The same 6 kB again takes the rate over the quota: Kafka 2.8 answers with no
        # partitions at all, error NONE, the throttle time, and takes the bytes back out
        # of the fetch quota (the client got none of them).
        # Asked as a full fetch opening a session: it gets none (Kafka's creates none).
        rate_before = fetch_rate(cluster, CLIENT)
        second = await wire.call(fetch_request("t", 0, 0, session_epoch=0))
        assert second.throttle_time > datetime.timedelta(0)
        assert second.error_code.value == 0
        assert second.responses == () and second.session_id == 0
        assert len(cluster.brokers[1].server.handlers.fetch_sessions.cache) == 0
        assert fetch_rate(cluster, CLIENT) <= rate_before
        await wire.aclose()


async def test_a_throttled_native_fetch_is_answered_empty():
    async with open_test_cluster(1, topics={"t": 1}, transport="tcp") as cluster:
        async with open_admin(cluster.bootstrap) as admin:
            await admin.alter_client_quotas({"client-id": "native"}, {CONSUMER_BYTE_RATE: 1000})
        await wait_for(
            lambda: applied(cluster, CONSUMER_BYTE_RATE, "ANONYMOUS", "native") == {1000}
        )
        host, port = cluster.brokers[1].address.rsplit(":", 1)
        async with open_connection(host, int(port), client_id="native") as conn:
            produced = await conn.request(
                m.ProduceRequest(
                    acks=1,
                    timeout_ms=10_000,
                    topics=[
                        m.ProduceTopic(
                            name="t",
                            partitions=[
                                m.ProducePartition(partition=0, records=native_batch(6000))
                            ],
                        )
                    ],
                ),
                timeout_s=10,
            )
            assert produced.topics[0].partitions[0].error_code == 0
            fetch = m.FetchRequest(
                replica_id=-1,
                max_wait_ms=0,
                min_bytes=1,
                max_bytes=1 << 20,
                topics=[
                    m.FetchTopic(
                        topic="t",
                        partitions=[
                            m.FetchPartition(
                                partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                            )
                        ],
                    )
                ],
            )
            first = await conn.request(fetch, timeout_s=10)
            assert first.throttle_time_ms == 0
            assert len(first.topics[0].partitions[0].records) > 6000
            second = await conn.request(fetch, timeout_s=10)
            assert second.throttle_time_ms > 0
            assert second.error_code == 0 and second.topics == []


async def test_request_quota_throttle_time_is_in_every_kafka_response_that_has_it():
    async with open_test_cluster(
        1, topics={"t": 1}, transport="tcp", broker_settings=dict(KAFKA_LISTENER)
    ) as cluster:
        async with open_admin(cluster.bootstrap) as admin:
            # A hundred-thousandth of one thread: the first request takes it over.
            await admin.alter_client_quotas({"client-id": CLIENT}, {REQUEST_PERCENTAGE: 0.00001})
        await wait_for(
            lambda: applied(cluster, REQUEST_PERCENTAGE, "ANONYMOUS", CLIENT) == {0.00001}
        )
        wire = await KafkaWire.open(cluster, 1)
        metadata = await wire.call(metadata_request(11, (None, "t")))
        assert metadata.throttle_time > datetime.timedelta(0)
        offsets = await wire.call(list_offsets_request("t", 0, -1))
        assert offsets.throttle_time > datetime.timedelta(0)
        # A request quota throttle is at most one window (Kafka's boundedThrottleTime).
        assert offsets.throttle_time <= datetime.timedelta(seconds=1)
        await wire.aclose()
