"""Users' SCRAM credentials through KIP-554's admin APIs: Kafka 2.8's checks (pure), then
against an in-process cluster of real brokers (tests/support/cluster.py, in-memory
ZooKeeper): the znodes and notifications as Kafka writes them, every broker's credential
cache following, logins with the SASL servers the listeners use, and Kafka's codes."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from broker.core.scram_users import check_alterations
from client.admin import (
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
    open_admin,
)
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.security.sasl_client import SaslClient
from server_common.security.sasl import SaslAuthenticationFailed, SaslServerFactory
from tests.support.cluster import open_test_cluster

SALT = b"0123456789abcdefghij"


def upsertion(name="bob", mechanism=m.SCRAM_SHA_512, iterations=4096, salt=SALT):
    return m.ScramCredentialUpsertion(
        name=name, mechanism=mechanism, iterations=iterations, salt=salt, salted_password=b"x"
    )


def test_the_checks_before_zookeeper_are_kafkas():
    request = m.AlterUserScramCredentialsRequest(
        deletions=[
            m.ScramCredentialDeletion(name="", mechanism=1),
            m.ScramCredentialDeletion(name="unknown-mech", mechanism=7),
            m.ScramCredentialDeletion(name="dup", mechanism=1),
        ],
        upsertions=[
            upsertion("few", iterations=4095),
            upsertion("many", iterations=16385),
            upsertion("short-salt", salt=b"short"),
            upsertion("dup", mechanism=m.SCRAM_SHA_256),
            upsertion("both", mechanism=m.SCRAM_SHA_256),
            upsertion("both", mechanism=m.SCRAM_SHA_512),
            upsertion("first-wins", iterations=1),
            upsertion("first-wins", iterations=1),
        ],
    )
    order, failures, changes = check_alterations(request)
    assert order == [
        "", "unknown-mech", "dup", "few", "many", "short-salt", "both", "first-wins"
    ]  # fmt: skip
    got = {user: (f.code, f.message) for user, f in failures.items()}
    assert got == {
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "unknown-mech": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "dup": (
            ErrorCode.DUPLICATE_RESOURCE,
            "A user credential cannot be altered twice in the same request",
        ),
        "few": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "many": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "short-salt": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt must be at least 12 bytes"),
        "first-wins": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
    }
    # Two mechanisms of one user in one request are fine in Kafka 2.8 (ZkAdminManager).
    assert list(changes) == ["both"] and len(changes["both"].upsertions) == 2


def expected_credential(mechanism: str, password: str, salt: bytes, iterations: int) -> str:
    """Kafka's ScramCredentialUtils string, derived here without the product code."""
    digest = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}[mechanism]
    salted = hashlib.pbkdf2_hmac(digest().name, password.encode(), salt, iterations)
    stored = digest(hmac.new(salted, b"Client Key", digest).digest()).digest()
    server = hmac.new(salted, b"Server Key", digest).digest()

    def b64(b: bytes) -> str:
        return base64.b64encode(b).decode()

    return (
        f"salt={b64(salt)},stored_key={b64(stored)},server_key={b64(server)},"
        f"iterations={iterations}"
    )


def login(server, mechanism: str, user: str, password: str) -> str:
    """Log in with the SASL server a listener would build over this broker's cache."""
    sasl = SaslServerFactory([mechanism], {}, server.user_credentials.cache).create(mechanism)
    client = SaslClient(mechanism, user, password)
    token: bytes | None = client.initial_response()
    while token is not None:
        token = client.evaluate(sasl.evaluate(token))
    return str(sasl.principal)


async def read_json(cluster, path: str):
    data, _ = await cluster.live()[0].server.gateway.zk.get(path)
    return json.loads(data)


