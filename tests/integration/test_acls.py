"""ACLs on a real cluster (3 broker processes, a controller, real ZooKeeper) with the
authorizer on: `tributary acls` writes through one broker and every broker enforces the
new ACL as soon as ZooKeeper delivers the change (the test measures how soon, and waits
generously); the znodes are where and what Kafka 2.8 writes; a librdkafka producer is
refused TOPIC_AUTHORIZATION_FAILED, then allowed.

Principals: the brokers' inter-broker listener (PLAINTEXT, native: the CLI's too) is
trusted (`authorizer.inter.broker.listener.super.user`), and Kafka clients on the Kafka
listeners, which do not authenticate yet, are User:ANONYMOUS, which the ACLs name.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio
from kio.schema.metadata.v1 import request as metadata_v1

from server_common.zk_kazoo import KazooZooKeeper
from tests.integration.conftest import running_cluster
from tests.integration.helpers import create_topic, wait_until
from tests.unit.test_kafka_listener import KafkaWire
from tools.cluster.launcher import LocalCluster

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
AUTHORIZER = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:admin",
    "authorizer.inter.broker.listener.super.user": "true",
}
TOPIC_AUTHORIZATION_FAILED = 29


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("acls"), **AUTHORIZER) as cluster:
        yield cluster


def tributary(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tools", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def topic_codes(cluster: LocalCluster, topic: str) -> list[int]:
    """The error code each broker's Kafka listener answers Metadata for `topic` with."""

    async def ask(port: int) -> int:
        wire = KafkaWire(await trio.open_tcp_stream("127.0.0.1", port))
        try:
            response = await wire.call(
                metadata_v1.MetadataRequest(topics=(metadata_v1.MetadataRequestTopic(name=topic),))
            )
        finally:
            await wire.aclose()
        return int(response.topics[0].error_code.value)

    async def ask_all() -> list[int]:
        return [await ask(b.kafka_port) for b in cluster.state.brokers()]

    return trio.run(ask_all)


def znodes(cluster: LocalCluster, paths: list[str]) -> dict[str, bytes | None]:
    async def read():
        zk = KazooZooKeeper(cluster.state.zookeeper_connect)
        await zk.start()
        try:
            found = {}
            for path in paths:
                got = await zk.get_or_none(path)
                found[path] = None if got is None else got[0]
            found["children"] = await zk.get_children_or_empty("/kafka-acl-changes")
            return found
        finally:
            await zk.stop()

    return trio.run(read)


def produce_as_anonymous(cluster: LocalCluster, topic: str) -> list:
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": cluster.state.kafka_bootstrap_servers,
            "message.timeout.ms": 10_000,
        }
    )
    outcomes: list = []
    producer.produce(topic, b"v", on_delivery=lambda error, msg: outcomes.append(error))
    producer.flush(30)
    return outcomes


def denied_events(cluster: LocalCluster) -> set[tuple[str, str, str]]:
    """(principal, resource name, operation) of every broker's authorization_denied events."""
    found = set()
    for broker in cluster.state.brokers():
        path = Path(broker.data_dir) / "events.jsonl"
        for line in path.read_text().splitlines() if path.exists() else []:
            event = json.loads(line)
            if event["event"] == "authorization_denied":
                found.add((event["principal"], event["resource_name"], event["operation"]))
    return found


