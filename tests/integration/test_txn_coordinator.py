"""The transaction coordinator on a real 3-broker cluster (real processes, real
ZooKeeper), through the Kafka listener: librdkafka's (confluent-kafka) init_transactions
finds the coordinator (FindCoordinator key type 1) and gets its producer id and epoch;
a second producer with the same transactional id bumps the epoch and fences the first
(PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH to a client of a version before KIP-588);
AddPartitionsToTxn and EndTxn move the state DescribeTransactions/ListTransactions show;
and after the coordinator's broker is SIGKILLed another broker loads
`__transaction_state` and describes the same transaction.

End to end: librdkafka commits and aborts, and a read_committed consumer sees exactly
the committed records.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from kio.schema.add_partitions_to_txn.v1 import request as add_v1
from kio.schema.add_partitions_to_txn.v3 import request as add_v3
from kio.schema.describe_transactions.v0 import request as describe_v0
from kio.schema.end_txn.v3 import request as end_v3
from kio.schema.find_coordinator.v3 import request as find_v3
from kio.schema.list_transactions.v0 import request as list_v0

from client.connection import open_connection
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from tests.integration import helpers
from tests.integration.conftest import running_cluster
from tests.integration.helpers import create_topic, wait_until
from tests.integration.test_kafka_clients import kafka_bootstrap, tributary
from tools.cluster.state import process_alive

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.integration

SETTINGS = {
    "transaction.state.log.num.partitions": 3,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("txn"), brokers=3, **SETTINGS) as c:
        create_topic(c, "txn-t", partitions=2, rf=3)
        yield c


def kafka_call(port: int, request: Any) -> Any:
    return helpers.kafka_call(port, request, client_id="txn-coordinator-test")


def kafka_port(cluster, broker_id: int) -> int:
    return cluster.process(f"broker-{broker_id}").kafka_port


def live_brokers(cluster) -> list[int]:
    return [b.id for b in cluster.state.brokers() if process_alive(b.pid)]


def find_coordinator(cluster, tid: str, timeout_s: float = 60) -> int:
    def found():
        for broker in live_brokers(cluster):
            try:
                answer = kafka_call(
                    kafka_port(cluster, broker), find_v3.FindCoordinatorRequest(key=tid, key_type=1)
                )
            except OSError:
                continue
            if answer.error_code.value == 0:
                return answer.node_id
        return None

    return wait_until(found, timeout_s)


def native_call(cluster, broker: int, request: Any) -> Any:
    """One request to a broker's native listener."""

    async def call():
        async with open_connection("127.0.0.1", cluster.process(f"broker-{broker}").port) as conn:
            return await conn.request(request, timeout_s=30)

    return trio.run(call)


def describe(cluster, broker: int, tid: str, timeout_s: float = 60) -> m.TransactionState:
    """DescribeTransactions on the native listener (kio cannot read the -1 start time
    Kafka answers for an id with no transaction, which Kafka's clients read)."""

    def answered():
        answer = native_call(
            cluster, broker, m.DescribeTransactionsRequest(transactional_ids=[tid])
        )
        [state] = answer.transaction_states
        return state if state.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else None

    return wait_until(answered, timeout_s)


def kafka_describe(cluster, broker: int, tid: str):
    """DescribeTransactions v0 on the Kafka listener (a transaction with a start time)."""
    answer = kafka_call(
        kafka_port(cluster, broker),
        describe_v0.DescribeTransactionsRequest(transactional_ids=(tid,)),
    )
    [state] = answer.transaction_states
    return state


def add_partitions(cluster, broker: int, tid: str, pid: int, epoch: int, module=add_v3):
    request = module.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=(module.AddPartitionsToTxnTopic(name="txn-t", partitions=(0, 1)),),
    )
    answer = kafka_call(kafka_port(cluster, broker), request)
    codes = {
        p.partition_error_code.name
        for t in answer.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }
    assert len(codes) == 1, answer
    return codes.pop()


def init_transactions(cluster, tid: str):
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": kafka_bootstrap(cluster), "transactional.id": tid}
    )
    producer.init_transactions(60)
    return producer


