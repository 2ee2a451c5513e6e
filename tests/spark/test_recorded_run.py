"""The analytics on a real recorded run: a broker killed, a broker paused past its
ZooKeeper session, the active controller killed; the failure timeline must list each
incident with its start and end, every time plot must carry the event markers (the data
behind the plot, not pixels), and report.html must open with no other file beside it.

Real processes (ZooKeeper, 2 controllers, 3 brokers, through the launcher users run),
then the job in this test run's shared Spark session. Faults take about half a minute:
each waits only for what the cluster must do (a leader moved, a session expired, a
standby took over), with a deadline.
"""

from __future__ import annotations

import html.parser
import os
import shutil
import subprocess
import sys

import pytest

from tests.integration.conftest import start_cluster  # noqa: F401 (the fixture)
from tests.integration.helpers import create_topic, wait_until
from tools.cluster.inspect import read_cluster

pytestmark = [
    pytest.mark.integration,
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
]

TOPIC = "incidents"
PARTITIONS = 3


def _cli(cluster, *args: str, stdin: str | None = None, timeout: float = 60):
    env = {**os.environ, "TRIBUTARY_CLUSTER_DIR": str(cluster.directory)}
    return subprocess.run(
        [sys.executable, "-c", "import sys; from tools.cli import main; sys.exit(main())", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def _produce(cluster, start: int, count: int) -> None:
    lines = "".join(f"key-{i % 17}:value-{i}\n" for i in range(start, start + count))
    result = _cli(cluster, "produce", TOPIC, "--key-separator", ":", "--acks", "all", stdin=lines)
    assert result.returncode == 0, result.stderr


def _consume_as_group(cluster, count: int) -> None:
    result = _cli(
        cluster,
        "consume",
        TOPIC,
        "--group",
        "readers",
        "--from-beginning",
        "--max-messages",
        str(count),
        "--timeout-ms",
        "5000",
    )
    assert result.returncode == 0, result.stderr


def _view(cluster):
    return read_cluster(cluster.state.zookeeper_connect)


def _all_isrs_full(cluster) -> bool:
    view = _view(cluster)
    mine = [p for p in view.partitions if p.topic == TOPIC]
    return len(mine) == PARTITIONS and all(len(p.isr) == 3 and p.leader >= 0 for p in mine)


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.references: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        for name, value in attrs:
            if name in ("src", "href") and value is not None:
                self.references.append(value)


def test_a_recorded_run_with_a_kill_a_pause_and_a_failover(start_cluster, spark, tmp_path):  # noqa: F811
    from spark.job import run

    cluster = start_cluster(brokers=3, controllers=2)
    create_topic(cluster, TOPIC, PARTITIONS, 3)
    _produce(cluster, 0, 300)
    _consume_as_group(cluster, 300)

    # 1. A broker killed, then started again.
    cluster.kill("broker-3")
    wait_until(lambda: 3 not in _view(cluster).brokers, 20)
    wait_until(
        lambda: all(3 not in p.isr for p in _view(cluster).partitions if p.topic == TOPIC), 20
    )
    _produce(cluster, 300, 200)
    cluster.start("broker-3")
    wait_until(lambda: _all_isrs_full(cluster), 60)

    # 2. A broker paused past its ZooKeeper session (4 s), then resumed.
    cluster.pause("broker-2")
    try:
        wait_until(lambda: 2 not in _view(cluster).brokers, 30)
    finally:
        cluster.resume("broker-2")
    wait_until(lambda: 2 in _view(cluster).brokers, 30)
    wait_until(lambda: _all_isrs_full(cluster), 60)

    # 3. The active controller killed: the standby takes over.
    active = wait_until(lambda: _view(cluster).controller_id, 20)
    cluster.kill(f"controller-{active}")
    successor = wait_until(
        lambda: (c := _view(cluster).controller_id) not in (None, active) and c, 30
    )
    _produce(cluster, 500, 200)
    _consume_as_group(cluster, 400)
    wait_until(lambda: _all_isrs_full(cluster), 30)
    cluster.down(timeout_s=30)

    out = tmp_path / "analytics"
    result = run(spark, cluster.directory, out)

    # The timeline lists each incident, with its start and end.
    incidents = {}
    for incident in result.timeline.incidents:  # the first of each (kind, subject)
        incidents.setdefault((incident.kind, incident.subject), incident)
    killed = incidents[("killed", "broker 3")]
    paused = incidents[("paused", "broker 2")]
    failover = incidents[("controller failover", "controller")]
    for incident in (killed, paused, failover):
        assert incident.start_ts is not None and incident.end_ts is not None, incident
        assert incident.start_ts <= incident.end_ts
    assert killed.end_ts <= paused.start_ts <= paused.end_ts <= failover.start_ts
    assert killed.recovered_ts is not None and paused.recovered_ts is not None
    # `cluster down` at the end: a controlled shutdown of each broker (not a kill), then
    # the last controller resigns.
    assert {i.kind for i in result.timeline.incidents if i.start_ts > failover.end_ts} <= {
        "stopped",
        "controller failover",
    }
    lanes = result.timeline.lanes()
    assert {"controller", "broker 2", "broker 3"} <= set(lanes)
    kinds = {m.kind for m in result.timeline.markers}
    assert {"broker_down", "broker_up", "controller_change", "leader_change"} <= kinds
    assert any(
        f"{successor}" in m.label for m in result.timeline.markers if m.kind == "controller_change"
    )

    # Every plot is drawn, is a time plot, and carries every event marker.
    expected = sorted({m.ts for m in result.timeline.markers})
    assert {"timeline", "throughput", "brokers", "isr_counts", "isr_heatmap", "latency",
            "groups"} <= set(result.plots)  # fmt: skip
    for plot in result.plots.values():
        assert plot.time_axis and plot.marker_ts == expected, plot.name

    # The data behind them: records counted once, the group committed what it read.
    assert result.summary["records (each offset once)"] >= 700
    import pyarrow.parquet as pq

    groups = pq.read_table(out / "group_summary").to_pandas()
    readers = groups[(groups["group"] == "readers") & (groups["topic"] == TOPIC)]
    assert readers["committed_offset"].sum() == 700 and (readers["lag"] == 0).all()
    assert result.audit_status.keys() == {"ok"}

    # report.html alone, in an otherwise empty directory, references nothing outside it.
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(result.report, alone / "report.html")
    links = _Links()
    links.feed((alone / "report.html").read_text())
    assert links.references and all(
        r.startswith("data:image/png;base64,") for r in links.references
    )
    assert len(links.references) == len(result.plots)
