"""Authorization on the in-process cluster (tests/support/cluster.py: real brokers and
controller), over the native protocol: ACLs created, described and deleted through the
admin client, and every kind of refusal a user meets (produce without Write, Metadata
hiding topics, a group without Read, the ACL APIs without Alter on the cluster).

Requests run as a principal through the test seam of tests/support/principals.py (a
client id `principal=User:bob;...`), as they will once connections authenticate.
"""

from __future__ import annotations

import contextlib
import json

import pytest
import trio

from client.admin import Acl, AclFilter, NewTopic, open_admin
from client.connection import open_connection_pool
from client.consumer import open_consumer
from client.producer import open_producer
from client.protocol import messages as m
from client.protocol.acl_types import AclOperation, PatternType, PermissionType, ResourceType
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.records import Record, build_batch
from tests.support.cluster import open_test_cluster
from tests.support.principals import client_id_for

AUTHORIZER = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:admin",
    # The brokers' and controller's own requests (ANONYMOUS on the inter-broker listener).
    "authorizer.inter.broker.listener.super.user": "true",
}
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
Op = AclOperation


@contextlib.asynccontextmanager
async def secured(brokers: int = 1, **settings: str):
    async with (
        open_test_cluster(brokers, broker_settings={**AUTHORIZER, **settings}) as cluster,
        open_admin(
            cluster.bootstrap,
            connector=cluster.connector(),
            client_id=client_id_for("User:admin"),
        ) as admin,
    ):
        for error in (
            await admin.create_topics([NewTopic("orders", 2, 1), NewTopic("secret", 1, 1)])
        ).values():
            assert error is None
        yield cluster, admin


@contextlib.asynccontextmanager
async def as_user(cluster, principal: str):
    """A request function sending to broker 1 as `principal`."""
    async with open_connection_pool(
        client_id=client_id_for(principal), connector=cluster.connector()
    ) as pool:
        broker = cluster.brokers[1]

        async def send(request):
            return await pool.request(broker.host, broker.port, request, timeout_s=30)

        yield send


RECORDS = build_batch([Record(None, b"v", 1_000)])


def produce(*topics: str) -> m.ProduceRequest:
    return m.ProduceRequest(
        acks=1,
        timeout_ms=10_000,
        topics=[
            m.ProduceTopic(name=t, partitions=[m.ProducePartition(partition=0, records=RECORDS)])
            for t in topics
        ],
    )


def codes(response) -> dict[str, set[int]]:
    def name(t):
        return getattr(t, "name", None) or t.topic

    return {name(t): {p.error_code for p in t.partitions} for t in response.topics}


async def test_write_acl_lets_bob_produce_to_one_topic_and_not_the_other(autojump_clock):
    async with secured() as (cluster, admin):
        assert await admin.create_acls([Acl(TOPIC, "orders", "User:bob", Op.WRITE)]) == [None]
        async with as_user(cluster, "User:bob") as bob:
            response = await bob(produce("orders", "secret"))
        assert codes(response) == {
            "orders": {ErrorCode.NONE},
            "secret": {ErrorCode.TOPIC_AUTHORIZATION_FAILED},
        }
        async with as_user(cluster, "User:carol") as carol:
            refused = await carol(produce("orders"))
        assert codes(refused) == {"orders": {ErrorCode.TOPIC_AUTHORIZATION_FAILED}}
        # Counted (tributary_authorization_denied_total) and logged.
        assert (
            "tributary_authorization_denied_total 2" in cluster.brokers[1].server.metrics.render()
        )
        # And written to the broker's events.jsonl, one event per (principal, resource,
        # operation) (tests/unit/test_denial_events.py: the rate limit).
        lines = (cluster.brokers[1].log_dir / "events.jsonl").read_text().splitlines()
        denied = [e for e in map(json.loads, lines) if e["event"] == "authorization_denied"]
        assert sorted((e["principal"], e["resource_name"], e["operation"]) for e in denied) == [
            ("User:bob", "secret", "Write"),
            ("User:carol", "orders", "Write"),
        ]
        assert all(e["resource_type"] == "Topic" and e["address"] for e in denied)


