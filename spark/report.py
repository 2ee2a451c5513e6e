"""The HTML report: tables and PNG plots from small, already aggregated pandas frames.

How it works: the job collects a bounded number of rows of each aggregated table
(`ReportData`; never record-level data) and `write_report` renders them into one
self-contained `OUT/report.html`: every plot is a PNG embedded as a base64 data URI
(matplotlib's Agg backend: no display needed), so the page needs no other file.
`render_plots` returns the plots with the data behind them (`Plot`): the failure timeline
(`spark.incidents`) comes first, and every time plot shares its time range and carries
its event markers as vertical lines (read back from the drawn figure, so tests can check
them without looking at pixels). Each section says how many rows exist when it shows
only the first ones; an empty input gives a short "nothing recorded" line instead of an
empty table or plot.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from spark.incidents import (
    STATE_OFFLINE,
    FailureTimeline,
    Marker,
    format_duration,
    leader_counts,
    partition_counts,
    partition_states,
)
from spark.latency import FETCH, FETCH_PROCESSING, FETCH_WAIT_PREFIX, fetch_processing

__all__ = [
    "Plot",
    "ReportData",
    "Table",
    "group_series",
    "incident_table",
    "render_plots",
    "render_report",
    "write_report",
]

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
    topic_throughput: Table = field(default_factory=Table.empty)
    broker_throughput: Table = field(default_factory=Table.empty)
    bucket_ms: int = 60_000
    isr_timeline: Table = field(default_factory=Table.empty)
    isr_events: Table = field(default_factory=Table.empty)
    leader_changes: Table = field(default_factory=Table.empty)
    truncations: Table = field(default_factory=Table.empty)
    under_replicated: Table = field(default_factory=Table.empty)
    offline: Table = field(default_factory=Table.empty)
    latency: Table = field(default_factory=Table.empty)
    latency_summary: Table = field(default_factory=Table.empty)
    group_lag: Table = field(default_factory=Table.empty)
    group_summary: Table = field(default_factory=Table.empty)
    security: Table = field(default_factory=Table.empty)  # spark.security, per minute
    timeline: FailureTimeline = field(default_factory=lambda: FailureTimeline(None, None))


@dataclass
class Plot:
    """One drawn figure: its PNG and what it shows (for tests and the page)."""

    name: str
    png: bytes
    time_axis: bool  # x is wall-clock time (then it carries the event markers)
    marker_ts: list[int]  # the event markers drawn on it, in ms since the epoch
    lanes: list[str] = field(default_factory=list)  # the timeline's lanes, top to bottom

    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")


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


_MARKER_GID = "event-marker:"
_MARKER_COLOURS = {
    "broker_down": "#cf222e",
    "broker_up": "#1a7f37",
    "broker_bounced": "#bc4c00",
    "not_answering": "#9a6700",
    "controller_change": "#8250df",
    "leader_change": "#0969da",
    "isr_shrink": "#d4a72c",
    "isr_expand": "#57ab5a",
}
_SPAN_COLOURS = {
    "down": "#cf222e",
    "stopped": "#8c959f",
    "paused": "#bc4c00",
    "not_answering": "#d4a72c",
    "active": "#8250df",
    "under_replicated": "#9ecbff",
    "offline": "#6e7781",
    "security": "#953800",  # a minute with failed logins or authorization denials
}
SECURITY_LANE = "auth failures / denials"


def _time(ms: int) -> pd.Timestamp:
    return pd.Timestamp(ms, unit="ms")


def _draw_markers(ax, timeline: FailureTimeline) -> None:
    """The timeline's events as thin vertical lines, and the shared time range."""
    for marker in timeline.markers:
        ax.axvline(
            _time(marker.ts),
            color=_MARKER_COLOURS.get(marker.kind, "#888"),
            linewidth=0.8,
            alpha=0.7,
            linestyle="--" if marker.kind in ("isr_shrink", "isr_expand") else "-",
            gid=f"{_MARKER_GID}{marker.ts}",
            zorder=0,
        )
    if timeline.start_ts is not None and timeline.end_ts is not None:
        low, high = ax.get_xlim() if ax.has_data() else (None, None)
        import matplotlib.dates as mdates

        start = mdates.date2num(_time(timeline.start_ts))
        end = mdates.date2num(_time(timeline.end_ts))
        if low is not None:
            start, end = min(start, low), max(end, high)
        pad = max((end - start) * 0.01, 1e-6)
        ax.set_xlim(start - pad, end + pad)


