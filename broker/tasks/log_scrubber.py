"""The scrubber's Trio task: checks closed segments' CRCs in the background and repairs
damaged batches from an in-sync replica (beyond Kafka, as HDFS's block scanner and
Ceph's deep scrub do).

How it works: one task per broker, shaped like the log cleaner's (log_cleaner.py): the
core (`broker/core/scrub.py`) says which segment to check next and what to do about
damage; the checking itself (`broker/core/log/verify.py`) runs inline on the Trio
thread in steps of about `STEP_BYTES`, after each of which the task sleeps as long as
`log.scrub.bytes.per.second` requires, so appends, reads, retention and truncation never
overlap a step, and a segment that is gone or replaced between steps ends its scan.

- Scan: every batch's length, magic and CRC-32C, no record decoding. The position
  (per partition) is checkpointed in `scrub-offset-checkpoint` after each segment and
  at least every `CHECKPOINT_S`, never past a damaged range not yet repaired, so a
  restart continues where it stopped and finds unrepaired damage again. With nothing
  left to check it sleeps `IDLE_S` (new segments close) and starts a new pass
  `log.scrub.interval.ms` after the previous one started.
- Report: each damaged range is one ERROR line, one `corrupt_batch` event in
  `events.jsonl` and the `scrub_corrupt_batches_total` metric.
- Repair, every `log.scrub.repair.backoff.ms` or when something new was found, as
  `plan_repair` says: a follower fetches the ranges from its leader (a consumer fetch:
  committed offsets only), splices them into a rebuilt segment (`rebuild_segment`,
  crash-safe swap) and reports `corrupt_batch_repaired`; a leader with other ISR
  members asks the controller to move its leadership (/admin/leader_step_down/<id>),
  then repairs as a follower; a leader alone in the ISR keeps its bytes and reports them
  (`scrub_unrepairable_partitions`).

`verify()` is the on-demand scrub behind `tributary log-dirs verify` (VerifyLogDirs):
every segment of the logs asked for, unthrottled but yielding between steps, then the
repairs, waited for up to a timeout; it answers what it checked and each range's fate.

Metrics: `scrub_bytes_total`, `scrub_batches_total`, `scrub_corrupt_batches_total`,
`scrub_repaired_ranges_total`, `scrub_repair_failures_total`, `scrub_passes_total`,
`scrub_pending_repairs`, `scrub_unrepairable_partitions`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field

import trio

from broker.core.log.errors import LogError
from broker.core.log.log import Log
from broker.core.log.manager import LogManager
from broker.core.log.segment import LogSegment
from broker.core.log.verify import SegmentScan, rebuild_segment, segment_end_offset
from broker.core.metadata_cache import BrokerEndpoint
from broker.core.replica_manager import ReplicaManager
from broker.core.scrub import (
    CorruptRange,
    Drop,
    Refetch,
    ReplicaView,
    SegmentSpan,
    SpliceError,
    StepDown,
    Unrepairable,
    merge_ranges,
    next_scrub_target,
    plan_repair,
    restart_pass,
)
from client.connection import BrokerConnectionError, Connector, open_connection
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, ProtocolError, TributaryError
from client.protocol.records import RecordError, iter_batches
from client.protocol.types import TopicPartition
from server_common.metrics import MetricsRegistry
from server_common.zk import ZkError

__all__ = ["STEP_BYTES", "LogScrubber", "RangeReport", "ScrubSettings"]

log = logging.getLogger(__name__)

# Bytes one step reads: small enough that a step costs a few hundred microseconds of
# CRC work, large enough that the per-step overhead does not matter.
STEP_BYTES = 256 * 1024
# With nothing to check, look again this often (segments close as the logs grow).
IDLE_S = 5.0
# Write the scrub positions at least this often while scanning.
CHECKPOINT_S = 10.0
# A repair fetch asks for this much per request.
REPAIR_FETCH_BYTES = 1024 * 1024


@dataclass(frozen=True)
class ScrubSettings:
    """The broker's `log.scrub.*` settings."""

    enable: bool = True
    bytes_per_second: float = 1024 * 1024
    interval_s: float = 7 * 24 * 3600.0
    repair_backoff_s: float = 5.0
    step_bytes: int = STEP_BYTES
    request_timeout_s: float = 30.0

    @classmethod
    def from_config(cls, config) -> ScrubSettings:
        return cls(
            enable=config["log.scrub.enable"],
            bytes_per_second=float(config["log.scrub.bytes.per.second"]),
            interval_s=config["log.scrub.interval.ms"] / 1000,
            repair_backoff_s=config["log.scrub.repair.backoff.ms"] / 1000,
            request_timeout_s=config["replica.socket.timeout.ms"] / 1000,
        )