def test_an_acl_added_through_one_broker_applies_on_every_broker(cluster):
    create_topic(cluster, "payments", 3, 3)
    assert topic_codes(cluster, "payments") == [TOPIC_AUTHORIZATION_FAILED] * 3
    (refused,) = produce_as_anonymous(cluster, "payments")
    assert (
        refused is not None
        and refused.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    # The refusals (Metadata's, before librdkafka would produce) are authorization_denied
    # events in the brokers' events.jsonl.
    wait_until(lambda: ("User:ANONYMOUS", "payments", "Describe") in denied_events(cluster), 30)

    first = cluster.state.brokers()[0]
    done = tributary(
        "acls", "--add", "--allow-principal", "User:ANONYMOUS", "--operation", "Write",
        "--topic", "payments", "--bootstrap-server", f"127.0.0.1:{first.port}",
    )  # fmt: skip
    added = time.monotonic()
    assert done.returncode == 0, done.stderr
    # Write implies Describe: every broker shows the topic once it has the change.
    wait_until(lambda: topic_codes(cluster, "payments") == [0, 0, 0], timeout_s=30)
    print(
        f"every broker enforced the new ACL {time.monotonic() - added:.3f} s after the CLI returned"
    )
    assert produce_as_anonymous(cluster, "payments") == [None]

    stored = znodes(cluster, ["/kafka-acl/Topic/payments"])
    assert json.loads(stored["/kafka-acl/Topic/payments"]) == {
        "version": 1,
        "acls": [
            {
                "principal": "User:ANONYMOUS",
                "permissionType": "Allow",
                "operation": "Write",
                "host": "*",
            }
        ],
    }
    (change,) = stored["children"]
    assert change.startswith("acl_changes_") and len(change) == len("acl_changes_") + 10

    done = tributary(
        "acls", "--remove", "--topic", "payments",
        "--bootstrap-server", cluster.state.bootstrap_servers,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    wait_until(
        lambda: topic_codes(cluster, "payments") == [TOPIC_AUTHORIZATION_FAILED] * 3, timeout_s=30
    )
    listed = tributary("acls", "--list", "--bootstrap-server", cluster.state.bootstrap_servers)
    assert listed.returncode == 0 and listed.stdout == ""


def test_kafka_clients_acl_admin_calls(cluster):
    """kafka-python's and confluent-kafka's create_acls/describe_acls/delete_acls, as
    User:ANONYMOUS once `tributary acls` gave it Alter and Describe on the cluster."""
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KafkaPythonType
    from kafka.errors import ClusterAuthorizationFailedError

    servers = cluster.state.kafka_bootstrap_servers
    every = ACLFilter(
        None,
        None,
        ACLOperation.ANY,
        ACLPermissionType.ANY,
        ResourcePatternFilter(KafkaPythonType.ANY, None, ACLResourcePatternType.ANY),
    )
    admin = KafkaAdminClient(bootstrap_servers=servers)
    with pytest.raises(ClusterAuthorizationFailedError):
        admin.describe_acls(every)

    done = tributary(
        "acls", "--add", "--allow-principal", "User:ANONYMOUS", "--operation", "Alter",
        "--operation", "Describe", "--cluster", "--bootstrap-server",
        cluster.state.bootstrap_servers,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    def described() -> set:
        acls, error = admin.describe_acls(every)
        return {(a.principal, a.operation, a.resource_pattern.resource_name) for a in acls}

    wait_until(lambda: len(described()) == 2, timeout_s=30)  # every broker has them
    result = admin.create_acls(
        [
            ACL(
                "User:bob",
                "*",
                ACLOperation.READ,
                ACLPermissionType.ALLOW,
                ResourcePattern(KafkaPythonType.GROUP, "bobs", ACLResourcePatternType.PREFIXED),
            )
        ]
    )
    assert len(result["succeeded"]) == 1 and not result["failed"]
    wait_until(lambda: ("User:bob", ACLOperation.READ, "bobs") in described(), timeout_s=30)

    confluent = AdminClient({"bootstrap.servers": servers})
    groups = AclBindingFilter(
        ResourceType.GROUP,
        None,
        ResourcePatternType.PREFIXED,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )

    def found() -> list:
        bindings = confluent.describe_acls(groups).result(30)
        return [(b.name, b.principal, b.operation.name) for b in bindings]

    # confluent-kafka may ask another broker, which learns of the new ACL from its change
    # notification a moment later (as in Kafka): eventually, not at once.
    wait_until(lambda: found() == [("bobs", "User:bob", "READ")], timeout_s=30)
    (deleted,) = confluent.delete_acls(
        [
            AclBindingFilter(
                ResourceType.ANY,
                None,
                ResourcePatternType.ANY,
                "User:bob",
                None,
                AclOperation.ANY,
                AclPermissionType.ANY,
            )
        ]
    ).values()
    assert len(deleted.result(30)) == 1
    (_, removed, error) = admin.delete_acls([every])[0]
    assert len(removed) == 2  # the cluster ACLs themselves
    admin.close()
