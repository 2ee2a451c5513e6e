"""TransactionalId ACLs end to end (issue 28), on one secure cluster of real processes
(`LocalCluster(secure=True)`: every listener SASL_SSL, the authorizer on, `admin` a super
user), with confluent-kafka on the Kafka listener and the `tributary` CLI as the judges.

`writer` is a SCRAM user with Write on the topic and, at first, nothing on any
transactional id:
- its `init_transactions()` fails at once with TRANSACTIONAL_ID_AUTHORIZATION_FAILED (a
  fatal KafkaError, not a hang);
- once `tributary acls --add ... --transactional-id ID` grants Write on the id (literal,
  or prefixed), the same user and id commit a transaction (and abort one), and a
  read_committed consumer reads exactly the committed records;
- Describe on a transactional id governs `tributary transactions list|describe` (KIP-664):
  the list holds only the ids it may describe, describing another is refused; Describe
  alone does not let it initialize a producer with that id (InitProducerId wants Write).

The ACLs are also where Kafka 2.8 stores them (/kafka-acl/TransactionalId/ID, and
/kafka-acl-extended/prefixed/... for a prefix) and listed in kafka-acls' format.

One module-scoped cluster of one broker and one controller: the checks are each
broker's, the propagation of ACLs to every broker is test_acls.py's. The CLI runs in
this process (`tools.cli.main`); librdkafka's producers are real clients.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import trio

from client.admin import NewTopic, open_admin
from client.admin.acls import Acl
from client.admin.users import UserScramCredentialUpsertion
from client.protocol.acl_types import AclOperation, ResourceType
from tests.integration.conftest import TEST_BROKER_SETTINGS, TEST_CONTROLLER_SETTINGS
from tests.integration.helpers import admin_properties, admin_security, wait_until
from tests.integration.test_acls import znodes
from tests.integration.test_secure_local_cluster import confluent_settings
from tools.cli import main
from tools.cluster.launcher import LocalCluster

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.integration

TOPIC = "ledger"
WRITER = "writer"
WRITER_PASSWORD = "writer-scram-secret"
SINGLE_BROKER = {
    "offsets.topic.replication.factor": 1,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "transaction.state.log.num.partitions": 2,
}
TXN_DENIED = confluent_kafka.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


class Secure:
    """The cluster, and a client properties file per user (for the CLI's
    --command-config and, through `confluent_settings`, for confluent-kafka)."""

    def __init__(self, cluster: LocalCluster):
        self.cluster = cluster
        admin = admin_properties(cluster)
        assert admin is not None
        self.admin_properties = admin
        text = Path(admin).read_text()
        writer = re.sub(
            r'username="[^"]+" password="[^"]+"',
            f'username="{WRITER}" password="{WRITER_PASSWORD}"',
            text,
        )
        assert writer != text
        self.writer_properties = str(cluster.directory / "writer.properties")
        Path(self.writer_properties).write_text(writer)

    def confluent(self, properties: str, **extra) -> dict:
        status = {
            "client_properties": properties,
            "kafka_bootstrap_servers": self.cluster.state.kafka_bootstrap_servers,
        }
        return {**confluent_settings(status), **extra}

    def tributary(self, properties: str, *args: str) -> subprocess.CompletedProcess:
        """`tributary ARGS` logged in with `properties` (the admin's or the writer's), run
        in this process (`tools.cli.main`, as test_cli_acls.py does: no interpreter start
        per call)."""
        argv = [
            *args,
            "--bootstrap-server",
            self.cluster.state.bootstrap_servers,
            "--command-config",
            properties,
        ]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())

    def logs_in(self, properties: str) -> bool:
        return self.tributary(properties, "topics", "list").returncode == 0

    def grant(self, *args: str) -> None:
        """`tributary acls --add --allow-principal User:writer ARGS`, as the admin."""
        done = self.tributary(
            self.admin_properties, "acls", "--add", "--allow-principal", f"User:{WRITER}", *args
        )
        assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    cluster = LocalCluster(
        tmp_path_factory.mktemp("txn-acls"),
        brokers=1,
        controllers=1,
        base_port=None,
        secure=True,
        broker_overrides={**TEST_BROKER_SETTINGS, **SINGLE_BROKER},
        controller_overrides=TEST_CONTROLLER_SETTINGS,
    )
    try:
        cluster.up(timeout_s=90)
        trio.run(_create_writer_and_topic, cluster)
        found = Secure(cluster)
        # The broker learns of the new SCRAM user from ZooKeeper: wait until it logs in.
        wait_until(lambda: found.logs_in(found.writer_properties), 30)
        yield found
    finally:
        cluster.down(timeout_s=20)


async def _create_writer_and_topic(cluster: LocalCluster) -> None:
    """As `admin`: the writer's SCRAM credential, the topic, Write on it for the writer."""
    async with open_admin(cluster.state.bootstrap_servers, **admin_security(cluster)) as admin:
        credential = UserScramCredentialUpsertion(WRITER, "SCRAM-SHA-512", WRITER_PASSWORD)
        assert await admin.alter_user_scram_credentials([credential]) == {WRITER: None}
        assert await admin.create_topics([NewTopic(TOPIC, 1, 1)]) == {TOPIC: None}
        write = Acl(ResourceType.TOPIC, TOPIC, f"User:{WRITER}", AclOperation.WRITE)
        assert await admin.create_acls([write]) == [None]


