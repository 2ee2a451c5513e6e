"""Compacting one log: keep the newest record per key, in bounded steps (Kafka's Cleaner).

How it works: a `CleaningJob` is made from a `LogToClean` (`cleaner_manager.py`) and runs
when its owner calls `step(max_bytes)`, which reads at most about `max_bytes` (whole
batches, at least one) and returns the bytes it read and wrote. Between steps the log
may change; every step first checks that the segments it still needs are in the log,
closed and of the size it saw, and aborts otherwise (retention deleted them, a follower
truncated, the log was deleted or is no longer compacted). A step waits for nothing but
the disk.

1. Map. The dirty batches, [first dirty, first uncleanable), are read in order and each
   record's key is mapped to its offset: the newest offset per key. The map holds at most
   `map_capacity` keys (`log.cleaner.dedupe.buffer.size` / 128 bytes, what a Python dict
   entry with a 16-byte key costs, measured; Kafka's MD5 map takes 24, and a 0.9 load
   factor as Kafka); when the next batch would not fit, mapping stops there and
   this pass cleans only up to it (the rest stays dirty for the next pass). The map's end
   offset (after its last batch) becomes the new cleaner checkpoint.
2. Plan. The segments holding offsets below the end offset (never the active one) are
   grouped, consecutive, so a group's bytes fit in `segment.bytes` and its index entries
   in `segment.index.bytes` (Kafka's groupSegmentsBySize).
3. Clean, one group at a time, into a new segment `<first base>.log.cleaned`. A record
   past the map's end offset is kept as it is; below it, a record is kept when it has a
   key, the map holds no newer offset for that key, and it is not an expired tombstone
   (Kafka's shouldRetainRecord). A tombstone (a null
   value) expires when it was already in the clean part before this pass and its segment's
   newest timestamp is older than now - `delete.retention.ms`; so a tombstone survives at
   least one pass and `delete.retention.ms`, giving readers time to see the delete (Kafka
   measures that horizon from the clean part's newest segment file time; we use the
   injected clock). Records without a key are dropped (the leader refuses them for a
   compacted topic; they can only come from a topic that was `delete` before). A batch
   with every record kept is copied byte for byte; one with some kept is rewritten with
   the same base offset and offset span (so offsets never change, and a batch may now hold
   fewer records than offsets); one with none is dropped, except the group's last batch,
   which stays as an empty batch so the new segment ends where the old ones did (crash
   recovery relies on it, `swap.py`).
4. Flush and swap. The new segment is fsynced as it is written (whenever `SYNC_BYTES`
   have piled up, so no single step waits for a large fsync), finished and fsynced once
   more in a step of its own, then a last step's `Log.replace_segments` puts it in place
   of the group: on disk through the `.cleaned`/`.swap`/`.deleted` protocol, in memory
   at once.

Transactions (Kafka's cleaner, `cleaner_txn.py`): control batches (COMMIT/ABORT markers)
and the records of aborted transactions (the log's `.txnindex`) are never mapped, so an
aborted record never hides a committed one with the same key; when cleaning, aborted
transactions' batches are removed. A marker stays while any batch of its transaction was
read in this pass (so the pass that removes an aborted transaction's batches keeps its
ABORT marker, and a COMMIT marker stays until every record of its transaction is gone);
then it goes like a tombstone, once past the delete horizon (in the clean part before
this pass and its segment older than now - `delete.retention.ms`), unless it is the new
segment's last batch. The last batch of each producer in the producer state (an empty
one if none of its records is kept; or its last marker, if it has no data batch) always
stays, so its epoch and sequence survive cleaning and recovery. The new segment's
`.txnindex` holds the entries of the ABORT markers kept (`Log.replace_segments`). The
cleaner manager keeps open transactions out of the dirty range.

File operations go through a `FileOps` object (tests inject crashes). Time is `now_ms`.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from enum import Enum

from broker.core.log.cleaner_manager import LogToClean
from broker.core.log.cleaner_txn import CleanedTransactions, last_records_of, marker_kind
from broker.core.log.config import INT_MAX
from broker.core.log.errors import LogError
from broker.core.log.log import Log
from broker.core.log.segment import BatchPlacement, LogSegment
from broker.core.log.swap import CLEANED_SUFFIX, FileOps
from broker.core.log.txn_index import AbortedTxn
from client.protocol.records import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    BATCH_OVERHEAD,
    LOG_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    filter_batch,
    read_header,
    record_keys,
    validate_batch,
)

__all__ = ["CleanerStats", "CleaningJob", "map_capacity_for"]

logger = logging.getLogger(__name__)

# Kafka's SkimpyOffsetMap: a 16-byte hash and an 8-byte offset per slot, 90 % full at most.
_MAP_BYTES_PER_ENTRY = 128  # measured: dict slot + bytes key + int offset
_MAP_LOAD_FACTOR = 0.9
# A cleaned segment is fsynced whenever this much was written to it since the last time:
# each fsync stays short (the cleaner runs on the broker's event loop).
SYNC_BYTES = 1024 * 1024
# Index entry sizes (offset index, time index), for grouping as Kafka does.
_OFFSET_ENTRY_BYTES = 8
_TIME_ENTRY_BYTES = 12


def map_capacity_for(dedupe_buffer_bytes: int) -> int:
    """Keys the offset map may hold for a `log.cleaner.dedupe.buffer.size`, so the buffer
    size bounds the map's real memory for short keys (longer keys cost their length)."""
    return max(1, int(dedupe_buffer_bytes // _MAP_BYTES_PER_ENTRY * _MAP_LOAD_FACTOR))


class Phase(Enum):
    MAP = "map"
    CLEAN = "clean"
    FLUSH = "flush"  # a group's new segment is written: the next step fsyncs it
    SWAP = "swap"  # ... and flushed: the next step swaps it in
    DONE = "done"
    ABORTED = "aborted"


@dataclass
class CleanerStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_mapped: int = 0
    records_read: int = 0
    records_kept: int = 0
    keys_mapped: int = 0
    groups_swapped: int = 0
    markers_removed: int = 0


@dataclass
class _Cursor:
    """Where reading is: the segment (index into a list) and the byte position in it."""

    segment: int = 0
    position: int = 0


@dataclass
class _Group:
    segments: list[LogSegment]
    last_offset: int  # the last offset the old segments hold: the new one must end there
    output: LogSegment | None = None
    mtime_ns: int = 0  # the newest modification time of the old segments
    unsynced: int = 0  # bytes written to `output` since its last fsync


class CleaningJob:
    """One cleaning pass over one log, run by `step` calls (see the module docstring)."""

    def __init__(
        self,
        target: LogToClean,
        *,
        now_ms: int,
        map_capacity: int,
        ops: FileOps | None = None,
    ) -> None:
        self.log: Log = target.log
        self.target = target
        self.now_ms = now_ms
        self.ops = ops or FileOps()
        self.stats = CleanerStats()
        self.phase = Phase.MAP
        self.end_offset: int | None = None  # the new cleaner checkpoint, once mapped
        self._first_dirty = target.first_dirty_offset
        self._uncleanable = target.first_uncleanable_offset
        self._capacity = max(1, map_capacity)
        self._map: dict[bytes, int] = {}
        self._latest_mapped = -1
        segments = self.log.segments
        self._dirty = [
            s
            for s in segments[:-1]
            if s.base_offset < self._uncleanable and s.next_offset > self._first_dirty
        ]
        self._sizes = {id(s): s.size for s in segments[:-1]}
        self._cursor = _Cursor()
        if self._dirty:  # start at the batch holding the first dirty offset
            found = self._dirty[0].translate_offset(self._first_dirty)
            self._cursor.position = found[0] if found is not None else self._dirty[0].size
        self._expired: dict[int, bool] = {}  # id(segment) -> its tombstones may go
        self._groups: list[_Group] = []
        self._txns = CleanedTransactions((), {})  # set when the groups are planned
        self._abort_entries: dict[tuple[int, int], AbortedTxn] = {}
        retention = self.log.config.delete_retention_ms
        self._tombstone_horizon_ms = now_ms - retention
        # Aborted transactions below the uncleanable offset: producer id -> [(first, last)].
        self._aborted: dict[int, list[tuple[int, int]]] = {}
        for txn in self.log.collect_aborted_transactions(0, self._uncleanable):
            self._aborted.setdefault(txn.producer_id, []).append(
                (txn.first_offset, txn.last_offset)
            )

    def _skipped(self, header: BatchHeader) -> bool | None:
        """None for a batch cleaned as usual; True for a control batch (kept whole, never
        mapped), False for an aborted transaction's batch (dropped, never mapped)."""
        attributes = header.attributes
        if attributes & ATTR_CONTROL:
            return True
        if attributes & ATTR_TRANSACTIONAL:
            base = header.base_offset
            for first, last in self._aborted.get(header.producer_id, ()):
                if first <= base <= last:
                    return False
        return None

    # ------------------------------------------------------------------ driving

    @property
    def done(self) -> bool:
        return self.phase in (Phase.DONE, Phase.ABORTED)

    @property
    def aborted(self) -> bool:
        return self.phase is Phase.ABORTED

    @property
    def group_ranges(self) -> list[tuple[int, int]]:
        """(first offset, last offset) covered by each group still to be swapped in."""
        return [(g.segments[0].base_offset, g.last_offset) for g in self._groups]

    @property
    def output(self) -> LogSegment | None:
        """The new segment being written, if any."""
        return self._groups[0].output if self._groups else None

    def step(self, max_bytes: int) -> int:
        """Do at most about `max_bytes` of reading; returns the bytes read and written."""
        if self.done:
            return 0
        if not self._still_valid():
            self.abort("the log changed under the cleaner")
            return 0
        before = self.stats.bytes_read + self.stats.bytes_written
        if self.phase is Phase.MAP:
            self._map_step(max_bytes)
        elif self.phase is Phase.CLEAN:
            self._clean_step(max_bytes)
        elif self.phase is Phase.FLUSH:
            self.flush_output()
        else:
            self._swap(self._groups[0])
        return self.stats.bytes_read + self.stats.bytes_written - before

    def flush_output(self) -> None:
        """In the FLUSH phase: finish the group's new segment and fsync what is left."""
        group = self._groups[0]
        output = group.output
        assert output is not None  # made by the group's first clean step
        output.on_become_inactive()
        self.ops.flush(output)
        # The old segments' modification time (Kafka's lastModified) carries over.
        os.utime(output.log_path, ns=(group.mtime_ns, group.mtime_ns))
        self.phase = Phase.SWAP

    def run_to_end(self, max_bytes_per_step: int = 1 << 20) -> CleanerStats:
        """Every step at once (tests and benchmarks)."""
        while not self.done:
            self.step(max_bytes_per_step)
        return self.stats

    def abort(self, why: str) -> None:
        """Stop; delete the half-written segment, if any. The checkpoint stays.

        A segment whose replacement was committed (its files renamed past `.cleaned`
        before an I/O error) is left alone: the next start completes the replacement.
        """
        if self.done:
            return
        logger.info("Log %s: cleaning aborted: %s", self.target.topic_partition, why)
        for group in self._groups:
            output = group.output
            if output is not None and output.log_path.name.endswith(CLEANED_SUFFIX):
                output.delete()
            group.output = None
        self.phase = Phase.ABORTED

    def _still_valid(self) -> bool:
        log = self.log
        if log.closed or not log.config.compact_enabled:
            return False
        closed = log.segments[:-1]
        present = {id(s) for s in closed}
        needed = (
            self._dirty
            if self.phase is Phase.MAP
            else [s for g in self._groups for s in g.segments]
        )
        return all(id(s) in present and self._sizes.get(id(s)) == s.size for s in needed)

    # ------------------------------------------------------------------ reading

    def _read(
        self, segments: list[LogSegment], max_bytes: int
    ) -> list[tuple[LogSegment, BatchHeader, memoryview]]:
        """Whole batches from the cursor on, about `max_bytes` of them (at least one), each
        checked (length, CRC): [(segment, header, batch bytes)]; moves the cursor."""
        cursor = self._cursor
        while cursor.segment < len(segments) and segments[cursor.segment].size <= cursor.position:
            cursor.segment, cursor.position = cursor.segment + 1, 0
        if cursor.segment >= len(segments):
            return []
        segment = segments[cursor.segment]
        remaining = segment.size - cursor.position
        data = segment.pread(min(max(max_bytes, BATCH_OVERHEAD), remaining), cursor.position)
        first = LOG_OVERHEAD + int.from_bytes(data[8:12], "big", signed=True)
        if first > len(data):
            data = segment.pread(first, cursor.position)
        self.stats.bytes_read += len(data)
        view = memoryview(data)
        out: list[tuple[LogSegment, BatchHeader, memoryview]] = []
        rel = 0
        while rel + BATCH_OVERHEAD <= len(view):
            size = LOG_OVERHEAD + int.from_bytes(view[rel + 8 : rel + 12], "big", signed=True)
            if rel + size > len(view):
                break
            header = validate_batch(view, rel, strict=False)
            out.append((segment, header, view[rel : rel + size]))
            rel += size
        if not out:
            raise CorruptRecordError(
                f"{segment.log_path.name}: no whole batch at position {cursor.position}"
            )
        cursor.position += rel
        if cursor.position >= segment.size:
            cursor.segment, cursor.position = cursor.segment + 1, 0
        return out

    # ------------------------------------------------------------------ 1. map

    def _map_step(self, max_bytes: int) -> None:
        full = False
        first_dirty = self._first_dirty
        table = self._map
        for _segment, header, batch in self._read(self._dirty, max_bytes):
            last = header.base_offset + header.last_offset_delta
            if last < first_dirty:
                continue
            if last >= self._uncleanable:
                self._cursor.segment = len(self._dirty)  # nothing further is eligible
                break
            if table and len(table) + header.records_count > self._capacity:
                full = True
                break
            if self._skipped(header) is not None:
                self._latest_mapped = last
                continue
            for offset, key in record_keys(batch):
                if key is not None and offset >= first_dirty:
                    table[key] = offset
            self.stats.records_mapped += header.records_count
            self._latest_mapped = last
        if full or self._cursor.segment >= len(self._dirty):
            self._finish_map(full)

    def _finish_map(self, full: bool) -> None:
        self.stats.keys_mapped = len(self._map)
        if self._latest_mapped < 0:
            self.end_offset = self._first_dirty
            self.phase = Phase.DONE  # nothing eligible after all
            return
        end_offset = self._latest_mapped + 1
        self.end_offset = end_offset
        if full:
            logger.info(
                "Log %s: offset map full at %d keys; cleaning up to offset %d this pass",
                self.target.topic_partition,
                len(self._map),
                end_offset,
            )
        self._groups = self._plan_groups(end_offset)
        self._cursor = _Cursor()
        if self._groups:
            aborted = self.log.collect_aborted_transactions(0, self._groups[-1].last_offset + 1)
            self._abort_entries = {(t.producer_id, t.last_offset): t for t in aborted}
            self._txns = CleanedTransactions(
                aborted, last_records_of(self.log.producer_state.entries)
            )
            self.phase = Phase.CLEAN
        else:
            self.log.update_cleaner_checkpoint(end_offset)
            self.phase = Phase.DONE

    # ------------------------------------------------------------------ 2. plan

    def _plan_groups(self, end_offset: int) -> list[_Group]:
        config = self.log.config
        segments = [s for s in self.log.segments[:-1] if s.base_offset < end_offset]
        groups: list[_Group] = []
        index = 0
        while index < len(segments):
            group = [segments[index]]
            size = segments[index].size
            offset_entries = len(segments[index].offset_index)
            time_entries = len(segments[index].time_index)
            index += 1
            while index < len(segments):
                candidate = segments[index]
                following = segments[index + 1].base_offset if index + 1 < len(segments) else None
                last_offset = (following or candidate.next_offset) - 1
                if (
                    size + candidate.size > config.segment_bytes
                    or (offset_entries + len(candidate.offset_index)) * _OFFSET_ENTRY_BYTES
                    > config.segment_index_bytes
                    or (time_entries + len(candidate.time_index)) * _TIME_ENTRY_BYTES
                    > config.segment_index_bytes
                    or last_offset - group[0].base_offset > INT_MAX
                ):
                    break
                group.append(candidate)
                size += candidate.size
                offset_entries += len(candidate.offset_index)
                time_entries += len(candidate.time_index)
                index += 1
            if size > 0:  # a run of empty segments: nothing to rewrite
                groups.append(_Group(group, max(s.next_offset for s in group) - 1))
        return groups

    # ------------------------------------------------------------------ 3. clean, 4. swap

    def _clean_step(self, max_bytes: int) -> None:
        group = self._groups[0]
        if group.output is None:
            group.output = self._new_segment(group.segments[0].base_offset)
        buffers: list[bytes | bytearray | memoryview] = []
        placements: list[BatchPlacement] = []
        for segment, header, batch in self._read(group.segments, max_bytes):
            kept = self._clean_batch(segment, header, batch, group.last_offset)
            if kept is None:
                continue
            kept_header = header if kept is batch else read_header(kept)
            buffers.append(kept)
            placements.append(
                BatchPlacement(
                    kept_header.base_offset,
                    kept_header.base_offset + kept_header.last_offset_delta,
                    kept_header.max_timestamp,
                    len(kept),
                )
            )
        if buffers:
            self.ops.append(group.output, buffers, placements)
            written = sum(p.size for p in placements)
            self.stats.bytes_written += written
            group.unsynced += written
            if group.unsynced >= SYNC_BYTES:
                self.ops.flush(group.output)
                group.unsynced = 0
        if self._cursor.segment >= len(group.segments):
            group.mtime_ns = max(os.fstat(s.fileno()).st_mtime_ns for s in group.segments)
            self.phase = Phase.FLUSH

    def _clean_batch(
        self, segment: LogSegment, header: BatchHeader, batch: memoryview, group_last: int
    ) -> bytes | bytearray | memoryview | None:
        base = header.base_offset
        last = base + header.last_offset_delta
        latest = self._latest_mapped
        self.stats.records_read += header.records_count
        first_dirty = self._first_dirty
        expire = self._expired.get(id(segment))
        if expire is None:
            expire = segment.largest_timestamp < self._tombstone_horizon_ms
            self._expired[id(segment)] = expire
        txns = self._txns
        if header.attributes & ATTR_CONTROL:
            commit = marker_kind(batch)
            if (
                txns.on_marker(header, commit)
                and base <= latest
                and expire
                and last < first_dirty
                and last != group_last  # the new segment must end where the old ones did
                and not txns.is_last_of_producer(header)
            ):
                self.stats.markers_removed += 1
                return None
            if commit is False:
                txns.keep_abort(header, self._abort_entries)
            self.stats.records_kept += header.records_count
            return batch
        discard = txns.on_batch(header)
        if base > latest:  # past the map: kept as it is (Kafka's pastLatestOffset)
            self.stats.records_kept += header.records_count
            return batch
        keep_empty = last == group_last or txns.is_last_of_producer(header)
        if discard:  # an aborted transaction's batch
            return filter_batch(batch, lambda *_: False, keep_empty=keep_empty)
        table = self._map

        def keep(offset: int, key: bytes | None, value: bytes | None) -> bool:
            if offset > latest:
                return True
            if key is None:
                return False
            if table.get(key, -1) > offset:
                return False
            return value is not None or not (expire and offset < first_dirty)

        kept = filter_batch(batch, keep, keep_empty=keep_empty)
        if kept is not None:
            self.stats.records_kept += read_header(kept).records_count
        return kept

    def _new_segment(self, base_offset: int) -> LogSegment:
        config = self.log.config
        return LogSegment.create(
            self.log.directory,
            base_offset,
            index_interval_bytes=config.index_interval_bytes,
            max_index_bytes=config.segment_index_bytes,
            now_ms=self.now_ms,
            suffix=CLEANED_SUFFIX,
        )

    def _swap(self, group: _Group) -> None:
        output = group.output
        assert output is not None  # made by the group's first clean step
        try:
            self.log.replace_segments(
                output, group.segments, self.ops, aborted=self._txns.take_kept()
            )
        except LogError as exc:
            self.abort(str(exc))
            return
        group.output = None
        self.stats.groups_swapped += 1
        self._groups.pop(0)
        self._cursor = _Cursor()
        if self._groups:
            self.phase = Phase.CLEAN
        else:
            assert self.end_offset is not None  # set when mapping finished
            self.log.update_cleaner_checkpoint(self.end_offset)
            self.phase = Phase.DONE
