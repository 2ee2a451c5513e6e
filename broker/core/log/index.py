"""Sparse segment indexes: `.index` (offset -> position) and `.timeindex` (time -> offset).

How it works: each index is an append-only file of fixed-size big-endian entries, mirrored
in memory by `array` columns that are searched with `bisect`. Offsets are stored relative
to the segment's base offset (uint32), as in Kafka.

- `OffsetIndex`: (relative offset uint32, position uint32), 8 bytes. An entry says "the
  batch starting at this offset is at this position"; we key entries by the batch's base
  offset (Kafka keys by its last offset; both are valid lower bounds, the base offset is
  the tighter one). `lookup(n)` gives the greatest entry <= n, from which a reader scans
  batch headers forward.
- `TimeIndex`: (max timestamp so far int64, relative offset uint32), 12 bytes, appended
  only when the timestamp grows. `lookup(t)` gives the greatest entry with timestamp <= t.

`open` loads and sanity-checks a file: a missing file, a size that is not a whole number
of entries, keys that do not increase, or positions past the log's end raise
`IndexCorruptError`, and the segment rebuilds the index from its log. An index holds at
most `max_index_bytes // entry_size` entries; when full, the log rolls a new segment.

Descriptors: an index file's handle is opened on first use, and at most
`MAX_OPEN_INDEX_FILES` are open at once over all the broker's indexes (the least
recently used is closed; its next write reopens it). Without that cap every partition's
active segment held three descriptors, and a broker with 10,000 partitions ran out of
them (Kafka holds one: its indexes are mmapped and their files closed). Indexes are
only used from the event loop's thread (the flushes fsync `os.dup`ed descriptors).
"""

from __future__ import annotations

import bisect
import collections
import io
import operator
import os
import struct
import sys
from array import array
from pathlib import Path
from typing import Self

from broker.core.log.errors import LogError

__all__ = ["IndexCorruptError", "OffsetIndex", "TimeIndex"]

_OFFSET_ENTRY = struct.Struct(">II")
_TIME_ENTRY = struct.Struct(">qI")
_LITTLE_ENDIAN = sys.byteorder == "little"


class IndexCorruptError(LogError):
    """An index file is missing or inconsistent; rebuild it from the log."""


MAX_OPEN_INDEX_FILES = 1024


class _OpenHandles:
    """The index files holding an open handle, least recently used first."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._files: collections.OrderedDict[_IndexFile, None] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._files)

    def used(self, index_file: _IndexFile) -> None:
        """`index_file` has just used its handle: close the oldest others past the limit."""
        self._files[index_file] = None
        self._files.move_to_end(index_file)
        while len(self._files) > self.limit:
            oldest, _ = self._files.popitem(last=False)
            oldest.close()

    def closed(self, index_file: _IndexFile) -> None:
        self._files.pop(index_file, None)


OPEN_HANDLES = _OpenHandles(MAX_OPEN_INDEX_FILES)


class _IndexFile:
    """The append-only file behind an index (unbuffered: readers see every entry).

    The handle is opened on first use and released when the segment goes inactive, so an
    old segment holds one descriptor (its `.log`) rather than three; a later flush or
    truncation reopens it. `OPEN_HANDLES` closes the least recently used past its limit.
    """

    def __init__(self, path: Path, entry_size: int, max_index_bytes: int) -> None:
        self.path = path
        self.entry_size = entry_size
        self.max_entries = max(1, max_index_bytes // entry_size)
        self._file: io.FileIO | None = None
        self._dirty = False

    def _handle(self) -> io.FileIO:
        if self._file is None:
            self._file = io.FileIO(self.path, "a")  # released by close()/delete()
        OPEN_HANDLES.used(self)
        return self._file

    def set_max_index_bytes(self, max_index_bytes: int) -> None:
        self.max_entries = max(1, max_index_bytes // self.entry_size)

    def write(self, data: bytes) -> None:
        file = self._handle()
        view = memoryview(data)
        while view:
            view = view[file.write(view) :]
        self._dirty = True

    def truncate_entries(self, entries: int) -> None:
        self._handle().truncate(entries * self.entry_size)
        self._dirty = True

    def flush(self) -> None:
        if self._dirty:
            os.fsync(self._handle().fileno())
            self._dirty = False

    def take_dirty_descriptor(self) -> int | None:
        """A duplicate of the file's descriptor if it has unsynced entries (marked synced:
        the caller fsyncs and closes it, possibly in another thread), else None."""
        if not self._dirty:
            return None
        self._dirty = False
        return os.dup(self._handle().fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
            OPEN_HANDLES.closed(self)

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


def _read_columns(
    path: Path, entry_size: int, typecodes: tuple[str, str]
) -> tuple[array[int], array[int]]:
    """The two columns of an index file, or IndexCorruptError if it is missing or torn."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise IndexCorruptError(f"{path.name} is missing") from None
    if len(data) % entry_size:
        raise IndexCorruptError(
            f"{path.name} has {len(data)} bytes, not a multiple of the entry size {entry_size}"
        )
    first, second = typecodes
    if entry_size == 8:
        both = array("I", data)
        if _LITTLE_ENDIAN:
            both.byteswap()
        return array(first, both[0::2]), array(second, both[1::2])
    a, b = array(first), array(second)
    for ts, rel in _TIME_ENTRY.iter_unpack(data):
        a.append(ts)
        b.append(rel)
    return a, b