def _drawn_markers(fig) -> list[int]:
    found = set()
    for ax in fig.axes:
        for line in ax.get_lines():
            gid = line.get_gid() or ""
            if gid.startswith(_MARKER_GID):
                found.add(int(gid[len(_MARKER_GID) :]))
    return sorted(found)


def _marker_legend(ax, timeline: FailureTimeline) -> list:
    from matplotlib.lines import Line2D

    kinds = sorted({m.kind for m in timeline.markers})
    return [
        Line2D([], [], color=_MARKER_COLOURS.get(k, "#888"), label=k.replace("_", " "))
        for k in kinds
    ]


def _timeline_figure(timeline: FailureTimeline, security=None, _bucket_ms: int = 0):
    """The lanes of the failure timeline, and a last lane of the minutes with failed
    logins or authorization denials (`security`: spark.security's table)."""
    end = timeline.end_ts  # set whenever start_ts is
    security = security if security is not None else pd.DataFrame()
    failures = timeline.start_ts is not None and bool(timeline.spans or timeline.markers)
    if not failures and security.empty:
        return None
    plt = _pyplot()
    from matplotlib.patches import Patch

    lanes = timeline.lanes() + ([SECURITY_LANE] if not security.empty else [])
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.45 * max(len(lanes), 1)))
    for row, lane in enumerate(lanes):
        for span in (s for s in timeline.spans if s.lane == lane):
            stop = span.end_ts if span.end_ts is not None else (end or span.start_ts)
            ax.barh(
                row,
                _time(stop) - _time(span.start_ts),
                left=_time(span.start_ts),
                height=0.6,
                color=_SPAN_COLOURS.get(span.kind, "#888"),
                hatch="//" if span.end_ts is None else None,
                edgecolor="white",
            )
            if span.kind == "active":
                ax.text(_time(span.start_ts), row, f" {span.label}", va="center", fontsize=8)
    if not security.empty:
        for minute in sorted(set(security["minute_ts"])):
            ax.barh(
                len(lanes) - 1,
                pd.Timedelta(minutes=1),
                left=_time(int(minute)),
                height=0.6,
                color=_SPAN_COLOURS["security"],
                edgecolor="white",
            )
    ax.set_yticks(range(len(lanes)), lanes)
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    _draw_markers(ax, timeline)
    kinds = sorted(
        {s.kind for s in timeline.spans} | ({"security"} if not security.empty else set())
    )
    handles = [Patch(color=_SPAN_COLOURS.get(k, "#888"), label=k.replace("_", " ")) for k in kinds]
    handles += _marker_legend(ax, timeline)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    ax.set_title("Failure timeline (hatched: still open at the end of the data)")
    ax.grid(axis="x", alpha=0.3)
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig, lanes


def _throughput_figure(timeline: FailureTimeline, frame: pd.DataFrame, bucket_ms: int = 0):
    if frame.empty:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(12, 4))
    for topic, group in frame.sort_values("bucket_ts").groupby("topic"):
        times, values = _closed_steps(group, "records_per_s", bucket_ms)
        ax.step(times, values, where="post", label=str(topic))
    ax.set_title(
        f"Produce rate per topic (records/s per {format_duration(bucket_ms)} bucket, "
        "idle buckets are zero, replicas counted once)"
    )
    ax.set_ylabel("records/s")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    _draw_markers(ax, timeline)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig, []


def _closed_steps(group: pd.DataFrame, column: str, bucket_ms: int) -> tuple[list, list]:
    """A bucketed series as step points, closed at the end of its last bucket (a "post"
    step otherwise draws the last bucket with no width)."""
    times = list(pd.to_datetime(group["bucket_ts"], unit="ms"))
    values = list(group[column])
    if times:
        times.append(times[-1] + pd.Timedelta(milliseconds=max(bucket_ms, 1)))
        values.append(values[-1])
    return times, values


