"""The data and admin CLI commands against an in-process cluster of real brokers and a real
controller running in a background thread (tests/support/cluster.py's ClusterThread).

`tools.cli.main([...])` runs in the test's thread (it starts its own Trio loop); the
brokers serve TCP from their own thread. Errors must come out as exactly one line
on stderr with a non-zero exit, never a traceback; a few checks run the real entry
point in a subprocess to make sure of that end to end.
"""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from client.protocol.api import ApiKey
from client.protocol.errors import ErrorCode
from client.protocol.records import read_header
from client.protocol.topic_ids import topic_id_str
from client.protocol.types import TopicPartition
from tests.support.cluster import ClusterThread
from tools.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def runner():
    runner = ClusterThread(3)
    with runner:
        yield runner


@pytest.fixture
def run(runner, capsys, monkeypatch):
    """run(*argv, stdin=b"") -> (exit code, stdout, stderr), bootstrap filled in."""

    def run(*argv: str, stdin: bytes = b"", bootstrap: str | None = None):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        code = main([*argv, "--bootstrap-server", bootstrap or runner.cluster.bootstrap])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got: {err!r}"
    assert "Traceback" not in err
    assert lines[0].startswith("error: ")
    return lines[0]


def dead_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"127.0.0.1:{port}"


# --- topics ---------------------------------------------------------------------------------


def test_topics_create_list_describe_delete(run, runner):
    code, out, _ = run("topics", "create", "orders", "--partitions", "2",
                       "--replication-factor", "2", "--config", "retention.ms=60000")  # fmt: skip
    assert (code, out) == (0, "Created topic orders.\n")
    assert runner.call(runner.cluster.topic_config, "orders") == {"retention.ms": "60000"}
    assert run("topics", "create", "audit", "--replica-assignment", "3:1,1:2")[0] == 0

    assert run("topics", "list")[1] == "audit\norders\n"
    code, out, _ = run("topics", "describe", "orders")
    assert code == 0
    # The broker places replicas from a random start (as Kafka does): read where they went.
    views = [runner.call(runner.cluster.partition, ("orders", p)) for p in (0, 1)]
    assert [(len(set(v.replicas)), v.leader, v.isr, v.leader_epoch) for v in views] == [
        (2, v.replicas[0], v.replicas, 0) for v in views
    ]
    topic_id = topic_id_str(
        runner.call(lambda: runner.cluster.controller.context.topic_ids["orders"])
    )
    assert out.splitlines() == [
        f"Topic: orders\tTopicId: {topic_id}\tPartitionCount: 2\tReplicationFactor: 2\t"
        "Configs: retention.ms=60000",
        *(
            f"\tTopic: orders\tPartition: {p}\tLeader: {v.leader}\tReplicas: {v.replicas[0]},"
            f"{v.replicas[1]}\tIsr: {v.replicas[0]},{v.replicas[1]}\tLeaderEpoch: 0"
            for p, v in enumerate(views)
        ),
    ]
    described = json.loads(run("topics", "describe", "audit", "--json")[1])
    assert described[0]["topic_id"] != topic_id and len(described[0]["topic_id"]) == 22
    assert [p["replicas"] for p in described[0]["partitions"]] == [[3, 1], [1, 2]]
    assert [p["leader"] for p in described[0]["partitions"]] == [3, 1]

    code, _, err = run("topics", "create", "orders", "--partitions", "1")
    assert code == 1 and one_error_line(err) == "error: topic 'orders' already exists"
    assert run("topics", "create", "orders", "--if-not-exists")[0] == 0

    assert run("topics", "delete", "orders")[:2] == (0, "Deleted topic orders.\n")
    code, _, err = run("topics", "delete", "orders")
    assert code == 1 and one_error_line(err) == "error: topic 'orders' does not exist"
    assert run("topics", "delete", "orders", "--if-exists")[0] == 0


def test_describe_marks_offline_and_under_replicated_partitions(run, runner):
    # Partition 1 only on broker 2, so that no replica is left to lead it.
    runner.call(runner.cluster.create_topic, "t", assignment={0: [1, 2], 1: [2]})
    runner.call(runner.cluster.stop_broker, 2)
    epoch = runner.call(runner.cluster.partition, TopicPartition("t", 0)).leader_epoch
    out = run("topics", "describe", "t")[1].splitlines()
    assert out[1].endswith(f"Leader: 1\tReplicas: 1,2\tIsr: 1\tLeaderEpoch: {epoch}\tOffline: 2"
                           "\tUnderReplicated: true")  # fmt: skip
    assert "\tLeader: none\t" in out[2]
    only = run("topics", "describe", "--unavailable-partitions")[1].splitlines()
    assert len(only) == 1 and "Partition: 1" in only[0]