async def test_metadata_hides_topics_bob_may_not_describe(autojump_clock):
    async with secured() as (cluster, admin):
        await admin.create_acls(
            [Acl(TOPIC, "ord", "User:bob", Op.READ, pattern_type=PatternType.PREFIXED)]
        )
        async with as_user(cluster, "User:bob") as bob:
            everything = await bob(m.MetadataRequest(topics=None))
            named = await bob(m.MetadataRequest(topics=["orders", "secret"]))
            auto = await bob(m.MetadataRequest(topics=["ord-new"], allow_auto_topic_creation=True))
        assert [t.name for t in everything.topics] == ["orders"]
        by_name = {t.name: t.error_code for t in named.topics}
        assert by_name == {"orders": ErrorCode.NONE, "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
        # Describe (implied by Read) but no Create: not auto-created.
        assert [(t.name, t.error_code) for t in auto.topics] == [
            ("ord-new", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        ]
        assert "ord-new" not in await admin.list_topics()
        # Counted: the named "secret" and the Create on "ord-new"; not what the
        # all-topics answer left out, nor the Create on the cluster tried first.
        metrics = cluster.brokers[1].server.metrics.render()
        assert "tributary_authorization_denied_total 2" in metrics


async def test_a_group_without_read_is_refused(autojump_clock):
    async with secured() as (cluster, admin):
        await admin.create_acls(
            [
                Acl(TOPIC, "orders", "User:bob", Op.READ),
                Acl(GROUP, "mine", "User:bob", Op.READ),
            ]
        )
        async with as_user(cluster, "User:bob") as bob:
            found = await bob(m.FindCoordinatorRequest(key="mine"))
            # Allowed: answered (COORDINATOR_NOT_AVAILABLE while __consumer_offsets is new).
            assert found.error_code in (ErrorCode.NONE, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            refused = await bob(m.FindCoordinatorRequest(key="theirs"))
            assert refused.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
            with pytest.raises(TributaryError) as join:
                await bob(
                    m.JoinGroupRequest(
                        group_id="theirs",
                        session_timeout_ms=10_000,
                        rebalance_timeout_ms=10_000,
                        member_id="",
                        protocol_type="consumer",
                        protocols=[m.JoinGroupProtocol(name="range", metadata=b"")],
                    )
                )
            assert join.value.code is ErrorCode.GROUP_AUTHORIZATION_FAILED
            commit = await bob(
                m.OffsetCommitRequest(
                    group_id="theirs",
                    topics=[
                        m.OffsetCommitTopic(
                            name="orders",
                            partitions=[
                                m.OffsetCommitPartition(partition_index=0, committed_offset=0)
                            ],
                        )
                    ],
                )
            )
            assert commit.topics[0].partitions[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
            fetched = await bob(m.OffsetFetchRequest(group_id="theirs", topics=None))
            assert fetched.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED


async def test_acl_apis_need_the_cluster_and_deleting_revokes(autojump_clock):
    async with secured() as (cluster, admin):
        acls = [
            Acl(TOPIC, "orders", "User:bob", Op.WRITE),
            Acl(TOPIC, "*", "User:*", Op.DESCRIBE, host="10.0.0.9"),
            Acl(
                GROUP,
                "g-",
                "User:bob",
                Op.READ,
                PermissionType.DENY,
                pattern_type=PatternType.PREFIXED,
            ),
        ]
        assert await admin.create_acls(acls) == [None, None, None]
        assert set(await admin.describe_acls()) == set(acls)
        # MATCH: what applies to topic "orders" (its literal ACL and the literal "*").
        matching = await admin.describe_acls(AclFilter(TOPIC, "orders", PatternType.MATCH))
        assert set(matching) == {acls[0], acls[1]}
        bad = await admin.create_acls([Acl(ResourceType.CLUSTER, "c", "User:bob", Op.ALTER)])
        assert bad[0] is not None and bad[0].code is ErrorCode.INVALID_REQUEST

        async with as_user(cluster, "User:bob") as bob:
            with pytest.raises(TributaryError) as denied:
                await bob(m.CreateAclsRequest(creations=[]))
            assert denied.value.code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            assert codes(await bob(produce("orders"))) == {"orders": {ErrorCode.NONE}}

            deleted = await admin.delete_acls([AclFilter(TOPIC, "orders", principal="User:bob")])
            assert deleted == [[acls[0]]]
            assert codes(await bob(produce("orders"))) == {
                "orders": {ErrorCode.TOPIC_AUTHORIZATION_FAILED}
            }
        assert set(await admin.describe_acls()) == {acls[1], acls[2]}


async def test_without_an_authorizer_acl_apis_are_security_disabled(autojump_clock):
    async with (
        open_test_cluster(1) as cluster,
        open_admin(cluster.bootstrap, connector=cluster.connector()) as admin,
    ):
        with pytest.raises(TributaryError) as disabled:
            await admin.describe_acls()
        assert disabled.value.code is ErrorCode.SECURITY_DISABLED
        results = await admin.create_acls([Acl(TOPIC, "t", "User:bob", Op.READ)])
        assert results[0] is not None and results[0].code is ErrorCode.SECURITY_DISABLED


def fetch(*, session_id=0, epoch=-1, topics=("orders",), replica_id=-1) -> m.FetchRequest:
    return m.FetchRequest(
        replica_id=replica_id,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        session_id=session_id,
        session_epoch=epoch,
        topics=[
            m.FetchTopic(
                topic=t,
                partitions=[
                    m.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
                ],
            )
            for t in topics
        ],
    )


async def test_fetch_sessions_follower_fetches_and_producer_ids(autojump_clock):
    async with secured() as (cluster, admin):
        await admin.create_acls([Acl(TOPIC, "orders", "User:bob", Op.READ)])
        async with as_user(cluster, "User:bob") as bob:
            opened = await bob(fetch(epoch=0, topics=("orders", "secret")))
            assert codes(opened) == {
                "orders": {ErrorCode.NONE},
                "secret": {ErrorCode.TOPIC_AUTHORIZATION_FAILED},
            }
            assert opened.session_id != 0
            # The ACL goes: the session's partition is refused in the next incremental fetch.
            await admin.delete_acls([AclFilter(TOPIC, "orders")])
            await bob(produce("orders"))  # refused, but something for the session to read
            async with as_user(cluster, "User:admin") as admin_requests:
                await admin_requests(produce("orders"))
            later = await bob(fetch(session_id=opened.session_id, epoch=1, topics=()))
            assert codes(later) == {"orders": {ErrorCode.TOPIC_AUTHORIZATION_FAILED}}
            assert all(p.records == b"" for t in later.topics for p in t.partitions)

            unknown_id = await bob(
                m.FetchRequest(
                    replica_id=-1,
                    max_wait_ms=0,
                    min_bytes=0,
                    max_bytes=1 << 20,
                    topics=[
                        m.FetchTopic(
                            topic="",
                            topic_id=b"\x01" * 16,
                            partitions=[
                                m.FetchPartition(
                                    partition=0, fetch_offset=0, partition_max_bytes=1024
                                )
                            ],
                        )
                    ],
                )
            )  # an id no topic has: UNKNOWN_TOPIC_ID, whoever asks
            assert unknown_id.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
            follower = await bob(fetch(replica_id=7))
            assert follower.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            # Neither IdempotentWrite on the cluster nor Write on any topic (KIP-679).
            ids = await bob(m.InitProducerIdRequest())
            assert ids.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        await admin.create_acls(
            [
                Acl(ResourceType.CLUSTER, "kafka-cluster", "User:bob", Op.IDEMPOTENT_WRITE),
                Acl(TOPIC, "orders", "User:carol", Op.WRITE),
            ]
        )
        for user in ("User:bob", "User:carol"):
            async with as_user(cluster, user) as requests:
                ids = await requests(m.InitProducerIdRequest())
            assert ids.error_code == ErrorCode.NONE and ids.producer_id >= 0


async def test_topic_admin_needs_create_delete_and_alter(autojump_clock):
    async with secured() as (cluster, admin):
        await admin.create_acls(
            [
                Acl(TOPIC, "new-", "User:bob", Op.CREATE, pattern_type=PatternType.PREFIXED),
                Acl(TOPIC, "orders", "User:bob", Op.ALTER_CONFIGS),
            ]
        )
        async with as_user(cluster, "User:bob") as bob:
            created = await bob(
                m.CreateTopicsRequest(
                    topics=[
                        m.CreateTopicsTopic(name="new-1", num_partitions=1, replication_factor=1),
                        m.CreateTopicsTopic(name="other", num_partitions=1, replication_factor=1),
                    ],
                    timeout_ms=10_000,
                )
            )
            assert {t.name: t.error_code for t in created.topics} == {
                "new-1": ErrorCode.NONE,
                "other": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            }
            deleted = await bob(m.DeleteTopicsRequest(topic_names=["orders"], timeout_ms=10_000))
            assert deleted.responses[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            described = await bob(
                m.DescribeConfigsRequest(
                    resources=[
                        m.DescribeConfigsResource(resource_type=2, resource_name="orders"),
                        m.DescribeConfigsResource(resource_type=2, resource_name="secret"),
                        m.DescribeConfigsResource(resource_type=4, resource_name=""),
                    ]
                )
            )
            assert {r.resource_name: r.error_code for r in described.results} == {
                "orders": ErrorCode.NONE,  # AlterConfigs implies DescribeConfigs
                "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                "": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            }
            with pytest.raises(TributaryError) as elect:
                await bob(m.ElectLeadersRequest(topic_partitions=None, timeout_ms=1000))
            assert elect.value.code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert "new-1" in await admin.list_topics()


async def test_the_client_library_reports_refusals_at_once(autojump_clock):
    """Tributary's producer and consumer surface the refusals as Kafka's clients do
    (TopicAuthorizationException, GroupAuthorizationException), without waiting for
    metadata that never comes."""
    async with secured() as (cluster, admin):
        await admin.create_acls([Acl(TOPIC, "orders", "User:bob", Op.READ)])
        bob = {"connector": cluster.connector(), "client_id": client_id_for("User:bob")}
        with trio.fail_after(10):
            async with open_producer(cluster.bootstrap, **bob) as producer:
                with pytest.raises(TributaryError) as produced:
                    await producer.send("secret", b"x")
            assert produced.value.code is ErrorCode.TOPIC_AUTHORIZATION_FAILED
            assert "not authorized to access topic 'secret'" in str(produced.value)

            async with open_consumer(cluster.bootstrap, **bob) as consumer:
                consumer.assign([("secret", 0)])
                consumer.seek(("secret", 0), 0)
                with pytest.raises(TributaryError) as read:
                    while True:
                        await consumer.poll(1000)
            assert read.value.code is ErrorCode.TOPIC_AUTHORIZATION_FAILED

            with pytest.raises(TributaryError) as grouped:
                async with open_consumer(cluster.bootstrap, group_id="theirs", **bob) as consumer:
                    consumer.subscribe(["orders"])
                    while True:
                        await consumer.poll(1000)
            assert grouped.value.code is ErrorCode.GROUP_AUTHORIZATION_FAILED


def test_every_api_a_broker_serves_has_an_authorization_rule():
    """A new API must say which operation it needs: one left out of the table would be
    served to anyone. Exempt: ApiVersions (answered to anyone, as Kafka does), the SASL
    exchange (before authentication, in the connection loop) and ControlledShutdown (the
    controller's, not a broker's)."""
    from broker.handlers.authorization import _RULES
    from client.protocol.api import ApiKey
    from client.protocol.messages.registry import REGISTRY

    exempt = {ApiKey.API_VERSIONS, ApiKey.CONTROLLED_SHUTDOWN}
    exempt |= {key for key in ApiKey if key.name.startswith("SASL_")}
    missing = [ApiKey(k).name for k in REGISTRY.supported() if k not in _RULES and k not in exempt]
    assert missing == []
