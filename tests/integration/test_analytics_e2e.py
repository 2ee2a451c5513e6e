"""The analytics job on a real local cluster: produce, kill the leader, produce more,
restart it, then `tributary analytics` must report the leader change and the ISR shrink
that happened, its per-partition record counts must equal what a consumer reads, and its
replica audit must find every acknowledged record on every replica.

Slow on purpose (about two minutes on 2 cores): real processes, a broker failure and
recovery, then a Spark job in its own JVM.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pyarrow.parquet as pq
import pytest

from tests.integration.helpers import partition_state, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.spark]

pytest.importorskip("pyspark")

TOPIC = "analytics"
FIRST, SECOND = 2_000, 1_000


def cli(cluster, *args: str, stdin: str | None = None, timeout: float = 300):
    env = {**os.environ, "TRIBUTARY_CLUSTER_DIR": str(cluster.directory)}
    return subprocess.run(
        [sys.executable, "-c", "import sys; from tools.cli import main; sys.exit(main())", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def produce(cluster, start: int, count: int) -> None:
    lines = "".join(f"key-{i % 31}:value-{i}\n" for i in range(start, start + count))
    result = cli(cluster, "produce", TOPIC, "--key-separator", ":", "--acks", "all", stdin=lines)
    assert result.returncode == 0, result.stderr


def test_analytics_reports_what_happened_on_a_real_cluster(start_cluster, tmp_path):
    cluster = start_cluster(brokers=3, controllers=1)
    created = cli(
        cluster, "topics", "create", TOPIC, "--partitions", "2", "--replication-factor", "3"
    )
    assert created.returncode == 0, created.stderr
    produce(cluster, 0, FIRST)

    before = partition_state(cluster, TOPIC, 0)
    victim = before.leader
    cluster.kill(f"broker-{victim}")
    after = wait_until(
        lambda: (s := partition_state(cluster, TOPIC, 0)) and s.leader not in (victim, -1) and s,
        30,
    )
    produce(cluster, FIRST, SECOND)
    cluster.start(f"broker-{victim}")
    wait_until(lambda: len(partition_state(cluster, TOPIC, 0).isr) == 3, 60)
    wait_until(lambda: len(partition_state(cluster, TOPIC, 1).isr) == 3, 60)

    consumed = cli(
        cluster,
        "consume",
        TOPIC,
        "--from-beginning",
        "--max-messages",
        str(FIRST + SECOND),
        "--timeout-ms",
        "20000",
        "--format",
        "json",
    )
    assert consumed.returncode == 0, consumed.stderr
    per_partition = Counter(json.loads(line)["partition"] for line in consumed.stdout.splitlines())
    assert sum(per_partition.values()) == FIRST + SECOND
    cluster.down(timeout_s=30)  # checkpoints written on the way down: an exact audit

    out = tmp_path / "analytics"
    job = cli(
        cluster,
        "analytics",
        "--data",
        str(cluster.directory),
        "--out",
        str(out),
        "--fail-on-audit",
        "--shuffle-partitions",  # as the tests' shared session: the data are small
        "4",
        timeout=600,
    )
    assert job.returncode == 0, job.stdout + job.stderr

    buckets = pq.read_table(out / "throughput").to_pandas()
    buckets = buckets[buckets["topic"] == TOPIC]
    assert buckets.groupby("partition")["records"].sum().to_dict() == dict(per_partition)

    leaders = pq.read_table(out / "leader_changes").to_pandas()
    elected = leaders[
        (leaders["topic"] == TOPIC)
        & (leaders["partition"] == 0)
        & (leaders["old_leader"] == victim)
        & (leaders["new_leader"] == after.leader)
    ]
    assert not elected.empty, leaders

    isr = pq.read_table(out / "isr_events").to_pandas()
    shrinks = isr[(isr["topic"] == TOPIC) & (isr["event"] == "isr_shrink")]
    assert any(victim in list(old) and victim not in list(new) for old, new in
               zip(shrinks["old_isr"], shrinks["new_isr"], strict=True)), isr  # fmt: skip

    audit = pq.read_table(out / "audit_partitions").to_pandas()
    mine = audit[audit["topic"] == TOPIC]
    assert set(mine["status"]) == {"ok"}, mine
    assert (mine["offsets_on_all_replicas"] == mine["hw"]).all()

    page = (out / "report.html").read_text()
    assert "isr_shrink" in page and str(after.leader_epoch) in page
