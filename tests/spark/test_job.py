"""The analytics job end to end on synthetic logs, events and metrics; the CLI's errors."""

from __future__ import annotations

import math

import pandas as pd
import pyarrow.parquet as pq
import pytest

from client.protocol.types import TopicPartition
from spark.job import TABLES
from spark.latency import broker_intervals
from tests.spark import synthetic
from tools.cli import main as cli

pytestmark = [
    pytest.mark.spark,
    # PySpark 4.3's own pandas conversions warn under pandas 3: noise, not our code.
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
]

ORDERS0 = TopicPartition("orders", 0)
ORDERS1 = TopicPartition("orders", 1)


T0 = synthetic.T0
# (commit time, group, partition, committed offset): orders-0 gets a batch of 5 records a
# second from T0 + 30 s (offsets 0..119), orders-1 from T0 + 60 s (offsets 0..59).
COMMITS = [
    (T0 + 40_500, "billing", ORDERS0, 20),  # 11 batches written by then: log end 55
    (T0 + 60_000, "billing", ORDERS0, 100),  # all 24: log end 120
    (T0 + 65_000, "billing", ORDERS1, 20),  # 5 batches and the first record of the 6th: 26
    (T0 + 66_000, "audit", ORDERS1, None),  # a tombstone: not a commit
]


@pytest.fixture(scope="module")
def job(tmp_path_factory, spark):
    """The story of `synthetic.write_events` on three brokers' logs, plus metrics, and a
    line with a mistyped field that must not change the tables."""
    from spark.job import run

    root = tmp_path_factory.mktemp("cluster")
    replicas = synthetic.write_replicas(
        root,
        {
            ORDERS0: synthetic.make_batches(ORDERS0, 24, 5, start_ts=synthetic.T0 + 30_000),
            ORDERS1: synthetic.make_batches(ORDERS1, 12, 5, start_ts=synthetic.T0 + 60_000),
            synthetic.OFFSETS: synthetic.offset_commit_batches(COMMITS),
        },
    )
    synthetic.write_events(root)
    synthetic.write_metrics(root)
    with (synthetic.log_dir_of(root, 2) / "events.jsonl").open("a") as out:
        out.write('{"ts": "yesterday", "broker": 2, "event": "isr_shrink"}\n')
    out = tmp_path_factory.mktemp("out")
    result = run(spark, root, out)
    return replicas, result


def _table(result, name) -> pd.DataFrame:
    return pq.read_table(result.tables[name]).to_pandas()


def test_every_table_and_the_report_are_written(job):
    _, result = job
    for name in TABLES:
        assert list(result.tables[name].glob("*.parquet")), name
    assert result.report.name == "report.html" and result.report.exists()
    assert not list(result.out.glob("*.png"))  # embedded in the page, not beside it
    assert result.audit_status == {"ok": 3}


def test_throughput_counts_each_offset_once_in_buckets_fitted_to_the_run(job):
    replicas, result = job
    buckets = _table(result, "throughput")
    buckets = buckets[buckets["topic"] == "orders"]
    per_partition = buckets.groupby("partition")["records"].sum().to_dict()
    assert per_partition == {0: 120, 1: 60}  # not 3x: three replicas hold each record
    assert buckets[buckets["partition"] == 0]["bytes"].sum() == replicas.log_bytes[ORDERS0]
    width = result.bucket_ms
    assert set(buckets["bucket_ts"] % width) == {0}
    # The topic series has a row for every bucket of the run, zeros where idle.
    topic = _table(result, "topic_throughput").sort_values("bucket_ts")
    topic = topic[topic["topic"] == "orders"]
    steps = set(topic["bucket_ts"].diff().dropna())
    assert steps == {width} and topic["records"].sum() == 180
    assert (topic["records"] == 0).any()
    # Rates over the buckets with records, and the peak bucket: not a lifetime average.
    summary = _table(result, "partitions")
    summary = summary[summary["topic"] == "orders"].set_index("partition")
    assert (
        summary.loc[1, "records"] == 60 and summary.loc[1, "bytes"] == replicas.log_bytes[ORDERS1]
    )
    active = buckets[buckets["partition"] == 1]
    assert summary.loc[1, "active_buckets"] == len(active)
    assert summary.loc[1, "records_per_s"] == pytest.approx(60 / (len(active) * width / 1000))
    assert summary.loc[1, "peak_records_per_s"] == pytest.approx(active["records_per_s"].max())


def test_isr_changes_leader_changes_and_intervals_are_found(job):
    _, result = job
    isr = _table(result, "isr_events")
    shrinks = isr[(isr["event"] == "isr_shrink") & (isr["source"] == "broker-1")]
    assert [list(v) for v in shrinks["new_isr"]] == [[1, 2]]
    assert (isr["event"] == "isr_expand").sum() == 1

    leaders = _table(result, "leader_changes")
    election = leaders[leaders["reason"] == "offline_election"].iloc[0]
    assert (election.partition, election.old_leader, election.new_leader) == (1, 2, 3)
    assert election.leader_epoch == 1

    under = _table(result, "under_replicated_intervals").set_index("partition")
    assert under.loc[0, "start_ts"] == synthetic.T0 + 10_000
    assert under.loc[1, "start_ts"] == synthetic.T0 + 20_010
    assert under["ongoing"].all()
    assert _table(result, "offline_intervals").empty

    truncations = _table(result, "truncations")
    assert truncations[["broker", "partition", "records_removed"]].values.tolist() == [[3, 0, 3]]

    timeline = _table(result, "isr_timeline")
    assert timeline["partition"].notna().all()  # the mistyped line did not sneak in