def test_create_with_bad_arguments_is_one_line(run):
    code, _, err = run("topics", "create", "x", "--replica-assignment", "1:a")
    assert code == 2 and "--replica-assignment" in one_error_line(err)
    code, _, err = run("topics", "create", "x", "--partitions", "2", "--replica-assignment", "1")
    assert code == 2 and "cannot be used with" in one_error_line(err)
    code, _, err = run("topics", "create", "x", "--config", "novalue")
    assert code == 2 and "NAME=VALUE" in one_error_line(err)
    code, _, err = run("topics", "create", "x", "--config", "bogus.setting=1")
    assert code == 1 and "INVALID_CONFIG" in one_error_line(err)


# --- produce and consume -------------------------------------------------------------------


def test_produce_then_consume(run, runner):
    runner.call(runner.cluster.create_topic, "t", 2)
    code, out, err = run(
        "produce", "t", "--key-separator", ":", "--report", stdin=b"a:1\nb:2\nc:3\na:4\n"
    )
    assert code == 0
    reports = [json.loads(line) for line in out.splitlines()]
    assert [(r["key"], r["value"]) for r in reports] == [("a", "1"), ("b", "2"), ("c", "3"),
                                                         ("a", "4")]  # fmt: skip
    assert reports[0]["partition"] == reports[3]["partition"]  # same key, same partition
    assert err.startswith("produced 4 record(s) to t, 0 failed")

    code, out, err = run("consume", "t", "--from-beginning", "--max-messages", "4",
                         "--timeout-ms", "10000", "--format", "json")  # fmt: skip
    assert code == 0 and err.strip() == "Processed a total of 4 messages"
    records = [json.loads(line) for line in out.splitlines()]
    assert sorted((r["key"], r["value"]) for r in records) == [
        ("a", "1"),
        ("a", "4"),
        ("b", "2"),
        ("c", "3"),
    ]
    assert set(records[0]) == {"topic", "partition", "offset", "timestamp", "key", "value"}

    last = reports[3]
    code, out, _ = run("consume", "t", "--partition", str(last["partition"]), "--offset",
                       str(last["offset"]), "--max-messages", "1", "--print-key",
                       "--timeout-ms", "10000")  # fmt: skip
    assert (code, out) == (0, "a\t4\n")


def test_produce_plain_lines_to_a_partition_with_compression(run, runner):
    runner.call(runner.cluster.create_topic, "t", 3)
    code, out, _ = run("produce", "t", "--partition", "2", "--compression", "zstd",
                       "--acks", "all", "--linger-ms", "5",
                       stdin=b"x\r\n\ny\nlast-without-newline")  # fmt: skip
    assert (code, out) == (0, "")
    values = runner.call(runner.cluster.values, TopicPartition("t", 2))
    assert values == [b"x", b"", b"y", b"last-without-newline"]
    code, out, _ = run("consume", "t", "--from-beginning", "--max-messages", "4",
                       "--timeout-ms", "10000")  # fmt: skip
    assert out == "x\n\ny\nlast-without-newline\n"


def test_consume_without_from_beginning_starts_at_the_end(run, runner):
    runner.call(runner.cluster.create_topic, "t", 1)
    runner.call(runner.cluster.append, TopicPartition("t", 0), b"old")
    code, out, err = run("consume", "t", "--timeout-ms", "200")
    assert (code, out, err.strip()) == (0, "", "Processed a total of 0 messages")


def test_a_failed_record_makes_produce_exit_1_with_the_reason(run, runner):
    runner.call(runner.cluster.create_topic, "t", 1)
    runner.call(runner.cluster.fail, ApiKey.PRODUCE, ErrorCode.RECORD_LIST_TOO_LARGE)
    code, _, err = run("produce", "t", stdin=b"one\n")
    assert code == 1
    summary, error = err.strip().splitlines()
    assert summary.startswith("produced 0 record(s) to t, 1 failed")
    assert error.startswith("error: 1 record(s) failed: RECORD_LIST_TOO_LARGE")
    code, _, err = run("produce", "t", "--key-separator", "=", stdin=b"k=v\nno-separator\n")
    assert code == 1 and "line 2 has no key separator '='" in err


