"""The analytics job: segment logs, events and metrics in; Parquet tables and a report out.

Run it as `tributary analytics --data DIR --out OUT [--master URL]`, as
`spark-submit spark/job.py --data DIR --out OUT`, or call `run(spark, data, out)`.

How it works: the driver lists the broker log dirs under `--data` (and their checkpoint
files: small) and fails with one line if there are none. Everything else is Spark: the
records are read once with the `tributary` data source, reduced to the columns the
analytics need plus a per-record hash, and cached; from them come the throughput per
time bucket (each offset counted once per partition; the bucket width adapts to the run's
duration, `spark.throughput`) and the replica consistency audit.
The offset commits in `__consumer_offsets` give each consumer group's committed offsets
and lag over time (`spark.groups`). Broker events, controller events and metrics
snapshots (declared schemas) give the ISR
timeline, ISR shrinks/expands, leader changes, under-replicated and offline intervals and
request latency percentiles, and failed logins and authorization denials per minute
(`spark.security`). The failure timeline (`spark.incidents`) is replayed on the
driver from the state-change events (bounded: `MAX_TIMELINE_EVENTS`). Every table is
written as Parquet under OUT; the report then reads a bounded number of rows of each back
(small aggregates only: no record-level data reaches the driver) and writes one
self-contained `OUT/report.html` (plots embedded). The CLI prints a short summary:
incidents, time under-replicated, the audit verdict.

On a real cluster (`--master spark://...`, YARN...) `--data` must be a path every
executor can read (a shared mount) and OUT a path Spark can write.
"""

from __future__ import annotations

import sys

if __name__ == "__main__" and __package__ in (None, ""):
    # Run as a script (`spark-submit spark/job.py`): import this project as packages, not
    # the files beside this one (`events`, `report`... would shadow other modules).
    from pathlib import Path as _Path

    _here = str(_Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if p and _Path(p).resolve().as_posix() != _here]
    sys.path.insert(0, str(_Path(__file__).resolve().parent.parent))

import argparse  # noqa: E402
import datetime as dt  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

if TYPE_CHECKING:
    from spark.incidents import FailureTimeline

__all__ = [
    "TABLES",
    "JobError",
    "JobResult",
    "add_arguments",
    "main",
    "run",
    "run_from_args",
    "text_summary",
]

logger = logging.getLogger(__name__)

# Parquet tables written under OUT, in the order they are computed.
TABLES = (
    "partitions",
    "throughput",
    "topic_throughput",
    "broker_throughput",
    "isr_timeline",
    "isr_events",
    "leader_changes",
    "truncations",
    "under_replicated_intervals",
    "offline_intervals",
    "security_events",
    "request_latency",
    "request_latency_cluster",
    "request_latency_summary",
    "audit_partitions",
    "audit_replicas",
    "audit_divergence",
    "audit_missing",
    "group_offsets",
    "group_lag",
    "group_summary",
)
# Rows of each table shown in the report (the Parquet tables hold all of them).
REPORT_ROWS = 200
PLOT_ROWS = 20_000
# Tables up to this many rows are read for the report on the driver with pyarrow.
LOCAL_SORT_ROWS = 200_000
# Segments smaller than this are read several to a Spark task (see spark/datasource.py).
DEFAULT_PACK_BYTES = 32 * 1024 * 1024
DEFAULT_LATENCY_BUCKET_MS = 10_000


class JobError(Exception):
    """A problem with the job's inputs, reported to the user as one line."""


@dataclass
class JobResult:
    out: Path
    report: Path
    tables: dict[str, Path]
    summary: dict[str, object] = field(default_factory=dict)
    audit_status: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    timeline: FailureTimeline | None = None
    bucket_ms: int = 0  # the throughput tables' bucket width
    plots: dict = field(default_factory=dict)  # name -> spark.report.Plot, as drawn

    @property
    def audit_failed(self) -> bool:
        return bool(self.audit_status.get("divergent") or self.audit_status.get("missing"))