def _strictly_increasing(column: array[int]) -> bool:
    return all(map(operator.lt, column, column[1:]))


def _non_decreasing(column: array[int]) -> bool:
    return all(map(operator.le, column, column[1:]))


class _SparseIndex:
    """What both indexes share: two parallel columns (one of them the offset relative to
    the segment's base, `_rel_offsets`), kept in memory and appended to one file."""

    ENTRY_SIZE: int
    _rel_offsets: array[int]  # set by each subclass's __init__

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        self.base_offset = base_offset
        self._file = _IndexFile(path, self.ENTRY_SIZE, max_index_bytes)

    @classmethod
    def create(cls, path: Path, base_offset: int, max_index_bytes: int) -> Self:
        """A new empty index (an existing file at `path` is emptied)."""
        index = cls(path, base_offset, max_index_bytes)
        index._file.truncate_entries(0)
        return index

    def _columns(self) -> tuple[array[int], array[int]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self._rel_offsets)

    @property
    def is_full(self) -> bool:
        return len(self) >= self._file.max_entries

    def set_max_index_bytes(self, max_index_bytes: int) -> None:
        self._file.set_max_index_bytes(max_index_bytes)

    def truncate_to(self, offset: int) -> None:
        """Drop every entry for an offset >= `offset`."""
        keep = bisect.bisect_left(self._rel_offsets, offset - self.base_offset)
        if keep < len(self):
            for column in self._columns():
                del column[keep:]
            self._file.truncate_entries(keep)

    def reset(self) -> None:
        self.truncate_to(self.base_offset)

    def flush(self) -> None:
        self._file.flush()

    def take_dirty_descriptor(self) -> int | None:
        return self._file.take_dirty_descriptor()

    @property
    def path(self) -> Path:
        return self._file.path

    def set_path(self, path: Path) -> None:
        """The file was renamed to `path` (an open handle stays valid; a reopen uses it)."""
        self._file.path = path

    def close(self) -> None:
        self._file.close()

    def delete(self) -> None:
        self._file.delete()