def test_produce_idempotence_flags(run, runner):
    runner.call(runner.cluster.create_topic, "t", 1)
    code, _, err = run("produce", "t", "--acks", "1", "--enable-idempotence", stdin=b"v\n")
    assert code == 2 and one_error_line(err) == "error: --enable-idempotence requires --acks all"
    for flags, idempotent in ((["--acks", "all"], True), (["--no-enable-idempotence"], False)):
        assert run("produce", "t", *flags, stdin=b"v\n")[0] == 0
        batch = runner.call(runner.cluster.batches, TopicPartition("t", 0))[-1]
        assert (read_header(batch).producer_id >= 0) is idempotent


def test_unknown_topic_is_one_line(run):
    for argv in (("produce", "nope"), ("consume", "nope"), ("topics", "describe", "nope")):
        code, _, err = run(*argv, stdin=b"v\n")
        assert code == 1 and one_error_line(err) == "error: topic 'nope' does not exist"


def test_unreachable_broker_is_one_line(run):
    address = dead_address()
    for argv in (
        ("topics", "list"),
        ("produce", "t"),
        ("consume", "t"),
        ("leaders", "elect-preferred"),
        ("partitions", "reassign", "--verify"),
    ):
        code, _, err = run(*argv, stdin=b"v\n", bootstrap=address)
        line = one_error_line(err)
        assert code == 1
        assert line.startswith(f"error: cannot reach any broker at {address} ("), line


def test_bad_flags_are_one_line(run):
    for argv in (
        ("produce",),
        ("produce", "t", "--acks", "2"),
        ("consume", "t", "--max-messages", "0"),
        ("consume", "t", "--offset", "5"),
        ("consume", "t", "--partition", "0", "--offset", "soon"),
        ("topics",),
        ("topics", "create", "x", "--partitions", "zero"),
        ("leaders",),
    ):
        code, _, err = run(*argv)
        assert code == 2, argv
        one_error_line(err)
    code, _, err = run("topics", "list", bootstrap="no-port-here")
    assert code == 2 and "--bootstrap-server" in one_error_line(err)


# --- leaders and reassignments --------------------------------------------------------------


def test_elect_preferred_leaders(run, runner):
    runner.call(runner.cluster.create_topic, "t", 2, 2)  # t-0 on [1, 2], t-1 on [2, 3]
    # Broker 1 goes away and comes back in sync: broker 2 leads t-0, not its preferred 1.
    runner.call(runner.cluster.stop_broker, 1)
    runner.call(runner.cluster.start_broker, 1)
    assert runner.call(runner.cluster.partition, TopicPartition("t", 0)).leader == 2
    code, out, _ = run("leaders", "elect-preferred", "--topic", "t")
    assert code == 0
    assert out.splitlines() == [
        "Successfully completed leader election (PREFERRED) for partitions t-0",
        "Valid replica already elected for partitions t-1",
    ]
    runner.call(runner.cluster.stop_broker, 1)  # t-0's leader moves to broker 2 again
    # t-0's preferred replica is down: the broker waits the timeout for the election.
    code, out, err = run("leaders", "elect-preferred", "--timeout-ms", "500")
    assert code == 1
    assert "Error completing leader election (PREFERRED) for partition: t-0" in out
    assert one_error_line(err) == "error: leader election failed for 1 partition(s)"


def test_reassign_from_a_plan_and_verify(run, runner, tmp_path):
    runner.call(runner.cluster.create_topic, "t", 2, 2)  # t-0 on [1, 2]
    # t-0's leader (broker 1) refuses the followers' fetches: the move cannot finish yet.
    runner.call(runner.cluster.fail, ApiKey.FETCH, ErrorCode.REPLICA_NOT_AVAILABLE,
                tp=TopicPartition("t", 0), broker=1, times=float("inf"),
                inter_broker=True)  # fmt: skip
    plan = tmp_path / "plan.json"
    moves = [{"topic": "t", "partition": 0, "replicas": [3, 1]}]
    plan.write_text(json.dumps({"partitions": moves}))
    code, out, _ = run("partitions", "reassign", "--plan", str(plan))
    assert (code, out) == (0, "Successfully started partition reassignments for t-0\n")
    assert "t-0 is still in progress" in run("partitions", "reassign", "--verify", "--plan",
                                              str(plan))[1]  # fmt: skip
    listing = run("partitions", "reassign", "--verify")[1]
    assert listing.startswith("Reassignment of partition t-0 is in progress: replicas 3,1,2")
    runner.call(runner.cluster.clear_faults)  # broker 3 catches up: the move finishes
    runner.call(runner.cluster.wait_for_reassignments)
    assert "t-0 is complete." in run("partitions", "reassign", "--verify", "--plan", str(plan))[1]
    idle = run("partitions", "reassign", "--verify")[1]
    assert idle == "No partition reassignments in progress.\n"