def _check_inputs(data: Path):
    from spark.layout import find_log_dirs

    if not data.exists():
        raise JobError(f"data directory {data} does not exist")
    if not data.is_dir():
        raise JobError(f"{data} is not a directory")
    log_dirs = find_log_dirs(data)
    if not log_dirs:
        raise JobError(
            f"no broker logs found under {data} "
            "(expected <topic>-<partition>/<20-digit offset>.log segment files)"
        )
    return log_dirs


def _collect(spark, path: Path, order_by: list[str], limit: int):
    """The first `limit` rows of a Parquet table by `order_by`, as a report `Table`.

    A small table is read on the driver with pyarrow (no Spark job: the report reads a
    dozen tables); a big one is sorted and cut by Spark.
    """
    import pyarrow.dataset as ds

    from spark.report import Table

    try:
        dataset = ds.dataset(str(path), format="parquet")
        total = dataset.count_rows()
    except (OSError, ValueError) as exc:  # not a local path: let Spark read it
        logger.debug("reading %s with Spark (%s)", path, exc)
        total = None
    if total is not None and total <= LOCAL_SORT_ROWS:
        frame = dataset.to_table().to_pandas()
        if order_by and not frame.empty:
            frame = frame.sort_values(order_by, kind="stable", na_position="first")
        return Table(frame.head(limit).reset_index(drop=True), total)
    frame = spark.read.parquet(str(path))
    if order_by:
        frame = frame.orderBy(*order_by)
    rows = frame.limit(limit).toPandas()
    return Table(rows, total if total is not None else len(rows))


