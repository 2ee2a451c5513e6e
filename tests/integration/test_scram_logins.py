"""A user created with `tributary configs alter --entity-type users` logs in on every
broker at once, and after `--delete-config` it cannot (the issue's "Must show"), with
real processes: three brokers and a controller whose listeners, native and Kafka, are
all SASL_PLAINTEXT (SCRAM-SHA-512/256 and PLAIN; brokers and the controller log in to
each other with PLAIN from their JAAS configs).

Each broker is asked on its own (bootstrap = that broker only), with Tributary's client
on the native listener and confluent-kafka on the Kafka listener; how long after the CLI
returned each broker first accepted (and, after the deletion, first refused) the login
is printed, not asserted. Runs once the SASL listeners (sec-transport) are present.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import trio

from client.admin import open_admin
from client.protocol.errors import ErrorCode, TributaryError
from tests.integration.conftest import TEST_BROKER_SETTINGS, TEST_CONTROLLER_SETTINGS
from tests.integration.helpers import wait_until
from tools.cluster.launcher import LocalCluster

pytest.importorskip(
    "server_common.security.authenticator", reason="needs the SASL listeners (sec-transport)"
)
pytestmark = pytest.mark.integration

PLAIN_JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule required"
ADMIN_PASSWORD = "admin-plain-secret"
FRANK_PASSWORD = "frank-scram-secret"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    users = (
        f'user_broker="broker-secret" user_controller="controller-secret" '
        f'user_admin="{ADMIN_PASSWORD}"'
    )
    cluster = LocalCluster(
        tmp_path_factory.mktemp("scram-logins"),
        brokers=3,
        controllers=1,
        base_port=None,
        broker_overrides={
            **TEST_BROKER_SETTINGS,
            "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT,KAFKA:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.jaas.config": (
                f'{PLAIN_JAAS} username="broker" password="broker-secret" {users};'
            ),
        },
        controller_overrides={
            **TEST_CONTROLLER_SETTINGS,
            "security.inter.broker.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.jaas.config": f'{PLAIN_JAAS} username="controller" password="controller-secret";',
        },
    )
    try:
        cluster.up(timeout_s=90)
        yield cluster
    finally:
        cluster.down(timeout_s=20)


def configs(cluster: LocalCluster, properties, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable, "-m", "tools", "configs", *args,
            "--bootstrap-server", cluster.state.bootstrap_servers,
            "--command-config", str(properties),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip


def native_login(address: str, password: str) -> bool:
    """Whether frank logs in on that one broker's native listener with SCRAM-SHA-512."""

    async def login() -> bool:
        try:
            async with open_admin(
                address,
                security_protocol="SASL_PLAINTEXT",
                sasl_mechanism="SCRAM-SHA-512",
                sasl_plain_username="frank",
                sasl_plain_password=password,
            ):
                return True
        except TributaryError as e:
            if e.code == ErrorCode.SASL_AUTHENTICATION_FAILED:
                return False
            raise

    return trio.run(login)


def kafka_login(address: str, password: str) -> bool:
    """Whether frank logs in on that one broker's Kafka listener (confluent-kafka)."""
    from confluent_kafka.admin import AdminClient

    client = AdminClient(
        {
            "bootstrap.servers": address,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "frank",
            "sasl.password": password,
            "log_level": 0,  # a refused login is expected here: no librdkafka noise
        }
    )
    try:
        client.list_topics(timeout=5)
        return True
    except Exception:
        return False


def wait_for_every_broker(cluster, expect: bool, since: float) -> None:
    """Wait (bounded) until each broker's native listener answers frank's login as
    `expect`, print the slowest broker's delay, then check each Kafka listener too."""
    brokers = cluster.state.brokers()
    lags = []
    for broker in brokers:
        native = f"127.0.0.1:{broker.port}"
        wait_until(lambda: native_login(native, FRANK_PASSWORD) is expect, 30)  # noqa: B023
        lags.append(time.time() - since)
    verb = "accepts" if expect else "refuses"
    print(f"every broker {verb} frank {max(lags):.3f} s after the CLI returned")
    for broker in brokers:
        assert kafka_login(f"127.0.0.1:{broker.kafka_port}", FRANK_PASSWORD) is expect


def test_a_cli_user_logs_in_everywhere_and_not_after_its_deletion(cluster, tmp_path):
    properties = tmp_path / "admin.properties"
    properties.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        f'sasl.jaas.config={PLAIN_JAAS} username="admin" password="{ADMIN_PASSWORD}";\n'
    )
    first = cluster.state.brokers()[0]
    assert native_login(f"127.0.0.1:{first.port}", FRANK_PASSWORD) is False

    added = configs(
        cluster, properties, "alter", "--entity-type", "users", "--entity-name", "frank",
        "--add-config", f"SCRAM-SHA-512=[password={FRANK_PASSWORD}]",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    wait_for_every_broker(cluster, True, time.time())
    assert native_login(f"127.0.0.1:{first.port}", "not-the-password") is False

    deleted = configs(
        cluster, properties, "alter", "--entity-type", "users", "--entity-name", "frank",
        "--delete-config", "SCRAM-SHA-512",
    )  # fmt: skip
    assert deleted.returncode == 0, deleted.stderr
    wait_for_every_broker(cluster, False, time.time())
    for output in (added, deleted):
        assert FRANK_PASSWORD not in output.stdout + output.stderr
