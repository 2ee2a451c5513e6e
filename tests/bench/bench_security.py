"""PLAINTEXT next to SASL_SSL (SCRAM-SHA-512), same cluster, same run, native protocol.

One real cluster (3 broker processes, 1 controller, ZooKeeper) whose brokers each have
two native-protocol listeners: PLAINTEXT (also the inter-broker one) and SASL_SSL (TLS
with certificates from a CA made here by trustme, SCRAM-SHA-512 as a user created through
the admin API), configured as tests/integration/test_secure_listeners.py does. Through
each, Tributary's producer and consumer: produce throughput (acks=1, RF 1, 100-byte
values), consume throughput (from the beginning), and end-to-end latency p50/p99 (one
record at a time: send, then poll until the consumer has it). Prints figures and ratios
and reports the SASL_SSL rows with the PLAINTEXT figures as their references
(tests/bench/table.py).

Then the same one-at-a-time latency of a good SASL_SSL client, idle and while 1,000
PLAIN logins with a wrong password come from one address (50 at a time, from a process
of their own, against the SASL_SSL listener of the broker that leads the client's
partition; tests/support/sasl_hostile.py): p50/p99 during the failures, reported with
the idle figures as their references (the issue's target: within 2x); twice: with no
limit on new connections (Kafka's default), then with `max.connection.creation.rate`
(KIP-612) set live to 100 a second as a cluster-wide dynamic broker config. The cluster
is stopped by pid at the end.
"""

from __future__ import annotations

import concurrent.futures
import logging
import multiprocessing
import os
import pathlib
import tempfile
import time

import trio
import trustme

from client.admin import NewTopic, open_admin
from client.admin.users import UserScramCredentialUpsertion
from client.consumer import open_consumer
from client.producer import open_producer
from client.protocol.types import TopicPartition
from tests.bench.table import Row, report
from tests.integration.helpers import partition_state
from tests.support.sasl_hostile import run_failed_login_storm
from tools.cluster.launcher import LocalCluster

VALUE = b"x" * 100
RECORDS = int(os.environ.get("BENCH_SECURITY_RECORDS", "50000"))
LATENCY_SAMPLES = int(os.environ.get("BENCH_SECURITY_LATENCY_SAMPLES", "300"))
FAILED_LOGINS = int(os.environ.get("BENCH_SECURITY_FAILED_LOGINS", "1000"))
FAILED_LOGIN_CONCURRENCY = 50
STORM_TOPIC = "sasl-storm"
# The second storm's limit on new connections (KIP-612): 1,000 logins take ~10 s.
CREATION_RATE = 100
PARTITIONS = 3
USER, PASSWORD = "bench", "bench-scram-secret"
PLAIN_JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule required"


def make_pki(directory: pathlib.Path) -> pathlib.Path:
    ca = trustme.CA()
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(
        str(directory / "broker.pem")
    )
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    return directory


def broker_overrides(pki: pathlib.Path) -> dict:
    """PLAINTEXT stays PLAINTEXT (clients, replication, the controller); the second
    listener (named KAFKA by the launcher) speaks the native protocol over SASL_SSL."""
    return {
        "listener.wire.protocol.map": "KAFKA:tributary",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,KAFKA:SASL_SSL",
        "ssl.keystore.location": str(pki / "broker.pem"),
        "ssl.truststore.location": str(pki / "ca.pem"),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",  # PLAIN: the failed logins
        "sasl.jaas.config": f'{PLAIN_JAAS} username="broker" password="unused";',
    }


def scram_options(pki: pathlib.Path) -> dict:
    return {
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(pki / "ca.pem"),
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": USER,
        "sasl_plain_password": PASSWORD,
    }


async def prepare(bootstrap: str) -> None:
    async with open_admin(bootstrap) as admin:
        results = await admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(USER, "SCRAM-SHA-512", PASSWORD)]
        )
        assert results == {USER: None}, results
        created = await admin.create_topics(
            [
                NewTopic(f"{name}-{kind}", PARTITIONS, 1)
                for name in ("plain", "sasl")
                for kind in ("bulk", "lat")
            ]
            + [NewTopic(STORM_TOPIC, 1, 1)]
        )
        assert all(error is None for error in created.values()), created


