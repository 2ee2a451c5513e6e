"""One log segment: a `.log` file of whole record batches plus its two sparse indexes.

How it works: the segment named `<base offset, 20 digits>.log` holds batches back to back,
exactly as they were appended. Appends go to the end through an unbuffered file opened in
append mode (one `write` per append), so `os.pread` on the same descriptor sees them at
once. While appending, the segment keeps Kafka's bookkeeping: the largest timestamp so far
and the offset of the batch that carried it, the bytes since the last index entry (an
`.index`/`.timeindex` entry is added when it exceeds `index.interval.bytes`), and the
first batch's timestamp (the clock that `segment.ms` rolls by).

Finding offset N: the offset index gives the greatest indexed batch at or before N; batch
headers are read forward from there (in small chunks, 61 bytes of each batch are needed)
until the batch whose last offset >= N. Nothing here decodes records, except
`find_offset_by_timestamp`, which opens the one batch it lands on.

`recover` re-reads the whole file, checks each batch's length and CRC, rebuilds both
indexes, and cuts the file at the first torn or corrupt batch, reporting where and why.

A segment's three files may carry a suffix after their usual names (`.cleaned`, `.swap`,
`.deleted`: the log cleaner's crash-safe replacement, see `swap.py`); `change_file_suffix`
renames all three.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from broker.core.log.index import IndexCorruptError, OffsetIndex, TimeIndex
from client.protocol.records import (
    BATCH_OVERHEAD,
    LOG_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    RecordError,
    decode_records,
    read_header,
    validate_batch,
)

__all__ = [
    "INDEX_SUFFIX",
    "LOG_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "BatchPlacement",
    "LogSegment",
    "RecoveryResult",
    "segment_file_name",
]

logger = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"

# Header scans read this much at a time: several small batches per read, and not much
# waste when batches are large and only their first 61 bytes are wanted.
SCAN_CHUNK = 16 * 1024
# Recovery checks CRCs, so it reads whole batches, in chunks this large (or one batch).
RECOVERY_CHUNK = 8 * 1024 * 1024
# writev takes at most this many buffers per call (POSIX guarantees at least 16).
_IOV_MAX = max(16, min(1024, os.sysconf("SC_IOV_MAX")))


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class BatchPlacement(NamedTuple):
    """What the segment needs to know about one appended batch (from its header)."""

    base_offset: int
    last_offset: int
    max_timestamp: int
    size: int


class RecoveryResult(NamedTuple):
    valid_bytes: int
    truncated_bytes: int
    next_offset: int  # offset after the last valid batch: the first offset lost, if any
    reason: str | None  # why the tail was cut; None when the whole file was valid
    epoch_starts: list[tuple[int, int]]  # (epoch, base offset) where the epoch grows


class LogSegment:
    """A `.log` file with its `.index` and `.timeindex`."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        created_ms: int,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        suffix: str = "",
    ) -> None:
        self.base_offset = base_offset
        self.log_path = directory / (segment_file_name(base_offset, LOG_SUFFIX) + suffix)
        self.offset_index = offset_index
        self.time_index = time_index
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        # Subtracted from segment.ms when deciding to roll (segment.jitter.ms); set by
        # the log that adds the segment.
        self.roll_jitter_ms = 0
        self._file = open(self.log_path, "a+b", buffering=0)  # closed by close()/delete()
        self._fd = self._file.fileno()
        self.size = os.fstat(self._fd).st_size
        self._next_offset: int | None = base_offset if self.size == 0 else None
        self._first_batch_timestamp: int | None = None
        last_time = time_index.last_entry
        self.max_timestamp, self.offset_of_max_timestamp = (
            last_time if last_time is not None else (-1, base_offset)
        )
        self.bytes_since_last_index_entry = self.size - offset_index.last_entry[1]

    # ------------------------------------------------------------------ construction

    @classmethod
    def create(
        cls,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        now_ms: int,
        suffix: str = "",
    ) -> LogSegment:
        """A new empty segment (leftover files with the same name are emptied); with a
        `suffix`, its files are named `<base>.log<suffix>`, `<base>.index<suffix>`..."""
        log_path = directory / (segment_file_name(base_offset, LOG_SUFFIX) + suffix)
        with open(log_path, "wb"):
            pass
        return cls(
            directory,
            base_offset,
            index_interval_bytes=index_interval_bytes,
            created_ms=now_ms,
            offset_index=OffsetIndex.create(
                directory / (segment_file_name(base_offset, INDEX_SUFFIX) + suffix),
                base_offset,
                max_index_bytes,
            ),
            time_index=TimeIndex.create(
                directory / (segment_file_name(base_offset, TIME_INDEX_SUFFIX) + suffix),
                base_offset,
                max_index_bytes,
            ),
            suffix=suffix,
        )

    @classmethod
    def load(
        cls,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        now_ms: int,
    ) -> tuple[LogSegment, str | None]:
        """Open an existing segment; the second value says why its indexes need a rebuild.

        When it is not None the indexes were emptied: call `recover()` before use.
        """
        log_path = directory / segment_file_name(base_offset, LOG_SUFFIX)
        index_path = directory / segment_file_name(base_offset, INDEX_SUFFIX)
        time_path = directory / segment_file_name(base_offset, TIME_INDEX_SUFFIX)
        log_size = log_path.stat().st_size
        problem: str | None = None
        try:
            offset_index = OffsetIndex.open(index_path, base_offset, max_index_bytes, log_size)
        except IndexCorruptError as exc:
            problem = str(exc)
            offset_index = OffsetIndex.create(index_path, base_offset, max_index_bytes)
        try:
            time_index = TimeIndex.open(time_path, base_offset, max_index_bytes)
        except IndexCorruptError as exc:
            problem = f"{problem}; {exc}" if problem else str(exc)
            time_index = TimeIndex.create(time_path, base_offset, max_index_bytes)
        if problem:
            offset_index.reset()
            time_index.reset()
        segment = cls(
            directory,
            base_offset,
            index_interval_bytes=index_interval_bytes,
            created_ms=now_ms,
            offset_index=offset_index,
            time_index=time_index,
        )
        return segment, problem

    # ------------------------------------------------------------------ facts

    @property
    def next_offset(self) -> int:
        """The offset after the segment's last batch (its base offset when empty)."""
        if self._next_offset is None:
            _, position = self.offset_index.last_entry
            next_offset = self.base_offset
            for _, header in self.iter_headers(position):
                next_offset = header.base_offset + header.last_offset_delta + 1
            self._next_offset = next_offset
        return self._next_offset

    @property
    def largest_timestamp(self) -> int:
        """The largest batch timestamp, or the file's mtime when no batch has one (Kafka)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return os.stat(self._fd).st_mtime_ns // 1_000_000

    def first_batch_timestamp(self) -> int | None:
        """The first batch's max timestamp: `segment.ms` counts from it (Kafka)."""
        if self._first_batch_timestamp is None and self.size >= BATCH_OVERHEAD:
            self._first_batch_timestamp = read_header(
                os.pread(self._fd, BATCH_OVERHEAD, 0)
            ).max_timestamp
        return self._first_batch_timestamp

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """How long this segment has been open, by record time when there is one."""
        first = self.first_batch_timestamp()
        if first is not None and first >= 0:
            return message_timestamp - first
        return now_ms - self.created_ms

    def set_index_config(self, index_interval_bytes: int, max_index_bytes: int) -> None:
        self.index_interval_bytes = index_interval_bytes
        self.offset_index.set_max_index_bytes(max_index_bytes)
        self.time_index.set_max_index_bytes(max_index_bytes)

    # ------------------------------------------------------------------ writing

    def append(
        self, buffers: Sequence[bytes | bytearray | memoryview], batches: Sequence[BatchPlacement]
    ) -> None:
        """Write `buffers` (together: the batches described by `batches`) at the end."""
        position = self.size
        self._write_all(buffers)
        for batch in batches:
            self._track(position, batch.base_offset, batch.last_offset, batch.max_timestamp)
            position += batch.size
            self.bytes_since_last_index_entry += batch.size
        self.size = position
        self._next_offset = batches[-1].last_offset + 1

    def _write_all(self, buffers: Sequence[bytes | bytearray | memoryview]) -> None:
        """One write (or writev) per call in the normal case; loops on short writes."""
        if len(buffers) == 1:
            view = memoryview(buffers[0])
            while view:
                view = view[self._file.write(view) :]
            return
        pending = [memoryview(buffer) for buffer in buffers]
        index = 0
        while index < len(pending):
            written = os.writev(self._fd, pending[index : index + _IOV_MAX])
            while written:
                length = len(pending[index])
                if written >= length:
                    written -= length
                    index += 1
                else:
                    pending[index] = pending[index][written:]
                    written = 0
            while index < len(pending) and not len(pending[index]):
                index += 1

    def _track(self, position: int, base_offset: int, last_offset: int, max_timestamp: int) -> None:
        """Kafka's per-batch bookkeeping: max timestamp, first timestamp, sparse indexes."""
        if position == 0:
            self._first_batch_timestamp = max_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(base_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0

    def on_become_inactive(self) -> None:
        """Record the final max timestamp in the time index (on roll and on close), and
        let go of the index files' handles until they are needed again."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(
                self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
            )
        self.offset_index.close()
        self.time_index.close()

    def truncate_to(self, offset: int) -> int:
        """Remove the batch containing `offset` and everything after; bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position, header = found
        self.offset_index.truncate_to(header.base_offset)
        self.time_index.truncate_to(header.base_offset)
        self._file.truncate(position)
        removed = self.size - position
        self.size = position
        self._next_offset = header.base_offset if position else self.base_offset
        if position == 0:
            self._first_batch_timestamp = None
        self.bytes_since_last_index_entry = self.size - self.offset_index.last_entry[1]
        last_time = self.time_index.last_entry
        if last_time is None:
            self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
            scan_from = 0
        else:
            self.max_timestamp, self.offset_of_max_timestamp = last_time
            scan_from = self.offset_index.lookup(last_time[1])[1]
        for _, batch in self.iter_headers(scan_from):
            if batch.max_timestamp > self.max_timestamp:
                self.max_timestamp = batch.max_timestamp
                self.offset_of_max_timestamp = batch.base_offset + batch.last_offset_delta
        return removed

    def flush(self) -> None:
        os.fsync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()

    def descriptors_to_flush(self) -> list[int]:
        """Duplicates of the descriptors `flush` would fsync (the log's, and its indexes'
        with unsynced entries), for an fsync away from the event loop: a duplicate stays
        valid if the segment is closed or deleted meanwhile. The caller closes them."""
        descriptors = [os.dup(self._fd)]
        for index in (self.offset_index, self.time_index):
            descriptor = index.take_dirty_descriptor()
            if descriptor is not None:
                descriptors.append(descriptor)
        return descriptors

    def file_paths(self) -> list[Path]:
        """The segment's files: the log first, then its indexes."""
        return [self.log_path, self.offset_index.path, self.time_index.path]

    def change_file_suffix(
        self,
        old_suffix: str,
        new_suffix: str,
        rename: Callable[[Path, Path], None] = os.replace,
    ) -> None:
        """Rename the three files from `<name><old_suffix>` to `<name><new_suffix>`, the log
        first (Kafka's changeFileSuffixes); index files that are missing are skipped (a
        missing index is rebuilt when the segment loads). Open handles stay valid."""
        files = (
            (self.log_path, self._set_log_path),
            (self.offset_index.path, self.offset_index.set_path),
            (self.time_index.path, self.time_index.set_path),
        )
        for number, (path, set_path) in enumerate(files):
            if not path.name.endswith(old_suffix):
                raise ValueError(f"{path.name} does not end with {old_suffix!r}")
            target = path.with_name(path.name[: len(path.name) - len(old_suffix)] + new_suffix)
            if number == 0 or path.exists():
                rename(path, target)
            set_path(target)

    def _set_log_path(self, path: Path) -> None:
        self.log_path = path

    def release(self) -> None:
        """Close the file handles without writing anything (before deleting the files)."""
        self._file.close()
        self.offset_index.close()
        self.time_index.close()

    def close(self) -> None:
        if self._file.closed:
            return
        self.on_become_inactive()
        self._file.close()
        self.offset_index.close()
        self.time_index.close()

    def delete(self) -> None:
        """Close and remove the segment's three files."""
        self._file.close()
        self.offset_index.delete()
        self.time_index.delete()
        self.log_path.unlink(missing_ok=True)

    # ------------------------------------------------------------------ reading

    def fileno(self) -> int:
        return self._fd

    def pread(self, size: int, position: int) -> bytes:
        return os.pread(self._fd, size, position)

    def iter_headers(self, position: int) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from `position` (a batch start) to the end."""
        end = self.size
        chunk = b""
        chunk_start = position
        while position < end:
            rel = position - chunk_start
            if rel + BATCH_OVERHEAD > len(chunk):
                chunk = os.pread(self._fd, min(SCAN_CHUNK, end - position), position)
                chunk_start, rel = position, 0
            header = read_header(chunk, rel)
            size = LOG_OVERHEAD + header.batch_length
            if size < BATCH_OVERHEAD or position + size > end:
                raise CorruptRecordError(
                    f"{self.log_path.name}: batch at position {position} claims {size} bytes"
                )
            yield position, header
            position += size

    def translate_offset(
        self, offset: int, start_position: int = 0
    ) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset >= `offset`, if any."""
        if self._next_offset is not None and offset >= self._next_offset:
            return None
        _, position = self.offset_index.lookup(offset)
        for found in self.iter_headers(max(position, start_position)):
            header = found[1]
            if header.base_offset + header.last_offset_delta >= offset:
                return found
        return None

    def read(
        self, start_offset: int, max_bytes: int, upper_bound: int | None, min_one_batch: bool
    ) -> tuple[bytes, int, int] | None:
        """Whole batches from the one containing `start_offset`: (bytes, first offset,
        position); None when the segment holds nothing at or after `start_offset`."""
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        position, header = found
        last_offset = header.base_offset + header.last_offset_delta
        if upper_bound is not None and last_offset >= upper_bound:
            return b"", start_offset, position
        first_size = LOG_OVERHEAD + header.batch_length
        if first_size > max_bytes:
            if not min_one_batch:
                return b"", start_offset, position
            return self.pread(first_size, position), header.base_offset, position
        limit = self.size
        if upper_bound is not None and upper_bound < self.next_offset:
            bound = self.translate_offset(upper_bound, position)
            if bound is not None:
                limit = bound[0]
        wanted = min(max_bytes, limit - position)
        data = self.pread(wanted, position)
        if position + wanted == limit:  # ends on a batch boundary already
            return data, header.base_offset, position
        # Cut after the last whole batch: walk lengths from an indexed batch near the end.
        rel = max(position, self.offset_index.floor_position(position + wanted)) - position
        while rel + LOG_OVERHEAD <= wanted:
            size = LOG_OVERHEAD + int.from_bytes(data[rel + 8 : rel + 12], "big", signed=True)
            if size < BATCH_OVERHEAD or rel + size > wanted:
                break
            rel += size
        return data[:rel], header.base_offset, position

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `starting_offset` whose
        timestamp >= `timestamp`, or None."""
        entry = self.time_index.lookup(timestamp)
        from_offset = max(entry[1] if entry else self.base_offset, starting_offset)
        _, index_position = self.offset_index.lookup(from_offset)
        for position, header in self.iter_headers(index_position):
            if header.base_offset + header.last_offset_delta < from_offset:
                continue
            if header.max_timestamp < timestamp:
                continue
            try:
                records = decode_records(self.pread(header.size, position))
            except RecordError:
                return max(header.base_offset, starting_offset), header.max_timestamp
            for record in records:
                if record.offset >= starting_offset and record.timestamp >= timestamp:
                    return record.offset, record.timestamp
        return None

    # ------------------------------------------------------------------ recovery

    def recover(self) -> RecoveryResult:
        """Validate every batch, rebuild the indexes, cut the file at the first bad batch."""
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
        self.bytes_since_last_index_entry = 0
        self._first_batch_timestamp = None
        file_size = os.fstat(self._fd).st_size
        epoch_starts: list[tuple[int, int]] = []
        latest_epoch = -1
        next_offset = self.base_offset
        position = 0
        reason: str | None = None
        chunk = memoryview(b"")
        chunk_start = 0
        while position < file_size:
            rel = position - chunk_start
            if rel + LOG_OVERHEAD > len(chunk):
                if position + LOG_OVERHEAD > file_size:
                    reason = f"short length prefix ({file_size - position} of 12 bytes)"
                    break
                chunk = memoryview(
                    os.pread(self._fd, min(RECOVERY_CHUNK, file_size - position), position)
                )
                chunk_start, rel = position, 0
            size = LOG_OVERHEAD + int.from_bytes(chunk[rel + 8 : rel + 12], "big", signed=True)
            if size < BATCH_OVERHEAD:
                reason = f"impossible batch length {size - LOG_OVERHEAD}"
                break
            if position + size > file_size:
                reason = f"batch length {size} runs past the end of the file"
                break
            if rel + size > len(chunk):
                chunk = memoryview(
                    os.pread(
                        self._fd, max(size, min(RECOVERY_CHUNK, file_size - position)), position
                    )
                )
                chunk_start, rel = position, 0
            try:
                header = validate_batch(chunk[rel : rel + size], strict=False)
            except RecordError as exc:
                reason = str(exc)
                break
            if header.base_offset < next_offset:
                reason = f"offset {header.base_offset} goes backwards (expected >= {next_offset})"
                break
            last_offset = header.base_offset + header.last_offset_delta
            self._track(position, header.base_offset, last_offset, header.max_timestamp)
            self.bytes_since_last_index_entry += size
            epoch = header.partition_leader_epoch
            if epoch > latest_epoch:
                latest_epoch = epoch
                epoch_starts.append((epoch, header.base_offset))
            next_offset = last_offset + 1
            position += size
        if position < file_size:
            self._file.truncate(position)
        self.size = position
        self._next_offset = next_offset
        return RecoveryResult(position, file_size - position, next_offset, reason, epoch_starts)
