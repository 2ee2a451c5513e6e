"""Broker CPU per follower fetch at 1,000 partitions, with and without fetch sessions
(KIP-227).

A follower of 1,000 partitions that are mostly idle, with a trickle of produce: without
sessions every fetch names all 1,000 partitions and every answer describes all 1,000;
in a session a fetch names only the partitions whose offset moved and the answer only
those with news (the leader still reads every partition of the session, as Kafka's does).
Two measures, each with sessions and without (`max.incremental.fetch.session.cache.slots`
= 0, which Kafka also takes as "no sessions"):

1. In process, without sockets (as bench_replication_cycle.py): the real leader
   (`RequestHandlers` over a `ReplicaManager` with 1,000 partitions, RF 2) and the real
   follower (`ReplicaFetcher`'s request building and session handling, `FollowerFetch`
   applying the answers over its own `ReplicaManager`), the native wire codec between
   them. Each cycle is one follower fetch in a trickle: the fetch finds nothing new and
   waits in the leader's fetch purgatory, one record produced to the next partition
   (acks=1) completes it. The leader's CPU for the cycle (decode the fetch, read every
   partition, park it; the produce, which completes it and reads every partition again;
   encode the answer) and the follower's (decode the answer, apply it, build the next
   request), in CPU time (`time.process_time`: a busy machine stretches wall time, not
   this), best of several repeats, in microseconds.
2. A real cluster: two broker processes and a controller, a topic of 1,000 partitions all
   led by broker 1 and followed by broker 2, `TRICKLE` records a second (acks=all)
   produced to random partitions for `WINDOW_S` seconds. Broker 1's CPU time (utime +
   stime from /proc) over the window, per follower fetch it answered in it (its
   `requests_total{request="Fetch"}`: the follower is the only fetcher). That figure
   also carries broker 1's fixed costs (timers over 1,000 partitions, metrics, ZooKeeper)
   and the produce requests, so the headline is the CPU above an idle baseline (the
   follower frozen with SIGSTOP for `IDLE_S` seconds, nothing produced) per fetch. With
   sessions the follower answers faster, so it fetches more often for the same trickle:
   the fetch rates are printed too. Best of `CLUSTER_ROUNDS` clusters each way, run
   alternately.

`main()` prints both and their ratios and reports the rows (tests/bench/table.py).
`BENCH_FETCH_SESSIONS_CLUSTER=0` skips the real cluster.
"""

from __future__ import annotations

import gc
import os
import random
import shutil
import signal
import tempfile
import time
import types
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import trio

from broker.core.fetch_sessions import FetchManager, FetchSessionCache, FetchSessionConfig
from broker.core.follower_fetch import FetchPhase
from broker.core.log.config import LogConfig
from broker.core.log.manager import LogManager
from broker.core.metadata_cache import MetadataCache
from broker.core.partition import PartitionStateUpdate
from broker.core.replica_manager import ReplicaManager, ReplicationConfig
from broker.handlers import RequestHandlers
from broker.handlers.metadata_changes import MetadataChanges
from broker.handlers.topics import TopicDefaults
from broker.tasks.fetcher import ReplicaFetcher
from broker.zookeeper.registration import BrokerIdentity
from client.admin import NewTopic, open_admin
from client.producer import open_producer
from client.protocol import messages as m
from client.protocol.connection import ClientConnection
from client.protocol.records import Record, build_batch
from server_common.network import NativeWire, Reply
from tests.bench.table import Row, report
from tools.cluster.launcher import LocalCluster

PARTITIONS = 1_000
TOPIC = "idle"
CYCLES = 300
REPEATS = 5
NOW = 1_700_000_000_000
TRICKLE = 20  # records a second, in the real cluster
WINDOW_S = 30.0
IDLE_S = 20.0
CLUSTER_ROUNDS = 2
CLUSTER = os.environ.get("BENCH_FETCH_SESSIONS_CLUSTER", "1") != "0"


def _run_handler(coroutine):
    """Run a handler that never suspends (Produce and Fetch don't) to its answer."""
    try:
        coroutine.send(None)
    except StopIteration as stop:
        return stop.value
    raise RuntimeError("the handler suspended")


