"""The perf tools' arithmetic: percentiles as Kafka computes them, reporting windows that
add up to the total, sampling that bounds memory, and a rate limiter that holds its rate."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tools.perf_stats import MAX_SAMPLES, MIN_SLEEP_S, LatencyStats, Throttler, percentiles


def test_percentiles_are_nearest_rank_like_kafka():
    samples = list(range(1, 1001))  # 1..1000 ms
    points = percentiles(samples)
    assert points[0.5] == 501
    assert points[0.99] == 991
    assert points[0.999] == 1000
    assert percentiles([]) == {0.5: 0.0, 0.95: 0.0, 0.99: 0.0, 0.999: 0.0}


@given(st.lists(st.floats(0, 10_000), min_size=1, max_size=300), st.integers(1, 50))
def test_windows_add_up_to_the_total(latencies, window_every):
    stats = LatencyStats(len(latencies), started=0.0, report_interval_s=1.0)
    windows = []
    for i, latency in enumerate(latencies):
        stats.record(latency, 100)
        if i % window_every == 0:
            windows.append(stats.close_window(now=float(i + 1)))
    windows.append(stats.close_window(now=float(len(latencies) + 1)))
    total = stats.total(now=float(len(latencies) + 1))
    assert sum(w.records for w in windows) == total.records == len(latencies)
    assert sum(w.bytes for w in windows) == total.bytes
    assert max(w.max_latency_ms for w in windows) == total.max_latency_ms == max(latencies)
    assert total.percentiles_ms[0.5] <= total.percentiles_ms[0.99] <= total.max_latency_ms


def test_samples_stay_bounded_for_huge_runs():
    stats = LatencyStats(expected_records=50 * MAX_SAMPLES, started=0.0)
    for _ in range(200_000):
        stats.record(1.0, 10)
    assert len(stats.samples) <= 200_000 // 50 + 1
    assert stats.count == 200_000


def test_the_total_line_reads_like_kafka_producer_perf_test():
    stats = LatencyStats(2, started=0.0)
    stats.record(2.0, 1024 * 1024)
    stats.record(4.0, 1024 * 1024)
    line = stats.total(now=2.0).line()
    assert line.startswith("2 records sent, 1.0 records/sec (1.00 MB/sec), 3.00 ms avg latency")
    assert "4.00 ms max latency" in line and "ms 99.9th" in line


@given(st.floats(1, 1e6), st.integers(0, 10_000))
def test_the_throttler_never_lets_the_rate_exceed_its_target(rate, sent):
    throttler = Throttler(rate, started=100.0)
    now = 100.0
    wait = throttler.delay(sent, now)
    # After waiting, `sent` records took at least sent/rate seconds, less the lead it
    # allows without sleeping (as Kafka's throttler: no sleep under 2 ms).
    assert now + wait - 100.0 >= sent / rate - MIN_SLEEP_S
    assert wait == 0.0 or wait >= MIN_SLEEP_S
    assert Throttler(-1, started=0.0).delay(sent, 0.0) == 0.0
