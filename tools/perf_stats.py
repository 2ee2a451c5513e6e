"""Measurements for the perf tools: latency samples, reporting windows, a rate limiter.

How it works (the same arithmetic as Kafka's `ProducerPerformance.Stats` and
`ThroughputThrottler`, without I/O, times passed in so tests drive them):
- `LatencyStats` counts every record and its latency, keeps one latency sample in
  `sampling` (so at most about `MAX_SAMPLES` are stored whatever the record count) for the
  percentiles, and tracks a reporting *window*: `window_due(now)` says when
  `report_interval_s` has passed, `close_window(now)` returns that window's
  `Summary` and starts the next. `total(now)` is the whole run's summary.
- `Summary.line()` prints a window or total in kafka-producer-perf-test's words:
  "N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency" plus,
  for the total, the 50th/95th/99th/99.9th percentiles.
- `Throttler(rate)` answers how long to sleep before sending record number n so the
  average rate stays at `rate` records/s (-1 = unlimited), as Kafka's throttler does.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass

MAX_SAMPLES = 500_000
PERCENTILES = (0.5, 0.95, 0.99, 0.999)


@dataclass(frozen=True)
class Summary:
    records: int
    seconds: float
    bytes: int
    avg_latency_ms: float
    max_latency_ms: float
    percentiles_ms: dict[float, float] | None = None  # only in totals

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / (1024 * 1024) if self.seconds > 0 else 0.0

    def line(self, noun: str = "sent") -> str:
        text = (
            f"{self.records} records {noun}, {self.records_per_s:.1f} records/sec "
            f"({self.mb_per_s:.2f} MB/sec), {self.avg_latency_ms:.2f} ms avg latency, "
            f"{self.max_latency_ms:.2f} ms max latency"
        )
        if self.percentiles_ms is not None:
            text += ", " + ", ".join(
                f"{value:.0f} ms {_ordinal(p)}" for p, value in self.percentiles_ms.items()
            )
        return text + "."

    def as_dict(self) -> dict:
        out = {
            "records": self.records,
            "seconds": round(self.seconds, 3),
            "records_per_sec": round(self.records_per_s, 1),
            "mb_per_sec": round(self.mb_per_s, 3),
            "avg_latency_ms": round(self.avg_latency_ms, 3),
            "max_latency_ms": round(self.max_latency_ms, 3),
        }
        if self.percentiles_ms is not None:
            for p, value in self.percentiles_ms.items():
                out[f"p{_ordinal(p)[:-2]}_ms"] = round(value, 3)
        return out


def _ordinal(p: float) -> str:
    """0.5 -> '50th', 0.999 -> '99.9th' (Kafka's labels)."""
    return f"{p * 100:g}th"


class LatencyStats:
    def __init__(self, expected_records: int, started: float, report_interval_s: float = 5.0):
        self.sampling = max(1, math.ceil(expected_records / MAX_SAMPLES))
        self.samples = array("d")
        self.started = started
        self.report_interval_s = report_interval_s
        self.count = 0
        self.bytes = 0
        self.total_latency_ms = 0.0
        self.max_latency_ms = 0.0
        self._window_start = started
        self._window_count = 0
        self._window_bytes = 0
        self._window_latency_ms = 0.0
        self._window_max_ms = 0.0

    def record(self, latency_ms: float, size: int) -> None:
        if self.count % self.sampling == 0:
            self.samples.append(latency_ms)
        self.count += 1
        self.bytes += size
        self.total_latency_ms += latency_ms
        if latency_ms > self.max_latency_ms:
            self.max_latency_ms = latency_ms
        self._window_count += 1
        self._window_bytes += size
        self._window_latency_ms += latency_ms
        if latency_ms > self._window_max_ms:
            self._window_max_ms = latency_ms

    def record_many(self, latency_ms: float, count: int, size_each: int) -> None:
        """`count` records that completed together with the same latency (one batch)."""
        for _ in range(count):
            self.record(latency_ms, size_each)

    def window_due(self, now: float) -> bool:
        return now - self._window_start >= self.report_interval_s

    def close_window(self, now: float) -> Summary:
        count = self._window_count
        summary = Summary(
            records=count,
            seconds=now - self._window_start,
            bytes=self._window_bytes,
            avg_latency_ms=self._window_latency_ms / count if count else 0.0,
            max_latency_ms=self._window_max_ms,
        )
        self._window_start = now
        self._window_count = self._window_bytes = 0
        self._window_latency_ms = self._window_max_ms = 0.0
        return summary

    def total(self, now: float) -> Summary:
        return Summary(
            records=self.count,
            seconds=now - self.started,
            bytes=self.bytes,
            avg_latency_ms=self.total_latency_ms / self.count if self.count else 0.0,
            max_latency_ms=self.max_latency_ms,
            percentiles_ms=percentiles(self.samples),
        )


def percentiles(samples, points=PERCENTILES) -> dict[float, float]:
    """Kafka's nearest-rank percentiles of `samples` (0 for an empty run)."""
    ordered = sorted(samples)
    if not ordered:
        return {p: 0.0 for p in points}
    return {p: ordered[min(len(ordered) - 1, int(p * len(ordered)))] for p in points}


# As Kafka's ThroughputThrottler: no sleep shorter than this; records go out at once until
# the sender is this far ahead of the rate (a sleep per record costs more than a record).
MIN_SLEEP_S = 0.002


class Throttler:
    """How long to wait before record `sent` so the rate stays at `rate` records/s: 0
    until the sender is `MIN_SLEEP_S` ahead, then the whole lead."""

    def __init__(self, rate: float, started: float) -> None:
        self.rate = rate
        self.started = started

    def delay(self, sent: int, now: float) -> float:
        if self.rate <= 0:
            return 0.0
        ahead = self.started + sent / self.rate - now
        return ahead if ahead >= MIN_SLEEP_S else 0.0
