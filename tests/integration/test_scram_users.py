"""Users' SCRAM credentials on a real 3-broker cluster (real ZooKeeper, real processes):
`tributary configs --entity-type users` through the native listener, and confluent-kafka's
and kafka-python 3's `alter_user_scram_credentials` / `describe_user_scram_credentials`
through the Kafka listener.

What is checked: the znode /config/users/<user> and its /config/changes notification are
Kafka 2.8's (the credential string equals one derived here, independently, from the
salt a real Kafka client sent); every broker's credential cache (what SCRAM logins are
checked against) takes a new user and drops a deleted one, seen in each broker's log
line for it (the time each took is printed, not asserted); no password ever reaches a
broker's log or the CLI's output.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.integration.conftest import running_cluster
from tests.integration.helpers import wait_until
from tools.cluster.launcher import LocalCluster

pytestmark = pytest.mark.integration

SECRET = "Sc4m-s3cret-value"
SALT = b"kafka-client-salt-0123"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("scram-users")) as cluster:
        yield cluster


def tributary(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tools", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def read_zk_json(cluster: LocalCluster, path: str) -> dict:
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=cluster.state.zookeeper_connect)
    zk.start(timeout=20)
    try:
        data, _ = zk.get(path)
        return json.loads(data)
    finally:
        zk.stop()
        zk.close()


def expected_credential(mechanism: str, password: str, salt: bytes, iterations: int) -> str:
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


def broker_logs(cluster: LocalCluster) -> list[Path]:
    return [Path(b.log_path) for b in cluster.state.brokers()]


def cache_line_times(cluster: LocalCluster, user: str, mechanisms: list[str]) -> list[float]:
    """When each broker logged that its cache holds exactly `mechanisms` for `user`
    (the latest such line); empty while a broker has not."""
    wanted = f"user {user}: SCRAM credentials now {mechanisms}"
    times = []
    for path in broker_logs(cluster):
        found = [line for line in path.read_text(errors="replace").splitlines() if wanted in line]
        if not found:
            return []
        stamp = re.match(r"(\S+ \S+)", found[-1]).group(1)
        times.append(datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp())
    return times


def wait_for_every_cache(cluster, user: str, mechanisms: list[str], since: float) -> None:
    """Wait (bounded, generously) until every broker logged the change after `since`;
    print how long the slowest took."""

    def logged_by_all() -> list[float] | None:
        times = cache_line_times(cluster, user, mechanisms)
        # Log stamps have millisecond resolution: a line logged at `since` may read lower.
        return times if times and min(times) >= since - 0.01 else None

    times = wait_until(logged_by_all, 30)
    print(f"{user} {mechanisms}: in every broker's cache {max(times) - since:.3f} s after")


def test_cli_user_reaches_every_broker_and_deletion_removes_it(cluster):
    bootstrap = cluster.state.bootstrap_servers
    before = time.time()
    done = tributary(
        "configs", "alter", "--entity-type", "users", "--entity-name", "carol",
        "--add-config", f"SCRAM-SHA-512=[password={SECRET}]",
        "--bootstrap-server", bootstrap,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Completed updating config for user carol.\n"
    wait_for_every_cache(cluster, "carol", ["SCRAM-SHA-512"], before)

    stored = read_zk_json(cluster, "/config/users/carol")
    assert stored["version"] == 1 and list(stored["config"]) == ["SCRAM-SHA-512"]
    value = stored["config"]["SCRAM-SHA-512"]
    assert re.fullmatch(
        r"salt=[A-Za-z0-9+/=]+,stored_key=[A-Za-z0-9+/=]+,server_key=[A-Za-z0-9+/=]+,"
        r"iterations=4096",
        value,
    )
    salt = base64.b64decode(value.split(",")[0].removeprefix("salt="))
    assert value == expected_credential("SCRAM-SHA-512", SECRET, salt, 4096)

    described = tributary(
        "configs", "describe", "--entity-type", "users", "--entity-name", "carol",
        "--bootstrap-server", bootstrap,
    )  # fmt: skip
    assert described.stdout == (
        "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-512=iterations=4096\n"
    )

    before = time.time()
    deleted = tributary(
        "configs", "alter", "--entity-type", "users", "--entity-name", "carol",
        "--delete-config", "SCRAM-SHA-512", "--bootstrap-server", bootstrap,
    )  # fmt: skip
    assert deleted.returncode == 0, deleted.stderr
    wait_for_every_cache(cluster, "carol", [], before)
    assert read_zk_json(cluster, "/config/users/carol") == {"version": 1, "config": {}}
    for output in (done, described, deleted):
        assert SECRET not in output.stdout + output.stderr
    for path in broker_logs(cluster):
        assert SECRET not in path.read_text(errors="replace")


def test_confluent_kafka_alters_and_describes_through_the_kafka_listener(cluster):
    confluent_admin = pytest.importorskip("confluent_kafka.admin")
    admin = confluent_admin.AdminClient(
        {"bootstrap.servers": cluster.state.kafka_bootstrap_servers}
    )
    Info = confluent_admin.ScramCredentialInfo
    Mechanism = confluent_admin.ScramMechanism
    upserts = [
        confluent_admin.UserScramCredentialUpsertion(
            "dave", Info(Mechanism.SCRAM_SHA_256, 8192), SECRET.encode(), SALT
        ),
        confluent_admin.UserScramCredentialUpsertion(
            "dave", Info(Mechanism.SCRAM_SHA_512, 4096), SECRET.encode(), SALT
        ),
    ]
    before = time.time()
    futures = admin.alter_user_scram_credentials(upserts, request_timeout=30)
    assert futures["dave"].result(timeout=30) is None
    # The broker stored exactly what Kafka would for the salt the client chose.
    assert read_zk_json(cluster, "/config/users/dave") == {
        "version": 1,
        "config": {
            "SCRAM-SHA-256": expected_credential("SCRAM-SHA-256", SECRET, SALT, 8192),
            "SCRAM-SHA-512": expected_credential("SCRAM-SHA-512", SECRET, SALT, 4096),
        },
    }
    wait_for_every_cache(cluster, "dave", ["SCRAM-SHA-256", "SCRAM-SHA-512"], before)

    described = admin.describe_user_scram_credentials(["dave"], request_timeout=30)
    description = described["dave"].result(timeout=30)
    assert sorted((i.mechanism, i.iterations) for i in description.scram_credential_infos) == [
        (Mechanism.SCRAM_SHA_256, 8192),
        (Mechanism.SCRAM_SHA_512, 4096),
    ]
    everyone = admin.describe_user_scram_credentials(request_timeout=30).result(timeout=30)
    assert "dave" in everyone

    futures = admin.alter_user_scram_credentials(
        [confluent_admin.UserScramCredentialDeletion("dave", Mechanism.SCRAM_SHA_256)],
        request_timeout=30,
    )
    assert futures["dave"].result(timeout=30) is None
    futures = admin.alter_user_scram_credentials(
        [confluent_admin.UserScramCredentialDeletion("dave", Mechanism.SCRAM_SHA_256)],
        request_timeout=30,
    )
    with pytest.raises(Exception, match="RESOURCE_NOT_FOUND|does not exist"):
        futures["dave"].result(timeout=30)
    missing = admin.describe_user_scram_credentials(["nobody"], request_timeout=30)
    with pytest.raises(Exception, match="RESOURCE_NOT_FOUND|does not exist"):
        missing["nobody"].result(timeout=30)


def test_kafka_python_alters_and_describes_through_the_kafka_listener(cluster):
    kafka_admin = pytest.importorskip("kafka.admin")
    admin = kafka_admin.KafkaAdminClient(
        bootstrap_servers=cluster.state.kafka_bootstrap_servers.split(","),
        request_timeout_ms=30_000,
    )
    try:
        from kafka.admin._users import (
            ScramMechanism,
            UserScramCredentialDeletion,
            UserScramCredentialUpsertion,
        )

        result = admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("erin", "SCRAM-SHA-256", SECRET, salt=SALT)]
        )
        assert result == {"erin": None}
        assert read_zk_json(cluster, "/config/users/erin")["config"] == {
            "SCRAM-SHA-256": expected_credential("SCRAM-SHA-256", SECRET, SALT, 4096)
        }
        described = admin.describe_user_scram_credentials(["erin"])
        assert described == {
            "erin": {
                "error": None,
                "credential_infos": [
                    {"mechanism": ScramMechanism.SCRAM_SHA_256, "iterations": 4096}
                ],
            }
        }
        refused = admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("erin", "SCRAM-SHA-512", SECRET, iterations=20000)]
        )
        assert refused == {"erin": "Too many iterations"}
        result = admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("erin", "SCRAM-SHA-256")]
        )
        assert result == {"erin": None}
    finally:
        admin.close()
