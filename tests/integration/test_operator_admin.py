"""Issue 15's last operator commands against real processes (ZooKeeper, a controller,
three brokers): `topics alter --partitions N` (CreatePartitions: the controller brings
the added partitions online, a running producer sees them after a metadata refresh and
a consumer reads them) and `delete-records --offset-json-file` (DeleteRecords: the log
start offset moves on the leader and its followers, earliest offsets and fetches follow
it, segments below it are deleted, and it survives a restart). The brokers' and the
controller's JSON-lines files rotate at the configured `jsonl.file.max.bytes`. Ctrl-C: every
long-running command exits 130 soon after SIGINT: `produce` typed into a terminal (a
pseudo-terminal whose ^C the line discipline turns into SIGINT), `cluster watch` on a
terminal, and commands waiting on a partition that has no leader (produce waiting for
deliveries, consume, get-offsets, groups reset-offsets, leaders elect-preferred). The bound on the
wait for the exit is generous: it only keeps a hung command from hanging the suite.

One cluster serves the module; the tests run in file order and leave every broker up.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
import trio

from client.admin import open_admin
from client.consumer import open_consumer
from client.producer import open_producer
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition
from tests.integration.conftest import TEST_BROKER_SETTINGS, TEST_CONTROLLER_SETTINGS
from tests.integration.helpers import partition_state, wait_until
from tools.cluster.launcher import LocalCluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = LocalCluster(
        tmp_path_factory.mktemp("operator-admin"),
        brokers=3,
        controllers=1,
        base_port=None,
        broker_overrides={
            **TEST_BROKER_SETTINGS,
            "log.retention.check.interval.ms": 300,
            "log.flush.offset.checkpoint.interval.ms": 1000,
            "jsonl.file.max.bytes": 4096,
            "metrics.snapshot.interval.ms": 100,
        },
        controller_overrides={**TEST_CONTROLLER_SETTINGS, "jsonl.file.max.bytes": 2048},
    )
    try:
        cluster.up(timeout_s=60)
        yield cluster
    finally:
        cluster.down(timeout_s=20)  # by pid, also when up() failed half way


def cli(cluster, *args, timeout: float = 60, check: bool = True):
    """The CLI in a child process against `cluster`: (exit code, stdout, stderr)."""
    env = {**os.environ, "TRIBUTARY_CLUSTER_DIR": str(cluster.directory)}
    result = subprocess.run(
        [sys.executable, "-m", "tools", *args],
        capture_output=True,
        env=env,
        timeout=timeout,
        text=True,
    )
    if check:
        assert result.returncode == 0, (args, result.stdout, result.stderr)
    return result.returncode, result.stdout, result.stderr


def bootstrap(cluster) -> str:
    return ",".join(
        f"127.0.0.1:{cluster.process(f'broker-{b.id}').port}" for b in cluster.state.brokers()
    )


# --- topics alter --partitions ---------------------------------------------------------


def test_topics_alter_refuses_a_count_that_does_not_grow(cluster):
    cli(cluster, "topics", "create", "grow", "--partitions", "2", "--replication-factor", "2")
    code, _, err = cli(cluster, "topics", "alter", "grow", "--partitions", "2", check=False)
    assert code == 1
    assert err.strip().endswith("Topic already has 2 partitions."), err
    code, _, err = cli(
        cluster, "topics", "alter", "--topic", "grow", "--partitions", "1", check=False
    )
    assert code == 1
    assert "Topic currently has 2 partitions, which is higher than the requested 1." in err
    code, _, err = cli(
        cluster, "topics", "alter", "--topic", "nope", "--partitions", "3", check=False
    )
    assert code == 1 and "topic 'nope' does not exist" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    code, _, err = cli(
        cluster, "topics", "alter", "__consumer_offsets", "--partitions", "60", check=False
    )
    assert code == 2 and "internal topics __consumer_offsets cannot be changed" in err


def test_topics_alter_adds_partitions_that_receive_records(cluster):
    code, out, _ = cli(cluster, "topics", "alter", "--topic", "grow", "--partitions", "4")
    assert out.startswith("WARNING: If partitions are increased for a topic that has a key")
    _, out, _ = cli(cluster, "topics", "describe", "grow")
    lines = out.strip().splitlines()
    assert "PartitionCount: 4\tReplicationFactor: 2" in lines[0], out
    assert len(lines) == 5 and all("Leader: none" not in line for line in lines[1:]), out
    for p in (2, 3):  # the controller wrote their state: leader and ISR of 2
        state = partition_state(cluster, "grow", p)
        assert state is not None and state.leader >= 0 and len(state.isr) == 2

    servers = bootstrap(cluster)

    async def scenario():
        # A producer that knew the topic with 4 partitions sees 6 after its next refresh.
        async with open_producer(servers, acks="all", metadata_max_age_ms=300) as producer:
            await (await producer.send("grow", b"before", partition=3))
            async with open_admin(servers) as admin:
                errors = await admin.create_partitions({"grow": 6})
                assert errors == {"grow": None}
                again = await admin.create_partitions({"grow": 6}, validate_only=True)
                assert again["grow"].code is ErrorCode.INVALID_PARTITIONS
            with trio.fail_after(20):
                while producer.metadata.cluster.partition_count("grow") != 6:
                    await trio.sleep(0.1)
            sent = {}
            for p in range(6):
                meta = await (await producer.send("grow", f"to-{p}".encode(), partition=p))
                sent[p] = meta.offset
        async with open_consumer(servers, auto_offset_reset="earliest") as consumer:
            consumer.assign([TopicPartition("grow", p) for p in range(6)])
            got: dict[int, list[bytes]] = {}
            with trio.fail_after(20):
                while sum(len(v) for v in got.values()) < 7:
                    for record in await consumer.poll(500):
                        got.setdefault(record.partition, []).append(record.value)
        return sent, got

    sent, got = trio.run(scenario)
    assert set(sent) == set(range(6))
    assert got[4] == [b"to-4"] and got[5] == [b"to-5"]
    assert got[3] == [b"before", b"to-3"]
    # kafka-topics' --replica-assignment lists every partition; only the added ones count.
    layout = ",".join(["1:2"] * 6 + ["3:1"])
    cli(cluster, "topics", "alter", "grow", "--partitions", "7", "--replica-assignment", layout)
    state = wait_until(lambda: partition_state(cluster, "grow", 6), 20)
    assert state.replicas == (3, 1) and state.leader == 3
    code, _, err = cli(
        cluster, "topics", "alter", "grow", "--partitions", "8", "--replica-assignment",
        layout + ",9:1", check=False,
    )  # fmt: skip
    assert code == 1 and "Unknown broker(s) in replica assignment: [9]." in err, err


# --- delete-records --------------------------------------------------------------------


def _produce(cluster, topic: str, partition: int, count: int) -> None:
    async def go():
        async with open_producer(bootstrap(cluster), acks="all", batch_size=200) as producer:
            handles = [
                await producer.send(topic, f"v{i:04d}".encode(), partition=partition)
                for i in range(count)
            ]
            for handle in handles:
                await handle

    trio.run(go)


def _offsets_file(tmp_path: Path, entries: list[tuple[str, int, int]]) -> str:
    path = tmp_path / "offsets.json"
    path.write_text(
        json.dumps(
            {
                "partitions": [{"topic": t, "partition": p, "offset": o} for t, p, o in entries],
                "version": 1,
            }
        )
    )
    return str(path)


def _earliest(cluster, topic: str, partition: int) -> int:
    _, out, _ = cli(cluster, "get-offsets", "--topic", topic, "--time", "earliest")
    for line in out.splitlines():
        t, p, offset = line.rsplit(":", 2)
        if t == topic and int(p) == partition:
            return int(offset)
    raise AssertionError(out)


def _segment_bases(cluster, broker_id: int, topic: str, partition: int) -> list[int]:
    directory = Path(cluster.process(f"broker-{broker_id}").data_dir) / f"{topic}-{partition}"
    return sorted(int(f.stem) for f in directory.glob("*.log"))


def test_delete_records_moves_the_log_start_offset_everywhere(cluster, tmp_path):
    cli(
        cluster,
        "topics", "create", "trim", "--partitions", "1", "--replication-factor", "3",
        "--config", "segment.bytes=400",
    )  # fmt: skip
    _produce(cluster, "trim", 0, 60)
    code, out, err = cli(
        cluster,
        "delete-records",
        "--offset-json-file",
        _offsets_file(tmp_path, [("trim", 0, 25)]),
    )
    assert out.splitlines() == [
        "Executing records delete operation",
        "Records delete operation completed:",
        "partition: trim-0\tlow_watermark: 25",
    ], (out, err)
    assert _earliest(cluster, "trim", 0) == 25
    # Below the log start a consumer gets OFFSET_OUT_OF_RANGE and resets (earliest -> 25).
    servers = bootstrap(cluster)

    async def read_from(offset: int):
        async with open_consumer(servers, auto_offset_reset="earliest") as consumer:
            tp = TopicPartition("trim", 0)
            consumer.assign([tp])
            consumer.seek(tp, offset)
            with trio.fail_after(20):
                while True:
                    records = await consumer.poll(500)
                    if records:
                        return records[0].offset, records[0].value

    assert trio.run(read_from, 3) == (25, b"v0025")
    # Every replica drops the segments wholly below 25 (retention runs every 300 ms).
    for broker in (1, 2, 3):
        wait_until(lambda b=broker: _segment_bases(cluster, b, "trim", 0)[0] <= 25, 20)
        wait_until(
            lambda b=broker: (
                len(_segment_bases(cluster, b, "trim", 0)) > 1
                and _segment_bases(cluster, b, "trim", 0)[1] > 25
            ),
            20,
        )
    # -1 is the high watermark; above it is OFFSET_OUT_OF_RANGE (exit 1, Kafka's lines).
    code, out, _ = cli(
        cluster,
        "delete-records",
        "--offset-json-file",
        _offsets_file(tmp_path, [("trim", 0, 500)]),
        check=False,
    )
    assert code == 1
    assert out.splitlines()[-1].startswith("partition: trim-0\terror: OFFSET_OUT_OF_RANGE")
    _, out, _ = cli(
        cluster, "delete-records", "--offset-json-file", _offsets_file(tmp_path, [("trim", 0, -1)])
    )
    assert out.splitlines()[-1] == "partition: trim-0\tlow_watermark: 60"
    assert _earliest(cluster, "trim", 0) == 60


def test_the_log_start_offset_survives_a_restart(cluster, tmp_path):
    cli(
        cluster,
        "topics", "create", "keep", "--partitions", "1", "--replication-factor", "2",
    )  # fmt: skip
    _produce(cluster, "keep", 0, 20)
    cli(cluster, "delete-records", "--offset-json-file", _offsets_file(tmp_path, [("keep", 0, 7)]))
    state = partition_state(cluster, "keep", 0)
    # Every replica restarts (one segment: only the checkpoint remembers 7).
    for broker in state.replicas:
        cluster.stop(f"broker-{broker}")
    for broker in state.replicas:
        cluster.start(f"broker-{broker}")
    wait_until(lambda: (partition_state(cluster, "keep", 0) or state).leader >= 0, 30)
    assert wait_until(lambda: _earliest_or_none(cluster, "keep") == 7, 30)


def _earliest_or_none(cluster, topic: str) -> int | None:
    try:
        return _earliest(cluster, topic, 0)
    except AssertionError:
        return None


def test_delete_records_input_errors_are_one_line(cluster, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    code, _, err = cli(cluster, "delete-records", "--offset-json-file", str(bad), check=False)
    assert code == 2 and "not valid JSON" in err and err.count("\n") == 1
    dup = _offsets_file(tmp_path, [("trim", 0, 1), ("trim", 0, 2)])
    code, _, err = cli(cluster, "delete-records", "--offset-json-file", dup, check=False)
    assert code == 2 and "duplicate topic partitions: trim-0" in err
    code, out, _ = cli(
        cluster,
        "delete-records",
        "--offset-json-file",
        _offsets_file(tmp_path, [("nope", 0, 1)]),
        check=False,
    )
    assert code == 1 and "partition: nope-0\terror:" in out


def test_jsonl_files_rotate_at_the_configured_size(cluster):
    broker_dir = Path(cluster.process("broker-1").data_dir)
    wait_until(lambda: (broker_dir / "metrics.jsonl.1").exists(), 20)
    controller = next(p for p in cluster.state.processes if p.role == "controller")
    controller_dir = Path(controller.data_dir)
    wait_until(lambda: (controller_dir / "controller-events.jsonl.1").exists(), 20)
    for directory, name, limit in (
        (broker_dir, "metrics.jsonl", 4096),
        (controller_dir, "controller-events.jsonl", 2048),
    ):
        rotated = sorted(directory.glob(name + ".*"))
        assert 1 <= len(rotated) <= 3  # jsonl.file.backups: 3
        for path in rotated:
            lines = path.read_text().splitlines()
            assert lines and all(json.loads(line) for line in lines)
            assert path.stat().st_size < limit + max(len(line) + 1 for line in lines)


# --- Ctrl-C ------------------------------------------------------------------------------

EXIT_WAIT_S = 20  # generous: a command that ignores Ctrl-C fails here instead of hanging


def _env(cluster) -> dict:
    return {**os.environ, "TRIBUTARY_CLUSTER_DIR": str(cluster.directory)}


def _on_a_terminal(cluster, *args):
    """Start the CLI with a new pseudo-terminal as its controlling terminal and stdin;
    returns (process, the terminal's master fd)."""
    master, slave = pty.openpty()

    def take_terminal() -> None:  # runs in the child after setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    process = subprocess.Popen(
        [sys.executable, "-m", "tools", *args],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(cluster),
        start_new_session=True,
        preexec_fn=take_terminal,
    )
    os.close(slave)
    return process, master


