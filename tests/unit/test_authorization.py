"""Authorization on the in-process cluster (tests/support/cluster.py: real brokers and
controller), over the native protocol: ACLs created, described and deleted through the
admin client, and every kind of refusal a user meets (produce without Write, Metadata
hiding topics, a group without Read, the ACL APIs without Alter on the cluster).

Requests run as a principal through the test seam of tests/support/principals.py (a
client id `principal=User:bob;...`), as they will once connections authenticate.
"""

from __future__ import annotations

import contextlib

import pytest

from client.admin import Acl, AclFilter, NewTopic, open_admin
from client.connection import open_connection_pool
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
    return {t.name: {p.error_code for p in t.partitions} for t in response.topics}


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
