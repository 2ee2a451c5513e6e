"""One transactional chaos run: the workload (txn_workload.py) against a `ChaosCluster`,
faults meanwhile, then everything read back and judged by the transactional checker.

How it works: `run_transactions(cluster, ...)` creates an input and an output topic
(RF 3, min.insync.replicas 2), starts the workload, lets it run `before_s`, calls
`faults(window)` (blocking), optionally injects a late write (`late_write`), lets it
run `after_s`, stops the clients (each finishes its transaction), restores the cluster,
reads every partition with read_committed and read_uncommitted, and returns the
`TxnRun`: the history, the checker's verdict, the client errors and the late write's
answer.

- `TxnNemesis`: the randomized nemesis (nemesis.py) with one more kind,
  `kill_coordinator`: SIGKILL the broker that coordinates a writer's transactional id
  (found with FindCoordinator, key type 1) and start it again 1-3 s later.
- `late_write`: the write KAFKA-17754 is about, made on purpose. A producer gets an id
  and epoch for a transactional id of its own (InitProducerId) and, without adding the
  partition to a transaction, sends a transactional batch to it, as a Produce request
  delayed past its transaction's end would arrive. KIP-890's check refuses it (the
  partition is in no ongoing transaction of that producer); without the check it
  lands, opens a transaction no coordinator knows of, and holds the partition's last
  stable offset for ever: the committed writes after it are never read_committed
  (lost writes to the checker). Its value enters the history as an ABORTED transaction.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from client.connection import open_connection
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.records import Record
from client.protocol.records.kafka_format import build_kafka_batch
from tests.chaos.cluster import ChaosCluster
from tests.chaos.nemesis import Nemesis
from tests.chaos.scenario import FaultWindow, make_topic, wait_for_leaders
from tests.chaos.txn_checker import ABORTED, History, Txn, TxnVerdict, check
from tests.chaos.txn_workload import Workload

ADD_PARTITIONS_TO_TXN = 24  # Kafka's api key

# Faults short enough for `make test` (each is followed by a full restoration).
SHORT_KINDS = ("kill_coordinator", "kill_broker", "cut_link", "kill_controller", "pause_short")
ALL_KINDS = (*SHORT_KINDS, "pause_long", "controlled_stop", "pause_zookeeper")


# -- the transaction coordinator --------------------------------------------------------


def find_txn_coordinator(
    cluster: ChaosCluster, transactional_id: str, timeout_s=30.0, *, key_type: int = 1
) -> int:
    """The broker id coordinating `transactional_id` (FindCoordinator, key type 1; with
    `key_type=0` the coordinator of the group of that id), asked of each live broker in
    turn until one answers."""

    async def ask(port: int) -> int | None:
        async with open_connection("127.0.0.1", port) as conn:
            request = m.FindCoordinatorRequest(key=transactional_id, key_type=key_type)
            response = await conn.request(request, timeout_s=5)
        return response.node_id if response.error_code == ErrorCode.NONE else None

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for broker in cluster.state.brokers():
            try:
                node = trio.run(ask, broker.port)
            except Exception:  # noqa: BLE001 - down or not ready: ask another
                continue
            if node is not None and node >= 0:
                return node
        time.sleep(0.5)
    raise AssertionError(f"no coordinator for transactional id {transactional_id!r}")


class TxnNemesis(Nemesis):
    """The seeded nemesis over `kinds`, plus killing a transaction coordinator."""

    def __init__(
        self,
        cluster: ChaosCluster,
        topic: str,
        seed: int,
        duration_s: float,
        *,
        kinds: tuple[str, ...] = SHORT_KINDS,
        transactional_ids: list[str],
    ):
        super().__init__(cluster, topic, seed, duration_s)
        self.kinds = kinds
        self.transactional_ids = transactional_ids

    def __call__(self, window: FaultWindow) -> None:
        deadline = time.monotonic() + self.duration_s
        kinds = list(self.kinds)
        self.rng.shuffle(kinds)  # the first round covers every kind once,
        kinds.sort(key=lambda kind: kind == "kill_coordinator")  # this one first
        while time.monotonic() < deadline:
            kind = kinds.pop() if kinds else self.rng.choice(self.kinds)
            started = time.monotonic()
            getattr(self, kind)(window)
            window.end()
            self.counts[kind] += 1
            self.cluster.restore([self.topic], timeout_s=90)
            self.log.append(f"{kind} ({time.monotonic() - started:.1f} s)")
            time.sleep(self.rng.uniform(0.3, 1.0))

    def kill_coordinator(self, window: FaultWindow) -> None:
        transactional_id = self.rng.choice(self.transactional_ids)
        name = f"broker-{find_txn_coordinator(self.cluster, transactional_id)}"
        window.begin()
        self.cluster.kill(name, signal.SIGKILL)
        self._hold(1, 3)
        self.cluster.start(name)
        wait_for_leaders(self.cluster, self.topic)


# -- the late write ---------------------------------------------------------------------


def late_write(cluster: ChaosCluster, topic: str, partition: int, value: str) -> ErrorCode:
    """A transactional batch to a partition its producer never added to a transaction;
    the Produce answer's error (NONE: it was appended)."""
    transactional_id = f"late-{value}"
    coordinator = find_txn_coordinator(cluster, transactional_id)
    leader = cluster.partition(topic, partition).leader
    ports = {b.id: b.port for b in cluster.state.brokers()}

    async def go() -> ErrorCode:
        async with open_connection("127.0.0.1", ports[coordinator]) as conn:
            ids = await conn.request(
                m.InitProducerIdRequest(
                    transactional_id=transactional_id, transaction_timeout_ms=60_000
                ),
                timeout_s=20,
            )
        if ids.error_code != ErrorCode.NONE:
            raise AssertionError(f"InitProducerId: {ErrorCode.from_code(ids.error_code).name}")
        record = Record(None, value.encode(), int(time.time() * 1000), ())
        batch = build_kafka_batch(
            [record],
            producer_id=ids.producer_id,
            producer_epoch=ids.producer_epoch,
            base_sequence=0,
            transactional=True,
        )
        request = m.ProduceRequest(
            transactional_id=transactional_id,
            acks=-1,
            timeout_ms=10_000,
            topics=[
                m.ProduceTopic(
                    name=topic, partitions=[m.ProducePartition(partition=partition, records=batch)]
                )
            ],
        )
        async with open_connection("127.0.0.1", ports[leader]) as conn:
            response = await conn.request(request, timeout_s=20)
        return ErrorCode.from_code(response.topics[0].partitions[0].error_code)

    return trio.run(go)


