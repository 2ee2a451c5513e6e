"""The log cleaner's Trio task: compacts the broker's `compact` logs in the background.

How it works: one task per broker (Kafka runs `log.cleaner.threads`, default 1). It asks
the core which log is dirtiest (`grab_filthiest_log`, with the partitions' high
watermarks), and cleans it with a `CleaningJob`, step by step, inline on the Trio
thread: each step reads about `STEP_BYTES` (Kafka's `log.cleaner.io.buffer.size`) and
does its work synchronously, then the task sleeps as long as
`log.cleaner.io.max.bytes.per.second` requires (at least a checkpoint), so the broker
keeps serving between steps. Running inline rather than on a worker thread is what
makes it safe: the logs are touched from the Trio thread only, so appends, reads,
retention and truncation never overlap a step, and a step that finds its segments gone
or changed (retention, a follower truncating, the topic deleted) aborts the pass, as
Kafka aborts cleaning on truncation. The price is that a step's CPU time delays other
requests: decoding and re-encoding about 512 KiB of records takes a few milliseconds, up
to about 20 ms for the slowest steps (`make bench BENCH_ARGS=cleaner` prints both);
fsyncs are kept short too (the cleaner syncs every MiB it writes). A worker thread
would also have let a MockClock's time race ahead in tests.

With nothing to clean (or after a pass that could not move forward, or was aborted) it
sleeps `log.cleaner.backoff.ms`. After each pass it writes
`cleaner-offset-checkpoint`. A log whose cleaning fails (an I/O error, a corrupt batch)
is logged and left alone until the broker restarts (Kafka marks it uncleanable).

Metrics: `log_cleaner_bytes_cleaned_total` (bytes read by the cleaner),
`log_cleaner_bytes_written_total`, `log_cleaner_passes_total` (completed passes),
`log_cleaner_aborts_total`, `log_cleaner_max_dirty_ratio` (Kafka's
max-dirty-percent, as a ratio), `log_cleaner_uncleanable_partitions`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import trio

from broker.core.log.cleaner import CleaningJob, map_capacity_for
from broker.core.log.cleaner_manager import grab_filthiest_log
from broker.core.log.manager import LogManager
from client.protocol.types import TopicPartition
from server_common.metrics import MetricsRegistry

__all__ = ["STEP_BYTES", "CleanerSettings", "LogCleanerTask"]

log = logging.getLogger(__name__)

# Bytes one step reads: Kafka's log.cleaner.io.buffer.size default.
STEP_BYTES = 512 * 1024


@dataclass(frozen=True)
class CleanerSettings:
    """The broker's `log.cleaner.*` settings."""

    enable: bool = True
    io_max_bytes_per_second: float = float("inf")
    dedupe_buffer_size: int = 128 * 1024 * 1024
    backoff_s: float = 15.0
    step_bytes: int = STEP_BYTES

    @classmethod
    def from_config(cls, config) -> CleanerSettings:
        """From a `BrokerConfig` (Kafka's names)."""
        return cls(
            enable=config["log.cleaner.enable"],
            io_max_bytes_per_second=float(config["log.cleaner.io.max.bytes.per.second"]),
            dedupe_buffer_size=config["log.cleaner.dedupe.buffer.size"],
            backoff_s=config["log.cleaner.backoff.ms"] / 1000,
        )


