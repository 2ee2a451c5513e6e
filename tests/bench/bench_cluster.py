"""Real-cluster benchmarks: three broker processes, one controller, ZooKeeper.

1. Produce throughput: acks=1 to an RF 1 topic next to acks=all to an RF 3 topic
   (min.insync.replicas=2), same producer settings, 100-byte values, in one run; through
   the Python producer one `send()` per record (client-bound: it builds every record)
   and `send_many()` with 10,000 records a call (the batch-level path), and once with
   pre-built 1 MiB batches sent straight to the leaders, pipelined (the brokers' own
   ingest rate, replication included).
2. Failover: SIGKILL the leader of a partition while producing to it with acks=all;
   time until the first successful produce on the new leader (bounded below by the
   ZooKeeper session timeout: that is when the controller learns of the death).
3. Controlled shutdown: SIGTERM a broker that leads ~100 partitions; time until it
   exited, its leaderships moved away first.
4. Consume from the beginning: the library (a consumer reading everything the produce
   run wrote, with `poll()` and with `poll_batches()`, each with the client's CPU time
   per record) and the CLI (`tributary consume` into a pipe, next to a plain Python loop
   printing the same lines: the CLI should be bound by printing, not fetching).
5. End-to-end latency at 10,000 records/s, acks=all, RF 3 (`tributary perf e2e`), once
   the disk has written back what the ingest rows left dirty (`settle`; so for row 6).
6. Broker memory with 1,000 more partitions (RF 3: every broker hosts them all): the
   largest broker RSS idle, and its peak while `tributary perf produce` writes to them.
Prints figures and reports the headline ones to the table (tests/bench/table.py) with
their same-run references: loopback TCP and file writes (tests/bench/references.py).
The cluster lives in a temp dir and is stopped by pid at the end.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from client.admin import NewTopic, open_admin
from client.connection import open_connection
from client.consumer import open_consumer
from client.producer import open_producer
from client.protocol import messages as m
from client.protocol.records import Record, build_batch
from client.protocol.types import TopicPartition
from tests.bench import references
from tests.bench.table import Row, report
from tools.cluster.inspect import read_cluster
from tools.cluster.launcher import LocalCluster

VALUE = b"x" * 100
RECORDS = int(os.environ.get("BENCH_CLUSTER_RECORDS", "100000"))
SESSION_MS = 6_000
E2E_RATE = 10_000
E2E_RECORDS = int(os.environ.get("BENCH_E2E_RECORDS", "50000"))
MANY_PARTITIONS = 1_000


async def create_topics(bootstrap: str, topics: list[NewTopic]) -> None:
    async with open_admin(bootstrap) as admin:
        await admin.create_topics(topics)


SEND_MANY_CHUNK = 10_000  # records handed to one send_many() call


async def throughput(bootstrap: str, topic: str, acks, many: bool = False) -> tuple[float, float]:
    """(records/s, MiB/s) of one producer sending RECORDS values: one `send()` per record,
    or `send_many()` with SEND_MANY_CHUNK records a call (`many`)."""
    async with open_producer(
        bootstrap, acks=acks, linger_ms=5, batch_size=256 * 1024, max_request_size=4 << 20
    ) as producer:
        await (await producer.send(topic, VALUE))  # warm up: metadata and connections
        started = time.perf_counter()
        if many:
            values = [VALUE] * SEND_MANY_CHUNK
            calls, rest = divmod(RECORDS, SEND_MANY_CHUNK)
            handles = [await producer.send_many(topic, values) for _ in range(calls)]
            handles.append(await producer.send_many(topic, values[:rest]))
            last = [handle for group in handles[-2:] for handle in group][-10:]
        else:
            last = [await producer.send(topic, VALUE) for _ in range(RECORDS)][-10:]
        await producer.flush()
        elapsed = time.perf_counter() - started
        for handle in last:
            await handle
    return RECORDS / elapsed, RECORDS * len(VALUE) / elapsed / 2**20


INGEST_SECONDS = 5.0
IN_FLIGHT = 4


async def ingest(cluster: LocalCluster, topic: str, acks: int) -> float:
    """MiB/s of pre-built 1 MiB batches (100-byte records) written to every partition's
    leader over one pipelined connection per partition for INGEST_SECONDS."""
    count = 2**20 // (len(VALUE) + 8)
    batch = build_batch([Record(None, VALUE, 0)] * count)
    while len(batch) > 1_000_000:  # under message.max.bytes (1048588) with room to spare
        count = count * 1_000_000 // len(batch)
        batch = build_batch([Record(None, VALUE, 0)] * count)
    view = read_cluster(cluster.state.zookeeper_connect)
    leaders = [(p.partition, p.leader) for p in view.partitions if p.topic == topic]
    written = [0]

    async def pump(partition: int, broker: int) -> None:
        port = cluster.process(f"broker-{broker}").port
        request = m.ProduceRequest(
            acks=acks,
            timeout_ms=30_000,
            topics=[
                m.ProduceTopic(
                    name=topic, partitions=[m.ProducePartition(partition=partition, records=batch)]
                )
            ],
        )
        async with open_connection("127.0.0.1", port) as conn:
            deadline = trio.current_time() + INGEST_SECONDS

            async def sender() -> None:
                while trio.current_time() < deadline:
                    response = await conn.request(request, timeout_s=60)
                    part = response.topics[0].partitions[0]
                    assert part.error_code == 0, (part.error_code, part.error_message)
                    written[0] += len(batch)

            async with trio.open_nursery() as nursery:
                for _ in range(IN_FLIGHT):
                    nursery.start_soon(sender)

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for partition, broker in leaders:
            nursery.start_soon(pump, partition, broker)
    return written[0] / (time.perf_counter() - started) / 2**20


def leader_of(cluster: LocalCluster, topic: str, partition: int) -> int:
    return read_cluster(cluster.state.zookeeper_connect).partition(topic, partition).leader


async def failover_time(cluster: LocalCluster, bootstrap: str):
    """(seconds from SIGKILL to the first ack on the new leader, its metadata, victim)."""
    victim = leader_of(cluster, "rf3", 0)
    async with open_producer(
        bootstrap, acks="all", linger_ms=0, request_timeout_ms=2_000, retry_backoff_ms=50
    ) as producer:
        await (await producer.send("rf3", VALUE, partition=0))
        killed_at = time.monotonic()
        os.kill(cluster.process(f"broker-{victim}").pid, signal.SIGKILL)
        while True:  # one record at a time: the first that is acked after the kill
            metadata = await (await producer.send("rf3", VALUE, partition=0))
            if leader_of(cluster, "rf3", 0) != victim:
                return time.monotonic() - killed_at, metadata, victim


async def consume_all(
    bootstrap: str, topic: str, partitions: int, count: int, batches: bool = False
) -> tuple[float, float, float]:
    """(records/s, MiB/s, client CPU us/record) of a consumer reading `count` records from
    the beginning with `poll()`, or with `poll_batches()` (columns, no record objects)."""

    async def take(consumer) -> tuple[int, int]:  # (records, value bytes) of one call
        if batches:
            got = await consumer.poll_batches(1000)
            return sum(map(len, got)), sum(sum(map(len, b.values)) for b in got)
        records = await consumer.poll(1000)
        return len(records), sum(len(r.value) for r in records)

    async with open_consumer(
        bootstrap, auto_offset_reset="earliest", max_poll_records=100_000
    ) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        first = 0
        while not first:  # connections, offsets and the first fetch before the clock
            first, _ = await take(consumer)
        seen = size = 0
        started = time.perf_counter()
        cpu_started = time.process_time()
        while seen < count - first:
            records, values = await take(consumer)
            seen += records
            size += values
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
    return seen / elapsed, size / elapsed / 2**20, cpu / seen * 1e6


def cli(cluster: LocalCluster, *args: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRIBUTARY_CLUSTER_DIR": str(cluster.directory)}
    return subprocess.run(
        [sys.executable, "-m", "tools", *args], stdout=stdout, env=env, timeout=600, check=True
    )


def timed_cli_consume(cluster: LocalCluster, topic: str, count: int) -> float:
    """records/s of `tributary consume --from-beginning --max-messages count` writing into
    a pipe, timed from its first record to its exit (as the library rows: the start-up
    and the first connections are left out; subtracting a one-record run's time instead
    left a difference smaller than the start-up's jitter)."""
    command = [sys.executable, "-m", "tools", "consume", topic, "--from-beginning"]
    env = {**os.environ, "TRIBUTARY_CLUSTER_DIR": str(cluster.directory)}
    return _piped_rate([*command, "--max-messages", str(count)], count, env)


def print_loop_rate(count: int, value_bytes: int) -> float:
    """records/s of a plain Python loop printing `count` lines of `value_bytes` (in a
    child process, into a pipe, timed as the CLI is): the printing bound."""
    code = f"line = 'x' * {value_bytes}\nfor _ in range({count}):\n    print(line)\n"
    return _piped_rate([sys.executable, "-c", code], count, dict(os.environ))


def _piped_rate(command: list[str], lines: int, env: dict) -> float:
    """Lines/s a child writes to a pipe (read here in 1 MiB chunks and dropped), from its
    first chunk to the end of its output; the lines of that first chunk are not counted."""
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert child.stdout is not None
    fd = child.stdout.fileno()
    with contextlib.suppress(OSError):  # a 1 MiB pipe: fewer switches between the two
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)
    try:
        first = os.read(fd, 1 << 20)
        started = time.perf_counter()
        while os.read(fd, 1 << 20):
            pass
        elapsed = time.perf_counter() - started
    finally:
        child.stdout.close()
        if child.wait(timeout=600) != 0:
            raise RuntimeError(f"{command[:4]} exited with {child.returncode}")
    return (lines - first.count(b"\n")) / max(elapsed, 1e-6)