# -- one run ----------------------------------------------------------------------------


@dataclass
class TxnSummary:
    """A run's verdict as the chaos suite's end-of-session table (conftest.py)."""

    title: str
    verdict: TxnVerdict
    faults: dict[str, int] = field(default_factory=dict)

    def table(self) -> str:
        lines = [self.verdict.table(self.title)]
        if self.faults:
            lines.append("faults: " + ", ".join(f"{k}={n}" for k, n in sorted(self.faults.items())))
        return "\n".join(lines)


@dataclass
class TxnRun:
    history: History
    verdict: TxnVerdict
    errors: list[str] = field(default_factory=list)
    late_write: ErrorCode | None = None
    faults: list[str] = field(default_factory=list)


def run_transactions(
    cluster: ChaosCluster,
    name: str,
    *,
    seed: int,
    faults: Callable[[FaultWindow], None] | None = None,
    inject_late_write: bool = False,
    before_s: float = 3.0,
    after_s: float = 3.0,
    partitions: int = 4,
    writers: int = 2,
    copiers: int = 2,
) -> TxnRun:
    source = make_topic(cluster, f"{name}-in", partitions=partitions)
    target = make_topic(cluster, f"{name}-out", partitions=partitions)
    workload = Workload(
        cluster.state.kafka_bootstrap_servers,
        source,
        target,
        partitions,
        seed,
        writers=writers,
        copiers=copiers,
    ).start()
    window = FaultWindow()
    late: ErrorCode | None = None
    late_txn: Txn | None = None
    try:
        time.sleep(before_s)
        if faults is not None:
            faults(window)
            window.end()
        if inject_late_write:
            value = f"late-{name}-{random.Random(seed).randrange(1 << 30)}"
            late = late_write(cluster, source, 0, value)
            late_txn = Txn(f"late.{value}", "late", ((source, 0, value),), ABORTED)
        time.sleep(after_s)
    finally:
        workload.stop()
    cluster.restore([source, target], timeout_s=90)
    history = workload.history()
    if late_txn is not None:
        history.txns.append(late_txn)
    return TxnRun(history, check(history), list(workload.recorder.errors), late)