def _zero_filled(group: pd.DataFrame, columns: list[str], bucket_ms: int) -> pd.DataFrame:
    """`group` (one series, by bucket_ts) with a zero row for every missing bucket."""
    if group.empty or bucket_ms <= 0:
        return group
    first, last = int(group["bucket_ts"].min()), int(group["bucket_ts"].max())
    grid = pd.DataFrame({"bucket_ts": range(first, last + 1, bucket_ms)})
    out = grid.merge(group[["bucket_ts", *columns]], on="bucket_ts", how="left")
    out[columns] = out[columns].fillna(0.0)
    out["time"] = pd.to_datetime(out["bucket_ts"], unit="ms")
    return out


def _brokers_figure(timeline: FailureTimeline, frame: pd.DataFrame, bucket_ms: int = 0):
    leaders = leader_counts(timeline)
    if frame.empty and not leaders:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(3, 1, figsize=(12, 8), sharex=True)
    columns = ["bytes_in_per_s", "bytes_out_per_s"]
    for broker, group in frame.groupby("broker") if not frame.empty else ():
        filled = _zero_filled(group.sort_values("bucket_ts"), columns, bucket_ms)
        for ax, column in zip(axes[:2], columns, strict=True):
            times, values = _closed_steps(filled, column, bucket_ms)
            ax.step(times, [v / 1e3 for v in values], where="post", label=f"broker {broker}")
    for broker, points in sorted(leaders.items()):
        axes[2].step(
            [_time(ts) for ts, _ in points],
            [n for _, n in points],
            where="post",
            label=f"broker {broker}",
        )
    titles = (
        f"Bytes in per broker (kB/s per {format_duration(bucket_ms)} bucket, from its metrics)",
        "Bytes out per broker (kB/s; fetches by consumers and followers)",
        "Partitions led per broker",
    )
    for ax, title, unit in zip(axes, titles, ("kB/s", "kB/s", "partitions"), strict=True):
        ax.set_title(title)
        ax.set_ylabel(unit)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        _draw_markers(ax, timeline)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    axes[2].yaxis.get_major_locator().set_params(integer=True)
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig, []


def _isr_heatmap_figure(timeline: FailureTimeline, _frame=None, _bucket_ms: int = 0):
    names, edges, matrix = partition_states(timeline)
    if not names or timeline.start_ts is None:  # (no names without a start)
        return None
    plt = _pyplot()
    import matplotlib.dates as mdates
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    colours = ["#d8f0d8", _SPAN_COLOURS["under_replicated"], _SPAN_COLOURS["offline"]]
    start = mdates.date2num(_time(timeline.start_ts))
    end = mdates.date2num(_time(timeline.end_ts if timeline.end_ts else timeline.start_ts))
    fig, ax = plt.subplots(figsize=(12, 1.5 + 0.3 * len(names)))
    ax.imshow(
        matrix,
        aspect="auto",
        interpolation="nearest",
        cmap=ListedColormap(colours),
        vmin=0,
        vmax=STATE_OFFLINE,
        extent=(start, end, len(names) - 0.5, -0.5),
    )
    ax.xaxis_date()
    ax.set_yticks(range(len(names)), names)
    ax.set_title("ISR per partition over time")
    _draw_markers(ax, timeline)
    for line in ax.get_lines():
        line.set_zorder(2)  # over the heatmap
    handles = [
        Patch(color=colours[0], label="full ISR"),
        Patch(color=colours[1], label="under-replicated"),
        Patch(color=colours[2], label="offline (no leader)"),
    ]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig, names


def _isr_counts_figure(timeline: FailureTimeline, _frame=None, _bucket_ms: int = 0):
    counts = partition_counts(timeline)
    if not counts:
        return None
    plt = _pyplot()
    times = [_time(ts) for ts, _, _ in counts]
    fig, ax = plt.subplots(figsize=(12, 3))
    ax.step(times, [u for _, u, _ in counts], where="post", label="under-replicated")
    ax.step(times, [o for _, _, o in counts], where="post", label="offline (no leader)")
    ax.set_title("Partitions under-replicated and offline")
    ax.set_ylabel("partitions")
    ax.set_ylim(bottom=0, top=max(1, *(max(u, o) for _, u, o in counts)) + 0.5)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.grid(alpha=0.3)
    _draw_markers(ax, timeline)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig, []


