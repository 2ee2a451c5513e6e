"""Transactions' cost (issue 28): transactional produce next to idempotent, read_committed
consume next to read_uncommitted, on one cluster in one run.

One real cluster (3 broker processes, 1 controller, ZooKeeper; `__transaction_state`
with 3 partitions, RF 3) and topics of 3 partitions, RF 3, min.insync.replicas 2:

- produce, acks=all, 100-byte values, linger 5 ms, batch 64 KiB: Tributary's idempotent
  producer sends `RECORDS` keyless records (the reference), then its transactional
  producer (`open_producer(..., transactional_id=...)`) sends the same records as
  transactions of `PER_TXN` records each (`begin_transaction`, the sends,
  `commit_transaction`), to a topic of the same layout. Records/s include the commits;
  the time of each `commit_transaction()` (its flush, then EndTxn) is printed as p50/p99.
- the same pair with confluent-kafka (librdkafka) through the Kafka listener, its
  idempotent producer the transactional one's reference (skipped when confluent-kafka
  is not installed).
- consume: a topic holding `CONSUME_TXNS` transactions of `PER_TXN` records, every other
  one aborted after its records were written (flushed), read from the beginning by
  Tributary's consumer with read_uncommitted (every record, the reference) and with
  read_committed (the committed half, aborted ones filtered out using the fetch's
  aborted-transaction list). Both figures count the data records of the log read
  through per second (committed + aborted), so the ratio is the time one takes to reach
  the end of the topic over the other's; the read_committed reader is checked to see
  exactly the committed records.

What a transaction costs: its records wait for AddPartitionsToTxn, which the coordinator
refuses (CONCURRENT_TRANSACTIONS) until the previous transaction's markers and
CompleteCommit are written; then the Produce (acks=all), then EndTxn (PrepareCommit
written with acks=all). So each transaction is four replicated writes one after another,
whatever the client (librdkafka pays the same): at 100 records a transaction that, not
the records, sets the rate.

Each measurement takes a few seconds; BENCH_TXN_RECORDS, BENCH_TXN_CONSUME_TXNS scale it.
The cluster is stopped by pid at the end.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time

import trio

from client.admin import NewTopic, open_admin
from client.consumer import open_consumer
from client.producer import open_producer
from client.protocol.types import TopicPartition
from tests.bench.table import Row, report
from tools.cluster.launcher import LocalCluster

VALUE = b"x" * 100
PER_TXN = 100
RECORDS = int(os.environ.get("BENCH_TXN_RECORDS", "20000")) // PER_TXN * PER_TXN
CONSUME_TXNS = int(os.environ.get("BENCH_TXN_CONSUME_TXNS", "200")) // 2 * 2
PARTITIONS = 3
PRODUCER = {"acks": "all", "linger_ms": 5, "batch_size": 64 * 1024}
CONFLUENT = {"acks": "all", "linger.ms": 5, "batch.size": 64 * 1024}
BROKER_SETTINGS = {
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
}
TOPICS = ("idem", "txn", "ck-idem", "ck-txn", "mixed")


async def create_topics(bootstrap: str) -> None:
    async with open_admin(bootstrap) as admin:
        created = await admin.create_topics(
            [NewTopic(name, PARTITIONS, 3, configs={"min.insync.replicas": "2"}) for name in TOPICS]
        )
        assert all(error is None for error in created.values()), created


def _p50_p99(samples: list[float]) -> tuple[float, float]:
    samples = sorted(samples)
    return samples[len(samples) // 2], samples[min(len(samples) - 1, len(samples) * 99 // 100)]


async def idempotent_produce(bootstrap: str, topic: str) -> float:
    """Records/s of Tributary's idempotent producer sending RECORDS values."""
    async with open_producer(bootstrap, enable_idempotence=True, **PRODUCER) as producer:
        await (await producer.send(topic, VALUE))  # warm up: metadata, connections, pid
        started = time.perf_counter()
        last = None
        for i in range(RECORDS):
            last = await producer.send(topic, VALUE)
            if i % PER_TXN == 0:
                await trio.lowlevel.checkpoint()  # let the sender run, as real code would
        await producer.flush()
        elapsed = time.perf_counter() - started
        assert last is not None
        await last
    return RECORDS / elapsed


