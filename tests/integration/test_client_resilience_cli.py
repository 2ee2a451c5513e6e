"""Issue 15 against real processes (ZooKeeper, a controller, three brokers): the CLI when
a broker breaks. A non-broker port is named at once; min ISR > RF is refused at create;
binary values round-trip through produce and `consume --format raw`; produce from an
open pipe exits 130 soon after Ctrl-C; an acks=all produce to a partition whose leader
is paused succeeds once a new leader is elected; with the first bootstrap broker paused,
describe/produce/consume each finish in seconds; a keyless produce with
partitioner.availability.timeout.ms finishes, on the other brokers' partitions, while a
leader stays paused (RF 1); `cluster watch` piped prints one line
per event while a broker is killed and started again.

One cluster serves the module (its tests run in file order; the fault tests come last
and leave every broker running). Time bounds are the issue's figures, generous against
what is measured (see the final report of issue 15)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.conftest import TEST_BROKER_SETTINGS, TEST_CONTROLLER_SETTINGS
from tests.integration.helpers import partition_state, wait_until
from tools.cli import main
from tools.cluster.inspect import read_cluster
from tools.cluster.launcher import LocalCluster

pytestmark = pytest.mark.integration

SESSION_TIMEOUT_S = TEST_BROKER_SETTINGS["zookeeper.session.timeout.ms"] / 1000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = LocalCluster(
        tmp_path_factory.mktemp("resilience"),
        brokers=3,
        controllers=1,
        base_port=None,
        broker_overrides={**TEST_BROKER_SETTINGS, "log.retention.check.interval.ms": 500},
        controller_overrides=TEST_CONTROLLER_SETTINGS,
    )
    try:
        cluster.up(timeout_s=60)
        yield cluster
    finally:
        cluster.down(timeout_s=20)  # by pid, also when up() failed half way


def cli(cluster, *args, stdin: bytes | None = None, timeout: float = 60, check=True):
    """Run the CLI in a child process against `cluster`; (exit code, stdout, stderr, s)."""
    env = {**os.environ, "TRIBUTARY_CLUSTER_DIR": str(cluster.directory)}
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "tools", *args],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=timeout,
    )
    elapsed = time.monotonic() - started
    if check:
        assert result.returncode == 0, (args, result.stdout, result.stderr)
    return result.returncode, result.stdout, result.stderr.decode(), elapsed


def bootstrap(cluster, first: int) -> str:
    """Every broker's address, broker `first` first."""
    ids = [first] + [b.id for b in cluster.state.brokers() if b.id != first]
    return ",".join(f"127.0.0.1:{cluster.process(f'broker-{i}').port}" for i in ids)


def test_a_metrics_port_is_named_within_2_s(cluster, capsys):
    metrics = cluster.process("broker-1").metrics_port
    started = time.monotonic()
    code = main(["topics", "list", "--bootstrap-server", f"127.0.0.1:{metrics}"])
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 1 and elapsed < 2.0, (elapsed, err)
    assert f"127.0.0.1:{metrics} is not a Tributary broker: it answered like an HTTP server" in err
    assert err.count("\n") == 1


def test_cluster_watch_reports_a_refused_zookeeper_at_once(cluster):
    # "At once": within a few seconds of what the same command takes against a ZooKeeper
    # that answers (measured now, so a busy machine's slow start counts on both sides),
    # not after a connection timeout.
    *_, answered = cli(cluster, "cluster", "watch", "--once", "--no-groups")
    code, _, err, elapsed = cli(
        cluster, "cluster", "watch", "--once", "--zookeeper", "127.0.0.1:1", check=False
    )
    assert code == 1 and elapsed < answered + 4, (elapsed, answered)
    assert err == "error: cannot read ZooKeeper at 127.0.0.1:1: Connection refused\n"


