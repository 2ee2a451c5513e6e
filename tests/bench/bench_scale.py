"""Scale figures (issue 29, `make bench BENCH_ARGS=scale`): memory after a burst, many
partitions, many idle connections. Each scenario has a hard time budget (every wait
takes what is left of it) and stops its cluster by pid at the end.

1. One broker (and a controller): its RSS idle, at the peak of a burst of large
   requests on both listeners (100 MiB garbage frames, 16 MiB produces and fetches,
   ~1 MiB librdkafka records: tests/support/memory_burst.py), 5 s and 60 s after it.
   Then, on the same broker, 10,000 idle client connections (RLIMIT_NOFILE raised here;
   the broker raises its own soft limit to the hard one, `max.connections` set above
   the count): the RSS each costs, and another client's Metadata, acks=all Produce and
   Fetch latency without and with them (the same run).
2. 10,000 partitions (RF 3) on three brokers and two controllers, created in a few
   CreateTopics requests of 1,000-partition topics: the time until all are led with full
   ISRs; per broker the RSS idle (and per partition replica), the CPU when idle (from
   /proc/<pid>/stat over 10 s) and the open files; the peak RSS under a modest produce
   load spread over every partition; all-topics Metadata latency (p50/p99); a broker
   SIGKILLed and restarted: its start-up (until registered) and the time until it is
   back in every ISR; the active controller SIGKILLed: the time until a topic created
   right after the kill has an elected leader (a new controller active and electing;
   bounded below by the ZooKeeper session timeout, when the standby learns of it).

Scale down for a quick check: BENCH_SCALE_PARTITIONS=1000 BENCH_SCALE_CONNECTIONS=1000.
`python -m tests.bench.bench_scale` prints the figures without recording them.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time

import trio

from broker.tasks.background import MEMORY_RELEASE_S
from client.admin import NewTopic, open_admin
from tests.bench import scale_probes as probe
from tests.bench.table import Row, report
from tests.integration.conftest import TEST_BROKER_SETTINGS, TEST_CONTROLLER_SETTINGS
from tests.support.hostile import (
    MiB,
    cap_address_space,
    connect_raw,
    fmt_ms,
    normal_requests,
    raise_own_open_files,
)
from tests.support.memory_burst import burst, settle_rss
from tools.cluster.inspect import read_cluster
from tools.cluster.launcher import LocalCluster

PARTITIONS = int(os.environ.get("BENCH_SCALE_PARTITIONS", "10000"))
CONNECTIONS = int(os.environ.get("BENCH_SCALE_CONNECTIONS", "10000"))
PER_TOPIC = 1_000
TOPICS_PER_REQUEST = 2
RF = 3
SESSION_MS = 6_000
PREFIX = "scale-"
BURST_BUDGET_S = 240.0
CONNECTIONS_BUDGET_S = 240.0
PARTITIONS_BUDGET_S = 1500.0
LOAD_RATE = 5_000  # records/s over every partition: a modest load
LOAD_SECONDS = 15.0
IDLE_CPU_SECONDS = 10.0
METADATA_REQUESTS = 50


# -- 1. one broker: memory after a burst, idle connections -------------------------------
def single_broker_scenarios() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-scale-one-") as directory:
        cluster = LocalCluster(
            directory,
            brokers=1,
            controllers=1,
            base_port=None,
            metrics=False,
            broker_overrides={
                **TEST_BROKER_SETTINGS,
                "offsets.topic.replication.factor": 1,
                "max.connections": CONNECTIONS + 100,
            },
            controller_overrides=TEST_CONTROLLER_SETTINGS,
        )
        try:
            cluster.up(timeout_s=60)
            info = cluster.process("broker-1")
            cap_address_space(info.pid)
            trio.run(_create, info.port, [NewTopic("burst", 16, 1)], 60_000)
            try:
                memory_after_burst(info, probe.Budget(BURST_BUDGET_S))
            except probe.OutOfTime as exc:
                print(f"memory after a burst: stopped, {exc}")
            try:
                idle_connections(info, probe.Budget(CONNECTIONS_BUDGET_S))
            except probe.OutOfTime as exc:
                print(f"idle connections: stopped, {exc}")
        finally:
            cluster.down(timeout_s=20)


def memory_after_burst(info, budget: probe.Budget) -> None:
    pid = info.pid
    burst(pid, info.port, info.kafka_port, "burst", garbage_frames=0, rounds=1)  # warm-up
    time.sleep(budget.bound(MEMORY_RELEASE_S + 1))  # what the warm-up freed is returned
    idle = settle_rss(pid) * MiB / 1e6
    result = burst(pid, info.port, info.kafka_port, "burst", rounds=3, partitions=16)
    ended = time.monotonic()
    time.sleep(budget.bound(max(0.0, ended + 5 - time.monotonic())))
    after5 = probe.rss_mb(pid)
    time.sleep(budget.bound(max(0.0, ended + 60 - time.monotonic())))
    after60 = probe.rss_mb(pid)
    peak = result.peak_rss_mib * MiB / 1e6
    print(
        f"burst ({result.garbage_closed} x 100 MiB garbage frames, "
        f"{result.produced_bytes / MiB:.0f} MiB produced + {result.fetched_bytes / MiB:.0f} MiB "
        f"fetched natively, {result.kafka_produced} + {result.kafka_consumed} librdkafka "
        f"records): broker RSS idle {idle:.1f} MB, peak {peak:.1f} MB, "
        f"{after5:.1f} MB 5 s after, {after60:.1f} MB 60 s after"
    )
    report(Row("broker RSS at the peak of a burst of large requests", peak, "MB", "idle", idle))
    report(Row("broker RSS 5 s after a burst", after5, "MB", "idle", idle))
    report(
        Row(
            "broker RSS kept 60 s after a burst (over idle)",
            after60 - idle,
            "MB",
            target="<= 20",
        )
    )


def idle_connections(info, budget: probe.Budget) -> None:
    if not probe_open_files(CONNECTIONS + 500):
        print(f"idle connections: skipped, needs {CONNECTIONS + 500} open files")
        return
    pid = info.pid
    trio.run(normal_requests, info.port, "burst", "warm-up")
    quiet = [trio.run(normal_requests, info.port, "burst", "quiet") for _ in range(5)]
    before = settle_rss(pid, 2.0) * MiB / 1e6
    idle: list = []
    try:
        started = time.monotonic()
        for _ in range(CONNECTIONS):
            idle.append(connect_raw(info.port))
            if len(idle) % 1000 == 0:
                budget.bound(1)
        opened = time.monotonic() - started
        budget.wait(
            "the broker took every connection in",
            lambda: probe.open_files(pid) >= CONNECTIONS,
            60,
        )
        busy = [trio.run(normal_requests, info.port, "burst", "idle") for _ in range(5)]
        with_them = settle_rss(pid, 2.0) * MiB / 1e6
        files = probe.open_files(pid)
    finally:
        for sock in idle:
            sock.close()
    per_connection_kb = (with_them - before) * 1000 / CONNECTIONS
    print(
        f"{CONNECTIONS:,} idle connections opened in {opened:.1f} s; broker RSS "
        f"{before:.1f} MB -> {with_them:.1f} MB ({per_connection_kb:.1f} kB each), "
        f"{files:,} open files"
    )
    for label, runs in (("without them", quiet), (f"with {CONNECTIONS:,} idle", busy)):
        print(f"another client, {label}: " + fmt_ms(_median_timings(runs)))
    q, b = _median_timings(quiet), _median_timings(busy)
    report(Row("broker RSS per idle client connection", per_connection_kb, "kB"))
    for what in ("produce", "fetch"):
        report(
            Row(
                f"{what} latency (acks=all) with {CONNECTIONS:,} idle connections",
                b[what] * 1000,
                "ms",
                "without them",
                q[what] * 1000,
            )
        )


def probe_open_files(wanted: int) -> bool:
    return raise_own_open_files(wanted)


def _median_timings(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: sorted(run[key] for run in runs)[len(runs) // 2] for key in runs[0]}


# -- 2. many partitions on three brokers ----------------------------------------------------
async def _create(port: int, topics: list[NewTopic], timeout_ms: int) -> None:
    async with open_admin(f"127.0.0.1:{port}", request_timeout_ms=timeout_ms + 10_000) as admin:
        errors = await admin.create_topics(topics, timeout_ms=timeout_ms)
        failed = {  # a timed-out CreateTopics created its topics: their leaders are waited for
            name: error
            for name, error in errors.items()
            if error is not None and "TIMED_OUT" not in str(error)
        }
        if failed:
            raise RuntimeError(f"CreateTopics failed: {failed}")


def partitions_scenario() -> None:
    topics = [
        NewTopic(f"{PREFIX}{i:02d}", min(PER_TOPIC, PARTITIONS - i * PER_TOPIC), RF)
        for i in range((PARTITIONS + PER_TOPIC - 1) // PER_TOPIC)
    ]
    with tempfile.TemporaryDirectory(prefix="bench-scale-parts-") as directory:
        cluster = LocalCluster(
            directory,
            brokers=3,
            controllers=2,
            base_port=None,
            metrics=False,
            broker_overrides={
                "zookeeper.session.timeout.ms": SESSION_MS,
                "max.broker.partitions": PARTITIONS + 1_000,
                "offsets.topic.num.partitions": 3,
                # The broker's default (the local cluster's 2 s, for its timelines, costs
                # a 10,000-partition broker ~20% of a core in JSON-lines snapshots).
                "metrics.snapshot.interval.ms": 10_000,
            },
            controller_overrides={"zookeeper.session.timeout.ms": SESSION_MS},
        )
        budget = probe.Budget(PARTITIONS_BUDGET_S)
        try:
            cluster.up(timeout_s=90)
            many_partitions(cluster, topics, budget)
        except probe.OutOfTime as exc:
            print(f"{PARTITIONS:,} partitions: stopped, {exc}")
        finally:
            cluster.down(timeout_s=60)


def _brokers(cluster: LocalCluster) -> dict[str, int]:
    return {b.name: b.pid for b in cluster.state.brokers()}


def many_partitions(cluster: LocalCluster, topics: list[NewTopic], budget: probe.Budget) -> None:
    port = cluster.process("broker-1").port
    label = f"{PARTITIONS:,} partitions RF {RF}"
    pids = _brokers(cluster)
    time.sleep(budget.bound(3))
    empty = sum(probe.rss_mb(pid) for pid in pids.values()) / len(pids)
    started = time.monotonic()
    for i in range(0, len(topics), TOPICS_PER_REQUEST):
        timeout = int(budget.bound(300) * 1000)
        trio.run(_create, port, topics[i : i + TOPICS_PER_REQUEST], timeout)
    created = time.monotonic() - started
    budget.wait(
        "every partition led, with a full ISR",
        lambda: probe.fully_replicated(probe.metadata(port), PREFIX, PARTITIONS, RF),
        900,
        step=2,
    )
    replicated = time.monotonic() - started
    print(
        f"{label}: created in {created:.1f} s ({len(topics)} topics, "
        f"{(len(topics) + TOPICS_PER_REQUEST - 1) // TOPICS_PER_REQUEST} CreateTopics requests); "
        f"all led with full ISRs after {replicated:.1f} s"
    )
    report(Row(f"create {label}, until all led with full ISRs", replicated, "s"))

    # Idle: replicas caught up, the creations' checkpoints and snapshots written (10 s
    # after a 30 s creation still measured that work: 67 % where 40 s later showed 45 %).
    time.sleep(budget.bound(40))
    cpu = probe.idle_cpu(pids, budget.bound(IDLE_CPU_SECONDS))
    rss = {name: probe.rss_mb(pid) for name, pid in pids.items()}
    files = {name: probe.open_files(pid) for name, pid in pids.items()}
    controller = {c.name: c.pid for c in cluster.state.controllers()}
    controller_cpu = probe.idle_cpu(controller, 5)
    for name in pids:
        print(
            f"  {name}: RSS {rss[name]:.1f} MB, CPU idle {cpu[name]:.1f}% of a core, "
            f"{files[name]:,} open files"
        )
    for name, pid in controller.items():
        print(f"  {name}: RSS {probe.rss_mb(pid):.1f} MB, CPU idle {controller_cpu[name]:.1f}%")
    idle_rss = max(rss.values())
    # Every broker holds a replica of every partition (RF 3 on 3 brokers).
    per_replica_kb = (sum(rss.values()) / len(rss) - empty) * 1000 / PARTITIONS
    print(
        f"{label}: broker RSS idle {idle_rss:.1f} MB (largest), about {per_replica_kb:.1f} kB "
        f"per partition replica over an empty broker's {empty:.0f} MB; "
        f"CPU idle {max(cpu.values()):.1f}% of a core (busiest broker)"
    )
    report(Row(f"broker RSS idle, {label}", idle_rss, "MB"))
    report(Row(f"broker RSS per partition replica, {label}", per_replica_kb, "kB"))
    report(Row(f"broker CPU idle, {label}", max(cpu.values()), "% of a core"))

    took = probe.metadata_latency(port, METADATA_REQUESTS, budget.bound(120))
    print(f"{label}: Metadata (all topics): {probe.summary(took)}")
    if took:
        report(Row(f"Metadata all topics p50, {label}", probe.percentile(took, 0.5) * 1000, "ms"))
        report(Row(f"Metadata all topics p99, {label}", probe.percentile(took, 0.99) * 1000, "ms"))

    targets = [(t.name, p) for t in topics for p in range(t.num_partitions)]
    with probe.PeakRss(list(pids.values())) as peak:
        sent = probe.spread_load(
            cluster.state.bootstrap_servers, targets, LOAD_RATE, budget.bound(LOAD_SECONDS)
        )
    print(
        f"{label}: broker RSS peak {peak.peak:.1f} MB under a load of {sent:,} records "
        f"({sent / LOAD_SECONDS:,.0f}/s over every partition, acks=1)"
    )
    report(Row(f"broker RSS under load, {label}", peak.peak, "MB", "idle", idle_rss))

    broker_restart(cluster, port, label, budget)
    controller_failover(cluster, label, budget)


def broker_restart(cluster: LocalCluster, port: int, label: str, budget: probe.Budget) -> None:
    """SIGKILL a broker; once the controller has moved its leaderships away (at the
    ZooKeeper session timeout), start it again: its start-up (until the others' metadata
    has it alive again) and the time until it is back in every ISR."""
    victim = cluster.state.brokers()[-1]
    cluster.kill(victim.name)
    killed = time.monotonic()

    def leads_nothing() -> bool:
        total, led = probe.partitions_where(
            probe.metadata(port), PREFIX, lambda p: p.leader == victim.id
        )
        return total == PARTITIONS and led == 0

    budget.wait(f"broker {victim.id}'s leaderships moved", leads_nothing, 120)
    moved = time.monotonic() - killed
    _, still_in = probe.partitions_where(probe.metadata(port), PREFIX, lambda p: victim.id in p.isr)
    restarted = time.monotonic()
    starter = threading.Thread(
        target=cluster.start, args=(victim.name,), kwargs={"timeout_s": budget.bound(300)}
    )
    starter.start()
    try:
        budget.wait(
            f"broker {victim.id} alive again", lambda: victim.id in probe.live_brokers(port), 300
        )
        startup = time.monotonic() - restarted
    finally:
        starter.join()
    print(
        f"{label}: broker {victim.id} SIGKILLed: its leaderships moved after {moved:.1f} s "
        f"(still in {still_in:,} ISRs then); restarted: alive after {startup:.1f} s"
    )
    report(Row(f"broker start-up after SIGKILL, {label}", startup, "s"))

    def back_in_every_isr() -> bool:
        total, good = probe.partitions_where(
            probe.metadata(port), PREFIX, lambda p: victim.id in p.isr
        )
        return total == PARTITIONS and good == total

    budget.wait(f"broker {victim.id} back in every ISR", back_in_every_isr, 600, step=1)
    recovered = time.monotonic() - restarted
    print(f"{label}: broker {victim.id} back in every ISR {recovered:.1f} s after the restart")
    report(Row(f"broker restart after SIGKILL -> back in every ISR, {label}", recovered, "s"))


def controller_failover(cluster: LocalCluster, label: str, budget: probe.Budget) -> None:
    connect = cluster.state.zookeeper_connect
    active = read_cluster(connect).controller_id
    if active is None:
        print(f"{label}: no active controller to fail over")
        return
    port = cluster.process("broker-1").port
    cluster.kill(f"controller-{active}")
    killed = time.monotonic()
    budget.wait(
        "a new active controller",
        lambda: read_cluster(connect).controller_id not in (None, active),
        120,
        step=0.1,
    )
    elected = time.monotonic() - killed
    trio.run(_create, port, [NewTopic("failover-probe", 1, RF)], int(budget.bound(120) * 1000))

    def probe_led() -> bool:
        total, good = probe.partitions_where(
            probe.metadata(port), "failover-probe", lambda p: p.leader >= 0
        )
        return total == 1 and good == 1

    budget.wait("the probe topic led", probe_led, 120, step=0.1)
    can_elect = time.monotonic() - killed
    print(
        f"{label}: active controller SIGKILLed: a new one active after {elected:.1f} s, a "
        f"topic created after the kill led after {can_elect:.1f} s (ZooKeeper session "
        f"timeout {SESSION_MS / 1000:.0f} s)"
    )
    report(
        Row(
            f"controller SIGKILL -> new controller elects, {label}",
            can_elect,
            "s",
            "ZooKeeper session timeout",
            SESSION_MS / 1000,
        )
    )


def main() -> None:
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    raise_own_open_files(CONNECTIONS + 500)
    single_broker_scenarios()
    partitions_scenario()


if __name__ == "__main__":
    main()