def _latency_figure(
    timeline: FailureTimeline, latency: pd.DataFrame, _bucket_ms: int = 0, max_requests: int = 8
):
    if latency.empty:
        return None
    plt = _pyplot()
    requests = latency[~latency["request"].astype(str).str.startswith(FETCH_WAIT_PREFIX)]
    busiest = requests.groupby("request")["requests"].sum().nlargest(max_requests).index
    waits = sorted(r for r in latency["request"].unique() if str(r).startswith(FETCH_WAIT_PREFIX))
    shown = [*sorted(busiest), *waits]
    processing = fetch_processing(latency)
    panels = 3 if not processing.empty else 2
    fig, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4), sharey=True)
    overflow_label = None
    for column, ax in zip(("p50_ms", "p99_ms"), axes, strict=False):
        for request in shown:
            group = latency[latency["request"] == request].sort_values("time")
            values = group[column].astype(float)
            top = group["top_bucket_ms"].astype(float)
            beyond = values > top
            style = {"linestyle": "--"} if str(request).startswith(FETCH_WAIT_PREFIX) else {}
            label = f"{request} (incl. long-poll wait)" if request == FETCH else str(request)
            (line,) = ax.plot(
                group["time"], values.where(~beyond, top), marker=".", label=label, **style
            )
            if beyond.any():
                ax.scatter(
                    group["time"][beyond],
                    top[beyond],
                    marker="^",
                    s=60,
                    color=line.get_color(),
                    zorder=3,
                )
                overflow_label = f"> top bucket ({top[beyond].max():,.0f} ms)"
        ax.set_title(f"{column[:3]} request latency (all brokers)")
        ax.set_ylabel("ms")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
        _draw_markers(ax, timeline)
    if panels == 3:
        ax = axes[2]
        for name, frame in (
            (FETCH_PROCESSING, processing),
            (FETCH, latency[latency["request"] == FETCH]),
        ):
            frame = frame.sort_values("time")
            label = (
                "Fetch processing (mean, wait excluded)" if name != FETCH else "Fetch total (mean)"
            )
            ax.plot(frame["time"], frame["mean_ms"].clip(lower=1e-3), marker=".", label=label)
        ax.set_title("Fetch: mean total vs processing")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
        _draw_markers(ax, timeline)
    handles, labels = axes[1].get_legend_handles_labels()
    if panels == 3:
        more, more_labels = axes[2].get_legend_handles_labels()
        handles, labels = handles + more, labels + more_labels
    if overflow_label:
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], marker="^", linestyle="", color="#444"))
        labels.append(overflow_label)
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.legend(
        handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=4, fontsize="small"
    )
    return fig, []


def group_series(frame: pd.DataFrame, bucket_ms: int) -> dict[str, pd.DataFrame]:
    """Per group: bucket_ts, time, committed (sum of its partitions' committed offsets)
    and lag (sum of their lags), each partition's last commit carried forward to the
    following buckets until it commits again (a partition counts from its first commit)."""
    out: dict[str, pd.DataFrame] = {}
    if frame.empty:
        return out
    for group, rows in frame.groupby("group"):
        first, last = int(rows["bucket_ts"].min()), int(rows["bucket_ts"].max())
        grid = range(first, last + 1, max(bucket_ms, 1))
        keyed = rows.assign(tp=rows["topic"] + "-" + rows["partition"].astype(str))
        sums = {}
        for column in ("committed_offset", "lag"):
            wide = keyed.pivot_table(
                index="bucket_ts", columns="tp", values=column, aggfunc="last"
            ).reindex(grid)
            sums[column] = wide.ffill().sum(axis=1, min_count=1).fillna(0)
        series = pd.DataFrame(
            {"bucket_ts": list(grid), "committed": sums["committed_offset"].values,
             "lag": sums["lag"].values}
        )  # fmt: skip
        series["time"] = pd.to_datetime(series["bucket_ts"], unit="ms")
        out[str(group)] = series
    return out