def _states() -> list[PartitionStateUpdate]:
    return [PartitionStateUpdate(TOPIC, p, 1, 1, 0, (1, 2), 0, (1, 2)) for p in range(PARTITIONS)]


def in_process_us(directory: Path, sessions: bool) -> tuple[float, float]:
    """(leader CPU, follower CPU) per follower fetch, in microseconds."""
    config = LogConfig()
    managers = [
        LogManager.open(directory / f"{name}-{sessions}", config, now_ms=NOW)
        for name in ("leader", "follower")
    ]
    leader_rm, follower_rm = (
        ReplicaManager(
            broker_id, manager, ReplicationConfig(), log_config_for=lambda t: config, now_ms=NOW
        )
        for broker_id, manager in zip((1, 2), managers, strict=True)
    )
    leader_rm.become_leader_or_follower(NOW, 1, _states())
    follower_rm.become_leader_or_follower(NOW, 1, _states())
    for state in follower_rm.followers.states.values():
        state.phase = FetchPhase.FETCHING  # truncation is not timed here
    slots = 1_000 if sessions else 0
    handlers = RequestHandlers(
        leader_rm,
        MetadataCache(),
        None,
        identity=BrokerIdentity(1),
        topic_configs=None,
        metadata_changes=MetadataChanges(),
        topic_defaults=TopicDefaults(),
        default_log_config=config,
        clock=lambda: NOW,
        log_dir=str(directory),
        fetch_sessions=FetchManager(FetchSessionCache(FetchSessionConfig(max_slots=slots))),
    )
    fetcher = ReplicaFetcher(types.SimpleNamespace(broker_id=2, replica_manager=follower_rm), 1)
    follower_client = ClientConnection()
    leader_wire = NativeWire(max_frame_bytes=1 << 26)
    producer, producer_wire = ClientConnection(), NativeWire(max_frame_bytes=1 << 26)
    batch = build_batch([Record(None, b"v" * 100, NOW)])
    totals = {"leader": 0.0, "follower": 0.0}

    def produce(i: int) -> None:
        partition = m.ProducePartition(partition=i % PARTITIONS, records=batch)
        request = m.ProduceRequest(
            acks=1, timeout_ms=30_000, topics=[m.ProduceTopic(name=TOPIC, partitions=[partition])]
        )
        _, frame = producer.send_request(request)
        producer_wire.receive_data(frame)
        header, decoded = producer_wire.next_request()
        answer = _run_handler(handlers.handle(header, decoded))
        assert isinstance(answer, Reply) and answer.done  # acks=1: answered at once
        producer.receive_data(producer_wire.encode_response(header, answer._value))
        producer.next_response()

    def cycle(i: int) -> None:
        """The follower's fetch finds nothing new and waits in the leader's purgatory; a
        record produced completes it; the follower applies the answer."""
        started = time.process_time()
        fetching = follower_rm.followers.fetch_request(1, NOW)
        _, frame = follower_client.send_request(fetcher._fetch_request(fetching))
        built = time.process_time()
        leader_wire.receive_data(frame)
        header, decoded = leader_wire.next_request()
        answer = _run_handler(handlers.handle(header, decoded))
        assert isinstance(answer, Reply) and not answer.done, "the fetch did not wait"
        produce(i)
        assert answer.done, "the produce did not complete the fetch"
        response_frame = leader_wire.encode_response(header, answer._value)
        answered = time.process_time()
        follower_client.receive_data(response_frame)
        _, response = follower_client.next_response()
        follower_rm.followers.apply_fetch(1, fetching, fetcher._answered(response), NOW)
        done = time.process_time()
        totals["leader"] += answered - built
        totals["follower"] += (built - started) + (done - answered)

    gc.collect()
    gc.freeze()  # as the broker does once started: its heap out of the collector's way
    try:
        for i in range(100):  # warm up: the session is made, the follower caught up
            cycle(i)
        best = (float("inf"), float("inf"))
        for r in range(REPEATS):
            totals.update(leader=0.0, follower=0.0)
            for i in range(CYCLES):
                cycle(100 + r * CYCLES + i)
            run = (totals["leader"] / CYCLES, totals["follower"] / CYCLES)
            best = min(best, run)
        expected = "incremental" if sessions else "full"
        assert handlers.fetch_sessions.served[expected] >= REPEATS * CYCLES
        return best[0] * 1e6, best[1] * 1e6
    finally:
        gc.unfreeze()
        for manager in managers:
            manager.close()