def _wait_exit(process) -> tuple[int, str, str]:
    try:
        out, err = process.communicate(timeout=EXIT_WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return process.returncode, out.decode(), err.decode()


def _talks_to_the_cluster(pid: int) -> bool:
    """Has the process opened a socket (so it has loaded its code and is at work)?"""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                return True
        except OSError:
            continue
    return False


def _wait_until_at_work(process) -> None:
    """Until the command has opened a socket (or exited): its code is loaded."""
    wait_until(lambda: process.poll() is not None or _talks_to_the_cluster(process.pid), 60)


def test_produce_typed_into_a_terminal_exits_130_on_ctrl_c(cluster):
    cli(cluster, "topics", "create", "typed", "--partitions", "1", "--replication-factor", "2")
    process, master = _on_a_terminal(cluster, "produce", "typed", "--acks", "all", "--report")
    try:
        os.write(master, b"hello\n")
        line = process.stdout.readline().decode()
        assert '"value": "hello"' in line, line  # delivered: the command is running
        os.write(master, b"\x03")  # ^C: the terminal sends SIGINT to its foreground group
        code, _, err = _wait_exit(process)
    finally:
        os.close(master)
    assert code == 130, err
    assert "interrupted: produced 1 record(s) to typed, 0 read but not delivered" in err
    assert "Traceback" not in err


def test_cluster_watch_on_a_terminal_exits_130_on_ctrl_c(cluster):
    process, master = _on_a_terminal(
        cluster, "cluster", "watch", "--interval", "0.5", "--no-groups"
    )
    try:
        _wait_until_at_work(process)
        time.sleep(2)  # a few frames
        os.write(master, b"\x03")
        code, _, err = _wait_exit(process)
    finally:
        os.close(master)
    assert code == 130 and "Traceback" not in err, err


def _interrupted(cluster, *args, stdin: bytes | None = None, after_s: float = 2.0):
    """Run a command and SIGINT it `after_s` after it first opens a socket (it must
    still be waiting then): (exit code, stdout, stderr). Waiting for the socket keeps a
    busy machine's slow interpreter start from turning this into a Ctrl-C at import."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tools", *args],
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(cluster),
    )
    if stdin is not None:
        process.stdin.write(stdin)
        process.stdin.close()
        process.stdin = None  # communicate() must not flush it again
    _wait_until_at_work(process)
    time.sleep(after_s)
    assert process.poll() is None, (args, process.communicate())
    process.send_signal(signal.SIGINT)
    return _wait_exit(process)


def test_commands_waiting_on_a_leaderless_partition_exit_130_on_ctrl_c(cluster):
    cli(cluster, "topics", "create", "lonely", "--replica-assignment", "3")
    _produce(cluster, "lonely", 0, 3)
    cluster.stop("broker-3")  # the only replica: the partition goes offline
    try:
        wait_until(lambda: partition_state(cluster, "lonely", 0).leader == -1, 30)
        code, _, err = _interrupted(cluster, "produce", "lonely", "--acks", "all", stdin=b"waits\n")
        assert code == 130, err
        assert "1 read but not delivered" in err, err
        for args in (
            ("consume", "lonely", "--from-beginning"),
            ("get-offsets", "--topic", "lonely"),
            (
                "groups", "reset-offsets", "g-lonely", "--topic", "lonely",
                "--to-earliest", "--execute",
            ),
            ("leaders", "elect-preferred", "--topic", "lonely"),
        ):  # fmt: skip
            code, _, err = _interrupted(cluster, *args)
            assert code == 130, (args, err)
            assert "Traceback" not in err, (args, err)
    finally:
        cluster.start("broker-3")