def _groups_figure(timeline: FailureTimeline, frame: pd.DataFrame, bucket_ms: int = 0):
    series = group_series(frame, bucket_ms)
    if not series:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(2, 1, figsize=(12, 6), sharex=True)
    for group, rows in sorted(series.items()):
        for ax, column in zip(axes, ("lag", "committed"), strict=True):
            times, values = _closed_steps(rows, column, bucket_ms)
            ax.step(times, values, where="post", label=group)
    titles = (
        "Consumer lag per group (records; log end offset at each commit - committed offset)",
        "Committed offsets per group (sum over its partitions)",
    )
    for ax, title in zip(axes, titles, strict=True):
        ax.set_title(title)
        ax.set_ylabel("records")
        ax.set_ylim(bottom=0)
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
        _draw_markers(ax, timeline)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig, []


def _security_figure(timeline: FailureTimeline, frame: pd.DataFrame, _bucket_ms: int = 0):
    """Failed logins and denials per minute, one bar series per kind and principal, on
    the failure timeline's time axis (with its markers)."""
    if frame.empty:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(12, 3.5))
    per = frame.groupby(["minute_ts", "kind", "principal"], as_index=False)["count"].sum()
    series = sorted({(k, p) for k, p in zip(per["kind"], per["principal"], strict=True)})
    bottom: dict[int, float] = {}
    for kind, principal in series:
        rows = per[(per["kind"] == kind) & (per["principal"] == principal)]
        times = [_time(int(ts) + 30_000) for ts in rows["minute_ts"]]
        base = [bottom.get(int(ts), 0.0) for ts in rows["minute_ts"]]
        label = f"{kind.replace('_', ' ')}: {principal}"
        ax.bar(times, rows["count"], width=pd.Timedelta(seconds=50), bottom=base, label=label)
        for ts, value in zip(rows["minute_ts"], rows["count"], strict=True):
            bottom[int(ts)] = bottom.get(int(ts), 0.0) + float(value)
    ax.set_title("Failed authentications and authorization denials per minute")
    ax.set_ylabel("per minute")
    ax.grid(alpha=0.3)
    _draw_markers(ax, timeline)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig, []


_FIGURES: tuple[tuple[str, Callable, Callable[[ReportData], pd.DataFrame]], ...] = (
    ("timeline", _timeline_figure, lambda d: d.security.frame),
    ("throughput", _throughput_figure, lambda d: d.topic_throughput.frame),
    ("brokers", _brokers_figure, lambda d: d.broker_throughput.frame),
    ("isr_counts", _isr_counts_figure, lambda d: pd.DataFrame()),
    ("isr_heatmap", _isr_heatmap_figure, lambda d: pd.DataFrame()),
    ("latency", _latency_figure, lambda d: d.latency.frame),
    ("groups", _groups_figure, lambda d: d.group_lag.frame),
    ("security", _security_figure, lambda d: d.security.frame),
)


def render_plots(data: ReportData) -> dict[str, Plot]:
    """Every plot the data allows, by name (timeline first); a plot that fails to draw is
    logged and left out (a plot is a nicety: never lose the report over one)."""
    plots: dict[str, Plot] = {}
    for name, draw, frame_of in _FIGURES:
        try:
            drawn = draw(data.timeline, frame_of(data), data.bucket_ms)
            if drawn is None:
                continue
            fig, lanes = drawn
            buffer = io.BytesIO()
            fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
            plots[name] = Plot(name, buffer.getvalue(), True, _drawn_markers(fig), lanes)
            _pyplot().close(fig)
        except Exception:
            logger.exception("could not draw %s", name)
    return plots


def _latency_table(table: Table) -> Table:
    """The latency summary for the page: overflowing percentiles as "> top bucket", and
    a Fetch processing row (mean only)."""
    frame = table.frame
    if frame.empty or "top_bucket_ms" not in frame:
        return table
    frame = pd.concat([frame, fetch_processing(frame)], ignore_index=True)
    shown = frame.drop(columns=["top_bucket_ms"]).astype({"p50_ms": object, "p99_ms": object})
    for column in ("p50_ms", "p99_ms"):
        beyond = frame[column].astype(float) > frame["top_bucket_ms"].astype(float)
        for i in frame.index[beyond]:
            shown.at[i, column] = f"> top bucket ({frame.at[i, 'top_bucket_ms']:,.0f})"
    return Table(shown, table.total + len(frame) - len(table.frame))


