"""`tributary perf produce|consume|e2e` against a real cluster (ZooKeeper, a controller,
three brokers, real sockets): each tool sends or reads the number of records asked for
and prints Kafka's lines (or JSON), so users can measure their own cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.integration.conftest import TEST_BROKER_SETTINGS, TEST_CONTROLLER_SETTINGS
from tools.cluster.launcher import LocalCluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = LocalCluster(
        tmp_path_factory.mktemp("perf"),
        brokers=3,
        controllers=1,
        base_port=None,
        broker_overrides=TEST_BROKER_SETTINGS,
        controller_overrides=TEST_CONTROLLER_SETTINGS,
    )
    try:
        cluster.up(timeout_s=60)
        yield cluster
    finally:
        cluster.down(timeout_s=20)


def perf(cluster, *args, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRIBUTARY_CLUSTER_DIR": str(cluster.directory)}
    return subprocess.run(
        [sys.executable, "-m", "tools", "perf", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def test_perf_produce_then_consume_counts_every_record(cluster):
    produced = perf(
        cluster, "produce", "--topic", "perf", "--num-records", "20000", "--record-size", "200",
        "--throughput", "-1", "--acks", "all", "--partitions", "3", "--replication-factor", "3",
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    final = produced.stdout.strip().splitlines()[-1]
    assert final.startswith("20000 records sent, ")
    for words in ("records/sec", "MB/sec", "ms avg latency", "ms max latency", "ms 50th",
                  "ms 95th", "ms 99th", "ms 99.9th"):  # fmt: skip
        assert words in final

    consumed = perf(cluster, "consume", "--topic", "perf", "--messages", "20000", "--json")
    assert consumed.returncode == 0, consumed.stderr
    row = json.loads(consumed.stdout.strip().splitlines()[-1])
    assert row["data.consumed.in.nMsg"] == 20000
    assert row["data.consumed.in.MB"] == pytest.approx(20000 * 200 / 2**20, rel=1e-3)

    in_group = perf(cluster, "consume", "--topic", "perf", "--messages", "20000",
                    "--group", "perf-group")  # fmt: skip
    assert in_group.returncode == 0, in_group.stderr
    header, line = in_group.stdout.strip().splitlines()[-2:]
    assert header.startswith("start.time, end.time, data.consumed.in.MB")
    assert line.split(", ")[4] == "20000"


def test_perf_produce_at_a_set_rate_reports_windows(cluster):
    result = perf(
        cluster, "produce", "--topic", "perf", "--num-records", "3000", "--throughput", "1500",
        "--reporting-interval", "500", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.strip().splitlines()]
    windows = [line for line in lines if line["type"] == "window"]
    total = lines[-1]
    assert total["type"] == "total" and total["records"] == 3000 and total["failed"] == 0
    assert windows, "a 2 s run at a 0.5 s interval prints progress"
    # The rate limiter holds the average at (or under) the target.
    assert total["records_per_sec"] <= 1500 * 1.05


def test_perf_e2e_measures_every_record(cluster):
    result = perf(
        cluster, "e2e", "--topic", "e2e", "--num-records", "2000", "--throughput", "1000",
        "--partitions", "1", "--replication-factor", "3",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-3].startswith("2000 records received")
    assert lines[-2].startswith("Avg latency: ")
    assert lines[-1].startswith("Percentiles: 50th = ")


def test_perf_tools_reject_bad_input_with_one_line(cluster):
    missing = perf(cluster, "consume", "--topic", "nope", "--messages", "1", "--timeout", "500")
    assert missing.returncode != 0
    assert "Traceback" not in missing.stderr and "nope" in missing.stderr
    bad = perf(cluster, "produce", "--topic", "x", "--num-records", "0", "--throughput", "1")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
