"""Log cleaner throughput (compaction), next to plain file writes of the same bytes.

- A compacted log of 64 MiB of 100-byte values in 16 KiB producer batches, 16 MiB
  segments, the last one active; two key spaces: 10,000 keys (a pass keeps about 1 MiB:
  mostly reading) and 1,000,000 keys (a pass keeps about 40 %: most batches are rewritten,
  the costly case).
- One full cleaning pass (map the dirty part, rewrite every closed segment, swap), in the
  broker's 512 KiB steps, timed: MiB of log cleaned per second, read + written I/O, and
  the longest step (how long the broker's event loop waits for one step).
- Against `write()` of the same bytes to a plain file in the same directory, measured in
  the same run (the ratio says how far below the disk's sequential speed cleaning runs).

Best of 3 rounds; everything lives in a temp dir that is removed afterwards. No fsync on
the raw side; the cleaner fsyncs each cleaned segment before swapping it in (as Kafka).
"""

from __future__ import annotations

import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from broker.core.log import CleaningJob, Log, LogConfig
from broker.core.log.cleaner_manager import log_to_clean
from broker.tasks.log_cleaner import STEP_BYTES
from client.protocol.records import Record, build_batch
from client.protocol.types import TopicPartition

MIB = 1024 * 1024
TOTAL_BYTES = 64 * MIB
KEY_SPACES = (10_000, 1_000_000)
BATCH_BYTES = 16 * 1024
SEGMENT_BYTES = 16 * MIB
ROUNDS = 3
TP = TopicPartition("bench", 0)


def _batches(total: int, keys: int) -> list[bytes]:
    rng = random.Random(7)
    value = b"x" * 100
    batches: list[bytes] = []
    size = 0
    timestamp = 1_700_000_000_000
    while size < total:
        records = []
        while len(records) * 120 < BATCH_BYTES:
            records.append(Record(b"key-%07d" % rng.randrange(keys), value, timestamp))
        batch = build_batch(records)
        batches.append(batch)
        size += len(batch)
        timestamp += 1
    return batches


def _raw_write(path: Path, batches: list[bytes]) -> float:
    start = time.perf_counter()
    with open(path, "ab", buffering=0) as file:
        for batch in batches:
            file.write(batch)
    return time.perf_counter() - start


def _build_log(directory: Path, batches: list[bytes]) -> Log:
    config = LogConfig(cleanup_policy="compact", segment_bytes=SEGMENT_BYTES)
    log = Log.open(directory / "bench-0", config, now_ms=0)
    for i, batch in enumerate(batches):
        log.append_as_leader(batch, leader_epoch=0, now_ms=i)
    log.roll(len(batches))
    return log


def _clean(log: Log) -> tuple[float, int, object, list[float]]:
    now = 1_800_000_000_000
    cleanable = sum(segment.size for segment in log.segments[:-1])
    job = CleaningJob(log_to_clean(TP, log, now, None), now_ms=now, map_capacity=1 << 24)
    steps: list[float] = []
    start = time.perf_counter()
    while not job.done:
        step_start = time.perf_counter()
        job.step(STEP_BYTES)
        steps.append(time.perf_counter() - step_start)
    elapsed = time.perf_counter() - start
    assert not job.aborted and job.end_offset == log.active_segment.base_offset
    return elapsed, cleanable, job.stats, steps


def _scenario(root: Path, keys: int) -> None:
    batches = _batches(TOTAL_BYTES, keys)
    total = sum(len(b) for b in batches)
    print(
        f"\n{keys} keys: {len(batches)} batches of ~{BATCH_BYTES // 1024} KiB, 100-byte values, "
        f"{total / MIB:.0f} MiB, {SEGMENT_BYTES // MIB} MiB segments"
    )
    raw_times, clean_times = [], []
    last = None
    for run in range(ROUNDS):
        raw_path = root / f"raw-{run}.bin"
        raw_times.append(_raw_write(raw_path, batches))
        raw_path.unlink()
        log = _build_log(root / f"run-{run}", batches)
        elapsed, cleanable, stats, steps = _clean(log)
        clean_times.append((elapsed, cleanable))
        last = (stats, steps, log.size_in_bytes)
        log.delete()
    raw = total / min(raw_times) / MIB
    elapsed, cleanable = min(clean_times)
    cleaned = cleanable / elapsed / MIB
    stats, steps, size_after = last
    moved = (stats.bytes_read + stats.bytes_written) / elapsed / MIB
    print(f"raw file write : {raw:8.0f} MiB/s  (best of {ROUNDS})")
    print(
        f"cleaner        : {cleaned:8.1f} MiB/s of log cleaned = {cleaned / raw:.3f} x raw "
        f"({moved:.0f} MiB/s read + written; best of {ROUNDS})"
    )
    print(
        f"                 {cleanable / MIB:.0f} MiB cleaned to {size_after / MIB:.1f} MiB "
        f"({stats.records_kept} of {stats.records_read} records kept)"
    )
    print(
        f"steps          : {len(steps)} of {STEP_BYTES // 1024} KiB, median "
        f"{statistics.median(steps) * 1000:.1f} ms, longest {max(steps) * 1000:.1f} ms "
        "(the broker's event loop waits this long per step)"
    )


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-cleaner-"))
    try:
        for keys in KEY_SPACES:
            _scenario(root, keys)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
