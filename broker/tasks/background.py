"""The broker's background tasks: the timers and queues that drive the sans-IO core.

How it works: each task is a small loop that calls one core method and carries out
what comes back, nothing more:

- `isr_writer`: the core's `IsrUpdate` effects as conditional sets through the ZooKeeper
  gateway, up to `ISR_WRITES_IN_FLIGHT` at once (a partition has at most one in flight:
  its ISR stays pending until the answer); ZooKeeper's answer goes back with
  `complete_isr_update`. One at a time, the ISR expansions after 10,000 new partitions
  went at ~6 a second per broker (a ZooKeeper round trip and fsync each) and the ISRs
  took over ten minutes to fill again;
- `isr_shrinker`: `maybe_shrink_isrs` every `replica.lag.time.max.ms / 2`;
- `isr_propagator`: `maybe_propagate_isr_changes` (the core throttles), published as one
  /isr_change_notification znode; requeued if ZooKeeper refuses;
- `reaper`: expires delayed produces and fetches; sleeps until the core's next deadline,
  and `wake_at(deadline_ms)` (the core's callback when an earlier deadline appears) wakes
  it sooner;
- `checkpointer`, `retention`, `flusher`: HW and recovery-point checkpoints, retention,
  and the fsyncs of rolled segments and `flush.ms`, each on its Kafka interval (the
  segment fsyncs in a worker thread, on duplicated descriptors; the checkpoints are
  snapshots taken on the loop and written, with their fsyncs, in a worker thread too);
  the flusher also removes retention's `.deleted` segment files once their
  `file.delete.delay.ms` has passed;
- `metrics_snapshots`: one line of every metric to `metrics.jsonl` per interval;
- `memory_releaser`: hands the heap's free pages back to the system every
  `MEMORY_RELEASE_S` (`server_common/malloc_tuning.py`), so RSS falls after a burst;
- `log_cleaner` (when set, `broker/tasks/log_cleaner.py`): compaction of `compact` logs;
- `log_scrubber` (when set, `broker/tasks/log_scrubber.py`): CRC checks of closed segments
  and repair of damaged batches.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import trio

from broker.core.log.log import PendingFlush
from broker.core.log.manager import LogManager
from broker.core.partition import IsrUpdate
from broker.core.replica_manager import ReplicaManager
from broker.tasks.log_cleaner import LogCleanerTask
from broker.tasks.log_scrubber import LogScrubber
from broker.zookeeper.gateway import BrokerZkGateway
from server_common.jsonl import Rotation
from server_common.malloc_tuning import release_free_memory
from server_common.metrics import MetricsRegistry
from server_common.zk import ZkError

log = logging.getLogger(__name__)

# Longest the reaper sleeps with nothing waiting in a purgatory.
IDLE_REAPER_S = 3600.0
# The propagator looks at least this often (and at most every 50 ms).
MAX_PROPAGATION_PERIOD_S = 2.5
# How often free heap memory is returned to the system (malloc_trim takes ~1 ms).
MEMORY_RELEASE_S = 5.0
ISR_WRITES_IN_FLIGHT = 32


@dataclass(frozen=True)
class Intervals:
    """How often each task runs, in seconds (from the Kafka-named broker configs)."""

    isr_shrink_s: float  # replica.lag.time.max.ms / 2
    isr_propagation_s: float  # from isr.change.propagation.blackout.ms
    hw_checkpoint_s: float  # replica.high.watermark.checkpoint.interval.ms
    recovery_checkpoint_s: float  # log.flush.offset.checkpoint.interval.ms
    retention_check_s: float  # log.retention.check.interval.ms
    flush_check_s: float  # log.flush.scheduler.interval.ms
    metrics_snapshot_s: float  # metrics.snapshot.interval.ms (<= 0: off)


class BackgroundTasks:
    def __init__(
        self,
        broker_id: int,
        gateway: BrokerZkGateway,
        metrics: MetricsRegistry,
        intervals: Intervals,
        clock: Callable[[], int],
        metrics_path: Path,
        *,
        rotation: Rotation | None = None,
    ):
        self.broker_id = broker_id
        self.gateway = gateway
        self.metrics = metrics
        self.intervals = intervals
        self.rotation = rotation or Rotation()
        self.now_ms = clock
        self.metrics_path = metrics_path
        self.replica_manager: ReplicaManager | None = None
        self.log_manager: LogManager | None = None
        self.log_cleaner: LogCleanerTask | None = None  # set by the server when enabled
        self.log_scrubber: LogScrubber | None = None  # set by the server when enabled
        self._isr_send, self._isr_receive = trio.open_memory_channel[IsrUpdate](math.inf)
        self._reaper_wakeup = trio.Event()
        self._offsets_checkpoint_lock = trio.Lock()

    # -- the core's callbacks (given to the ReplicaManager) ------------------------------
    def emit_isr_update(self, update: IsrUpdate) -> None:
        self._isr_send.send_nowait(update)

    def wake_at(self, deadline_ms: int) -> None:
        self._reaper_wakeup.set()

    def attach(self, replica_manager: ReplicaManager, log_manager: LogManager) -> None:
        self.replica_manager = replica_manager
        self.log_manager = log_manager

    def _attached(self) -> tuple[ReplicaManager, LogManager]:
        """The core the tasks drive (made after this object, which gives it its callbacks,
        and handed over by `attach` before `start_all`)."""
        if self.replica_manager is None or self.log_manager is None:
            raise RuntimeError("BackgroundTasks.attach() was not called")
        return self.replica_manager, self.log_manager

    def start_all(self, nursery: trio.Nursery) -> None:
        for task in (
            self.isr_writer,
            self.isr_shrinker,
            self.isr_propagator,
            self.reaper,
            self.checkpointer,
            self.retention,
            self.flusher,
            self.metrics_snapshots,
            self.memory_releaser,
        ):
            nursery.start_soon(task)
        if self.log_cleaner is not None:
            nursery.start_soon(self.log_cleaner.run)
        if self.log_scrubber is not None:
            nursery.start_soon(self.log_scrubber.run)

    # -- tasks ---------------------------------------------------------------------------
    async def isr_writer(self) -> None:
        rm, _ = self._attached()
        in_flight = trio.Semaphore(ISR_WRITES_IN_FLIGHT)

        async def write(update: IsrUpdate) -> None:
            try:
                tp = update.topic_partition
                outcome = await self.gateway.write_isr(tp, update.new_state)
                rm.complete_isr_update(tp, outcome, self.now_ms(), update.new_state)
            finally:
                in_flight.release()

        async with trio.open_nursery() as nursery:
            async for update in self._isr_receive:
                await in_flight.acquire()
                nursery.start_soon(write, update)

    async def isr_shrinker(self) -> None:
        rm, _ = self._attached()
        while True:
            await trio.sleep(self.intervals.isr_shrink_s)
            rm.maybe_shrink_isrs(self.now_ms())

    async def isr_propagator(self) -> None:
        rm, _ = self._attached()
        period = max(min(self.intervals.isr_propagation_s, MAX_PROPAGATION_PERIOD_S), 0.05)
        while True:
            await trio.sleep(period)
            now = self.now_ms()
            batch = rm.maybe_propagate_isr_changes(now)
            if not batch:
                continue
            try:
                await self.gateway.publish_isr_changes(batch)
            except ZkError as exc:
                log.warning("could not publish ISR changes: %s", exc)
                rm.isr_changes.requeue(batch, now)

    async def reaper(self) -> None:
        rm, _ = self._attached()
        while True:
            rm.expire_delayed(self.now_ms())
            deadline = rm.next_deadline_ms()
            self._reaper_wakeup = trio.Event()
            delay = (
                IDLE_REAPER_S if deadline is None else max(0.0, (deadline - self.now_ms()) / 1000)
            )
            with trio.move_on_after(delay):
                await self._reaper_wakeup.wait()

    async def checkpointer(self) -> None:
        rm, logs = self._attached()
        last_recovery = trio.current_time()
        written: dict | None = None  # what the file holds, once this task wrote it
        while True:
            await trio.sleep(self.intervals.hw_checkpoint_s)
            try:
                # The HW checkpoint is taken on the loop and written (two fsyncs) in a
                # worker thread: on the loop it stalled every request once a second.
                # Only this task writes that file while the broker runs, so an unchanged
                # checkpoint is not written again (formatting 10,000 lines at every
                # interval was a tenth of an idle large broker's CPU).
                high_watermarks = rm.high_watermarks_to_checkpoint()
                if high_watermarks != written:
                    await trio.to_thread.run_sync(logs.write_high_watermarks, high_watermarks)
                    written = high_watermarks
                if trio.current_time() - last_recovery >= self.intervals.recovery_checkpoint_s:
                    await self._checkpoint_offsets(recovery_points=True)
                    last_recovery = trio.current_time()
            except OSError as exc:
                log.error("checkpoint failed: %s", exc)

    async def _checkpoint_offsets(self, *, recovery_points: bool) -> None:
        """Write the log-start (and recovery-point) checkpoints in a worker thread (two
        fsyncs each: on the loop they stalled every request). The lock makes this the
        one writer of those files while the broker runs, and as each snapshot is taken
        under it, a later snapshot is never overwritten by an earlier one."""
        async with self._offsets_checkpoint_lock:
            _, manager = self._attached()
            starts = manager.log_start_offsets()
            points = manager.recovery_points() if recovery_points else None

            def write() -> None:
                if points is not None:
                    manager.write_recovery_points(points)
                manager.write_log_start_offsets(starts)

            await trio.to_thread.run_sync(write)

    async def memory_releaser(self) -> None:
        while True:
            await trio.sleep(MEMORY_RELEASE_S)
            release_free_memory()

    async def retention(self) -> None:
        rm, logs = self._attached()
        while True:
            await trio.sleep(self.intervals.retention_check_s)
            try:
                deleted = logs.run_retention(
                    self.now_ms(),
                    high_watermarks=rm.high_watermarks(),
                    checkpoint=False,
                )
                if deleted:
                    log.info("retention deleted %d segment(s)", deleted)
                    await self._checkpoint_offsets(recovery_points=False)
            except Exception:
                log.exception("retention failed")

    async def flusher(self) -> None:
        _, logs = self._attached()
        while True:
            await trio.sleep(self.intervals.flush_check_s)
            try:
                logs.delete_due_files(self.now_ms())  # file.delete.delay.ms
            except Exception:
                log.exception("deleting .deleted segment files failed")
            try:
                pending = logs.due_flushes(self.now_ms())
            except Exception:
                log.exception("flush failed")
                continue
            if pending:
                await self._run_flushes(pending)

    async def _run_flushes(self, pending: list[PendingFlush]) -> None:
        """fsync in a worker thread (an fsync of a rolled 16 MiB segment takes tens of ms:
        on the event loop it stalled every request), record the results on the loop."""
        failures = await trio.to_thread.run_sync(_run_all, pending)
        for flush, failure in zip(pending, failures, strict=True):
            flush.log.finish_flush(flush, synced=failure is None)
            if failure is not None:
                log.error("flush of %s failed: %s", flush.log.topic_partition, failure)

    async def metrics_snapshots(self) -> None:
        if self.intervals.metrics_snapshot_s <= 0:
            return
        out = self.rotation.open(self.metrics_path)
        try:
            while True:
                await trio.sleep(self.intervals.metrics_snapshot_s)
                out.append(
                    {"ts": self.now_ms(), "broker": self.broker_id, **self.metrics.snapshot()}
                )
        finally:
            out.close()


def _run_all(pending: list[PendingFlush]) -> list[OSError | None]:
    """Run every flush (in a worker thread); each one's failure, or None."""
    failures: list[OSError | None] = []
    for flush in pending:
        try:
            flush.run()
        except OSError as exc:
            failures.append(exc)
        else:
            failures.append(None)
    return failures
