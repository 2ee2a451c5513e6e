"""`tributary produce --transactional-id` (tools/commands/produce_txn.py) against an
in-process cluster whose transaction APIs a scripted coordinator answers
(tests/unit/test_txn_producer.py; tests/integration/test_txn_producer.py runs the
command against real brokers once they serve transactions)."""

from __future__ import annotations

import io
import json
import sys

import pytest

from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition
from tests.support.cluster import ClusterThread
from tests.unit.test_txn_producer import ScriptedCoordinator
from tools.cli import main


@pytest.fixture
def runner():
    runner = ClusterThread(1)
    with runner:
        runner.call(runner.cluster.create_topic, "t", 2)
        yield runner


@pytest.fixture
def script(runner) -> ScriptedCoordinator:
    return runner.call(lambda: ScriptedCoordinator(runner.cluster))


@pytest.fixture
def run(runner, capsys, monkeypatch):
    def run(*argv: str, stdin: bytes = b""):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        code = main([*argv, "--bootstrap-server", runner.cluster.bootstrap])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def ends(script: ScriptedCoordinator) -> list[bool]:
    return [entry[1] for entry in script.log if entry[0] == "end"]


def test_lines_are_committed_every_transaction_size_records(run, script):
    lines = b"".join(b"k%d:v%d\n" % (i % 2, i) for i in range(5))
    code, out, err = run(
        "produce", "t", "--transactional-id", "cli", "--transaction-size", "2",
        "--key-separator", ":", "--report", stdin=lines,
    )  # fmt: skip
    assert code == 0, err
    assert "committed 5 record(s) to t, aborted 0, in 3 transaction(s)" in err
    reports = [json.loads(line) for line in out.splitlines()]
    assert [r["value"] for r in reports] == [f"v{i}" for i in range(5)]
    assert ends(script) == [True, True, True]
    assert script.violations == []
    assert ("init", "cli", 60_000) in script.log


def test_all_of_stdin_is_one_transaction_by_default_and_abort_aborts_it(run, script):
    code, _, err = run("produce", "t", "--transactional-id", "cli", stdin=b"a\nb\nc\n")
    assert code == 0 and "committed 3 record(s)" in err and "in 1 transaction(s)" in err
    code, _, err = run("produce", "t", "--transactional-id", "cli", "--abort", stdin=b"x\ny\n")
    assert code == 0 and "committed 0 record(s) to t, aborted 2" in err
    assert ends(script) == [True, False]


def test_a_failed_record_aborts_the_open_transaction_and_exits_1(run, script, runner):
    script.produce_errors[TopicPartition("t", 1)] = ErrorCode.INVALID_RECORD
    code, _, err = run(
        "produce", "t", "--transactional-id", "cli", "--partition", "1", stdin=b"a\nb\n"
    )
    assert code == 1
    assert "aborted 2" in err and "INVALID_RECORD" in err
    assert "Traceback" not in err
    assert ends(script) == [False]


def test_transaction_options_need_a_transactional_id_and_acks_all(run, script):
    code, _, err = run("produce", "t", "--transaction-size", "3", stdin=b"a\n")
    assert code == 2 and "need --transactional-id" in err
    code, _, err = run("produce", "t", "--abort", stdin=b"a\n")
    assert code == 2
    code, _, err = run("produce", "t", "--transactional-id", "x", "--acks", "1", stdin=b"a\n")
    assert code == 2 and "--acks all" in err
    assert script.log == []