def test_the_report_lists_the_isr_shrink_and_the_leader_change(job):
    _, result = job
    page = result.report.read_text()
    assert "isr_shrink" in page and "isr_expand" in page
    assert "offline_election" in page
    assert "Replica consistency audit" in page and ">ok<" in page
    assert page.count('<img src="data:image/png;base64,') == 7  # timeline + 6 time plots


def test_the_timeline_and_the_summary_tell_the_broker_failure(job):
    from spark.job import text_summary

    _, result = job
    down = [i for i in result.timeline.incidents if i.subject == "broker 2"]
    assert [(i.kind, i.start_ts, i.end_ts) for i in down] == [
        ("killed", synthetic.T0 + 20_000, None)
    ]
    lines = text_summary(result)
    assert lines[0].startswith("incidents: 2; under-replicated for ")
    assert any("broker 2: killed (ongoing); ISR never full again" in line for line in lines)
    assert lines[-1] == "audit passed (ok: 3)"


def test_latency_percentiles_come_from_differences_between_snapshots(job):
    _, result = job
    cluster = _table(result, "request_latency_summary").set_index("request")
    assert cluster.loc["Produce", "p50_ms"] == 1.0 and cluster.loc["Produce", "p99_ms"] == 50.0
    assert cluster.loc["Fetch", "p99_ms"] == 0.5
    per_broker = _table(result, "request_latency")
    produce = per_broker[per_broker["request"] == "Produce"]
    assert set(produce["requests"]) == {100}  # 100 new requests in every interval


def test_a_broker_restart_resets_the_histogram_instead_of_going_negative():
    def snapshot(ts, buckets):
        return dict(ts=ts, broker=1, request="Produce", count=sum(buckets), sum=0.0,
                    le=[0.001, 0.01], buckets=buckets)  # fmt: skip

    frame = pd.DataFrame(
        [snapshot(1_000, [10, 0]), snapshot(2_000, [10, 5]), snapshot(3_000, [0, 2])]
    )
    rows = broker_intervals(frame).set_index("ts")
    assert rows.loc[2_000, "requests"] == 5 and rows.loc[2_000, "p50_ms"] == 10.0
    assert rows.loc[3_000, "requests"] == 2  # restarted: counted from zero
    assert rows.loc[2_000, "interval_ms"] == 1_000
    assert math.isnan(rows.loc[1_000, "interval_ms"])


# ----------------------------------------------------------------- the CLI, no Spark


def test_cli_reports_a_missing_data_dir_in_one_line(tmp_path, capsys):
    assert cli(["analytics", "--data", str(tmp_path / "nope"), "--out", str(tmp_path)]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" in err and "Traceback" not in err


def test_cli_reports_no_logs_in_one_line(tmp_path, capsys):
    (tmp_path / "broker-1" / "data").mkdir(parents=True)
    (tmp_path / "broker-1" / "data" / "events.jsonl").write_text("{}\n")
    assert cli(["analytics", "--data", str(tmp_path), "--out", str(tmp_path / "o")]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no broker logs found" in err


def test_consumer_group_commits_and_lag_over_time(job):
    _, result = job
    commits = _table(result, "group_offsets").sort_values("commit_ts")
    assert [
        (r.group, r.partition, r.commit_ts - T0, r.committed_offset, r.log_end_offset, r.lag)
        for r in commits.itertuples()
    ] == [
        ("billing", 0, 40_500, 20, 55, 35),
        ("billing", 0, 60_000, 100, 120, 20),
        ("billing", 1, 65_000, 20, 26, 6),
    ]
    summary = _table(result, "group_summary").set_index("partition")
    assert summary.loc[0, "lag"] == 20 and summary.loc[1, "lag"] == 40  # final log ends
    assert summary.loc[0, "commits"] == 2
    from spark.report import group_series

    lag = _table(result, "group_lag")
    orders0 = lag[lag["partition"] == 0].set_index("bucket_ts")
    # Lag over time grows while orders-0 is written and billing does not commit.
    assert orders0.loc[T0 + 40_000, "lag"] == 35  # committed 20, log end 55
    assert orders0.loc[T0 + 59_000, "lag"] == 100  # still 20, all 120 written
    assert orders0.loc[T0 + 60_000, "lag"] == 20  # committed 100
    series = group_series(lag, result.bucket_ms)["billing"]
    assert series["lag"].iloc[0] == 35 and series["lag"].max() == 100
    assert series["lag"].iloc[-1] == 60 and series["committed"].iloc[-1] == 120
    page = result.report.read_text()
    assert "Consumer groups" in page and "billing" in page