def test_min_isr_above_rf_is_refused_at_create(cluster):
    code, _, err, _ = cli(cluster, "topics", "create", "misr", "--replication-factor", "3",
                          "--config", "min.insync.replicas=4", check=False)  # fmt: skip
    assert code == 1
    assert "min.insync.replicas (4) is larger than the replication factor (3)" in err
    assert "misr" not in cli(cluster, "topics", "list")[1].decode().split()


def test_binary_values_round_trip_byte_for_byte(cluster):
    cli(cluster, "topics", "create", "bin", "--partitions", "2", "--replication-factor", "2")
    values = [bytes(range(1, 256)), b"\xff\xfe\x80 invalid utf-8", b"a\r\nb\nc", b"\x7f"]
    cli(cluster, "produce", "bin", "--partition", "1", "--acks", "all", "--separator", "\\0",
        stdin=b"\0".join(values))  # fmt: skip
    _, out, _, _ = cli(cluster, "consume", "bin", "--partition", "1", "--from-beginning",
                       "--format", "raw", "--separator", "\\0", "--max-messages", "4",
                       "--timeout-ms", "10000")  # fmt: skip
    assert out == b"".join(v + b"\0" for v in values)


def test_operator_commands_with_a_dynamic_retention_change(cluster):
    cli(cluster, "topics", "create", "ops", "--partitions", "1", "--replication-factor", "3",
        "--config", "segment.bytes=1024")  # fmt: skip
    cli(
        cluster,
        "produce",
        "ops",
        "--acks",
        "all",
        stdin=b"".join(b"%050d\n" % i for i in range(60)),
    )
    offsets = lambda time: cli(cluster, "get-offsets", "--topic", "ops", "--time", time)[1]  # noqa: E731
    assert offsets("earliest") == b"ops:0:0\n" and offsets("latest") == b"ops:0:60\n"
    assert offsets("4102444800000") == b"ops:0:\n"  # a time after every record: none

    described = cli(cluster, "configs", "describe", "--topic", "ops")[1].decode()
    assert described == "Dynamic configs for topic ops are:\n  segment.bytes=1024\n"
    out = cli(cluster, "log-dirs", "describe", "--broker-list", "1,2", "--topic-list", "ops")[1]
    lines = out.decode().splitlines()
    assert lines[:2] == [
        "Querying brokers for log directories information",
        "Received log directory information from brokers 1,2",
    ]
    document = json.loads(lines[2])
    assert [b["broker"] for b in document["brokers"]] == [1, 2]
    for broker in document["brokers"]:
        (replica,) = broker["logDirs"][0]["partitions"]
        assert replica["partition"] == "ops-0" and replica["size"] > 60 * 51
        assert replica["offsetLag"] >= 0 and replica["isFuture"] is False
        assert replica["logEndOffset"] == 60

    segments = sorted(Path(cluster.process("broker-1").data_dir).glob("ops-0/*.log"))
    out = cli(cluster, "dump-log", "--files", str(segments[-1]), "--print-data-log")[1].decode()
    assert out.startswith(f"Dumping {segments[-1]}\nStarting offset: {int(segments[-1].stem)}")
    assert "isvalid: true" in out and "| offset: 59 " in out
    assert f"payload: {59:050d}" in out

    # Retention by time, changed on the running brokers: the old segments go, no restart.
    out = cli(cluster, "configs", "alter", "--topic", "ops", "--add-config", "retention.ms=1000")[1]
    assert out == b"Completed updating config for topic ops.\n"
    wait_until(lambda: offsets("earliest") != b"ops:0:0\n", 30, 0.5)
    assert int(offsets("earliest").split(b":")[2]) > 0
    code, _, err, _ = cli(cluster, "configs", "alter", "--topic", "ops", "--add-config",
                          "min.insync.replicas=4", check=False)  # fmt: skip
    assert code == 1 and "is larger than the replication factor (3)" in err
    cli(cluster, "configs", "alter", "--topic", "ops", "--delete-config", "retention.ms")
    described = cli(cluster, "configs", "describe", "--topic", "ops")[1].decode()
    assert "retention.ms" not in described and "segment.bytes=1024" in described