def incident_table(timeline: FailureTimeline) -> Table:
    """The incidents with their recovery times, one row each."""
    rows = [
        {
            "incident": i.kind,
            "subject": i.subject,
            "start": _time(i.start_ts),
            "end": _time(i.end_ts) if i.end_ts is not None else "not by the end of the data",
            "full ISR again": _time(i.recovered_ts) if i.recovered_ts is not None else "never",
            "recovery time": format_duration(i.recovery_ms),
            "sequence": i.detail,
        }
        for i in timeline.incidents
    ]
    return Table(pd.DataFrame(rows), len(rows))


def _image(plots: dict[str, Plot], name: str) -> str:
    plot = plots.get(name)
    if plot is None:
        return ""
    return f'<p><img src="{plot.data_uri()}" alt="{html.escape(name)}"></p>'


def _markers_note(markers: list[Marker]) -> str:
    if not markers:
        return ""
    return (
        '<p class="note">Vertical lines on every time plot: the events of the failure '
        "timeline (solid: brokers, controller, leaders; dashed: ISR shrink/expand).</p>"
    )


def write_report(out: Path, data: ReportData) -> Path:
    """Render `data` as the self-contained `out/report.html`; returns its path."""
    return render_report(out, data)[0]


def render_report(out: Path, data: ReportData) -> tuple[Path, dict[str, Plot]]:
    """`write_report`, also returning the plots drawn (with the data behind them)."""
    out.mkdir(parents=True, exist_ok=True)
    plots = render_plots(data)
    timeline = data.timeline
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
        "<h2>Failure timeline</h2>",
        '<p class="note">Brokers down (declared dead by the controller), paused (alive '
        "but its ZooKeeper session expired), not answering (dropped from an ISR while "
        "registered); the active controller; per partition, under-replicated and offline "
        "spans. Under-replicated for "
        f"{html.escape(format_duration(timeline.under_replicated_ms))} in all, offline for "
        f"{html.escape(format_duration(timeline.offline_ms))}.</p>",
        _image(plots, "timeline"),
        _markers_note(timeline.markers),
        "<h3>Incidents and recovery time</h3>",
        '<p class="note">Recovery: from the first failure event to the first moment, after '
        "the incident ended, when every partition had a full ISR and a leader.</p>",
        _table_html(incident_table(timeline), what="incidents"),
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
        _image(plots, "throughput"),
        '<p class="note">Per partition: <b>records_per_s</b> and <b>bytes_per_s</b> are '
        "averages over the buckets in which the partition received records "
        "(<b>active_buckets</b> of <b>bucket_s</b> seconds), <b>peak_*</b> the busiest "
        "bucket.</p>",
        _table_html(data.partitions, what="partitions"),
        "<h3>Brokers</h3>",
        _image(plots, "brokers"),
        "<h2>ISR over time</h2>",
        _image(plots, "isr_counts"),
        _image(plots, "isr_heatmap"),
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
        _image(plots, "latency"),
        '<p class="note">A percentile beyond the histogram\'s top bucket is shown as '
        '"&gt; top bucket" (a triangle on the plot), never as a number. A consumer\'s Fetch '
        "waits up to fetch.max.wait.ms when there is nothing new: <b>Fetch wait</b> is that "
        "long-poll wait, <b>Fetch processing</b> the mean of the rest.</p>",
        _table_html(_latency_table(data.latency_summary), what="request types"),
        "<h2>Consumer groups</h2>",
        '<p class="note">From the offset commits in __consumer_offsets (what compaction '
        "left): lag is the partition's log end offset at the moment of each commit minus "
        "the committed offset; the table's lag is against the log end the data ends "
        "with.</p>",
        _image(plots, "groups"),
        _table_html(data.group_summary, what="committed partitions"),
        "<h2>Security: failed authentications and authorization denials</h2>",
        '<p class="note">Per minute, principal and client address, from the brokers\' '
        "authentication_failed and authorization_denied events; <b>count</b> includes the "
        "denials the brokers' rate limit did not write (<b>events</b>: lines written).</p>",
        _image(plots, "security"),
        _table_html(data.security, what="minutes with failures or denials"),
        "</body></html>",
    ]
    path = out / "report.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path, plots
