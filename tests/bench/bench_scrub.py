"""The scrubber: its checking rate, at the default limit and unthrottled, and what it
costs the broker's produce path.

- A log of 32 MiB in 16 KiB producer batches (100-byte values), 8 MiB segments, all
  closed but the last, scrubbed in the scrubber's 256 KiB steps with its throttle
  (`broker/tasks/log_scrubber.py`): MiB/s at `log.scrub.bytes.per.second`'s default (1 MiB/s,
  measured over 3 s) and with no limit (the CPU cost: CRC-32C of every byte), and the
  longest step (how long the event loop waits for one step).
- Produce cost: leader appends of 16 KiB batches in a Trio loop (yielding after each,
  as a handler does) for 3 s (best of 2), alone and then beside a scrub at the default limit and at
  no limit, in one Trio run as in the broker: appended MiB/s and the ratio to alone.

Everything lives in a temp dir that is removed afterwards.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import trio
import trio.lowlevel

from broker.core.log import Log, LogConfig
from broker.core.log.verify import SegmentScan, segment_end_offset
from broker.tasks.log_scrubber import STEP_BYTES, ScrubSettings
from client.protocol.records import Record, build_batch

MIB = 1024 * 1024
LOG_BYTES = 32 * MIB
SEGMENT_BYTES = 8 * MIB
RUN_S = 3.0
DEFAULT_RATE = ScrubSettings().bytes_per_second


def _batch() -> bytes:
    records = [Record(None, b"x" * 100, 1_700_000_000_000) for _ in range(16 * 1024 // 110)]
    return build_batch(records)


def _filled(directory: Path, name: str, total: int) -> Log:
    log = Log.open(directory / name, LogConfig(segment_bytes=SEGMENT_BYTES), now_ms=0)
    batch = _batch()
    while log.size_in_bytes < total:
        log.append_as_leader(batch, 0, now_ms=0)
    return log


async def _scrub(log: Log, rate: float, stop_after_s: float, stats: dict) -> None:
    """The scrubber's loop (log_scrubber._scan), over every closed segment, repeatedly."""
    started = trio.current_time()
    done = 0
    longest = 0.0
    while trio.current_time() - started < stop_after_s:
        for segment in log.segments[:-1]:
            scan = SegmentScan(segment, segment.base_offset, segment_end_offset(log, segment))
            while not scan.done and trio.current_time() - started < stop_after_s:
                t0 = time.perf_counter()
                done += scan.step(STEP_BYTES)
                longest = max(longest, time.perf_counter() - t0)
                ahead = done / rate - (trio.current_time() - started) if rate else 0.0
                await trio.sleep(max(0.0, ahead))
    stats["mib_s"] = done / MIB / (trio.current_time() - started)
    stats["longest_step_ms"] = longest * 1000


async def _produce(log: Log, run_s: float, stats: dict) -> None:
    batch = _batch()
    started = trio.current_time()
    written = 0
    while trio.current_time() - started < run_s:
        log.append_as_leader(batch, 0, now_ms=0)
        written += len(batch)
        await trio.lowlevel.checkpoint()
    stats["mib_s"] = written / MIB / (trio.current_time() - started)


def _produce_beside(directory: Path, scrubbed: Log, rate: float | None, n: int) -> float:
    target = Log.open(directory / f"produce-{n}", LogConfig(segment_bytes=SEGMENT_BYTES), now_ms=0)
    produced: dict = {}
    scrubbed_stats: dict = {}

    async def main():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_produce, target, RUN_S, produced)
            if rate is not None:
                nursery.start_soon(_scrub, scrubbed, rate, RUN_S, scrubbed_stats)

    trio.run(main)
    target.close()
    shutil.rmtree(target.directory)
    return produced["mib_s"]


def main() -> None:
    directory = Path(tempfile.mkdtemp(prefix="bench-scrub-"))
    try:
        log = _filled(directory, "bench-0", LOG_BYTES)
        for label, rate, run_s in (
            (f"default limit ({DEFAULT_RATE / MIB:g} MiB/s)", DEFAULT_RATE, RUN_S),
            ("no limit", 0.0, RUN_S),
        ):
            stats: dict = {}
            trio.run(_scrub, log, rate, run_s, stats)
            print(
                f"scrub, {label}: {stats['mib_s']:.1f} MiB/s checked, "
                f"longest step {stats['longest_step_ms']:.2f} ms"
            )
        # Best of 2 each: the machine is shared, and the first run also warms up.
        alone = max(_produce_beside(directory, log, None, k) for k in (10, 11))
        print(f"produce alone: {alone:.0f} MiB/s appended (16 KiB batches)")
        for n, (label, rate) in enumerate(
            (
                (f"at the default limit ({DEFAULT_RATE / MIB:g} MiB/s)", DEFAULT_RATE),
                ("at no limit", 0.0),
            ),
            start=1,
        ):
            beside = max(_produce_beside(directory, log, rate, 2 * n + k) for k in (0, 1))
            print(f"produce beside a scrub {label}: {beside:.0f} MiB/s ({beside / alone:.2f} x)")
        log.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