class OffsetIndex(_SparseIndex):
    """Sparse map from offset to file position within one segment."""

    ENTRY_SIZE = _OFFSET_ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        self._rel_offsets = array("I")
        self._positions = array("I")

    def _columns(self) -> tuple[array[int], array[int]]:
        return self._rel_offsets, self._positions

    @classmethod
    def open(cls, path: Path, base_offset: int, max_index_bytes: int, log_size: int) -> OffsetIndex:
        """Load an existing index; IndexCorruptError if missing or inconsistent."""
        rel_offsets, positions = _read_columns(path, cls.ENTRY_SIZE, ("I", "I"))
        if not _strictly_increasing(rel_offsets) or not _strictly_increasing(positions):
            raise IndexCorruptError(f"{path.name} has entries that do not increase")
        if positions and positions[-1] >= log_size:
            raise IndexCorruptError(
                f"{path.name} points at position {positions[-1]}, past the log's {log_size} bytes"
            )
        index = cls(path, base_offset, max_index_bytes)
        index._rel_offsets, index._positions = rel_offsets, positions
        return index

    @property
    def last_entry(self) -> tuple[int, int]:
        """(offset, position) of the last entry, or (base offset, 0) when empty."""
        if not self._rel_offsets:
            return self.base_offset, 0
        return self.base_offset + self._rel_offsets[-1], self._positions[-1]

    def lookup(self, offset: int) -> tuple[int, int]:
        """The greatest entry (offset, position) with offset <= `offset`, else (base, 0)."""
        slot = bisect.bisect_right(self._rel_offsets, offset - self.base_offset) - 1
        if slot < 0:
            return self.base_offset, 0
        return self.base_offset + self._rel_offsets[slot], self._positions[slot]

    def floor_position(self, position: int) -> int:
        """The greatest indexed batch position <= `position` (0 when none)."""
        slot = bisect.bisect_right(self._positions, position) - 1
        return self._positions[slot] if slot >= 0 else 0

    def append(self, offset: int, position: int) -> bool:
        """Add an entry if there is room and it moves forward; returns whether it did."""
        rel = offset - self.base_offset
        if self.is_full or (self._rel_offsets and rel <= self._rel_offsets[-1]):
            return False
        self._file.write(_OFFSET_ENTRY.pack(rel, position))
        self._rel_offsets.append(rel)
        self._positions.append(position)
        return True


class TimeIndex(_SparseIndex):
    """Sparse map from (max timestamp so far) to offset within one segment."""

    ENTRY_SIZE = _TIME_ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        self._timestamps = array("q")
        self._rel_offsets = array("I")

    def _columns(self) -> tuple[array[int], array[int]]:
        return self._timestamps, self._rel_offsets

    @classmethod
    def open(cls, path: Path, base_offset: int, max_index_bytes: int) -> TimeIndex:
        """Load an existing index; IndexCorruptError if missing or inconsistent."""
        timestamps, rel_offsets = _read_columns(path, cls.ENTRY_SIZE, ("q", "I"))
        if not _strictly_increasing(timestamps) or not _non_decreasing(rel_offsets):
            raise IndexCorruptError(f"{path.name} has entries that do not increase")
        index = cls(path, base_offset, max_index_bytes)
        index._timestamps, index._rel_offsets = timestamps, rel_offsets
        return index

    @property
    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the last entry, or None when empty."""
        if not self._timestamps:
            return None
        return self._timestamps[-1], self.base_offset + self._rel_offsets[-1]

    def lookup(self, timestamp: int) -> tuple[int, int] | None:
        """The greatest entry (timestamp, offset) with timestamp <= `timestamp`, or None."""
        slot = bisect.bisect_right(self._timestamps, timestamp) - 1
        if slot < 0:
            return None
        return self._timestamps[slot], self.base_offset + self._rel_offsets[slot]

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Add (timestamp, offset) if the timestamp grows (and there is room)."""
        if not skip_full_check and self.is_full:
            return False
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return False
        rel = offset - self.base_offset
        if self._rel_offsets and rel < self._rel_offsets[-1]:
            return False
        self._file.write(_TIME_ENTRY.pack(timestamp, rel))
        self._timestamps.append(timestamp)
        self._rel_offsets.append(rel)
        return True