@pytest.mark.parametrize(
    "content, problem",
    [
        (None, "cannot read plan"),
        ("{not json", "is not valid JSON"),
        ('{"partitions": []}', 'needs a non-empty "partitions" list'),
        ('{"partitions": [{"topic": "t", "partition": -1, "replicas": [1]}]}', '"partition"'),
        ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}', "twice"),
    ],
)
def test_a_bad_plan_is_one_line(run, tmp_path, content, problem):
    plan = tmp_path / "plan.json"
    if content is not None:
        plan.write_text(content)
    code, _, err = run("partitions", "reassign", "--plan", str(plan))
    assert code == 1 and problem in one_error_line(err)


# --- the real entry point ------------------------------------------------------------------


def cli(*argv: str, stdin: str = "") -> subprocess.CompletedProcess:
    """What the `tributary` console script runs (`tools.cli:main`)."""
    return subprocess.run(
        [sys.executable, "-c", "import sys; from tools.cli import main; sys.exit(main())", *argv],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_installed_command_never_prints_a_traceback(runner):
    dead = dead_address()
    result = cli("--bootstrap-server", dead, "consume", "t")
    assert result.returncode == 1 and result.stderr.startswith("error: cannot reach any broker")
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    result = cli("produce", "t", "--acks", "7")
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    runner.call(runner.cluster.create_topic, "t", 1)
    result = cli("produce", "t", "--bootstrap-server", runner.cluster.bootstrap, stdin="a\nb\n")
    assert result.returncode == 0, result.stderr
    assert runner.call(runner.cluster.values, TopicPartition("t", 0)) == [b"a", b"b"]


def test_ctrl_c_while_the_commands_load_exits_130_without_a_traceback(monkeypatch, capsys):
    """The command modules load inside `main` (the slow part of starting the CLI on a busy
    machine): a Ctrl-C there is answered like one during a command."""
    import importlib

    real_import = importlib.import_module

    def interrupted(name, *args):
        if name.startswith("tools.commands."):
            raise KeyboardInterrupt
        return real_import(name, *args)

    monkeypatch.setattr(importlib, "import_module", interrupted)
    assert main(["topics", "list"]) == 130
    assert capsys.readouterr().err == ""


def test_loading_the_entry_point_loads_no_command_or_client_library():
    """Everything slow to import loads inside `main`'s handlers, not before them."""
    probe = (
        "import sys, tools.cli; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('trio', 'kazoo') "
        "or m.startswith(('client.', 'tools.commands.'))))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# --- configs of brokers --------------------------------------------------------------------


def test_configs_of_brokers_describe_alter_and_argument_errors(run):
    code, out, err = run(
        "configs", "alter", "--entity-type", "brokers", "--entity-name", "2",
        "--add-config", "log.retention.bytes=1000000,compression.type=zstd",
    )  # fmt: skip
    assert (code, out) == (0, "Completed updating config for broker 2.\n"), err
    code, out, _ = run("configs", "describe", "--entity-type", "brokers", "--entity-name", "2")
    assert out.splitlines() == [
        "Dynamic configs for broker 2 are:",
        "  compression.type=zstd sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
        "compression.type=zstd, DEFAULT_CONFIG:compression.type=producer}",
        "  log.retention.bytes=1000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
        "log.retention.bytes=1000000, DEFAULT_CONFIG:log.retention.bytes=-1}",
    ]
    code, out, _ = run("configs", "describe", "--entity-type", "brokers", "--entity-default")
    assert out == "Default configs for brokers in the cluster are:\n"
    code, out, _ = run(
        "configs", "describe", "--entity-type", "brokers", "--entity-name", "1", "--all"
    )
    assert out.startswith("All configs for broker 1 are:\n") and "  broker.id=1 " in out
    code, _, err = run(
        "configs", "alter", "--entity-type", "brokers", "--entity-default",
        "--add-config", "num.partitions=4",
    )  # fmt: skip
    assert (
        code == 1
        and "Cannot update these configs dynamically: num.partitions" in one_error_line(err)
    )
    code, _, err = run("configs", "describe", "--entity-type", "brokers")
    assert code == 2 and "--entity-name ID or --entity-default" in one_error_line(err)
    code, _, err = run("configs", "describe", "--entity-type", "brokers", "--entity-name", "x")
    assert code == 2 and "must be an integer" in one_error_line(err)
    code, _, err = run("configs", "describe")
    assert code == 2 and "--topic T or --entity-type" in one_error_line(err)
    code, _, err = run("configs", "describe", "--entity-type", "brokers", "--entity-name", "9")
    assert code == 1 and "broker 9 is not alive" in one_error_line(err)
