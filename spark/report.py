"""The HTML report: tables and PNG plots from small, already aggregated pandas frames.

How it works: the job collects a bounded number of rows of each aggregated table
(`ReportData`; never record-level data) and `write_report` renders them into
`OUT/report.html` with PNG plots beside it (matplotlib's Agg backend: no display needed).
Each section says how many rows exist when it shows only the first ones; an empty input
gives a short "nothing recorded" line instead of an empty table or plot.
"""

from __future__ import annotations

import datetime as dt
import html
import logging
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

__all__ = ["ReportData", "Table", "write_report"]

logger = logging.getLogger(__name__)

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
.note { color: #666; font-size: 0.9em; }
.ok { color: #1a7f37; font-weight: bold; } .bad { color: #cf222e; font-weight: bold; }
.warn { color: #9a6700; font-weight: bold; }
img { max-width: 100%; border: 1px solid #eee; }
"""
_STATUS_CLASS = {
    "ok": "ok",
    "divergent": "bad",
    "missing": "bad",
    "lagging": "warn",
    "no_hw": "warn",
}


@dataclass
class Table:
    """At most `limit` rows of a table with `total` rows in all."""

    frame: pd.DataFrame
    total: int

    @classmethod
    def empty(cls) -> Table:
        return cls(pd.DataFrame(), 0)


@dataclass
class ReportData:
    data_dir: str
    summary: dict[str, object]
    audit_partitions: Table = field(default_factory=Table.empty)
    audit_replicas: Table = field(default_factory=Table.empty)
    audit_divergence: Table = field(default_factory=Table.empty)
    audit_missing: Table = field(default_factory=Table.empty)
    partitions: Table = field(default_factory=Table.empty)
    topic_minutes: Table = field(default_factory=Table.empty)
    isr_timeline: Table = field(default_factory=Table.empty)
    isr_events: Table = field(default_factory=Table.empty)
    leader_changes: Table = field(default_factory=Table.empty)
    truncations: Table = field(default_factory=Table.empty)
    under_replicated: Table = field(default_factory=Table.empty)
    offline: Table = field(default_factory=Table.empty)
    latency: Table = field(default_factory=Table.empty)
    latency_summary: Table = field(default_factory=Table.empty)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _format_cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if pd.isna(value):
            return ""
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 1e15 else str(value)
    if isinstance(value, pd.Timestamp | dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    if isinstance(value, bytes | bytearray):
        return value[:32].hex()
    if isinstance(value, list | tuple) or hasattr(value, "tolist"):
        items = value.tolist() if hasattr(value, "tolist") else value
        if isinstance(items, list):
            return "[" + ", ".join(_format_cell(v) for v in items) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_format_cell(v)}" for k, v in value.items()) + "}"
    try:
        if pd.isna(value):
            return ""
    except (TypeError, ValueError):
        pass
    return str(value)


def _table_html(table: Table, *, what: str, status_column: str | None = None) -> str:
    frame = table.frame
    if frame.empty:
        return f'<p class="note">No {html.escape(what)} recorded.</p>'
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = []
    for row in frame.itertuples(index=False):
        cells = []
        for column, value in zip(frame.columns, row, strict=True):
            text = html.escape(_format_cell(value))
            css = _STATUS_CLASS.get(str(value)) if column == status_column else None
            cells.append(f'<td class="{css}">{text}</td>' if css else f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    note = ""
    if table.total > len(frame):
        note = (
            f'<p class="note">Showing {len(frame):,} of {table.total:,} {html.escape(what)}; '
            "the Parquet table has them all.</p>"
        )
    return f"<table><tr>{head}</tr>{''.join(body)}</table>{note}"


def _plot_throughput(minutes: pd.DataFrame, path: Path) -> bool:
    if minutes.empty:
        return False
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 4))
    for topic, group in minutes.sort_values("minute").groupby("topic"):
        ax.plot(group["minute"], group["records_per_s"], marker="o", label=str(topic))
    ax.set_title("Produce rate per topic (records/s, per minute, replicas counted once)")
    ax.set_ylabel("records/s")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def _plot_isr(timeline: pd.DataFrame, path: Path, max_partitions: int = 12) -> bool:
    if timeline.empty:
        return False
    plt = _pyplot()
    frame = timeline.assign(tp=timeline["topic"] + "-" + timeline["partition"].astype(str))
    busiest = frame["tp"].value_counts().index[:max_partitions]
    end = frame["time"].max()
    fig, ax = plt.subplots(figsize=(10, 4))
    for tp in sorted(busiest):
        group = frame[frame["tp"] == tp].sort_values("time")
        times = [*group["time"], end]
        sizes = [*group["isr_size"], group["isr_size"].iloc[-1]]
        ax.step(times, sizes, where="post", label=tp)
        offline = group[group["offline"]]
        if not offline.empty:
            ax.scatter(offline["time"], offline["isr_size"], marker="x", color="red")
    ax.set_title("ISR size per partition (x: leader -1, offline)")
    ax.set_ylabel("replicas in ISR")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small", ncol=2)
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def _plot_latency(latency: pd.DataFrame, path: Path, max_requests: int = 8) -> bool:
    if latency.empty:
        return False
    plt = _pyplot()
    busiest = latency.groupby("request")["requests"].sum().nlargest(max_requests).index
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
    for column, ax in zip(("p50_ms", "p99_ms"), axes, strict=True):
        for request in sorted(busiest):
            group = latency[latency["request"] == request].sort_values("time")
            ax.plot(group["time"], group[column].clip(upper=1e6), marker=".", label=request)
        ax.set_title(f"{column[:3]} request latency (all brokers)")
        ax.set_ylabel("ms")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0].legend(loc="best", fontsize="small")
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def _image(name: str, made: bool) -> str:
    return f'<p><img src="{name}" alt="{name}"></p>' if made else ""


def write_report(out: Path, data: ReportData) -> Path:
    """Render `data` as `out/report.html` (and its PNGs); returns the report's path."""
    out.mkdir(parents=True, exist_ok=True)
    plots = {}
    for name, plot, frame in (
        ("throughput.png", _plot_throughput, data.topic_minutes.frame),
        ("isr.png", _plot_isr, data.isr_timeline.frame),
        ("latency.png", _plot_latency, data.latency.frame),
    ):
        try:
            plots[name] = plot(frame, out / name)
        except Exception:  # a plot is a nicety: never lose the report over one
            logger.exception("could not draw %s", name)
            plots[name] = False
    summary_rows = "".join(
        f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(_format_cell(v))}</td></tr>"
        for k, v in data.summary.items()
    )
    generated = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        "<title>Tributary analytics</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>Tributary analytics</h1>",
        f'<p class="note">Data: {html.escape(data.data_dir)}. Generated {generated}. '
        "All times UTC.</p>",
        f"<table>{summary_rows}</table>",
        "<h2>Replica consistency audit</h2>",
        '<p class="note">Per partition, every replica\'s records below the high watermark '
        "(the highest HW checkpointed by any replica) are compared by a hash of timestamp, "
        "key, value and headers. <b>divergent</b>: replicas hold different records at the "
        "same offset; <b>missing</b>: an acknowledged range is absent from a replica that "
        "has later offsets (hole) or from every replica; <b>lagging</b>: a replica's log "
        "ends below the HW (a follower out of the ISR or catching up).</p>",
        _table_html(data.audit_partitions, what="partitions", status_column="status"),
        "<h3>Replicas</h3>",
        _table_html(data.audit_replicas, what="replicas"),
        "<h3>Divergent offsets</h3>",
        _table_html(data.audit_divergence, what="divergent offsets"),
        "<h3>Missing acknowledged ranges</h3>",
        _table_html(data.audit_missing, what="missing ranges"),
        "<h2>Produce throughput</h2>",
        _image("throughput.png", plots["throughput.png"]),
        _table_html(data.partitions, what="partitions"),
        "<h2>ISR over time</h2>",
        _image("isr.png", plots["isr.png"]),
        "<h3>ISR shrinks and expands</h3>",
        _table_html(data.isr_events, what="ISR shrink or expand events"),
        "<h3>Under-replicated intervals</h3>",
        _table_html(data.under_replicated, what="under-replicated intervals"),
        "<h3>Offline intervals (leader -1)</h3>",
        _table_html(data.offline, what="offline intervals"),
        "<h2>Leader changes</h2>",
        _table_html(data.leader_changes, what="leader changes"),
        "<h3>Follower truncations</h3>",
        _table_html(data.truncations, what="truncations"),
        "<h2>Request latency</h2>",
        _image("latency.png", plots["latency.png"]),
        _table_html(data.latency_summary, what="request types"),
        "</body></html>",
    ]
    path = out / "report.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