def run(
    spark,
    data: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    pack_bytes: int = DEFAULT_PACK_BYTES,
    split_bytes: int | None = None,
    latency_bucket_ms: int = DEFAULT_LATENCY_BUCKET_MS,
) -> JobResult:
    """Run the whole job with `spark` (see the module docstring); JobError for bad inputs."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from spark import audit as audit_
    from spark import events, groups, latency, security, throughput, timeline
    from spark.datasource import FORMAT
    from spark.layout import read_checkpoints
    from spark.report import ReportData, render_report

    started = time.monotonic()
    data_path = Path(data).resolve()
    out_path = Path(out).resolve()
    log_dirs = _check_inputs(data_path)
    out_path.mkdir(parents=True, exist_ok=True)
    tables = {name: out_path / name for name in TABLES}

    def save(name: str, frame) -> None:
        step = time.monotonic()
        frame.write.mode("overwrite").parquet(str(tables[name]))
        logger.info("wrote %s (%.1f s)", name, time.monotonic() - step)

    logger.info("reading %d broker log dir(s) under %s", len(log_dirs), data_path)
    inventory = audit_.replica_inventory(spark, log_dirs, read_checkpoints(log_dirs))
    reader = spark.read.format(FORMAT).option("pack_bytes", str(pack_bytes))
    if split_bytes is not None:
        reader = reader.option("split_bytes", str(split_bytes))
    records = audit_.with_record_hash(reader.load(str(data_path))).persist(
        StorageLevel.MEMORY_AND_DISK
    )
    unique = throughput.unique_records(records).persist(StorageLevel.MEMORY_AND_DISK)
    broker_events = events.read_broker_events(spark, str(data_path)).cache()
    controller_events = events.read_controller_events(spark, str(data_path)).cache()
    metrics = events.read_metrics(spark, str(data_path)).cache()
    cached = [records, unique, broker_events, controller_events, metrics]
    try:
        ends = (
            broker_events.select("ts")
            .unionByName(controller_events.select("ts"))
            .unionByName(metrics.select("ts"))
            .agg(F.min("ts").alias("start"), F.max("ts").alias("end"))
            .collect()
        )
        data_start_ts = ends[0]["start"] if ends else None
        data_end_ts = ends[0]["end"] if ends else None
        first_record_ts, last_record_ts = throughput.time_range(unique)
        known = [t for t in (data_start_ts, data_end_ts, first_record_ts, last_record_ts) if t]
        run_start = min(known) if known else None
        run_end = max(known) if known else None
        bucket_ms = throughput.choose_bucket_ms(
            run_end - run_start if run_start is not None and run_end is not None else None
        )
        buckets = throughput.per_bucket(unique, bucket_ms)
        save("throughput", buckets)
        buckets = spark.read.parquet(str(tables["throughput"]))
        save("partitions", throughput.partition_summary(unique, buckets, bucket_ms))
        save(
            "topic_throughput",
            throughput.topic_per_bucket(spark, buckets, bucket_ms, run_start, run_end),
        )
        save("broker_throughput", throughput.broker_bytes(metrics, bucket_ms))
        isr = timeline.isr_timeline(broker_events, controller_events)
        save("isr_timeline", isr)
        isr_saved = spark.read.parquet(str(tables["isr_timeline"]))
        save("isr_events", timeline.isr_events(broker_events, controller_events))
        save("leader_changes", timeline.leader_changes(broker_events, controller_events))
        save("truncations", timeline.truncations(broker_events))
        save(
            "under_replicated_intervals",
            timeline.under_replicated_intervals(isr_saved, data_end_ts),
        )
        save("offline_intervals", timeline.offline_intervals(isr_saved, data_end_ts))
        failures = _failure_timeline(broker_events, controller_events, data_end_ts)

        save("security_events", security.security_per_minute(broker_events))
        security_totals = {
            row["kind"]: int(row["count"] or 0)
            for row in spark.read.parquet(str(tables["security_events"]))
            .groupBy("kind")
            .agg(F.sum("count").alias("count"))
            .collect()
        }

        save("request_latency", latency.latency_intervals(metrics))
        intervals = spark.read.parquet(str(tables["request_latency"]))
        save("request_latency_cluster", latency.cluster_latency(intervals, latency_bucket_ms))
        save("request_latency_summary", latency.latency_summary(intervals))

        # Consumer groups: only the __consumer_offsets records are read again (pushed down).
        offsets = spark.read.format(FORMAT).option("pushdown", "true").load(str(data_path))
        offsets = offsets.where(F.col("topic") == groups.OFFSETS_TOPIC)
        lags = groups.lag_at_commits(groups.offset_commits(offsets), unique)
        save("group_offsets", lags)
        lags = spark.read.parquet(str(tables["group_offsets"]))
        save("group_lag", groups.lag_per_bucket(lags, unique, bucket_ms, run_end))
        save("group_summary", groups.group_summary(lags, unique))

        result = audit_.audit(records, inventory)
        try:
            save("audit_partitions", result.partitions)
            save("audit_replicas", result.replicas)
            save("audit_divergence", result.divergence)
            save("audit_missing", result.missing)
        finally:
            result.unpersist()
    finally:
        for frame in cached:
            frame.unpersist()

    status = {
        row["status"]: row["count"]
        for row in spark.read.parquet(str(tables["audit_partitions"]))
        .groupBy("status")
        .count()
        .collect()
    }
    totals = (
        spark.read.parquet(str(tables["partitions"]))
        .agg(F.sum("records").alias("records"), F.sum("bytes").alias("bytes"))
        .collect()[0]
    )
    brokers = sorted({d.broker for d in log_dirs if d.broker is not None})
    from spark.incidents import format_duration

    summary: dict[str, object] = {
        "broker log dirs": len(log_dirs),
        "brokers": ", ".join(map(str, brokers)) or "unknown",
        "partitions": len({(p.topic, p.partition) for d in log_dirs for p in d.partitions}),
        "replicas (partition logs)": sum(len(d.partitions) for d in log_dirs),
        "records (each offset once)": int(totals["records"] or 0),
        "bytes (each offset once)": int(totals["bytes"] or 0),
        "audit": ", ".join(f"{k}: {v}" for k, v in sorted(status.items())) or "nothing audited",
        "throughput bucket": format_duration(bucket_ms),
        "failed authentications": security_totals.get(security.AUTHENTICATION_FAILED, 0),
        "authorization denials": security_totals.get(security.AUTHORIZATION_DENIED, 0),
    }
    report = ReportData(
        data_dir=str(data_path),
        summary=summary,
        audit_partitions=_collect(
            spark, tables["audit_partitions"], ["status", "topic", "partition"], REPORT_ROWS
        ),
        audit_replicas=_collect(
            spark, tables["audit_replicas"], ["topic", "partition", "broker"], REPORT_ROWS
        ),
        audit_divergence=_collect(
            spark, tables["audit_divergence"], ["topic", "partition", "offset"], REPORT_ROWS
        ),
        audit_missing=_collect(
            spark, tables["audit_missing"], ["topic", "partition", "start_offset"], REPORT_ROWS
        ),
        partitions=_collect(spark, tables["partitions"], ["topic", "partition"], REPORT_ROWS),
        topic_throughput=_collect(
            spark, tables["topic_throughput"], ["topic", "bucket_ts"], PLOT_ROWS
        ),
        broker_throughput=_collect(
            spark, tables["broker_throughput"], ["broker", "bucket_ts"], PLOT_ROWS
        ),
        bucket_ms=bucket_ms,
        isr_timeline=_collect(
            spark, tables["isr_timeline"], ["topic", "partition", "ts"], PLOT_ROWS
        ),
        isr_events=_collect(spark, tables["isr_events"], ["ts"], REPORT_ROWS),
        leader_changes=_collect(spark, tables["leader_changes"], ["ts"], REPORT_ROWS),
        truncations=_collect(spark, tables["truncations"], ["ts"], REPORT_ROWS),
        under_replicated=_collect(
            spark, tables["under_replicated_intervals"], ["start_ts"], REPORT_ROWS
        ),
        offline=_collect(spark, tables["offline_intervals"], ["start_ts"], REPORT_ROWS),
        latency=_collect(spark, tables["request_latency_cluster"], ["bucket_ts"], PLOT_ROWS),
        latency_summary=_collect(
            spark, tables["request_latency_summary"], ["request"], REPORT_ROWS
        ),
        group_lag=_collect(
            spark, tables["group_lag"], ["group", "topic", "partition", "bucket_ts"], PLOT_ROWS
        ),
        group_summary=_collect(
            spark, tables["group_summary"], ["group", "topic", "partition"], REPORT_ROWS
        ),
        security=_collect(
            spark,
            tables["security_events"],
            ["minute_ts", "kind", "principal", "address"],
            PLOT_ROWS,
        ),
        timeline=failures,
    )
    summary.update(
        {
            "incidents": len(failures.incidents),
            "time under-replicated": format_duration(failures.under_replicated_ms),
            "ISR shrink/expand events": report.isr_events.total,
            "leader changes (elections and takeovers)": report.leader_changes.total,
            "under-replicated intervals": report.under_replicated.total,
            "offline intervals": report.offline.total,
            "follower truncations": report.truncations.total,
        }
    )
    report_path, plots = render_report(out_path, report)
    return JobResult(
        out_path,
        report_path,
        tables,
        summary,
        status,
        time.monotonic() - started,
        failures,
        bucket_ms,
        plots,
    )


# Event rows brought to the driver for the failure timeline (one per state change, not per
# record); beyond this the timeline is built from the first rows and says so in the log.
MAX_TIMELINE_EVENTS = 500_000


def _failure_timeline(broker_events, controller_events, data_end_ts):
    from pyspark.sql import functions as F

    from spark.incidents import BROKER_KINDS, CONTROLLER_KINDS, failure_timeline

    def rows(frame, kinds, columns):
        wanted = frame.where(F.col("event").isin(list(kinds))).select(*columns).orderBy("ts")
        collected = [r.asDict() for r in wanted.limit(MAX_TIMELINE_EVENTS).collect()]
        if len(collected) == MAX_TIMELINE_EVENTS:
            logger.warning("failure timeline: only the first %d events used", len(collected))
        return collected

    broker_rows = rows(
        broker_events,
        BROKER_KINDS,
        ["ts", "broker", "event", "topic", "partition", "leader_epoch", "isr", "new_isr",
         "replicas"],
    )  # fmt: skip
    controller_rows = rows(
        controller_events,
        CONTROLLER_KINDS,
        ["ts", "controller", "event", "broker", "topic", "partition", "old_leader",
         "new_leader", "leader_epoch", "old_isr", "isr"],
    )  # fmt: skip
    return failure_timeline(broker_rows, controller_rows, data_end_ts)


def text_summary(result: JobResult) -> list[str]:
    """The CLI's short account: incidents, time under-replicated, the audit verdict."""
    from spark.incidents import format_duration

    lines = []
    timeline = result.timeline
    if timeline is not None:
        lines.append(
            f"incidents: {len(timeline.incidents)}; under-replicated for "
            f"{format_duration(timeline.under_replicated_ms)}, offline for "
            f"{format_duration(timeline.offline_ms)}"
        )
        for incident in timeline.incidents:
            end = "ongoing" if incident.end_ts is None else "ended"
            recovery = (
                f"full ISR after {format_duration(incident.recovery_ms)}"
                if incident.recovery_ms is not None
                else "ISR never full again"
            )
            started = dt.datetime.fromtimestamp(incident.start_ts / 1000, dt.UTC)
            lines.append(
                f"  {started:%H:%M:%S} {incident.subject}: {incident.kind} ({end}); {recovery}"
            )
    verdict = "FAILED" if result.audit_failed else "passed"
    audit = ", ".join(f"{k}: {v}" for k, v in sorted(result.audit_status.items()))
    lines.append(f"audit {verdict} ({audit or 'nothing audited'})")
    return lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data",
        required=True,
        help="a broker log dir, or a folder holding several (e.g. the local cluster dir)",
    )
    parser.add_argument(
        "--out", default="analytics-out", help="where Parquet tables and report.html go"
    )
    parser.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    parser.add_argument(
        "--shuffle-partitions",
        type=int,
        default=None,
        help="spark.sql.shuffle.partitions (default: 16 on a local master, else Spark's)",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an extra Spark setting (repeatable), e.g. spark.driver.memory=4g",
    )
    parser.add_argument(
        "--fail-on-audit",
        action="store_true",
        help="exit 3 when the audit finds divergent or missing acknowledged records",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log each step")


def _parse_conf(pairs: list[str]) -> dict[str, str]:
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise JobError(f"--conf {pair!r}: expected KEY=VALUE")
        conf[key.strip()] = value
    return conf


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def run_from_args(args: argparse.Namespace) -> int:
    """Build a session from parsed arguments, run, print a summary; the exit code.

    Raises JobError (one line for the user) for bad inputs; the session is always stopped.
    """
    data = Path(args.data).resolve()
    _check_inputs(data)  # fail fast, before starting a JVM
    conf = _parse_conf(args.conf)
    from spark.session import build_session

    master = args.master
    shuffle = args.shuffle_partitions
    if shuffle is None and (master is None or master.startswith("local")):
        shuffle = 16
    print(f"analytics: starting Spark ({master or 'local[*]'}) ...", file=sys.stderr, flush=True)
    try:
        spark = build_session(master, shuffle_partitions=shuffle, conf=conf)
    except Exception as exc:  # no Java, a bad master URL...
        raise JobError(f"cannot start Spark: {_first_line(exc)}") from exc
    try:
        result = run(spark, data, args.out)
    except JobError:
        raise
    except Exception as exc:  # Py4J/PySpark errors carry pages of JVM stack trace
        logger.debug("the job failed", exc_info=True)
        raise JobError(f"the Spark job failed: {_first_line(exc)}") from exc
    finally:
        spark.stop()
    summary = result.summary
    print(
        f"analytics: {summary['records (each offset once)']:,} records in "
        f"{summary['partitions']} partition(s) on {summary['broker log dirs']} broker log "
        f"dir(s); audit: {summary['audit']}; {result.seconds:.1f} s"
    )
    for line in text_summary(result):
        print(f"analytics: {line}")
    print(f"analytics: report {result.report} (self-contained)")
    if args.fail_on_audit and result.audit_failed:
        return 3
    return 0


def main(argv: list[str] | None = None) -> int:
    """`spark-submit spark/job.py --data DIR --out OUT` (and `python -m spark.job`)."""
    parser = argparse.ArgumentParser(prog="spark/job.py", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("spark").setLevel(logging.INFO if args.verbose else logging.WARNING)
    try:
        return run_from_args(args)
    except JobError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