def producer(secure: Secure, properties: str, transactional_id: str):
    return confluent_kafka.Producer(
        secure.confluent(
            properties,
            **{"transactional.id": transactional_id, "linger.ms": 5, "socket.timeout.ms": 10_000},
        )
    )


def close(client) -> None:
    """Stop the client's threads (a producer in a fatal state says so again: ignored)."""
    with contextlib.suppress(confluent_kafka.KafkaException):
        client.close()


def init_error(secure: Secure, properties: str, transactional_id: str):
    """The KafkaError `init_transactions()` raises for `transactional_id`, None if none."""
    attempt = producer(secure, properties, transactional_id)
    try:
        attempt.init_transactions(30)
    except confluent_kafka.KafkaException as exc:
        return exc.args[0]
    finally:
        close(attempt)
    return None


def assert_refused(secure: Secure, properties: str, transactional_id: str) -> None:
    """`init_transactions()` fails fatally with TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""
    error = init_error(secure, properties, transactional_id)
    assert error is not None and error.code() == TXN_DENIED, error
    assert error.fatal(), error


def initialized(secure: Secure, properties: str, transactional_id: str):
    """A producer whose `init_transactions()` succeeded, once the broker has the ACL the
    test just granted (it comes through ZooKeeper's change notification): until then
    each attempt fails fatally, so each uses a new producer."""
    deadline = time.monotonic() + 30
    while True:
        attempt = producer(secure, properties, transactional_id)
        try:
            attempt.init_transactions(30)
            return attempt
        except confluent_kafka.KafkaException as exc:
            close(attempt)
            if exc.args[0].code() != TXN_DENIED or time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def commit_and_abort(txn_producer, committed: list[bytes], aborted: list[bytes]) -> None:
    """One transaction of `committed` committed, then one of `aborted` aborted (if any);
    then the producer is closed."""
    try:
        _commit_and_abort(txn_producer, committed, aborted)
    finally:
        close(txn_producer)


def _commit_and_abort(txn_producer, committed: list[bytes], aborted: list[bytes]) -> None:
    txn_producer.begin_transaction()
    for value in committed:
        txn_producer.produce(TOPIC, value)
    txn_producer.commit_transaction(30)
    if not aborted:
        return
    txn_producer.begin_transaction()
    for value in aborted:
        txn_producer.produce(TOPIC, value)
    assert txn_producer.flush(30) == 0  # in the log, so that the abort has to hide them
    txn_producer.abort_transaction(30)


def read_committed(secure: Secure) -> set[bytes]:
    """Every record of the topic a read_committed consumer (the admin) reads."""
    consumer = confluent_kafka.Consumer(
        secure.confluent(
            secure.admin_properties,
            **{
                "group.id": f"reader-{uuid.uuid4().hex}",
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            },
        )
    )
    tp = confluent_kafka.TopicPartition(TOPIC, 0)
    try:
        consumer.assign(
            [confluent_kafka.TopicPartition(TOPIC, 0, confluent_kafka.OFFSET_BEGINNING)]
        )
        end = consumer.get_watermark_offsets(tp, 10)[1]
        found: set[bytes] = set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for message in consumer.consume(num_messages=500, timeout=0.5):
                if message.error() is None:
                    found.add(message.value())
            (position,) = consumer.position([tp])
            if position.offset >= end:  # the last abort marker is past every record
                break
        return found
    finally:
        consumer.close()


def test_init_transactions_without_a_transactional_id_acl_is_a_clear_error(secure):
    assert_refused(secure, secure.writer_properties, "no-acl-1")


def test_a_literal_write_acl_lets_the_writer_commit(secure):
    assert_refused(secure, secure.writer_properties, "payments-1")
    secure.grant("--operation", "Write", "--transactional-id", "payments-1")

    listed = secure.tributary(
        secure.admin_properties, "acls", "--list", "--transactional-id", "payments-1"
    )
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[:2] == [
        "Current ACLs for resource `ResourcePattern(resourceType=TRANSACTIONAL_ID, "
        "name=payments-1, patternType=LITERAL)`: ",
        f" \t(principal=User:{WRITER}, host=*, operation=WRITE, permissionType=ALLOW) ",
    ]
    stored = znodes(secure.cluster, ["/kafka-acl/TransactionalId/payments-1"])
    assert json.loads(stored["/kafka-acl/TransactionalId/payments-1"])["acls"] == [
        {"principal": f"User:{WRITER}", "permissionType": "Allow", "operation": "Write",
         "host": "*"}
    ]  # fmt: skip

    txn_producer = initialized(secure, secure.writer_properties, "payments-1")
    commit_and_abort(txn_producer, [b"paid-1", b"paid-2"], [b"void-1", b"void-2"])
    found = read_committed(secure)
    assert {b"paid-1", b"paid-2"} <= found and not {b"void-1", b"void-2"} & found


def test_a_prefixed_write_acl_covers_every_id_with_the_prefix(secure):
    assert_refused(secure, secure.writer_properties, "batch-7")
    secure.grant(
        "--operation", "Write", "--transactional-id", "batch-", "--resource-pattern-type",
        "prefixed",
    )  # fmt: skip
    stored = znodes(secure.cluster, ["/kafka-acl-extended/prefixed/TransactionalId/batch-"])
    assert stored["/kafka-acl-extended/prefixed/TransactionalId/batch-"] is not None

    txn_producer = initialized(secure, secure.writer_properties, "batch-7")
    commit_and_abort(txn_producer, [b"batch-7-a"], [b"batch-7-void"])
    found = read_committed(secure)
    assert b"batch-7-a" in found and b"batch-7-void" not in found
    # The prefix is a prefix: another id is still refused.
    assert_refused(secure, secure.writer_properties, "batches")


def listed_ids(secure: Secure, properties: str) -> set[str]:
    done = secure.tributary(properties, "transactions", "list", "--json")
    assert done.returncode == 0, done.stderr
    return {t["transactional_id"] for t in json.loads(done.stdout)}


def test_describe_on_a_transactional_id_governs_list_and_describe(secure):
    # One id the writer may write (so describe), one only the admin uses.
    secure.grant("--operation", "Write", "--transactional-id", "listed-1")
    commit_and_abort(initialized(secure, secure.writer_properties, "listed-1"), [b"l"], [])
    hidden = initialized(secure, secure.admin_properties, "hidden-1")
    commit_and_abort(hidden, [b"h"], [])

    assert {"listed-1", "hidden-1"} <= listed_ids(secure, secure.admin_properties)
    mine = listed_ids(secure, secure.writer_properties)
    assert "listed-1" in mine and "hidden-1" not in mine

    described = secure.tributary(
        secure.writer_properties, "transactions", "describe", "--transactional-id", "listed-1",
        "--json",
    )  # fmt: skip
    assert described.returncode == 0, described.stderr
    # EndTxn is answered once PrepareCommit is logged; CompleteCommit follows the markers.
    assert json.loads(described.stdout)["state"] in ("PrepareCommit", "CompleteCommit")
    refused = secure.tributary(
        secure.writer_properties, "transactions", "describe", "--transactional-id", "hidden-1"
    )
    assert refused.returncode != 0
    assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in refused.stderr, refused.stderr
    assert len([line for line in refused.stderr.splitlines() if line.strip()]) == 1

    # Describe on hidden-1: listed and described, but still no producer with that id.
    secure.grant("--operation", "Describe", "--transactional-id", "hidden-1")
    wait_until(lambda: "hidden-1" in listed_ids(secure, secure.writer_properties), 30)
    described = secure.tributary(
        secure.writer_properties, "transactions", "describe", "--transactional-id", "hidden-1",
        "--json",
    )  # fmt: skip
    assert described.returncode == 0, described.stderr
    assert json.loads(described.stdout)["transactional_id"] == "hidden-1"
    assert_refused(secure, secure.writer_properties, "hidden-1")