async def test_a_user_is_created_described_and_deleted_on_every_broker(autojump_clock):
    user = "bob smith@example.com"  # sanitized in the znode name, as Kafka does
    async with (
        open_test_cluster(2) as cluster,
        open_admin(cluster.bootstrap, connector=cluster.connector()) as admin,
    ):
        zk = cluster.live()[0].server.gateway.zk
        before = set(await zk.get_children("/config/changes"))
        result = await admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(user, "SCRAM-SHA-512", "bob-secret", salt=SALT),
                UserScramCredentialUpsertion(
                    user, "SCRAM-SHA-256", "bob-secret", iterations=8192, salt=SALT
                ),
            ]
        )
        assert result == {user: None}
        path = "/config/users/bob%20smith%40example.com"
        assert await read_json(cluster, path) == {
            "version": 1,
            "config": {
                "SCRAM-SHA-512": expected_credential("SCRAM-SHA-512", "bob-secret", SALT, 4096),
                "SCRAM-SHA-256": expected_credential("SCRAM-SHA-256", "bob-secret", SALT, 8192),
            },
        }
        (change,) = set(await zk.get_children("/config/changes")) - before
        assert change.startswith("config_change_")
        assert await read_json(cluster, f"/config/changes/{change}") == {
            "version": 2,
            "entity_path": "users/bob%20smith%40example.com",
        }
        brokers = [b.server for b in cluster.live()]
        await cluster.until(
            lambda: all(s.user_credentials.cache.users().get(user) for s in brokers),
            "every broker's cache has the user",
        )
        for server in brokers:
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                assert login(server, mechanism, user, "bob-secret") == f"User:{user}"
                with pytest.raises(SaslAuthenticationFailed):
                    login(server, mechanism, user, "wrong")

        described = await admin.describe_user_scram_credentials()
        assert described == {
            user: [
                ScramCredentialInfo("SCRAM-SHA-256", 8192),
                ScramCredentialInfo("SCRAM-SHA-512", 4096),
            ]
        }
        described = await admin.describe_user_scram_credentials([user, "nobody"])
        assert described[user] == [
            ScramCredentialInfo("SCRAM-SHA-256", 8192),
            ScramCredentialInfo("SCRAM-SHA-512", 4096),
        ]
        assert described["nobody"].code is ErrorCode.RESOURCE_NOT_FOUND
        dup = await admin.describe_user_scram_credentials(["x", "x"])
        assert dup["x"].code is ErrorCode.DUPLICATE_RESOURCE

        result = await admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion(user, "SCRAM-SHA-512")]
        )
        assert result == {user: None}
        await cluster.until(
            lambda: all(
                s.user_credentials.cache.users().get(user) == ["SCRAM-SHA-256"] for s in brokers
            ),
            "every broker dropped SCRAM-SHA-512",
        )
        with pytest.raises(SaslAuthenticationFailed):
            login(brokers[1], "SCRAM-SHA-512", user, "bob-secret")
        assert login(brokers[1], "SCRAM-SHA-256", user, "bob-secret") == f"User:{user}"

        missing = await admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion(user, "SCRAM-SHA-512")]
        )
        assert missing[user].code is ErrorCode.RESOURCE_NOT_FOUND
        await admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion(user, "SCRAM-SHA-256")]
        )
        await cluster.until(
            lambda: all(user not in s.user_credentials.cache.users() for s in brokers),
            "every broker dropped the user",
        )
        assert await admin.describe_user_scram_credentials() == {}
        assert (await read_json(cluster, path))["config"] == {}


async def test_bad_alterations_get_kafkas_codes_and_write_nothing(autojump_clock):
    async with (
        open_test_cluster(1) as cluster,
        open_admin(cluster.bootstrap, connector=cluster.connector()) as admin,
    ):
        result = await admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion("few", "SCRAM-SHA-256", "pw", iterations=100),
                UserScramCredentialUpsertion("many", "SCRAM-SHA-256", "pw", iterations=10**9),
                UserScramCredentialUpsertion("mech", "SCRAM-SHA-1", "pw"),
                UserScramCredentialUpsertion("", "SCRAM-SHA-256", "pw"),
            ]
        )
        codes = {user: (error.code if error else None) for user, error in result.items()}
        assert codes == {
            "few": ErrorCode.UNACCEPTABLE_CREDENTIAL,
            "many": ErrorCode.UNACCEPTABLE_CREDENTIAL,
            "mech": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
            "": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        }
        zk = cluster.live()[0].server.gateway.zk
        assert await zk.get_children_or_empty("/config/users") == []


