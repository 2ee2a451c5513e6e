"""Real-cluster benchmarks: three broker processes, one controller, ZooKeeper.

1. Produce throughput: acks=1 to an RF 1 topic next to acks=all to an RF 3 topic
   (min.insync.replicas=2), same producer settings, 100-byte values, in one run; once
   through the Python producer (client-bound: it builds every record), and once with
   pre-built 1 MiB batches sent straight to the leaders, pipelined (the brokers' own
   ingest rate, replication included).
2. Failover: SIGKILL the leader of a partition while producing to it with acks=all;
   time until the first successful produce on the new leader (bounded below by the
   ZooKeeper session timeout: that is when the controller learns of the death).
3. Controlled shutdown: SIGTERM a broker that leads ~100 partitions; time until it
   exited, its leaderships moved away first.
Prints figures only. The cluster lives in a temp dir and is stopped by pid at the end.
"""

from __future__ import annotations

import logging
import os
import signal
import tempfile
import time

import trio

from client.admin import NewTopic, open_admin
from client.connection import open_connection
from client.producer import open_producer
from client.protocol import messages as m
from client.protocol.records import Record, build_batch
from tools.cluster.inspect import read_cluster
from tools.cluster.launcher import LocalCluster

VALUE = b"x" * 100
RECORDS = int(os.environ.get("BENCH_CLUSTER_RECORDS", "100000"))
SESSION_MS = 6_000


async def create_topics(bootstrap: str, topics: list[NewTopic]) -> None:
    async with open_admin(bootstrap) as admin:
        await admin.create_topics(topics)


async def throughput(bootstrap: str, topic: str, acks) -> tuple[float, float]:
    async with open_producer(
        bootstrap, acks=acks, linger_ms=5, batch_size=256 * 1024, max_request_size=4 << 20
    ) as producer:
        await (await producer.send(topic, VALUE))  # warm up: metadata and connections
        started = time.perf_counter()
        handles = [await producer.send(topic, VALUE) for _ in range(RECORDS)]
        await producer.flush()
        elapsed = time.perf_counter() - started
        for handle in handles[-10:]:
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


async def failover_time(cluster: LocalCluster, bootstrap: str) -> float:
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
                return time.monotonic() - killed_at, metadata


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
                    NewTopic("many", 300, 3),
                ],
            )
            one = trio.run(throughput, bootstrap, "rf1", 1)
            three = trio.run(throughput, bootstrap, "rf3", "all")
            print(f"records: {RECORDS:,} x {len(VALUE)} bytes, linger 5 ms, batch 256 KiB")
            print(f"produce acks=1   RF 1: {one[0]:>10,.0f} records/s  {one[1]:6.1f} MiB/s")
            print(f"produce acks=all RF 3: {three[0]:>10,.0f} records/s  {three[1]:6.1f} MiB/s")
            print(f"acks=all RF 3 / acks=1 RF 1: {three[0] / one[0]:.2f}")
            raw_one = trio.run(ingest, cluster, "rf1", 1)
            raw_three = trio.run(ingest, cluster, "rf3", -1)
            print(f"broker ingest, 1 MiB batches, acks=1   RF 1: {raw_one:7.1f} MiB/s")
            print(f"broker ingest, 1 MiB batches, acks=all RF 3: {raw_three:7.1f} MiB/s")
            print(f"acks=all RF 3 / acks=1 RF 1: {raw_three / raw_one:.2f}")

            # Controlled shutdown of the broker leading the most of 300 partitions.
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

            elapsed, metadata = trio.run(failover_time, cluster, bootstrap)
            print(
                f"SIGKILL of a leader -> first acks=all produce on the new leader: {elapsed:.2f} s "
                f"(ZooKeeper session timeout {SESSION_MS / 1000:.0f} s; acked at offset "
                f"{metadata.offset})"
            )
        finally:
            cluster.down(timeout_s=20)


if __name__ == "__main__":
    main()
