"""`tributary verifiable-producer` / `verifiable-consumer` against an in-process cluster of
real brokers (tests/support/cluster.py's ClusterThread): Kafka's event lines and fields,
the numbered values, and one clear line for bad arguments."""

from __future__ import annotations

import argparse
import io
import json
import sys

import pytest

from tests.support.cluster import ClusterThread
from tools.cli import main
from tools.commands.verifiable import producer_options


@pytest.fixture
def runner():
    runner = ClusterThread(3)
    with runner:
        yield runner


@pytest.fixture
def run(runner, capsys, monkeypatch):
    def run(*argv: str):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
        code = main([*argv, "--bootstrap-server", runner.cluster.bootstrap])
        out, err = capsys.readouterr()
        return code, [json.loads(line) for line in out.splitlines()], err

    return run


def names(events):
    return [e["name"] for e in events]


def test_producer_events_then_consumer_reads_them_all(run, runner):
    runner.call(runner.cluster.create_topic, "v", 2)
    code, events, err = run("verifiable-producer", "--topic", "v", "--max-messages", "30",
                            "--throughput", "-1", "--acks", "all", "--value-prefix", "7",
                            "--repeating-keys", "3")  # fmt: skip
    assert code == 0, err
    assert names(events)[0] == "startup_complete"
    assert names(events)[-2:] == ["shutdown_complete", "tool_data"]
    sent = [e for e in events if e["name"] == "producer_send_success"]
    assert sorted(e["value"] for e in sent) == sorted(f"7.{n}" for n in range(30))
    assert {e["value"]: e["key"] for e in sent}["7.4"] == "1"  # keys 0, 1, 2, 0, 1, ...
    assert all(e["topic"] == "v" and e["offset"] >= 0 and e["latency_ms"] >= 0 for e in sent)
    assert len({(e["partition"], e["offset"]) for e in sent}) == 30
    tool_data = events[-1]
    assert (tool_data["sent"], tool_data["acked"], tool_data["target_throughput"]) == (30, 30, -1)
    assert all(isinstance(e["timestamp"], int) for e in events)

    code, events, err = run("verifiable-consumer", "--topic", "v", "--max-messages", "30",
                            "--verbose")  # fmt: skip
    assert code == 0, err
    assert names(events)[:2] == ["startup_complete", "partitions_assigned"]
    assert names(events)[-1] == "shutdown_complete"
    assert events[1]["partitions"] == [{"topic": "v", "partition": 0},
                                       {"topic": "v", "partition": 1}]  # fmt: skip
    consumed = [e for e in events if e["name"] == "records_consumed"]
    assert sum(e["count"] for e in consumed) == 30
    for summary in consumed:
        for part in summary["partitions"]:
            assert set(part) == {"topic", "partition", "count", "minOffset", "maxOffset"}
            assert part["maxOffset"] - part["minOffset"] + 1 >= part["count"]
    data = [e for e in events if e["name"] == "record_data"]
    assert {(e["partition"], e["offset"], e["value"]) for e in data} == {
        (e["partition"], e["offset"], e["value"]) for e in sent
    }


def test_group_consumer_reports_assignment_and_commits(run, runner):
    runner.call(runner.cluster.create_topic, "g", 1)
    code, _, err = run("verifiable-producer", "--topic", "g", "--max-messages", "5")
    assert code == 0, err
    code, events, err = run("verifiable-consumer", "--topic", "g", "--group-id", "vg",
                            "--max-messages", "5", "--session-timeout", "6000")  # fmt: skip
    assert code == 0, err
    assigned = [e for e in events if e["name"] == "partitions_assigned"]
    assert assigned and assigned[0]["partitions"] == [{"topic": "g", "partition": 0}]
    commits = [e for e in events if e["name"] == "offsets_committed"]
    assert commits and all(c["success"] for c in commits)
    assert commits[-1]["offsets"] == [{"topic": "g", "partition": 0, "offset": 5}]


@pytest.mark.parametrize(
    "argv",
    [
        ["verifiable-producer", "--topic", "x", "--throughput", "0"],
        ["verifiable-producer", "--max-messages", "3"],
        ["verifiable-consumer", "--topic", "x", "--reset-policy", "sometimes"],
    ],
)
def test_bad_arguments_are_one_line(capsys, argv):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def _args(**given):
    defaults = {"acks": "all", "linger_ms": 0, "retries": None, "delivery_timeout_ms": None,
                "enable_idempotence": None, "request_timeout_ms": None}  # fmt: skip
    return argparse.Namespace(**{**defaults, **given})


def test_idempotence_reaches_the_producer_only_when_asked():
    assert "enable_idempotence" not in producer_options(_args())
    assert producer_options(_args(enable_idempotence=True))["enable_idempotence"] is True
    assert producer_options(_args(enable_idempotence=False))["enable_idempotence"] is False