def test_librdkafka_init_transactions_bumps_epochs_and_fences_the_zombie(cluster):
    zombie = init_transactions(cluster, "tx-a")
    coordinator = find_coordinator(cluster, "tx-a")
    first = describe(cluster, coordinator, "tx-a")
    assert (first.error_code, first.transaction_state, first.producer_epoch) == (
        ErrorCode.NONE,
        "Empty",
        0,
    )
    pid = first.producer_id
    init_transactions(cluster, "tx-a")  # a second producer with the same id
    second = describe(cluster, coordinator, "tx-a")
    assert (second.producer_id, second.producer_epoch) == (pid, 1)

    # The zombie's epoch is fenced, in the words of each version.
    assert add_partitions(cluster, coordinator, "tx-a", pid, 0) == "producer_fenced"
    assert add_partitions(cluster, coordinator, "tx-a", pid, 0, add_v1) == "invalid_producer_epoch"
    zombie.begin_transaction()
    zombie.produce("txn-t", b"late", partition=0)
    with pytest.raises(confluent_kafka.KafkaException):
        zombie.commit_transaction(30)

    # The current producer's transaction, seen through Describe and List.
    assert add_partitions(cluster, coordinator, "tx-a", pid, 1) == "none"
    ongoing = kafka_describe(cluster, coordinator, "tx-a")
    assert (ongoing.error_code.name, ongoing.transaction_state) == ("none", "Ongoing")
    assert [(t.topic, sorted(t.partitions)) for t in ongoing.topics] == [("txn-t", [0, 1])]
    listed = kafka_call(
        kafka_port(cluster, coordinator),
        list_v0.ListTransactionsRequest(state_filters=("Ongoing",), producer_id_filters=()),
    )
    assert [(t.transactional_id, t.producer_id) for t in listed.transaction_states] == [
        ("tx-a", pid)
    ]
    fenced_end = end_v3.EndTxnRequest(
        transactional_id="tx-a", producer_id=pid, producer_epoch=0, committed=True
    )
    assert kafka_call(kafka_port(cluster, coordinator), fenced_end).error_code.name == (
        "producer_fenced"
    )
    end = end_v3.EndTxnRequest(
        transactional_id="tx-a", producer_id=pid, producer_epoch=1, committed=True
    )
    assert kafka_call(kafka_port(cluster, coordinator), end).error_code.name == "none"
    assert describe(cluster, coordinator, "tx-a").transaction_state in (
        "PrepareCommit",
        "CompleteCommit",
    )


def test_the_transactions_cli_lists_and_describes(cluster):
    init_transactions(cluster, "tx-cli")
    coordinator = find_coordinator(cluster, "tx-cli")
    pid = describe(cluster, coordinator, "tx-cli").producer_id
    assert add_partitions(cluster, coordinator, "tx-cli", pid, 0) == "none"
    bootstrap = ["--bootstrap-server", cluster.state.bootstrap_servers]
    listed = tributary("transactions", "list", "--state", "Ongoing", *bootstrap)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert ["tx-cli", str(coordinator), str(pid), "Ongoing"] in [line.split() for line in lines]
    described = tributary("transactions", "describe", "--transactional-id", "tx-cli", *bootstrap)
    assert described.returncode == 0, described.stderr
    header, row = described.stdout.splitlines()
    values = dict(zip(header.split(), row.split(), strict=True))
    assert values["TransactionState"] == "Ongoing" and values["ProducerId"] == str(pid)
    assert values["TopicPartitions"] == "txn-t-0,txn-t-1"
    missing = tributary("transactions", "describe", "--transactional-id", "nobody", *bootstrap)
    assert missing.returncode != 0 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr


def test_the_state_survives_the_coordinators_sigkill(cluster):
    init_transactions(cluster, "tx-b")
    coordinator = find_coordinator(cluster, "tx-b")
    before = describe(cluster, coordinator, "tx-b")
    assert add_partitions(cluster, coordinator, "tx-b", before.producer_id, 0) == "none"
    cluster.kill(f"broker-{coordinator}")
    try:
        successor = wait_until(
            lambda: (b := find_coordinator(cluster, "tx-b")) != coordinator and b, 60
        )
        after = describe(cluster, successor, "tx-b")
        assert (after.error_code, after.transaction_state) == (ErrorCode.NONE, "Ongoing")
        assert (after.producer_id, after.producer_epoch) == (before.producer_id, 0)
        assert [(t.topic, sorted(t.partitions)) for t in after.topics] == [("txn-t", [0, 1])]
    finally:
        cluster.start(f"broker-{coordinator}")


def test_librdkafka_commits_and_aborts_end_to_end(cluster):
    producer = init_transactions(cluster, "tx-e2e")
    producer.begin_transaction()
    for i in range(10):
        producer.produce("txn-t", f"c-{i}".encode(), partition=i % 2)
    producer.commit_transaction(60)
    producer.begin_transaction()
    for i in range(10):
        producer.produce("txn-t", f"a-{i}".encode(), partition=i % 2)
    assert producer.flush(60) == 0  # written to the log (else abort just drops them unsent)
    producer.abort_transaction(60)
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "group.id": "txn-e2e",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["txn-t"])
    seen: list[bytes] = []
    try:
        wait_until(
            lambda: (
                (msg := consumer.poll(0.5)) is not None
                and not msg.error()
                and seen.append(msg.value()) is None
                and sum(v.startswith(b"c-") for v in seen) >= 10
            ),
            60,
        )
    finally:
        consumer.close()
    assert sorted(v for v in seen if v.startswith(b"c-")) == sorted(
        f"c-{i}".encode() for i in range(10)
    )
    assert not [v for v in seen if v.startswith(b"a-")]
    coordinator = find_coordinator(cluster, "tx-e2e")
    assert describe(cluster, coordinator, "tx-e2e").transaction_state == "CompleteAbort"