async def test_hostile_names_and_values_get_clear_codes_and_stay_inside_config_users(
    autojump_clock,
):
    async with (
        open_test_cluster(1) as cluster,
        open_admin(cluster.bootstrap, connector=cluster.connector()) as admin,
    ):
        zk = cluster.live()[0].server.gateway.zk

        async def alter(**fields) -> list[tuple[str, int, str | None]]:
            values = dict(
                name="h", mechanism=1, iterations=4096, salt=SALT, salted_password=b"p" * 32
            )
            values.update(fields)
            request = m.AlterUserScramCredentialsRequest(
                upsertions=[m.ScramCredentialUpsertion(**values)]
            )
            response = await admin._request_any(request)
            return [(r.user, r.error_code, r.error_message) for r in response.results]

        assert await alter(name=".") == [(".", 93, "Username must not be . or ..")]
        assert await alter(name="..") == [("..", 93, "Username must not be . or ..")]
        assert await alter(mechanism=-5) == [("h", 33, "Unknown SCRAM mechanism")]
        assert await alter(mechanism=300) == [("h", 33, "Unknown SCRAM mechanism")]
        assert await alter(iterations=-1) == [("h", 93, "Too few iterations")]
        assert await alter(salted_password=b"") == [("h", 93, "Salted password must not be empty")]
        for name in ("a/b", "zoo/../keeper", "\x00", "ü"):
            assert await alter(name=name) == [(name, 0, None)]
        assert sorted(await zk.get_children("/config/users")) == [
            "%00", "%C3%BC", "a%2Fb", "zoo%2F..%2Fkeeper"
        ]  # fmt: skip
        described = await admin.describe_user_scram_credentials([".", "a/b"])
        assert described["."].code is ErrorCode.RESOURCE_NOT_FOUND
        assert described["a/b"] == [ScramCredentialInfo("SCRAM-SHA-256", 4096)]
        assert set(await admin.describe_user_scram_credentials()) == {
            "a/b", "zoo/../keeper", "\x00", "ü"
        }  # fmt: skip


async def test_kafka_listener_translates_both_apis():
    """kio-encoded AlterUserScramCredentials v0 and DescribeUserScramCredentials v0 over a
    real socket to the Kafka listener: the same checks, znodes and answers."""
    from kio.schema.alter_user_scram_credentials.v0 import request as alter_v0
    from kio.schema.describe_user_scram_credentials.v0 import request as describe_v0
    from kio.static.primitive import i8, i32

    from tests.unit.test_kafka_listener import KafkaWire, kafka_cluster

    salted = hashlib.pbkdf2_hmac("sha512", b"k-secret", SALT, 4096)
    async with kafka_cluster(1) as cluster:
        wire = await KafkaWire.open(cluster, 1)
        altered = await wire.call(
            alter_v0.AlterUserScramCredentialsRequest(
                deletions=(alter_v0.ScramCredentialDeletion(name="nobody", mechanism=i8(1)),),
                upsertions=(
                    alter_v0.ScramCredentialUpsertion(
                        name="kim",
                        mechanism=i8(2),
                        iterations=i32(4096),
                        salt=SALT,
                        salted_password=salted,
                    ),
                    alter_v0.ScramCredentialUpsertion(
                        name="few",
                        mechanism=i8(1),
                        iterations=i32(10),
                        salt=SALT,
                        salted_password=salted,
                    ),
                ),
            )
        )
        results = {r.user: (r.error_code.value, r.error_message) for r in altered.results}
        assert results == {
            "nobody": (91, "Attempt to delete a user credential that does not exist"),
            "kim": (0, None),
            "few": (93, "Too few iterations"),
        }
        assert (await read_json(cluster, "/config/users/kim"))["config"] == {
            "SCRAM-SHA-512": expected_credential("SCRAM-SHA-512", "k-secret", SALT, 4096)
        }
        described = await wire.call(
            describe_v0.DescribeUserScramCredentialsRequest(
                users=(
                    describe_v0.UserName(name="kim"),
                    describe_v0.UserName(name="nobody"),
                )
            )
        )
        assert described.error_code.value == 0
        answers = {
            r.user: (r.error_code.value, [(c.mechanism, c.iterations) for c in r.credential_infos])
            for r in described.results
        }
        assert answers == {"kim": (0, [(2, 4096)]), "nobody": (91, [])}
        everyone = await wire.call(describe_v0.DescribeUserScramCredentialsRequest(users=None))
        assert [r.user for r in everyone.results] == ["kim"]