def test_produce_from_an_open_pipe_exits_130_soon_after_ctrl_c(cluster):
    cli(cluster, "topics", "create", "pipe", "--partitions", "1", "--replication-factor", "3")
    env = {**os.environ, "TRIBUTARY_CLUSTER_DIR": str(cluster.directory)}
    process = subprocess.Popen(
        [sys.executable, "-m", "tools", "produce", "pipe", "--acks", "all", "--report"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        process.stdin.write(b"first\n")
        process.stdin.flush()
        assert b'"value": "first"' in process.stdout.readline()  # delivered: it is running
        process.send_signal(signal.SIGINT)  # stdin stays open: the read is blocked
        signalled = time.monotonic()
        code = process.wait(timeout=30)
        elapsed = time.monotonic() - signalled
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdin.close()
    err = process.stderr.read().decode()
    assert code == 130 and elapsed < 2.0, (code, elapsed, err)
    assert "interrupted: produced 1 record(s) to pipe, 0 read but not delivered" in err
    assert "Traceback" not in err


def test_acks_all_to_a_paused_leader_succeeds_after_the_election(cluster):
    cli(cluster, "topics", "create", "moving", "--partitions", "1", "--replication-factor", "3",
        "--config", "min.insync.replicas=2")  # fmt: skip
    leader = partition_state(cluster, "moving", 0).leader
    cluster.pause(str(leader))
    try:
        code, _, err, elapsed = cli(
            cluster, "produce", "moving", "--partition", "0", "--acks", "all",
            "--bootstrap-server", bootstrap(cluster, leader), stdin=b"after-pause\n",
        )  # fmt: skip
        # Done once the election is (the session timeout and a few seconds when idle),
        # long before the delivery timeout (2 min): a generous bound for loaded machines.
        print(f"acks=all produce to paused leader {leader}: {elapsed:.2f} s")
        assert elapsed < SESSION_TIMEOUT_S + 30, (elapsed, err)
        assert partition_state(cluster, "moving", 0).leader != leader
    finally:
        cluster.resume(str(leader))
    wait_until(lambda: len(partition_state(cluster, "moving", 0).isr) == 3, 30, 0.3)


def _describe_produce_consume(cluster, topic: str, servers: str) -> dict[str, float]:
    """Each command's time (a fresh process each) against `servers`, first to last."""
    timings = {}
    _, out, _, timings["describe"] = cli(
        cluster, "topics", "describe", topic, "--bootstrap-server", servers
    )
    assert f"Topic: {topic}".encode() in out
    _, _, _, timings["produce"] = cli(
        cluster, "produce", topic, "--acks", "all", "--bootstrap-server", servers,
        stdin=b"".join(b"r%d\n" % i for i in range(6)),
    )  # fmt: skip
    _, out, _, timings["consume"] = cli(
        cluster, "consume", topic, "--from-beginning", "--max-messages", "6",
        "--timeout-ms", "10000", "--bootstrap-server", servers,
    )  # fmt: skip
    assert sorted(out.split()) == sorted(b"r%d" % i for i in range(6))
    return timings


def test_with_the_first_bootstrap_broker_paused_commands_take_seconds(cluster):
    for topic in ("demo", "control"):
        cli(cluster, "topics", "create", topic, "--partitions", "3", "--replication-factor", "2")
    # The same commands with every broker answering, measured now: a busy machine's slow
    # process start then counts on both sides, and the bound is on what the paused broker
    # adds: the 3 s bootstrap handshake timeout, once, and not the 30 s request timeout.
    # The bound sits between the two (a loaded machine stretches the first: CI saw +4.4 s).
    normal = _describe_produce_consume(cluster, "control", bootstrap(cluster, 1))
    cluster.pause("1")
    try:
        connect = cluster.state.zookeeper_connect
        wait_until(lambda: 1 not in read_cluster(connect).brokers, 30, 0.3)
        timings = _describe_produce_consume(cluster, "demo", bootstrap(cluster, 1))
        print("first bootstrap broker paused:", {k: round(v, 2) for k, v in timings.items()})
        print("every broker answering:", {k: round(v, 2) for k, v in normal.items()})
        assert all(timings[k] < normal[k] + 12 for k in timings), (timings, normal)
    finally:
        cluster.resume("1")
    wait_until(lambda: 1 in read_cluster(cluster.state.zookeeper_connect).brokers, 30, 0.3)


def test_a_keyless_produce_steers_around_a_paused_leader(cluster):
    """KIP-794 (issue 29): with the console producer's partitioner.availability.timeout.ms
    (500 ms unless set), a keyless produce finishes while the leader of 2 of the 6
    partitions (RF 1: no failover possible) stays paused throughout, and every record
    lands on the other brokers' partitions."""
    cli(cluster, "topics", "create", "steer", "--partitions", "6", "--replication-factor", "1")
    leaders = {p: partition_state(cluster, "steer", p).leader for p in range(6)}
    paused = leaders[0]
    avoided = {p for p, leader in leaders.items() if leader == paused}
    first = next(b for b in leaders.values() if b != paused)
    count = 1_000
    lines = b"".join(b"keyless-%04d-" % i + b"x" * 80 + b"\n" for i in range(count))
    cluster.pause(str(paused))
    try:
        _, out, err, elapsed = cli(
            cluster, "produce", "steer", "--acks", "1", "--report", "--batch-size", "4096",
            "--bootstrap-server", bootstrap(cluster, first),
            stdin=lines, timeout=60,
        )  # fmt: skip
        print(f"keyless produce of {count} with broker {paused} paused: {elapsed:.2f} s")
    finally:
        cluster.resume(str(paused))
    reports = [json.loads(line) for line in out.splitlines()]
    assert len(reports) == count, err
    assert not {r["partition"] for r in reports} & avoided, (avoided, err)
    connect = cluster.state.zookeeper_connect
    wait_until(lambda: paused in read_cluster(connect).brokers, 30, 0.3)
    wait_until(lambda: all(partition_state(cluster, "steer", p).leader >= 0 for p in avoided), 30)


def test_cluster_watch_piped_prints_one_line_per_event(cluster):
    env = {**os.environ, "TRIBUTARY_CLUSTER_DIR": str(cluster.directory)}
    watch = subprocess.Popen(
        [sys.executable, "-m", "tools", "cluster", "watch", "--interval", "0.5", "--no-groups"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        first = watch.stdout.readline().decode()
        assert "brokers up 1,2,3" in first and "controller" in first
        connect = cluster.state.zookeeper_connect
        cluster.kill("3")
        wait_until(lambda: 3 not in read_cluster(connect).brokers, 30, 0.3)
        time.sleep(1.5)  # a frame or two sees it
        cluster.start("3")
        wait_until(lambda: 3 in read_cluster(connect).brokers, 30, 0.3)
        time.sleep(1.5)
        watch.send_signal(signal.SIGINT)
        out, err = watch.communicate(timeout=20)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.communicate()
    lines = out.decode().splitlines()
    assert watch.returncode == 130, err  # ended by Ctrl-C
    assert any(line.endswith("  broker 3 down") for line in lines), lines
    assert any(line.endswith("  broker 3 up") for line in lines), lines
    # One line per event: a clock, two spaces, the event; no frames, no terminal codes.
    assert all(line[2] == ":" and line[8:10] == "  " for line in lines), lines
    assert "\x1b" not in out.decode() and "Topic" not in out.decode()
    # --once off a terminal: the frame unwrapped, then the controller's last events.
    _, once, _, _ = cli(cluster, "cluster", "watch", "--once", "--no-groups")
    text = once.decode()
    # The last events tell of broker 3's return: its coming up, or (when enough
    # partitions move back to it that those fill the list) the leaders it took back.
    assert "events" in text and ("broker 3 up" in text or "-> 3 (epoch" in text), text
    assert max(len(line) for line in text.splitlines()) <= 200
