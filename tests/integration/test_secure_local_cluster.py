"""`tributary cluster up --secure` through the CLI, with real processes: three brokers
and a controller whose every listener is SASL_SSL with the cluster's own CA, the
authorizer on. The CLI works against it with no extra flag (admin.properties, 0600, by
itself); confluent-kafka works with those properties; a client without credentials, or
a user without ACLs, is refused; `cluster down` leaves no process behind (by pid)."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import confluent_kafka
import pytest
import trio

from client.admin import open_admin
from client.metadata import NoBrokersAvailableError
from client.protocol.errors import TributaryError
from tools.cluster.state import ClusterState, process_alive

pytestmark = pytest.mark.integration

TOPIC = "secured"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required"


class Cli:
    def __init__(self, directory: Path):
        self.directory = directory
        self.env = {**os.environ, "TRIBUTARY_CLUSTER_DIR": str(directory)}

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from tools.cli import main; sys.exit(main())",
                *args,
            ],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=180,
        )

    def __call__(self, *args: str, stdin: str | None = None) -> str:
        result = self.run(*args, stdin=stdin)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result.stdout

    def status(self) -> dict:
        return json.loads(self("cluster", "status", "--json"))


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    cli = Cli(tmp_path_factory.mktemp("secure-local") / "cluster")
    try:
        cli("cluster", "up", "--secure", "--brokers", "3", "--controllers", "1", "--base-port", "0")
        yield cli
    finally:
        cli.run("cluster", "down")


def read_properties(path: str) -> dict[str, str]:
    lines = Path(path).read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def test_admin_properties_are_private_and_status_names_them(cli):
    status = cli.status()
    assert status["secure"] is True
    properties_path = Path(status["client_properties"])
    assert properties_path == cli.directory / "admin.properties"
    assert stat.S_IMODE(properties_path.stat().st_mode) == 0o600
    properties = read_properties(str(properties_path))
    assert properties["security.protocol"] == "SASL_SSL"
    assert properties["sasl.mechanism"] == "SCRAM-SHA-512"
    assert 'username="admin"' in properties["sasl.jaas.config"]
    assert properties["ssl.truststore.location"] == status["ca_file"]
    assert properties["ssl.truststore.type"] == "PEM"
    assert "BEGIN CERTIFICATE" in Path(status["ca_file"]).read_text()


def test_the_cli_produces_and_consumes_without_extra_flags(cli):
    cli("topics", "create", TOPIC, "--partitions", "3", "--replication-factor", "3")
    cli("produce", TOPIC, "--acks", "all", stdin="".join(f"cli-{i}\n" for i in range(20)))
    consumed = cli(
        "consume", TOPIC, "--from-beginning", "--max-messages", "20", "--timeout-ms", "30000"
    )
    assert sorted(consumed.split()) == sorted(f"cli-{i}" for i in range(20))
    described = cli("topics", "describe", TOPIC)
    assert described.count("Isr: ") == 3


def confluent_settings(status: dict) -> dict:
    properties = read_properties(status["client_properties"])
    login = re.search(r'username="([^"]+)" password="([^"]+)"', properties["sasl.jaas.config"])
    assert login is not None
    return {
        "bootstrap.servers": status["kafka_bootstrap_servers"],
        "security.protocol": properties["security.protocol"],
        "sasl.mechanism": properties["sasl.mechanism"],
        "sasl.username": login[1],
        "sasl.password": login[2],
        "ssl.ca.location": properties["ssl.truststore.location"],
    }


def test_confluent_kafka_produces_and_consumes_with_the_properties(cli):
    cli("topics", "create", "ck", "--partitions", "1", "--replication-factor", "3")
    settings = confluent_settings(cli.status())
    producer = confluent_kafka.Producer({**settings, "acks": "all"})
    values = [f"ck-{i}".encode() for i in range(10)]
    for value in values:
        producer.produce("ck", value)
    assert producer.flush(60) == 0
    consumer = confluent_kafka.Consumer(
        {**settings, "group.id": "ck-group", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe(["ck"])
        got: list[bytes] = []
        deadline = time.monotonic() + 90
        while len(got) < len(values) and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    assert got == values


def test_a_client_without_credentials_is_refused(cli):
    status = cli.status()

    async def plaintext_admin() -> None:
        async with open_admin(status["bootstrap_servers"], request_timeout_ms=5000) as admin:
            await admin.list_topics()

    with pytest.raises((NoBrokersAvailableError, TributaryError, OSError)):
        trio.run(plaintext_admin)
    plaintext = cli.directory.parent / "plaintext.properties"
    plaintext.write_text("security.protocol=PLAINTEXT\n")
    refused = cli.run("--command-config", str(plaintext), "topics", "list")
    assert refused.returncode != 0 and "cannot reach any broker" in refused.stderr


def test_a_user_without_acls_is_denied(cli):
    cli(
        "configs",
        "alter",
        "--entity-type",
        "users",
        "--entity-name",
        "bob",
        "--add-config",
        "SCRAM-SHA-512=[password=bob-secret-1]",
    )
    properties = read_properties(cli.status()["client_properties"])
    bob = cli.directory.parent / "bob.properties"
    bob.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f'sasl.jaas.config={SCRAM_JAAS} username="bob" password="bob-secret-1";\n'
        f"ssl.truststore.location={properties['ssl.truststore.location']}\n"
    )
    denied = ""
    deadline = time.monotonic() + 30  # the brokers learn bob's credential within ~1 s
    while "AUTHORIZATION_FAILED" not in denied and time.monotonic() < deadline:
        result = cli.run("--command-config", str(bob), "produce", TOPIC, stdin="x\n")
        denied = result.stdout + result.stderr
    assert "TOPIC_AUTHORIZATION_FAILED" in denied


def test_cluster_down_leaves_nothing_running(cli):
    pids = [p.pid for p in ClusterState.load(cli.directory).processes]
    assert all(process_alive(pid) for pid in pids)
    cli("cluster", "down")
    assert not any(process_alive(pid) for pid in pids)