def settle() -> None:
    """Let the disk catch up before a latency or memory row: the ingest rows leave
    gigabytes of dirty pages whose writeback (and the brokers' flushes of the rolled
    segments) would otherwise stall the next row's appends and checkpoints."""
    os.sync()
    time.sleep(1.0)


def e2e_latency(cluster: LocalCluster) -> dict:
    result = cli(
        cluster,
        "perf",
        "e2e",
        "--topic",
        "e2e",
        "--num-records",
        str(E2E_RECORDS),
        "--throughput",
        str(E2E_RATE),
        "--acks",
        "all",
        "--partitions",
        "1",
        "--replication-factor",
        "3",
        "--json",
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def broker_rss(cluster: LocalCluster) -> float:
    """The largest RSS (MB) among the brokers."""
    return max(rss_mb(cluster.process(f"broker-{b.id}").pid) for b in cluster.state.brokers())


def rss_under_load(cluster: LocalCluster, topic: str) -> tuple[float, float]:
    """(peak broker RSS in MB while `perf produce` writes to every partition of `topic`,
    records/s of that run)."""
    env = {**os.environ, "TRIBUTARY_CLUSTER_DIR": str(cluster.directory)}
    producer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tools",
            "perf",
            "produce",
            "--topic",
            topic,
            "--num-records",
            "200000",
            "--throughput",
            "-1",
            "--acks",
            "all",
            "--json",
        ],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    peak = 0.0
    try:
        while producer.poll() is None:
            peak = max(peak, broker_rss(cluster))
            time.sleep(0.2)
        out = producer.stdout.read() if producer.stdout else ""
    finally:
        if producer.poll() is None:
            producer.kill()
        producer.wait()
    total = json.loads(out.strip().splitlines()[-1])
    return peak, total["records_per_sec"]


