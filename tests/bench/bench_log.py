"""Log store throughput next to plain file writes of the same bytes, in the same directory.

- append: `Log.append_as_leader` of pre-built 1 MiB batches of 100-byte records (the
  batches are built before timing: this measures the store: validation, CRC, offset
  patching, index upkeep and the write), against `write()` of the same bytes to a plain
  file. The goal is append >= 0.7 x raw.
- read: `Log.read` of the whole log in 1 MiB fetches.
- small batches: appends/s of 1 KiB batches (the per-append overhead).

Everything lives in a temp dir that is removed afterwards. No fsync on either side (the
store leaves durability to the OS by default, like Kafka), so both measure the page cache.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from broker.core.log import Log, LogConfig
from client.protocol.records import Record, build_batch

MIB = 1024 * 1024
TOTAL_BYTES = 256 * MIB
RECORD_VALUE = b"x" * 100
SMALL_BATCH_COUNT = 50_000
ROUNDS = 5


def _batch_of_size(target: int, timestamp: int) -> bytes:
    """One batch of 100-byte records, as large as fits in `target` bytes."""
    record = Record(None, RECORD_VALUE, timestamp)
    count = max(1, target // len(RECORD_VALUE))
    batch = build_batch([record] * count)
    while len(batch) > target and count > 1:
        count = max(1, count * target // len(batch) - 1)
        batch = build_batch([record] * count)
    return batch


def _raw_write(path: Path, batches: list[bytes]) -> float:
    start = time.perf_counter()
    with open(path, "ab", buffering=0) as file:
        for batch in batches:
            file.write(batch)
    return time.perf_counter() - start


def _append(directory: Path, config: LogConfig, batches: list[bytes]) -> tuple[float, Log]:
    log = Log.open(directory, config, now_ms=0)
    start = time.perf_counter()
    for i, batch in enumerate(batches):
        log.append_as_leader(batch, leader_epoch=0, now_ms=i)
    return time.perf_counter() - start, log


def _read_all(log: Log, max_bytes: int) -> tuple[float, int]:
    start = time.perf_counter()
    offset, total = log.log_start_offset, 0
    end = log.log_end_offset
    while offset < end:
        fetched = log.read(offset, max_bytes)
        if not fetched.records:
            break
        total += len(fetched.records)
        # the next fetch starts after the last batch returned (read its header's fields)
        tail = fetched.records
        pos = 0
        while pos < len(tail):
            length = int.from_bytes(tail[pos + 8 : pos + 12], "big")
            last_delta = int.from_bytes(tail[pos + 23 : pos + 27], "big")
            offset = int.from_bytes(tail[pos : pos + 8], "big") + last_delta + 1
            pos += 12 + length
    return time.perf_counter() - start, total


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-log-"))
    try:
        batch = _batch_of_size(MIB, 1_700_000_000_000)
        batches = [batch] * (TOTAL_BYTES // len(batch))
        total = len(batch) * len(batches)
        print(f"directory {root} ({os.statvfs(root).f_bsize}-byte blocks)")
        print(f"{len(batches)} batches of {len(batch)} bytes (100-byte records)", end="")
        print(f", {total / MIB:.0f} MiB in all")

        config = LogConfig()  # Kafka defaults: 1 GiB segments, 4 KiB index interval
        raw_times, append_times, read_times = [], [], []
        for run in range(ROUNDS):  # interleaved, so load from elsewhere hits both sides
            raw_path = root / f"raw-{run}.bin"
            raw_times.append(_raw_write(raw_path, batches))
            raw_path.unlink()
            elapsed, log = _append(root / f"bench-{run}", config, batches)
            append_times.append(elapsed)
            read_elapsed, read_total = _read_all(log, MIB)
            assert read_total == total, (read_total, total)
            read_times.append(read_elapsed)
            log.delete()
        raw = total / min(raw_times) / MIB
        append = total / min(append_times) / MIB
        read = total / min(read_times) / MIB
        ratios = sorted(r / a for r, a in zip(raw_times, append_times, strict=True))
        print(f"raw file write : {raw:8.0f} MiB/s  (best of {ROUNDS})")
        print(f"log append     : {append:8.0f} MiB/s  = {append / raw:.2f} x raw (goal >= 0.70)")
        print(
            f"                 per-round ratio: median {ratios[len(ratios) // 2]:.2f}, "
            f"range {ratios[0]:.2f}-{ratios[-1]:.2f}"
        )
        print(f"log read       : {read:8.0f} MiB/s  (1 MiB fetches, best of {ROUNDS})")

        small = _batch_of_size(1024, 1_700_000_000_000)
        small_batches = [small] * SMALL_BATCH_COUNT
        raw_elapsed = _raw_write(root / "raw-small.bin", small_batches)
        elapsed, log = _append(root / "small-0", config, small_batches)
        log.delete()
        print(
            f"small batches  : {SMALL_BATCH_COUNT / elapsed:8.0f} appends/s of {len(small)} bytes "
            f"({elapsed / SMALL_BATCH_COUNT * 1e6:.1f} us each; a plain write takes "
            f"{raw_elapsed / SMALL_BATCH_COUNT * 1e6:.1f} us)"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
