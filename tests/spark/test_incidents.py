"""The failure timeline from a run with a kill, a pause and a controller failover, and the
self-contained report drawn from it: the data behind the plots, not their pixels."""

from __future__ import annotations

import math
import re

import pandas as pd

from spark.incidents import (
    Span,
    failure_timeline,
    format_duration,
    leader_counts,
    partition_counts,
    partition_states,
)
from spark.report import ReportData, Table, _latency_table, render_plots, write_report
from spark.throughput import TARGET_BUCKETS, choose_bucket_ms
from tests.spark import synthetic
from tests.spark.synthetic import T0


def _story():
    return failure_timeline(*synthetic.failure_story())


def test_each_incident_has_its_start_end_and_recovery_time():
    incidents = [
        (i.kind, i.subject, i.start_ts - T0, i.end_ts - T0, i.recovery_ms)
        for i in _story().incidents
    ]
    assert incidents == [
        ("killed", "broker 2", 10_000, 30_000, 24_000),  # full ISR at +34 s
        ("paused", "broker 3", 50_000, 70_500, 24_000),  # dropped from ISR first
        ("controller failover", "controller", 96_000, 96_000, 0),
    ]


def test_lanes_hold_the_spans_of_each_failure():
    timeline = _story()
    spans = {(s.lane, s.kind, s.start_ts - T0, (s.end_ts or 0) - T0) for s in timeline.spans}
    assert ("broker 2", "down", 10_000, 30_000) in spans
    assert ("broker 3", "not_answering", 50_000, 56_000) in spans
    assert ("broker 3", "paused", 56_000, 70_500) in spans
    assert ("controller", "active", -100, 96_000) in spans
    assert ("ISR orders-0", "under_replicated", 10_010, 33_000) in spans
    assert ("ISR orders-1", "under_replicated", 56_010, 74_000) in spans
    assert Span("controller", "active", T0 + 96_000, None, "controller 1002") in timeline.spans
    assert timeline.lanes() == [
        "controller",
        "broker 2",
        "broker 3",
        "ISR orders-0",
        "ISR orders-1",
    ]
    assert timeline.under_replicated_ms == (34_000 - 10_010) + (74_000 - 50_000)
    assert timeline.offline_ms == 0


def test_markers_cover_brokers_controller_leaders_and_isr():
    kinds = {(m.ts - T0, m.kind) for m in _story().markers}
    for expected in [
        (10_000, "broker_down"),
        (30_000, "broker_up"),
        (50_000, "not_answering"),
        (56_010, "leader_change"),
        (50_000, "isr_shrink"),
        (74_000, "isr_expand"),
        (96_000, "controller_change"),
    ]:
        assert expected in kinds
    # A new partition's first leader is not an incident marker.
    assert not any(k == "leader_change" and ts < 0 for ts, k in kinds)


def test_partition_counts_step_with_the_under_replicated_spans():
    counts = [(ts - T0, under, offline) for ts, under, offline in partition_counts(_story())]
    assert counts == [
        (-100, 0, 0),
        (10_010, 2, 0),
        (33_000, 1, 0),
        (34_000, 0, 0),
        (50_000, 1, 0),
        (56_010, 2, 0),
        (73_000, 1, 0),
        (74_000, 0, 0),
        (100_000, 0, 0),
    ]
    assert all(isinstance(v, int) for row in counts for v in row)


def test_an_open_incident_and_a_resigned_controller():
    brokers, controllers = synthetic.failure_story()
    cut = [r for r in controllers if r["ts"] <= T0 + 56_010]
    cut.append({"ts": T0 + 60_000, "controller": 1001, "epoch": 1, "event": "controller_resigned"})
    cut.append({"ts": T0 + 61_000, "controller": 1001, "epoch": 2, "event": "controller_elected"})
    timeline = failure_timeline(
        [r for r in brokers if r["ts"] <= T0 + 60_000], cut, end_ts=T0 + 80_000
    )
    last = {(i.kind, i.subject): i for i in timeline.incidents}
    paused = last[("killed", "broker 3")]  # it never came back: no session_lost seen
    assert (paused.start_ts, paused.end_ts, paused.recovered_ts) == (T0 + 50_000, None, None)
    failover = last[("controller failover", "controller")]
    assert (failover.start_ts, failover.end_ts, failover.recovered_ts) == (
        T0 + 60_000,
        T0 + 61_000,
        None,  # orders-1 is still under-replicated
    )
    assert timeline.end_ts == T0 + 80_000
    assert failure_timeline([], []).incidents == []
    assert format_duration(24_000) == "24.0 s" and format_duration(125_000) == "2 min 05 s"