class LogCleanerTask:
    """Cleans compacted logs forever: `await task.run()` (or `task.start(nursery)`)."""

    def __init__(
        self,
        log_manager: LogManager,
        settings: CleanerSettings,
        high_watermarks: Callable[[], Mapping[TopicPartition, int]],
        clock: Callable[[], int],
        metrics: MetricsRegistry | None = None,
    ) -> None:
        self.log_manager = log_manager
        self.settings = settings
        self.high_watermarks = high_watermarks
        self.now_ms = clock
        self.uncleanable: set[TopicPartition] = set()
        self.max_dirty_ratio = 0.0
        self.passes = 0
        self._wakeup = trio.Event()
        metrics = metrics or MetricsRegistry()
        self._bytes_read = metrics.counter(
            "log_cleaner_bytes_cleaned_total", "bytes the log cleaner read from segments"
        )
        self._bytes_written = metrics.counter(
            "log_cleaner_bytes_written_total", "bytes the log cleaner wrote to cleaned segments"
        )
        self._passes = metrics.counter(
            "log_cleaner_passes_total", "cleaning passes completed (one log each)"
        )
        self._aborts = metrics.counter(
            "log_cleaner_aborts_total", "cleaning passes aborted (log changed or failed)"
        )
        metrics.gauge(
            "log_cleaner_max_dirty_ratio",
            "max-dirty-percent: the highest dirty ratio of a compacted log, as a ratio",
            lambda: self.max_dirty_ratio,
        )
        metrics.gauge(
            "log_cleaner_uncleanable_partitions",
            "uncleanable-partitions-count: logs left alone after a cleaning failure",
            lambda: len(self.uncleanable),
        )

    @classmethod
    def for_broker(
        cls,
        config,
        log_manager: LogManager,
        high_watermarks: Callable[[], Mapping[TopicPartition, int]],
        clock: Callable[[], int],
        metrics: MetricsRegistry | None = None,
    ) -> LogCleanerTask | None:
        """The task for a broker's `BrokerConfig`, or None with log.cleaner.enable=false."""
        settings = CleanerSettings.from_config(config)
        if not settings.enable:
            return None
        return cls(log_manager, settings, high_watermarks, clock, metrics)

    def start(self, nursery: trio.Nursery) -> None:
        nursery.start_soon(self.run)

    def wake(self) -> None:
        """Look for work now instead of at the end of the backoff (tests, admin)."""
        self._wakeup.set()

    async def run(self) -> None:
        while True:
            try:
                job = self._next_job()
            except Exception:  # a broken log must not take the broker down
                log.exception("the log cleaner could not choose a log to clean")
                job = None
            if job is None or not await self._clean(job):
                self._wakeup = trio.Event()
                with trio.move_on_after(self.settings.backoff_s):
                    await self._wakeup.wait()

    def _next_job(self) -> CleaningJob | None:
        now = self.now_ms()
        target, self.max_dirty_ratio = grab_filthiest_log(
            self.log_manager.all_logs(), self.high_watermarks(), now, skip=self.uncleanable
        )
        if target is None:
            return None
        log.debug(
            "cleaning %s: dirty ratio %.2f, offsets [%d, %d)",
            target.topic_partition,
            target.dirty_ratio,
            target.first_dirty_offset,
            target.first_uncleanable_offset,
        )
        return CleaningJob(
            target,
            now_ms=now,
            map_capacity=map_capacity_for(self.settings.dedupe_buffer_size),
        )

    async def _clean(self, job: CleaningJob) -> bool:
        """Run the pass; returns whether it moved the log's cleaner checkpoint forward (if
        not, the caller backs off rather than choosing the same log again at once)."""
        tp = job.target.topic_partition
        rate = self.settings.io_max_bytes_per_second
        started = trio.current_time()
        done_bytes = 0
        try:
            while not job.done:
                read, written = job.stats.bytes_read, job.stats.bytes_written
                done_bytes += job.step(self.settings.step_bytes)
                self._bytes_read.inc(job.stats.bytes_read - read)
                self._bytes_written.inc(job.stats.bytes_written - written)
                # Throttle (Kafka's Throttler): never ahead of the allowed byte rate.
                ahead = done_bytes / rate - (trio.current_time() - started)
                await trio.sleep(max(0.0, ahead))
        except Exception:
            log.exception("cleaning %s failed; it is not cleaned again until restart", tp)
            self.uncleanable.add(tp)
            job.abort("cleaning failed")
        finally:
            if not job.done:  # cancelled (the broker is stopping): leave no .cleaned files
                job.abort("the cleaner stopped")
        if job.aborted:
            self._aborts.inc()
            return False
        self.passes += 1
        self._passes.inc()
        try:
            self.log_manager.checkpoint_cleaner_offsets()
        except OSError as exc:
            log.error("writing the cleaner checkpoint failed: %s", exc)
        stats = job.stats
        log.info(
            "cleaned %s up to offset %s: read %d bytes, wrote %d (%d of %d records kept, "
            "%d keys), %d segment group(s) replaced",
            tp,
            job.end_offset,
            stats.bytes_read,
            stats.bytes_written,
            stats.records_kept,
            stats.records_read,
            stats.keys_mapped,
            stats.groups_swapped,
        )
        return job.end_offset is not None and job.end_offset > job.target.first_dirty_offset