# -- the real cluster -------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _fetches_answered(metrics_port: int) -> float:
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        for line in response.read().decode().splitlines():
            if "requests_total{" in line and 'request="Fetch"' in line:
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def _fetch_kinds(metrics_port: int) -> dict[str, float]:
    """fetch_requests_by_session_total by kind (sessionless, full, incremental, error)."""
    kinds = {}
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        for line in response.read().decode().splitlines():
            if "fetch_requests_by_session_total{" in line:
                key, value = line.rsplit(" ", 1)
                kinds[key.split('kind="')[1].split('"')[0]] = float(value)
    return kinds


@dataclass
class ClusterFigures:
    cpu_per_fetch_us: float  # broker 1's CPU over the window / follower fetches answered
    fetches_per_s: float
    cpu_per_s: float  # broker 1's CPU seconds a second over the window
    idle_cpu_per_s: float  # ...with the follower paused and no produce (timers, metrics)
    kinds: dict[str, int]  # the window's fetches per kind of session context

    @property
    def marginal_per_fetch_us(self) -> float:
        """What the window cost beyond the idle baseline, per follower fetch (the trickle's
        produce requests are in it, the same with and without sessions)."""
        return (self.cpu_per_s - self.idle_cpu_per_s) / self.fetches_per_s * 1e6


class _Window:
    """Broker 1's CPU seconds and answered fetches between `start()` and `stop()`."""

    def __init__(self, pid: int, metrics_port: int) -> None:
        self.pid, self.metrics_port = pid, metrics_port

    def start(self) -> None:
        self.cpu = _cpu_seconds(self.pid)
        self.fetches = _fetches_answered(self.metrics_port)
        self.kinds = _fetch_kinds(self.metrics_port)
        self.wall = time.monotonic()

    def kinds_served(self) -> dict[str, int]:
        """Fetches per kind of session context since `start()`."""
        now = _fetch_kinds(self.metrics_port)
        return {kind: int(now[kind] - self.kinds.get(kind, 0)) for kind in now}

    def stop(self) -> tuple[float, float, float]:
        """(CPU seconds, fetches, wall seconds) of the window."""
        return (
            _cpu_seconds(self.pid) - self.cpu,
            _fetches_answered(self.metrics_port) - self.fetches,
            time.monotonic() - self.wall,
        )


async def _measure(bootstrap: str, leader: _Window, follower_pid: int) -> ClusterFigures:
    async with open_admin(bootstrap) as admin:
        await admin.create_topics(
            [NewTopic(TOPIC, assignment={p: [1, 2] for p in range(PARTITIONS)})]
        )
    rng = random.Random(1)
    async with open_producer(bootstrap, acks=-1, linger_ms=0) as producer:
        await (await producer.send(TOPIC, b"warm-up", partition=0))
        await trio.sleep(5)  # leaders elected everywhere, the follower settled in
        # The idle baseline: the follower frozen (SIGSTOP), nothing produced.
        os.kill(follower_pid, signal.SIGSTOP)
        try:
            await trio.sleep(1)
            leader.start()
            await trio.sleep(IDLE_S)
            idle_cpu, _, idle_wall = leader.stop()
        finally:
            os.kill(follower_pid, signal.SIGCONT)
        await trio.sleep(3)
        leader.start()
        deadline = trio.current_time() + WINDOW_S
        while trio.current_time() < deadline:
            await producer.send(TOPIC, b"v" * 100, partition=rng.randrange(PARTITIONS))
            await trio.sleep(1 / TRICKLE)
        await producer.flush()
        cpu, fetches, wall = leader.stop()
        kinds = leader.kinds_served()
    return ClusterFigures(
        cpu / fetches * 1e6, fetches / wall, cpu / wall, idle_cpu / idle_wall, kinds
    )