@dataclass
class RangeReport:
    """One damaged range and what became of it: repaired, pending (why), unrepairable."""

    topic_partition: TopicPartition
    range: CorruptRange
    status: str = m.RANGE_PENDING
    detail: str = ""


@dataclass
class PartitionReport:
    topic_partition: TopicPartition
    batches: int = 0
    bytes: int = 0
    ranges: list[RangeReport] = field(default_factory=list)


class LogScrubber:
    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        replica_manager: ReplicaManager,
        settings: ScrubSettings,
        *,
        clock: Callable[[], int],
        events: Callable[[str, dict], None],
        endpoint: Callable[[int], BrokerEndpoint | None],
        connector: Connector | None,
        request_step_down: Callable[[int, list[TopicPartition]], Awaitable[object]],
        metrics: MetricsRegistry | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.rm = replica_manager
        self.settings = settings
        self.now_ms = clock
        self._events = events
        self._endpoint = endpoint
        self._connector = connector
        self._request_step_down = request_step_down
        self.positions: dict[TopicPartition, int] = {}
        self.pending: dict[TopicPartition, list[RangeReport]] = {}
        self.unrepairable: set[TopicPartition] = set()
        self._last: TopicPartition | None = None  # the log checked last (round-robin)
        self._pass_started = 0.0
        self._last_checkpoint = 0.0
        self._written: dict[TopicPartition, int] | None = None  # what the file holds
        self._step_down_asked: dict[TopicPartition, float] = {}
        self._leading_since: dict[TopicPartition, tuple[int, float]] = {}  # (epoch, when)
        self._repair_wakeup = trio.Event()
        self._repaired = trio.Event()
        metrics = metrics or MetricsRegistry()
        self._bytes = metrics.counter("scrub_bytes_total", "bytes the scrubber checked")
        self._batches = metrics.counter("scrub_batches_total", "batches the scrubber checked")
        self._corrupt = metrics.counter(
            "scrub_corrupt_batches_total", "damaged ranges (batch CRC mismatches) found"
        )
        self._repaired_total = metrics.counter(
            "scrub_repaired_ranges_total", "damaged ranges repaired from an in-sync replica"
        )
        self._repair_failures = metrics.counter(
            "scrub_repair_failures_total", "repair attempts that failed (retried later)"
        )
        self._passes = metrics.counter("scrub_passes_total", "full scrub passes completed")
        metrics.gauge(
            "scrub_pending_repairs",
            "damaged ranges not repaired yet",
            lambda: sum(len(r) for r in self.pending.values()),
        )
        metrics.gauge(
            "scrub_unrepairable_partitions",
            "partitions with damage and no other in-sync copy to repair from",
            lambda: len(self.unrepairable),
        )

    @classmethod
    def for_broker(cls, config, log_manager, replica_manager, **kwargs) -> LogScrubber:
        """The scrubber of a broker's `BrokerConfig` (its background task runs only with
        log.scrub.enable=true; `verify` works either way)."""
        settings = ScrubSettings.from_config(config)
        return cls(config.broker_id, log_manager, replica_manager, settings, **kwargs)

    # -- the background task -------------------------------------------------------------
    async def run(self) -> None:
        self.positions = self.log_manager.read_scrub_positions()
        self._pass_started = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._repair_loop)
            while True:
                try:
                    target = self._next_target()
                except Exception:
                    log.exception("the scrubber could not choose what to check")
                    target = None
                if target is None:
                    self._checkpoint(force=True)
                    await self._idle()
                    continue
                await self._scrub_target(*target)

    def _next_target(self) -> tuple[TopicPartition, Log, LogSegment, int] | None:
        logs = self.log_manager.all_logs()
        spans = {tp: _closed_spans(lg) for tp, lg in logs.items() if not lg.closed}
        starts = {tp: lg.log_start_offset for tp, lg in logs.items()}
        target = next_scrub_target(spans, self.positions, starts, self._last)
        if target is None:
            return None
        tp = target.topic_partition
        lg = logs[tp]
        segment = next(s for s in lg.segments if s.base_offset == target.segment_base_offset)
        return tp, lg, segment, target.from_offset

    async def _idle(self) -> None:
        elapsed = trio.current_time() - self._pass_started
        if elapsed >= self.settings.interval_s:
            self._passes.inc()
            starts = {tp: lg.log_start_offset for tp, lg in self.log_manager.all_logs().items()}
            self.positions = restart_pass(self.positions, starts)
            self._pass_started = trio.current_time()
            log.info("scrubber: starting a new pass over %d log(s)", len(starts))
            return
        await trio.sleep(min(IDLE_S, self.settings.interval_s - elapsed))

    async def _scrub_target(
        self, tp: TopicPartition, lg: Log, segment: LogSegment, from_offset: int
    ) -> None:
        self._last = tp
        scan = await self._scan(lg, segment, from_offset, self.settings.bytes_per_second)
        if scan is None:  # the segment went away under us: look again
            return
        self.positions[tp] = max(self.positions.get(tp, 0), scan.end_offset)
        if scan.corrupt:
            self._report(tp, scan.corrupt)
        self._checkpoint(force=True)

    async def _scan(
        self, lg: Log, segment: LogSegment, from_offset: int, rate: float
    ) -> SegmentScan | None:
        scan = SegmentScan(segment, from_offset, segment_end_offset(lg, segment))
        started = trio.current_time()
        done_bytes = 0
        while not scan.done:
            if lg.closed or not any(s is segment for s in lg.segments):
                return None
            batches, checked = scan.batches, scan.bytes
            done_bytes += scan.step(self.settings.step_bytes)
            self._batches.inc(scan.batches - batches)
            self._bytes.inc(scan.bytes - checked)
            self.positions[lg.topic_partition] = max(
                self.positions.get(lg.topic_partition, 0), scan.next_offset
            )
            self._checkpoint()
            ahead = done_bytes / rate - (trio.current_time() - started) if rate else 0.0
            await trio.sleep(max(0.0, ahead))
        return scan

    def _checkpoint(self, *, force: bool = False) -> None:
        now = trio.current_time()
        if not force and now - self._last_checkpoint < CHECKPOINT_S:
            return
        self._last_checkpoint = now
        positions = dict(self.positions)
        for tp, reports in self.pending.items():  # never past damage not yet repaired
            for report in reports:
                positions[tp] = min(positions.get(tp, 0), report.range.first_offset)
        if positions == self._written:
            return  # unchanged: no write (each one is an fsync on the event loop)
        try:
            self.log_manager.write_scrub_positions(positions)
            self._written = positions
        except OSError as exc:
            log.error("writing the scrub checkpoint failed: %s", exc)

    def _report(self, tp: TopicPartition, ranges: list[CorruptRange]) -> list[RangeReport]:
        reports = self.pending.setdefault(tp, [])
        known = {r.range[:2] for r in reports}
        added: list[RangeReport] = []
        for r in ranges:
            if r[:2] in known:
                added.extend(x for x in reports if x.range[:2] == r[:2])
                continue
            self._corrupt.inc()
            log.error(
                "scrubber: %s: damaged bytes at offsets %d..%d in segment %d (%s); repairing "
                "from an in-sync replica",
                tp,
                r.first_offset,
                r.last_offset,
                r.segment_base_offset,
                r.reason,
            )
            self._events(
                "corrupt_batch",
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "first_offset": r.first_offset,
                    "last_offset": r.last_offset,
                    "segment": r.segment_base_offset,
                    "reason": r.reason,
                },
            )
            report = RangeReport(tp, r)
            reports.append(report)
            added.append(report)
        self._repair_wakeup.set()
        return added

    # -- repair --------------------------------------------------------------------------
    async def _repair_loop(self) -> None:
        while True:
            self._repair_wakeup = trio.Event()
            try:
                await self.repair_all()
            except Exception:
                log.exception("scrubber: repair round failed")
            with trio.move_on_after(self.settings.repair_backoff_s):
                await self._repair_wakeup.wait()

    async def repair_all(self) -> None:
        """One repair round over every partition with damage (see module docstring)."""
        step_down: list[TopicPartition] = []
        for tp in list(self.pending):
            partition = self.rm.get_partition(tp)
            reports = self.pending.get(tp, [])
            if partition is None or not reports:
                self.pending.pop(tp, None)
                continue
            view = ReplicaView(
                self.broker_id,
                partition.leader_id,
                partition.isr if partition.is_leader else (),
                partition.high_watermark,
                partition.log_start_offset,
                self._leading_for_ms(tp, partition),
                int(2000 * self.settings.repair_backoff_s),
            )
            plan = plan_repair(view, merge_ranges(r.range for r in reports))
            if not isinstance(plan, Unrepairable):
                self.unrepairable.discard(tp)
            if isinstance(plan, Drop):
                self._finish(tp, plan.ranges, "dropped", "below the log start offset")
            elif isinstance(plan, Refetch):
                await self._refetch(tp, partition, plan)
            elif isinstance(plan, StepDown):
                self._mark(tp, "pending", "waiting for leadership to move to another replica")
                last = self._step_down_asked.get(tp)
                if last is None or trio.current_time() - last >= self.settings.repair_backoff_s:
                    step_down.append(tp)
            elif isinstance(plan, Unrepairable):
                if tp not in self.unrepairable:
                    log.error("scrubber: %s: cannot repair: %s", tp, plan.reason)
                    self._events(
                        "corrupt_batch_unrepairable",
                        {"topic": tp.topic, "partition": tp.partition, "reason": plan.reason},
                    )
                self.unrepairable.add(tp)
                self._mark(tp, "unrepairable", plan.reason)
            elif plan is not None:
                self._mark(tp, "pending", plan.reason)
        if step_down:
            try:
                await self._request_step_down(self.broker_id, step_down)
            except (ZkError, OSError) as exc:
                log.warning("scrubber: could not ask for a leader step-down: %s", exc)
                return
            now = trio.current_time()
            for tp in step_down:
                self._step_down_asked[tp] = now
                log.warning("scrubber: %s: asked the controller to move its leadership", tp)
                self._events(
                    "leader_step_down_requested", {"topic": tp.topic, "partition": tp.partition}
                )

    def _leading_for_ms(self, tp: TopicPartition, partition) -> int:
        """How long this broker has led `tp` at its current epoch, as the scrubber saw it
        (from the first repair round that found it leading)."""
        if not partition.is_leader:
            self._leading_since.pop(tp, None)
            return 0
        now = trio.current_time()
        epoch, since = self._leading_since.get(tp, (None, now))
        if epoch != partition.leader_epoch:
            epoch, since = partition.leader_epoch, now
            self._leading_since[tp] = (epoch, since)
        return int((now - since) * 1000)

    def _mark(self, tp: TopicPartition, status: str, detail: str) -> None:
        for report in self.pending.get(tp, []):
            report.status, report.detail = status, detail

    def _finish(
        self, tp: TopicPartition, ranges: Collection[CorruptRange], status: str, detail: str
    ) -> None:
        """The pending reports inside `ranges` are done."""
        reports = self.pending.get(tp, [])
        for report in list(reports):
            r = report.range
            if any(
                r.first_offset >= x.first_offset and r.last_offset <= x.last_offset for x in ranges
            ):
                report.status, report.detail = status, detail
                reports.remove(report)
        if not reports:
            self.pending.pop(tp, None)
            self._step_down_asked.pop(tp, None)
        self._repaired.set()
        self._repaired = trio.Event()

    async def _refetch(self, tp: TopicPartition, partition, plan: Refetch) -> None:
        by_segment: dict[int, list[CorruptRange]] = {}
        for r in plan.ranges:
            by_segment.setdefault(r.segment_base_offset, []).append(r)
        for base, ranges in by_segment.items():
            lg = partition.log
            try:
                fetched = b"".join(
                    [
                        await self._fetch_range(tp, plan.leader, partition.leader_epoch, r)
                        for r in ranges
                    ]
                )
                segment = next((s for s in lg.segments if s.base_offset == base), None)
                if segment is None:
                    self._finish(tp, ranges, "dropped", "the segment is gone (rescanned later)")
                    continue
                if segment is lg.active_segment:
                    lg.roll(self.now_ms())
                size = rebuild_segment(lg, segment, ranges, fetched, now_ms=self.now_ms())
            except (
                BrokerConnectionError,
                TributaryError,
                ProtocolError,
                OSError,
                RecordError,
                SpliceError,
                LogError,
            ) as exc:
                self._repair_failures.inc()
                self._mark(tp, "pending", f"repair from leader {plan.leader} failed: {exc}")
                log.warning(
                    "scrubber: %s: repairing segment %d from leader %d failed (retrying): %s",
                    tp,
                    base,
                    plan.leader,
                    exc,
                )
                continue
            for r in ranges:
                self._repaired_total.inc()
                log.info(
                    "scrubber: %s: repaired offsets %d..%d of segment %d from broker %d",
                    tp,
                    r.first_offset,
                    r.last_offset,
                    base,
                    plan.leader,
                )
                self._events(
                    "corrupt_batch_repaired",
                    {
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "first_offset": r.first_offset,
                        "last_offset": r.last_offset,
                        "segment": base,
                        "source": plan.leader,
                        "segment_bytes": size,
                    },
                )
            self._finish(tp, ranges, "repaired", f"from broker {plan.leader}")

    async def _fetch_range(
        self, tp: TopicPartition, leader: int, epoch: int, r: CorruptRange
    ) -> bytes:
        """The leader's batches holding offsets first..last (committed ones only)."""
        endpoint = self._endpoint(leader)
        if endpoint is None:
            raise BrokerConnectionError(f"no address known for broker {leader}")
        out = bytearray()
        offset = r.first_offset
        timeout = self.settings.request_timeout_s
        async with open_connection(
            endpoint.host,
            endpoint.port,
            client_id=f"scrubber-{self.broker_id}",
            connector=self._connector,
        ) as connection:
            while offset <= r.last_offset:
                request = m.FetchRequest(
                    replica_id=m.CONSUMER_REPLICA_ID,
                    max_wait_ms=0,
                    min_bytes=1,
                    max_bytes=REPAIR_FETCH_BYTES,
                    topics=[
                        m.FetchTopic(
                            topic=tp.topic,
                            partitions=[
                                m.FetchPartition(
                                    partition=tp.partition,
                                    current_leader_epoch=epoch,
                                    fetch_offset=offset,
                                    partition_max_bytes=REPAIR_FETCH_BYTES,
                                )
                            ],
                        )
                    ],
                )
                response = await connection.request(request, timeout_s=timeout)
                part = response.topics[0].partitions[0]
                code = ErrorCode.from_code(part.error_code)
                if code is not ErrorCode.NONE:
                    raise TributaryError(code, f"fetching {tp} at offset {offset} from {leader}")
                if not part.records:
                    raise TributaryError(
                        ErrorCode.OFFSET_NOT_AVAILABLE,
                        f"leader {leader} has nothing at offset {offset} of {tp} below its HW",
                    )
                data = memoryview(part.records)
                for pos, header in iter_batches(data):
                    if header.last_offset < offset:
                        continue
                    if header.base_offset > r.last_offset:
                        offset = r.last_offset + 1
                        break
                    out += data[pos : pos + header.size]
                    offset = header.next_offset
        return bytes(out)

    # -- on demand -----------------------------------------------------------------------
    async def verify(
        self, topics: Collection[str] | None, timeout_s: float
    ) -> list[PartitionReport]:
        """Check every segment of the logs of `topics` (None: all) now, then repair what
        is damaged, waiting up to `timeout_s` for the repairs; a report per log."""
        reports: list[PartitionReport] = []
        for tp, lg in sorted(self.log_manager.all_logs().items()):
            if (topics is not None and tp.topic not in topics) or lg.closed:
                continue
            report = PartitionReport(tp)
            for segment in lg.segments:
                scan = await self._scan(lg, segment, segment.base_offset, 0.0)
                if scan is None:
                    continue
                report.batches += scan.batches
                report.bytes += scan.bytes
                if scan.corrupt:
                    report.ranges.extend(self._report(tp, scan.corrupt))
            reports.append(report)
        with trio.move_on_after(timeout_s):
            while any(
                r.status not in ("repaired", "dropped", "unrepairable")
                for p in reports
                for r in p.ranges
            ):
                await self.repair_all()
                with trio.move_on_after(min(0.5, self.settings.repair_backoff_s)):
                    await self._repaired.wait()
        return reports


def _closed_spans(lg: Log) -> list[SegmentSpan]:
    segments = lg.segments
    return [
        SegmentSpan(s.base_offset, segments[i + 1].base_offset, s.size)
        for i, s in enumerate(segments[:-1])
    ]