async def set_creation_rate(bootstrap: str, rate: int) -> None:
    """max.connection.creation.rate as a cluster-wide dynamic broker config (live)."""
    async with open_admin(bootstrap) as admin:
        error = await admin.alter_configs_incrementally(
            set_configs={"max.connection.creation.rate": str(rate)}
        )
        assert error is None, error
    await trio.sleep(1.0)  # every broker applies it from /config/changes


async def produce(bootstrap: str, topic: str, options: dict) -> float:
    """Records/s of one producer sending RECORDS values with acks=1."""
    async with open_producer(
        bootstrap, acks=1, linger_ms=5, batch_size=256 * 1024, **options
    ) as producer:
        await (await producer.send(topic, VALUE))  # warm up: metadata, connections, login
        started = time.perf_counter()
        last = [await producer.send(topic, VALUE) for _ in range(RECORDS)][-10:]
        await producer.flush()
        elapsed = time.perf_counter() - started
        for handle in last:
            await handle
    return RECORDS / elapsed


async def consume(bootstrap: str, topic: str, count: int, options: dict) -> float:
    async with open_consumer(bootstrap, **options) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        started = time.perf_counter()
        seen = 0
        with trio.move_on_after(120):
            while seen < count:
                seen += len(await consumer.poll(500))
        return seen / (time.perf_counter() - started)


async def _one_at_a_time(producer, consumer, topic: str, index: int) -> float:
    """ms from send() to the consumer's poll() returning that record (partition 0)."""
    value = b"%d" % index
    started = time.perf_counter()
    await producer.send(topic, value, partition=0)
    with trio.fail_after(30):
        while not any(r.value == value for r in await consumer.poll(100)):
            pass
    return (time.perf_counter() - started) * 1000


async def _warm_up(producer, consumer, topic: str) -> None:
    consumer.assign([TopicPartition(topic, 0)])
    await (await producer.send(topic, b"warm-up", partition=0))
    consumer.seek_to_beginning()
    with trio.fail_after(60):
        while not await consumer.poll(500):
            pass


