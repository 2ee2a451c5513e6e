"""Broker metrics: counters, gauges and latency histograms in Prometheus text format.

How it works: a `MetricsRegistry` holds named metrics with optional labels. Counters
and histograms are updated on the hot path (a dict lookup and an add; `labelled(...)`
gives an updater for one label set, its key made once); gauges are
callbacks read only when someone scrapes (`render()`) or a snapshot is taken
(`snapshot()`, the JSON-lines record the Spark job reads). Names follow Kafka's JMX
names where one exists (UnderReplicatedPartitions, IsrShrinksPerSec...), in Prometheus
form: `tributary_<snake_case>`.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable

# Request latency buckets in seconds: 0.5 ms .. 30 s.
LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)

Labels = tuple[tuple[str, str], ...]


def _labels(labels: dict[str, str] | None) -> Labels:
    return tuple(sorted((labels or {}).items()))


def _render_labels(labels: Labels, extra: Iterable[tuple[str, str]] = ()) -> str:
    items = list(labels) + list(extra)
    if not items:
        return ""
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in items)
    return "{" + body + "}"


def _escape(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if value == math.inf:
        return "+Inf"
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))


class Counter:
    def __init__(self, name: str, doc: str):
        self.name, self.doc = name, doc
        self.values: dict[Labels, float] = {}

    def inc(self, amount: float = 1, labels: dict[str, str] | None = None) -> None:
        key = _labels(labels)
        self.values[key] = self.values.get(key, 0) + amount

    def labelled(self, labels: dict[str, str] | None = None) -> Callable[[float], None]:
        """`inc` for one label set, its key made once (for a per-request hot path)."""
        key = _labels(labels)
        values = self.values

        def inc(amount: float = 1) -> None:
            values[key] = values.get(key, 0) + amount

        return inc

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.doc}", f"# TYPE {self.name} counter"]
        for labels, value in sorted(self.values.items()):
            lines.append(f"{self.name}{_render_labels(labels)} {_number(value)}")
        return lines


class Gauge:
    """A value read from a callback at scrape time; the callback may return a number or a
    list of (labels dict, number) pairs."""

    def __init__(self, name: str, doc: str, read: Callable[[], float | list]):
        self.name, self.doc, self.read = name, doc, read

    def samples(self) -> list[tuple[Labels, float]]:
        value = self.read()
        if isinstance(value, list):
            return [(_labels(labels), v) for labels, v in value]
        return [((), value)]

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.doc}", f"# TYPE {self.name} gauge"]
        for labels, value in self.samples():
            lines.append(f"{self.name}{_render_labels(labels)} {_number(value)}")
        return lines


class CallbackCounter(Gauge):
    """A running total read from a callback at scrape time (a count kept elsewhere, such
    as the replica manager's ISR shrinks): typed `counter` for Prometheus, so `rate()`
    and counter resets work on it; in snapshots it is a number like a gauge's."""

    def render(self) -> list[str]:
        lines = super().render()
        lines[1] = f"# TYPE {self.name} counter"
        return lines


class Histogram:
    def __init__(self, name: str, doc: str, buckets: tuple[float, ...] = LATENCY_BUCKETS):
        self.name, self.doc, self.buckets = name, doc, buckets
        self.series: dict[Labels, list] = {}  # labels -> [bucket counts..., sum, count]

    def observe(self, value: float, labels: dict[str, str] | None = None) -> None:
        self.labelled(labels)(value)

    def labelled(self, labels: dict[str, str] | None = None) -> Callable[[float], None]:
        """`observe` for one label set, its series found once (for a hot path); the
        series appears when the first value is observed."""
        key = _labels(labels)
        buckets, all_series = self.buckets, self.series
        top = len(buckets)
        bisect_left = bisect.bisect_left

        def observe(value: float) -> None:
            series = all_series.get(key)
            if series is None:
                series = all_series[key] = [0] * (top + 2)
            index = bisect_left(buckets, value)
            if index < top:
                series[index] += 1
            series[-2] += value
            series[-1] += 1

        return observe

    def quantile(self, q: float, labels: dict[str, str] | None = None) -> float | None:
        """Estimated quantile (upper bucket bound) from the buckets; None when empty."""
        series = self.series.get(_labels(labels))
        if not series or series[-1] == 0:
            return None
        target = q * series[-1]
        running = 0
        for bound, count in zip(self.buckets, series, strict=False):
            running += count
            if running >= target:
                return bound
        return math.inf

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.doc}", f"# TYPE {self.name} histogram"]
        for labels, series in sorted(self.series.items()):
            running = 0
            for bound, count in zip(self.buckets, series, strict=False):
                running += count
                lines.append(
                    f"{self.name}_bucket{_render_labels(labels, [('le', _number(bound))])} "
                    f"{running}"
                )
            lines.append(
                f"{self.name}_bucket{_render_labels(labels, [('le', '+Inf')])} {series[-1]}"
            )
            lines.append(f"{self.name}_sum{_render_labels(labels)} {_number(series[-2])}")
            lines.append(f"{self.name}_count{_render_labels(labels)} {series[-1]}")
        return lines


class MetricsRegistry:
    def __init__(self, prefix: str = "tributary"):
        self.prefix = prefix
        self.metrics: dict[str, Counter | Gauge | Histogram] = {}

    def _name(self, name: str) -> str:
        return f"{self.prefix}_{name}"

    def counter(self, name: str, doc: str) -> Counter:
        return self._add(Counter(self._name(name), doc))

    def gauge(self, name: str, doc: str, read: Callable[[], float | list]) -> Gauge:
        return self._add(Gauge(self._name(name), doc, read))

    def counter_of(self, name: str, doc: str, read: Callable[[], float | list]) -> Gauge:
        """A counter whose running total `read()` returns (see `CallbackCounter`)."""
        return self._add(CallbackCounter(self._name(name), doc, read))

    def histogram(self, name: str, doc: str, buckets=LATENCY_BUCKETS) -> Histogram:
        return self._add(Histogram(self._name(name), doc, buckets))

    def _add(self, metric):
        if metric.name in self.metrics:
            raise ValueError(f"metric {metric.name} registered twice")
        self.metrics[metric.name] = metric
        return metric

    def render(self) -> str:
        lines: list[str] = []
        for metric in self.metrics.values():
            lines.extend(metric.render())
        return "\n".join(lines) + "\n"

    def snapshot(self) -> dict:
        """A JSON-friendly view: counters and gauges by name (labelled ones as lists), and
        per histogram series: count, sum, p50/p99 and the bucket counts (not cumulative
        across buckets; cumulative over time)."""
        out: dict = {}
        for metric in self.metrics.values():
            short = metric.name.removeprefix(self.prefix + "_")
            if isinstance(metric, Counter):
                out[short] = _flatten(metric.values.items())
            elif isinstance(metric, Gauge):
                out[short] = _flatten(metric.samples())
            else:
                series = []
                for labels in metric.series:
                    d = dict(labels)
                    counts = metric.series[labels]
                    series.append(
                        {
                            **d,
                            "count": counts[-1],
                            "sum": counts[-2],
                            "p50": metric.quantile(0.5, d),
                            "p99": metric.quantile(0.99, d),
                            # Cumulative per-bucket counts (upper bounds in "le"): readers
                            # take differences between snapshots for per-interval quantiles.
                            "le": list(metric.buckets),
                            "buckets": list(counts[: len(metric.buckets)]),
                        }
                    )
                out[short] = series
        return out


def _flatten(items) -> float | list:
    items = list(items)
    if len(items) == 1 and items[0][0] == ():
        return items[0][1]
    return [{**dict(labels), "value": value} for labels, value in items]