def cluster_figures(sessions: bool) -> ClusterFigures:
    """Broker 1 of a 2-broker cluster leading all 1,000 partitions, broker 2 following."""
    directory = Path(tempfile.mkdtemp(prefix="bench-fetch-sessions-"))
    overrides = {
        "max.incremental.fetch.session.cache.slots": 1_000 if sessions else 0,
        # The follower is frozen for IDLE_S: neither its ZooKeeper session nor its place
        # in the ISR may run out meanwhile (that would be a burst of work to measure).
        "zookeeper.session.timeout.ms": 60_000,
        "replica.lag.time.max.ms": 60_000,
    }
    cluster = LocalCluster(
        directory, brokers=2, controllers=1, base_port=None, broker_overrides=overrides
    )
    try:
        cluster.up(timeout_s=60)
        leader, follower = cluster.process("broker-1"), cluster.process("broker-2")
        assert leader.pid and leader.metrics_port and follower.pid
        window = _Window(leader.pid, leader.metrics_port)
        return trio.run(_measure, cluster.state.bootstrap_servers, window, follower.pid)
    finally:
        cluster.down(timeout_s=20)
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    directory = Path(tempfile.mkdtemp(prefix="bench-fetch-sessions-"))
    try:
        with_leader, with_follower = in_process_us(directory, sessions=True)
        without_leader, without_follower = in_process_us(directory, sessions=False)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(
        f"in process, {PARTITIONS:,} partitions (RF 2), one record produced per follower "
        f"fetch, best of {REPEATS} x {CYCLES} fetches:"
    )
    print(
        f"  leader CPU per follower fetch:   {with_leader:7.0f} us with sessions, "
        f"{without_leader:7.0f} us without ({with_leader / without_leader:.2f}x)"
    )
    print(
        f"  follower CPU per fetch:          {with_follower:7.0f} us with sessions, "
        f"{without_follower:7.0f} us without ({with_follower / without_follower:.2f}x)"
    )
    report(
        Row(
            f"leader CPU per follower fetch, {PARTITIONS:,} partitions, fetch sessions "
            "(in process)",
            with_leader,
            "us",
            reference_name="without sessions",
            reference=without_leader,
            target="<= 0.5",
        )
    )
    if not CLUSTER:
        return
    # Best of CLUSTER_ROUNDS clusters each, alternated: a run's figures move with what
    # else the machine does (tens of percent on a shared one).
    runs: dict[bool, list[ClusterFigures]] = {True: [], False: []}
    for _ in range(CLUSTER_ROUNDS):
        for sessions in (True, False):
            runs[sessions].append(cluster_figures(sessions))
    on, off = (min(runs[s], key=lambda f: f.marginal_per_fetch_us) for s in (True, False))
    print(
        f"real cluster, {PARTITIONS:,} partitions led by broker 1 and followed by broker 2, "
        f"{TRICKLE} records/s (acks=all) for {WINDOW_S:.0f} s, best of {CLUSTER_ROUNDS} "
        "clusters; broker 1's CPU:"
    )
    for label, figures in (("with sessions:   ", on), ("without sessions:", off)):
        print(
            f"  {label} {figures.cpu_per_fetch_us:7.0f} us per follower fetch "
            f"({figures.fetches_per_s:.1f} fetches/s, {figures.cpu_per_s * 100:.0f}% of a "
            f"core; idle {figures.idle_cpu_per_s * 100:.0f}%: "
            f"{figures.marginal_per_fetch_us:.0f} us per fetch above idle; fetches by "
            f"session: {figures.kinds})"
        )
    print(
        f"  ratio per fetch {on.cpu_per_fetch_us / off.cpu_per_fetch_us:.2f}x, above idle "
        f"{on.marginal_per_fetch_us / off.marginal_per_fetch_us:.2f}x"
    )
    report(
        Row(
            f"broker CPU per follower fetch above idle, {PARTITIONS:,} partitions (RF 2, "
            f"{TRICKLE} records/s), fetch sessions",
            on.marginal_per_fetch_us,
            "us",
            reference_name="without sessions",
            reference=off.marginal_per_fetch_us,
            target="<= 0.5",
        )
    )


if __name__ == "__main__":
    main()