def main() -> None:
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        cluster = LocalCluster(
            tmp,
            brokers=3,
            controllers=1,
            base_port=None,
            metrics=False,
            broker_overrides={"zookeeper.session.timeout.ms": SESSION_MS},
            controller_overrides={"zookeeper.session.timeout.ms": SESSION_MS},
        )
        try:
            cluster.up(timeout_s=90)
            bootstrap = cluster.state.bootstrap_servers
            trio.run(
                create_topics,
                bootstrap,
                [
                    NewTopic("rf1", 3, 1),
                    NewTopic("rf3", 3, 3, configs={"min.insync.replicas": "2"}),
                ],
            )
            one = trio.run(throughput, bootstrap, "rf1", 1)
            one_many = trio.run(throughput, bootstrap, "rf1", 1, True)
            three = trio.run(throughput, bootstrap, "rf3", "all")
            three_many = trio.run(throughput, bootstrap, "rf3", "all", True)
            print(f"records: {RECORDS:,} x {len(VALUE)} bytes, linger 5 ms, batch 256 KiB")
            for what, (rate, mib) in (
                ("acks=1   RF 1, send()    ", one),
                ("acks=1   RF 1, send_many ", one_many),
                ("acks=all RF 3, send()    ", three),
                ("acks=all RF 3, send_many ", three_many),
            ):
                print(f"produce {what}: {rate:>10,.0f} records/s  {mib:6.1f} MiB/s")
            print(
                f"acks=all RF 3 / acks=1 RF 1: {three[0] / one[0]:.2f} (send()), "
                f"{three_many[0] / one_many[0]:.2f} (send_many)"
            )
            report(Row("produce 100 B, acks=1, RF 1", one[0], "records/s"))
            report(
                Row(
                    "produce 100 B, acks=1, RF 1, send_many",
                    one_many[0],
                    "records/s",
                    target=">= 500000",
                )
            )
            report(
                Row(
                    "produce 100 B, acks=all, RF 3",
                    three[0],
                    "records/s",
                    "acks=1 RF 1",
                    one[0],
                    ">= 0.5",
                )
            )
            report(
                Row(
                    "produce 100 B, acks=all, RF 3, send_many",
                    three_many[0],
                    "records/s",
                    "acks=1 RF 1, send_many",
                    one_many[0],
                    ">= 0.5",
                )
            )

            loopback = references.loopback_mib_s()
            file_write = references.file_write_mib_s(tmp)
            print(
                f"references: loopback TCP {loopback:,.0f} MiB/s, file writes "
                f"{file_write:,.0f} MiB/s"
            )
            raw_one = trio.run(ingest, cluster, "rf1", 1)
            raw_three = trio.run(ingest, cluster, "rf3", -1)
            print(f"broker ingest, 1 MiB batches, acks=1   RF 1: {raw_one:7.1f} MiB/s")
            print(f"broker ingest, 1 MiB batches, acks=all RF 3: {raw_three:7.1f} MiB/s")
            print(f"acks=all RF 3 / acks=1 RF 1: {raw_three / raw_one:.2f}")
            bound = min(loopback, file_write)
            bound_name = "loopback" if loopback <= file_write else "file write"
            report(
                Row(
                    "ingest 1 MiB batches, acks=1, RF 1",
                    raw_one,
                    "MiB/s",
                    f"{bound_name} (the lower)",
                    bound,
                    ">= 0.5",
                )
            )
            report(
                Row(
                    "ingest 1 MiB batches, acks=all, RF 3",
                    raw_three,
                    "MiB/s",
                    "ingest RF 1",
                    raw_one,
                    ">= 0.3",
                )
            )

            for batches, call in ((False, "poll()"), (True, "poll_batches()")):
                records, mib, cpu = trio.run(consume_all, bootstrap, "rf1", 3, RECORDS, batches)
                print(
                    f"consume from the beginning (library, {call}): {records:,.0f} records/s, "
                    f"{mib:.1f} MiB/s, client CPU {cpu:.2f} us/record"
                )
                name = "consume from the beginning, library" + (f" {call}" if batches else "")
                report(Row(name, records, "records/s", target=">= 1000000"))
            cli_rate = timed_cli_consume(cluster, "rf1", RECORDS)
            printing = print_loop_rate(RECORDS, len(VALUE))
            print(
                f"consume from the beginning (CLI into a pipe): {cli_rate:,.0f} records/s; "
                f"a Python loop printing the same lines: {printing:,.0f}/s"
            )
            report(
                Row(
                    "consume from the beginning, CLI",
                    cli_rate,
                    "records/s",
                    "python print loop",
                    printing,
                )
            )

            settle()
            e2e = e2e_latency(cluster)
            print(
                f"end-to-end latency at {E2E_RATE:,} records/s, acks=all, RF 3: "
                f"p50 {e2e['p50_ms']:.2f} ms, p99 {e2e['p99_ms']:.2f} ms, "
                f"max {e2e['max_latency_ms']:.1f} ms"
            )
            report(
                Row(
                    f"e2e latency p50 at {E2E_RATE:,}/s, acks=all, RF 3",
                    e2e["p50_ms"],
                    "ms",
                    target="<= 2",
                )
            )
            report(
                Row(
                    f"e2e latency p99 at {E2E_RATE:,}/s, acks=all, RF 3",
                    e2e["p99_ms"],
                    "ms",
                    target="<= 10",
                )
            )

            # Controlled shutdown of the broker leading the most of 300 partitions.
            trio.run(create_topics, bootstrap, [NewTopic("many", 300, 3)])
            time.sleep(3)  # their leaders elected
            view = read_cluster(cluster.state.zookeeper_connect)
            led: dict[int, int] = {}
            for p in view.partitions:
                if p.topic == "many":
                    led[p.leader] = led.get(p.leader, 0) + 1
            broker = max(led, key=led.get)
            started = time.monotonic()
            cluster.stop(f"broker-{broker}")
            took = time.monotonic() - started
            view = read_cluster(cluster.state.zookeeper_connect)
            still = sum(1 for p in view.partitions if p.topic == "many" and p.leader == broker)
            print(
                f"controlled shutdown of a broker leading {led[broker]} partitions: "
                f"{took:.2f} s (partitions it still led afterwards: {still})"
            )
            cluster.start(f"broker-{broker}")
            time.sleep(5)  # let it rejoin the ISRs before the failover run

            elapsed, metadata, victim = trio.run(failover_time, cluster, bootstrap)
            print(
                f"SIGKILL of a leader -> first acks=all produce on the new leader: {elapsed:.2f} s "
                f"(ZooKeeper session timeout {SESSION_MS / 1000:.0f} s; acked at offset "
                f"{metadata.offset})"
            )
            report(
                Row(
                    "leader SIGKILL -> first acks=all produce on the new leader",
                    elapsed,
                    "s",
                    "ZooKeeper session timeout + 0.5 s",
                    SESSION_MS / 1000 + 0.5,
                    "<= 1",
                )
            )
            cluster.start(f"broker-{victim}")
            time.sleep(5)

            settle()
            trio.run(create_topics, bootstrap, [NewTopic("thousand", MANY_PARTITIONS, 3)])
            time.sleep(5)  # leaders elected, replicas caught up: idle
            idle = broker_rss(cluster)
            peak, rate = rss_under_load(cluster, "thousand")
            print(
                f"broker RSS with {MANY_PARTITIONS:,} more partitions: idle {idle:.1f} MB, "
                f"peak under load {peak:.1f} MB (perf produce {rate:,.0f} records/s)"
            )
            report(
                Row(f"broker RSS idle, +{MANY_PARTITIONS:,} partitions", idle, "MB", target="<= 60")
            )
            report(
                Row(
                    f"broker RSS under load, +{MANY_PARTITIONS:,} partitions",
                    peak,
                    "MB",
                    target="<= 60",
                )
            )
        finally:
            cluster.down(timeout_s=20)


if __name__ == "__main__":
    main()