def _report_data() -> ReportData:
    topics = pd.DataFrame(
        {
            "topic": ["orders"] * 3,
            "bucket_ts": [T0, T0 + 30_000, T0 + 60_000],
            "time": [pd.Timestamp(T0 + i * 30_000, unit="ms") for i in range(3)],
            "records_per_s": [10.0, 0.0, 12.0],
        }
    )
    brokers = pd.DataFrame(
        {
            "broker": [1, 1, 2],
            "bucket_ts": [T0, T0 + 60_000, T0],
            "bytes_in_per_s": [1000.0, 2000.0, 500.0],
            "bytes_out_per_s": [100.0, 200.0, 50.0],
        }
    )
    isr = pd.DataFrame(
        {
            "topic": ["orders", "orders"],
            "partition": [0, 0],
            "time": [pd.Timestamp(T0, unit="ms"), pd.Timestamp(T0 + 10_010, unit="ms")],
            "isr_size": [3, 2],
            "offline": [False, False],
        }
    )
    times = [pd.Timestamp(T0, unit="ms"), pd.Timestamp(T0 + 5_000, unit="ms")]
    latency = pd.DataFrame(
        {
            "bucket_ts": [T0, T0 + 5_000] * 3,
            "request": ["Produce"] * 2 + ["Fetch"] * 2 + ["Fetch wait (consumer)"] * 2,
            "time": times * 3,
            "requests": [10, 10, 4, 4, 4, 4],
            "mean_ms": [1.0, 2.0, 260.0, 300.0, 250.0, 280.0],
            "p50_ms": [1.0, 2.0, 250.0, 250.0, 250.0, 250.0],
            "p99_ms": [5.0, math.inf, 500.0, 500.0, 250.0, 250.0],
            "top_bucket_ms": [30_000.0] * 6,
        }
    )
    return ReportData(
        data_dir="/nowhere",
        summary={"audit": "ok: 2"},
        topic_throughput=Table(topics, 3),
        broker_throughput=Table(brokers, 3),
        bucket_ms=30_000,
        isr_timeline=Table(isr, 2),
        latency=Table(latency, 2),
        timeline=_story(),
    )


def test_every_time_plot_carries_every_event_marker_and_the_timeline_comes_first():
    data = _report_data()
    plots = render_plots(data)
    assert list(plots) == [
        "timeline",
        "throughput",
        "brokers",
        "isr_counts",
        "isr_heatmap",
        "latency",
    ]
    expected = sorted({m.ts for m in data.timeline.markers})
    for plot in plots.values():
        assert plot.time_axis and plot.marker_ts == expected, plot.name
        assert plot.png.startswith(b"\x89PNG")
    assert plots["timeline"].lanes == data.timeline.lanes()


def test_the_report_is_one_self_contained_file(tmp_path):
    path = write_report(tmp_path, _report_data())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]
    page = path.read_text()
    references = re.findall(r'(?:src|href)\s*=\s*["\']([^"\']*)', page)
    assert len(references) == 6
    assert all(ref.startswith("data:image/png;base64,") for ref in references)
    assert "url(" not in page and "@import" not in page
    assert page.index("Failure timeline") < page.index("Replica consistency audit")
    assert "24.0 s" in page and "controller failover" in page


def test_leader_counts_and_the_isr_heatmap_follow_the_story():
    timeline = _story()
    counts = leader_counts(timeline)
    # Every broker's count is a whole number of partitions, never negative, and ends with
    # the leaders the replay holds at the end.
    assert all(n >= 0 for points in counts.values() for _, n in points)
    final = {b: points[-1][1] for b, points in counts.items()}
    assert sum(final.values()) == len(
        [tp for tp in timeline.partitions if _last_leader(timeline, tp) not in (None, -1)]
    )
    names, edges, matrix = partition_states(timeline, bins=100)
    assert names == [f"{t}-{p}" for t, p in timeline.partitions]
    assert len(edges) == 100 and all(len(row) == 100 for row in matrix)
    for span in timeline.spans:
        if span.kind not in ("under_replicated", "offline"):
            continue
        row = matrix[names.index(span.lane.removeprefix("ISR "))]
        width = (timeline.end_ts - timeline.start_ts) / 100
        middle = int(((span.start_ts + (span.end_ts or timeline.end_ts)) / 2 - edges[0]) / width)
        assert row[min(middle, 99)] >= (1 if span.kind == "under_replicated" else 2), span


def _last_leader(timeline, tp):
    leaders = [leader for _, t, leader in timeline.leaders if t == tp]
    return leaders[-1] if leaders else None


def test_latency_beyond_the_top_bucket_is_never_a_number_and_fetch_wait_is_split_out():
    data = _report_data()
    table = _latency_table(Table(data.latency.frame, len(data.latency.frame))).frame
    produce = table[table["request"] == "Produce"]
    assert produce["p99_ms"].tolist() == [5.0, "> top bucket (30,000)"]
    processing = table[table["request"] == "Fetch processing"]
    # (260 - 250) and (300 - 280) ms of each Fetch were not long-poll waiting.
    assert processing["mean_ms"].tolist() == [10.0, 20.0]
    page = write_report_text(data)
    assert "> top bucket" in page.replace("&gt;", ">") and "inf" not in page.split("<img")[0]


def write_report_text(data) -> str:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as out:
        return write_report(Path(out), data).read_text()


def test_throughput_buckets_adapt_to_the_run():
    assert choose_bucket_ms(90_000) == 1_000  # a 90 s run: one point a second
    assert choose_bucket_ms(20 * 60_000) == 10_000
    assert choose_bucket_ms(24 * 3_600_000) == 600_000
    assert choose_bucket_ms(None) == 1_000
    for duration in (1, 10_000, 3_600_000, 400 * 86_400_000):
        assert duration / choose_bucket_ms(duration) <= TARGET_BUCKETS


def test_fetch_processing_in_the_whole_run_summary_too():
    frame = _report_data().latency.frame.drop(columns=["bucket_ts", "time"])
    frame = frame.groupby("request", as_index=False).first()
    table = _latency_table(Table(frame, len(frame))).frame
    assert table[table["request"] == "Fetch processing"]["mean_ms"].tolist() == [10.0]