def _p50_p99(samples: list[float]) -> tuple[float, float]:
    samples = sorted(samples)
    return samples[len(samples) // 2], samples[min(len(samples) - 1, len(samples) * 99 // 100)]


async def latency(bootstrap: str, topic: str, options: dict) -> tuple[float, float]:
    """(p50, p99) ms from send() to the consumer's poll() returning that record, one
    record at a time, to partition 0."""
    async with (
        open_producer(bootstrap, acks=1, linger_ms=0, **options) as producer,
        open_consumer(bootstrap, **options) as consumer,
    ):
        await _warm_up(producer, consumer, topic)
        samples = [
            await _one_at_a_time(producer, consumer, topic, i) for i in range(LATENCY_SAMPLES)
        ]
    return _p50_p99(samples)


async def latency_during_failed_logins(
    bootstrap: str, options: dict, storm_port: int, cafile: str
) -> dict[str, float]:
    """One-at-a-time latency of a good SASL_SSL client idle, then while FAILED_LOGINS
    wrong-password PLAIN logins hit `storm_port` from another process."""
    async with (
        open_producer(bootstrap, acks=1, linger_ms=0, **options) as producer,
        open_consumer(bootstrap, **options) as consumer,
    ):
        await _warm_up(producer, consumer, STORM_TOPIC)
        idle = [
            await _one_at_a_time(producer, consumer, STORM_TOPIC, i) for i in range(LATENCY_SAMPLES)
        ]
        during: list[float] = []
        with concurrent.futures.ProcessPoolExecutor(
            1, mp_context=multiprocessing.get_context("spawn")
        ) as pool:
            pool.submit(int).result()  # the process is up before the clock starts
            started = time.perf_counter()
            storm = pool.submit(
                run_failed_login_storm,
                [("native", storm_port)],
                cafile,
                USER,
                FAILED_LOGINS,
                FAILED_LOGIN_CONCURRENCY,
            )
            while not storm.done():
                during.append(
                    await _one_at_a_time(
                        producer, consumer, STORM_TOPIC, LATENCY_SAMPLES + len(during)
                    )
                )
            outcomes = storm.result()
            storm_s = time.perf_counter() - started
    print(f"{FAILED_LOGINS} failed logins in {storm_s:.1f} s: {outcomes}; {len(during)} samples")
    idle_p50, idle_p99 = _p50_p99(idle)
    p50, p99 = _p50_p99(during)
    return {"idle_p50": idle_p50, "idle_p99": idle_p99, "p50": p50, "p99": p99}


async def measure(bootstrap: str, name: str, options: dict) -> dict[str, float]:
    produced = await produce(bootstrap, f"{name}-bulk", options)
    consumed = await consume(bootstrap, f"{name}-bulk", RECORDS + 1, options)
    p50, p99 = await latency(bootstrap, f"{name}-lat", options)
    return {"produce": produced, "consume": consumed, "p50": p50, "p99": p99}


FIGURES = (
    ("produce", "produce acks=1 RF 1", "records/s"),
    ("consume", "consume from the beginning", "records/s"),
    ("p50", "e2e latency p50 (one at a time)", "ms"),
    ("p99", "e2e latency p99 (one at a time)", "ms"),
)


def main() -> None:
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="bench-security-") as tmp:
        pki = make_pki(pathlib.Path(tmp))
        cluster = LocalCluster(
            pathlib.Path(tmp) / "cluster",
            brokers=3,
            controllers=1,
            base_port=None,
            metrics=False,
            broker_overrides=broker_overrides(pki),
        )
        try:
            cluster.up(timeout_s=90)
            plaintext = cluster.state.bootstrap_servers
            sasl_ssl = cluster.state.kafka_bootstrap_servers  # the native SASL_SSL listener
            trio.run(prepare, plaintext)
            time.sleep(1.0)  # the SCRAM credential reaches every broker (/config/changes)
            plain = trio.run(measure, plaintext, "plain", {})
            secure = trio.run(measure, sasl_ssl, "sasl", scram_options(pki))
            leader = partition_state(cluster, STORM_TOPIC, 0).leader
            storm_port = cluster.process(f"broker-{leader}").kafka_port
            assert storm_port is not None
            storms = {}
            for rate in (None, CREATION_RATE):
                if rate is not None:
                    trio.run(set_creation_rate, plaintext, rate)
                storms[rate] = trio.run(
                    latency_during_failed_logins,
                    sasl_ssl,
                    scram_options(pki),
                    storm_port,
                    str(pki / "ca.pem"),
                )
        finally:
            cluster.down(timeout_s=20)
    print(f"records: {RECORDS:,} x {len(VALUE)} bytes, linger 5 ms; latency: {LATENCY_SAMPLES}")
    print(f"{'':36}{'PLAINTEXT':>14}{'SASL_SSL':>14}{'ratio':>8}")
    for key, label, unit in FIGURES:
        ratio = secure[key] / plain[key]
        print(f"{label + f' ({unit})':36}{plain[key]:>14,.1f}{secure[key]:>14,.1f}{ratio:>8.2f}")
    for key, label, unit in FIGURES:
        report(
            Row(
                f"{label}, SASL_SSL SCRAM-SHA-512 (native)",
                secure[key],
                unit,
                "PLAINTEXT",
                plain[key],
            )
        )
    for rate, storm in storms.items():
        limit = "no limit" if rate is None else f"max.connection.creation.rate={rate}"
        print(
            f"e2e latency of a good SASL_SSL client, {FAILED_LOGINS} failed logins from one "
            f"address ({limit}):"
        )
        for key in ("p50", "p99"):
            idle, during = storm[f"idle_{key}"], storm[key]
            print(f"  {key}: idle {idle:.2f} ms, during {during:.2f} ms, ratio {during / idle:.2f}")
            report(
                Row(
                    f"e2e latency {key}, SASL_SSL, during {FAILED_LOGINS:,} failed logins "
                    f"({limit})",
                    during,
                    "ms",
                    "idle",
                    idle,
                    target="<= 2",
                )
            )
