"""One chaos run: a verifiable producer (acks=all) and a verifiable consumer as real
processes against a `ChaosCluster`, faults injected meanwhile, then the checker.

How it works: `run_with_faults(cluster, topic, faults, ...)` starts the consumer (it
reads the topic from the beginning throughout) and the producer, lets traffic flow for
`before_s`, calls `faults(window)` (a blocking function that injects whatever it wants
and records in `window` when single-broker faults were active), lets traffic flow for
`after_s`, stops the producer (SIGTERM: it flushes what is in flight), restores the
cluster (links healed, everything running, full ISRs), waits until the consumer has read
every acknowledged value (or stops making progress), stops it, reads the healed log
from the beginning with a fresh consumer (the audit: what is there now), reads every
replica from disk and returns the `Verdict`. `idempotent` is passed to the producer as
`--enable-idempotence` / `--no-enable-idempotence` (None: the producer's default).
Against a secure cluster every tool logs in as its admin (`cluster.command_config`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.chaos.checker import Verdict, check
from tests.chaos.cluster import ChaosCluster
from tests.chaos.tools import VerifiableConsumer, VerifiableProducer
from tests.integration.helpers import create_topic

_runs = itertools.count()


@dataclass
class FaultWindow:
    """Wall-clock spans (start, end) during which a single-broker fault was active."""

    spans: list[tuple[float, float]] = field(default_factory=list)
    _open: float | None = None

    def begin(self) -> None:
        self._open = time.time()

    def end(self) -> None:
        if self._open is not None:
            self.spans.append((self._open, time.time()))
            self._open = None

    def contains(self, t: float) -> bool:
        return any(a <= t <= b for a, b in self.spans)


def wait_for_leaders(cluster: ChaosCluster, topic: str, timeout_s: float = 60) -> None:
    """Until every partition of `topic` is led by a registered broker again (the end of
    the outage a broker fault causes)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            view = cluster.view()
        except Exception:  # noqa: BLE001 - ZooKeeper unreachable: not yet
            view = None
        if view is not None:
            parts = [p for p in view.partitions if p.topic == topic]
            if parts and all(p.leader in view.brokers for p in parts):
                return
        time.sleep(0.1)
    raise AssertionError(f"{topic}: partitions without a live leader after {timeout_s}s")


def make_topic(cluster: ChaosCluster, name: str, partitions: int = 3, **config) -> str:
    create_topic(cluster, name, partitions, 3, **{"min.insync.replicas": 2, **config})
    cluster.restore([name])
    return name


def run_with_faults(
    cluster: ChaosCluster,
    topic: str,
    faults: Callable[[FaultWindow], None] | None,
    *,
    before_s: float = 2.0,
    after_s: float = 3.0,
    throughput: int = 200,
    idempotent: bool | None = None,
    partitions: int = 3,
    log_dir: Path | None = None,
    consume_timeout_s: float = 90.0,
) -> Verdict:
    log_dir = Path(log_dir or cluster.directory)
    run = next(_runs)
    bootstrap = cluster.state.bootstrap_servers
    window = FaultWindow()
    consumer = VerifiableConsumer(
        bootstrap, topic, log_dir / f"consumer-{run}.log", command_config=cluster.command_config
    )
    producer = None
    try:
        consumer.wait_for("partitions_assigned", 60)
        producer = VerifiableProducer(
            bootstrap,
            topic,
            log_dir / f"producer-{run}.log",
            throughput=throughput,
            idempotent=idempotent,
            command_config=cluster.command_config,
        )
        producer.wait_for("startup_complete", 60)
        time.sleep(before_s)
        if faults is not None:
            faults(window)
        window.end()
        time.sleep(after_s)
        producer.stop(timeout_s=90)
        cluster.restore([topic])
        consumer.wait_for_values(list(producer.acked), consume_timeout_s, idle_s=5)
    finally:
        if producer is not None:
            producer.stop(timeout_s=30)
        consumer.stop(timeout_s=20)
    audit = read_everything(cluster, topic, producer.acked, log_dir / f"audit-{run}.log")
    replicas = {p: settled_replicas(cluster, topic, p) for p in range(partitions)}
    verdict = check(
        producer.acked,
        audit.records,
        observed=consumer.records,
        failed=len(producer.failed),
        replicas=replicas,
    )
    verdict.lost_in_fault_window = [
        v for v in verdict.lost if window.contains(producer.ack_times.get(v, -1.0))
    ]
    for ack_time, latency in producer.latencies:
        verdict.latencies_ms.append(latency)
        if window.contains(ack_time - latency / 1000):  # sent while a fault was active
            verdict.fault_latencies_ms.append(latency)
    return verdict


def read_everything(cluster, topic: str, expected, log_path: Path):
    """A fresh verifiable consumer reading the healed log from the beginning, until it
    has every expected value or reads nothing new for 10 s."""
    audit = VerifiableConsumer(
        cluster.state.bootstrap_servers, topic, log_path, command_config=cluster.command_config
    )
    try:
        audit.wait_for("partitions_assigned", 60)
        audit.wait_for_values(list(expected), 60 + len(expected) / 1000, idle_s=10)
    finally:
        audit.stop(timeout_s=20)
    return audit


def settled_replicas(cluster: ChaosCluster, topic: str, partition: int, timeout_s: float = 20):
    """The replicas read from disk once their ends agree (followers caught up)."""
    deadline = time.monotonic() + timeout_s
    while True:
        logs = cluster.replica_logs(topic, partition)
        ends = {max(log) + 1 if log else 0 for log in logs.values()}
        if len(ends) <= 1 or time.monotonic() > deadline:
            return logs
        time.sleep(0.25)