async def transactional_produce(bootstrap: str, topic: str) -> tuple[float, list[float]]:
    """(records/s, ms of each commit_transaction()) of Tributary's transactional producer
    sending RECORDS values, PER_TXN a transaction."""
    commits: list[float] = []
    async with open_producer(bootstrap, transactional_id="bench-txn", **PRODUCER) as producer:
        await producer.init_transactions()
        producer.begin_transaction()  # warm up: metadata, connections, AddPartitionsToTxn
        await producer.send(topic, VALUE)
        await producer.commit_transaction()
        started = time.perf_counter()
        for _ in range(RECORDS // PER_TXN):
            producer.begin_transaction()
            for _ in range(PER_TXN):
                await producer.send(topic, VALUE)
            committing = time.perf_counter()
            await producer.commit_transaction()
            commits.append((time.perf_counter() - committing) * 1000)
        elapsed = time.perf_counter() - started
    return RECORDS / elapsed, commits


async def write_mixed(bootstrap: str, topic: str) -> int:
    """CONSUME_TXNS transactions of PER_TXN records, every other one aborted after its
    records were written; values say which. Returns the committed count."""
    committed = 0
    async with open_producer(bootstrap, transactional_id="bench-mixed", **PRODUCER) as producer:
        await producer.init_transactions()
        for n in range(CONSUME_TXNS):
            producer.begin_transaction()
            value = (b"c" if n % 2 == 0 else b"a") + VALUE[1:]
            for _ in range(PER_TXN):
                await producer.send(topic, value)
            if n % 2 == 0:
                await producer.commit_transaction()
                committed += PER_TXN
            else:
                await producer.flush()  # the aborted records are in the log
                await producer.abort_transaction()
    return committed


async def consume(bootstrap: str, topic: str, isolation: str, count: int) -> tuple[float, int]:
    """(seconds to read `count` records from the beginning, aborted ones among them)."""
    async with open_consumer(bootstrap, isolation_level=isolation) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        started = time.perf_counter()
        seen = aborted = 0
        with trio.move_on_after(120):
            while seen < count:
                records = await consumer.poll(500)
                seen += len(records)
                aborted += sum(1 for r in records if r.value[:1] == b"a")
        elapsed = time.perf_counter() - started
    assert seen == count, f"{isolation}: {seen} of {count} records within 120 s"
    return elapsed, aborted


def confluent_produce(bootstrap: str, topic: str, transactional: bool) -> tuple[float, list[float]]:
    """(records/s, ms of each commit) of librdkafka's idempotent or transactional
    producer sending RECORDS values (PER_TXN a transaction)."""
    from confluent_kafka import Producer

    config = {"bootstrap.servers": bootstrap, "enable.idempotence": True, **CONFLUENT}
    if transactional:
        config["transactional.id"] = "bench-ck-txn"
    producer = Producer(config)

    def send() -> None:
        while True:
            try:
                producer.produce(topic, VALUE)
                return
            except BufferError:
                producer.poll(0.01)

    commits: list[float] = []
    if transactional:
        producer.init_transactions(60)
        producer.begin_transaction()
    send()  # warm up: metadata and connections
    if transactional:
        producer.commit_transaction(60)
    producer.flush(30)
    started = time.perf_counter()
    for _ in range(RECORDS // PER_TXN):
        if transactional:
            producer.begin_transaction()
        for _ in range(PER_TXN):
            send()
        if transactional:
            committing = time.perf_counter()
            producer.commit_transaction(60)
            commits.append((time.perf_counter() - committing) * 1000)
        else:
            producer.poll(0)
    producer.flush(120)
    return RECORDS / (time.perf_counter() - started), commits


def _has_confluent() -> bool:
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return False
    return True


def _commit_line(who: str, commits: list[float]) -> str:
    p50, p99 = _p50_p99(commits)
    return f"  {who} commit_transaction(): p50 {p50:.1f} ms, p99 {p99:.1f} ms ({len(commits)})"


def main() -> None:
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    ck: dict[str, tuple[float, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-transactions-") as tmp:
        cluster = LocalCluster(
            tmp,
            brokers=3,
            controllers=1,
            base_port=None,
            metrics=False,
            broker_overrides=BROKER_SETTINGS,
        )
        try:
            cluster.up(timeout_s=90)
            native = cluster.state.bootstrap_servers
            trio.run(create_topics, native)
            time.sleep(1.0)  # every broker knows the topics' leaders
            idempotent = trio.run(idempotent_produce, native, "idem")
            transactional, commits = trio.run(transactional_produce, native, "txn")
            if _has_confluent():
                kafka = cluster.state.kafka_bootstrap_servers
                ck["idem"] = confluent_produce(kafka, "ck-idem", transactional=False)
                ck["txn"] = confluent_produce(kafka, "ck-txn", transactional=True)
            committed = trio.run(write_mixed, native, "mixed")
            total = CONSUME_TXNS * PER_TXN
            uncommitted_s, aborted_seen = trio.run(
                consume, native, "mixed", "read_uncommitted", total
            )
            committed_s, aborted_leaked = trio.run(
                consume, native, "mixed", "read_committed", committed
            )
        finally:
            cluster.down(timeout_s=20)
    assert aborted_seen == total - committed, (aborted_seen, total - committed)
    assert aborted_leaked == 0, f"read_committed returned {aborted_leaked} aborted records"
    print(
        f"produce: {RECORDS:,} x {len(VALUE)} bytes, acks=all, RF 3, linger 5 ms, "
        f"{PER_TXN} records a transaction"
    )
    print(f"  Tributary idempotent:    {idempotent:>10,.0f} records/s")
    print(
        f"  Tributary transactional: {transactional:>10,.0f} records/s "
        f"({transactional / idempotent:.2f} of idempotent)"
    )
    print(_commit_line("Tributary", commits))
    report(
        Row(
            f"transactional produce, {PER_TXN} records/txn, acks=all, RF 3",
            transactional,
            "records/s",
            "idempotent producer",
            idempotent,
        )
    )
    p50, p99 = _p50_p99(commits)
    report(Row(f"commit_transaction() p50, {PER_TXN} records/txn", p50, "ms"))
    report(Row(f"commit_transaction() p99, {PER_TXN} records/txn", p99, "ms"))
    if ck:
        (ck_idem, _), (ck_txn, ck_commits) = ck["idem"], ck["txn"]
        print(f"  librdkafka idempotent:    {ck_idem:>10,.0f} records/s (Kafka listener)")
        print(
            f"  librdkafka transactional: {ck_txn:>10,.0f} records/s "
            f"({ck_txn / ck_idem:.2f} of idempotent)"
        )
        print(_commit_line("librdkafka", ck_commits))
        report(
            Row(
                f"transactional produce, librdkafka (Kafka listener), {PER_TXN} records/txn",
                ck_txn,
                "records/s",
                "librdkafka idempotent",
                ck_idem,
            )
        )
    else:
        print("  (confluent-kafka not installed: no librdkafka rows)")
    read_uncommitted = total / uncommitted_s
    read_committed = total / committed_s
    print(
        f"consume from the beginning: {CONSUME_TXNS} transactions of {PER_TXN}, half aborted "
        f"({total:,} data records)"
    )
    print(f"  read_uncommitted: {uncommitted_s:.2f} s, {read_uncommitted:,.0f} log records/s")
    print(
        f"  read_committed:   {committed_s:.2f} s, {read_committed:,.0f} log records/s "
        f"({committed:,} returned, no aborted one)"
    )
    report(
        Row(
            "consume read_committed, half of txns aborted (log records/s)",
            read_committed,
            "records/s",
            "read_uncommitted",
            read_uncommitted,
        )
    )
