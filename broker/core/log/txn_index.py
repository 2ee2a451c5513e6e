"""The aborted-transaction index of each segment (Kafka's `TransactionIndex`, the
`<base offset>.txnindex` files).

How it works: when an ABORT marker is written, an `AbortedTxn` entry goes to the
`.txnindex` of the segment the marker lands in: Kafka's 34-byte record (int16 version
0, int64 producer id, first offset, last offset (the marker's) and the last stable
offset when the transaction completed). `TransactionIndexes` holds every segment's
entries in memory (aborts are rare) and mirrors them in the files: appends go to the
end of the file; truncation drops the entries whose marker is at or after the new end
and rewrites the file; retention and truncation drop the files of segments that are
gone (`retain`); the cleaner's replacement gives the cleaned segment the entries of
the ABORT markers it kept, in a file swapped in with the segment (`replace`). Loading
reads every file (a torn trailing entry is ignored) and removes files without a
segment; recovery drops the entries from the offset it replays from and writes them
again as it meets the markers (`loader.py`).

A read_committed fetch asks `collect(fetch_offset, upper, bases)`: the aborted
transactions overlapping [fetch_offset, upper), from the segments at and after the one
read (a transaction's marker follows its data); the scan stops at an entry whose LSO
reaches `upper` (no later abort can overlap the range: Kafka's collectAbortedTxns).
`check_markers` is the leader's check of the coordinator's markers; `record_batches`
records written batches in the producer state, and `record_completed` indexes an ABORT:
every append path and recovery do the same.
"""

from __future__ import annotations

import logging
import os
import re
import struct
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from broker.core.log.errors import ControlBatchError
from broker.core.log.producer_state import CompletedTxn, ProducerStateManager
from client.protocol.records import LOG_OVERHEAD, BatchHeader, is_control, read_control_marker
from client.protocol.types import TopicPartition

__all__ = [
    "TXN_INDEX_SUFFIX",
    "read_txn_index",
    "AbortedTxn",
    "Records",
    "TransactionIndexes",
    "check_markers",
    "markers_of",
    "record_batches",
    "record_completed",
]

Records = bytes | bytearray | memoryview

logger = logging.getLogger(__name__)

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first, last, last stable offset
_VERSION = 0
_NAME = re.compile(r"^(\d{20})\.txnindex$")


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def to_bytes(self) -> bytes:
        return _ENTRY.pack(_VERSION, *self)


def read_txn_index(data: bytes) -> tuple[list[AbortedTxn], bool]:
    """The entries of a `.txnindex` file's bytes (unknown versions skipped), and whether
    the bytes ended cleanly (False: a torn trailing entry, ignored)."""
    whole = len(data) - len(data) % _ENTRY.size
    found = []
    for pos in range(0, whole, _ENTRY.size):
        version, *fields = _ENTRY.unpack_from(data, pos)
        if version == _VERSION:
            found.append(AbortedTxn(*fields))
    return found, whole == len(data)


class TransactionIndexes:
    """The `.txnindex` entries of every segment of the partition directory `directory`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.entries: dict[int, list[AbortedTxn]] = {}

    def path(self, base: int) -> Path:
        return self.directory / f"{base:020d}{TXN_INDEX_SUFFIX}"

    def load(self, bases: Iterable[int]) -> None:
        """Read the files of the segments at `bases`; remove those of other bases."""
        wanted = set(bases)
        self.entries.clear()
        for name in os.listdir(self.directory):
            match = _NAME.match(name)
            if match is None:
                continue
            base = int(match.group(1))
            path = self.directory / name
            if base not in wanted:
                path.unlink(missing_ok=True)
                continue
            found, clean = read_txn_index(path.read_bytes())
            if not clean:
                logger.warning("%s: torn trailing entry ignored", path)
                self._rewrite(base, found)
            if found:
                self.entries[base] = found

    def append(self, base: int, entry: AbortedTxn) -> None:
        self.entries.setdefault(base, []).append(entry)
        with open(self.path(base), "ab") as file:
            file.write(entry.to_bytes())

    def _rewrite(self, base: int, entries: list[AbortedTxn]) -> None:
        path = self.path(base)
        if not entries:
            path.unlink(missing_ok=True)
            return
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(b"".join(e.to_bytes() for e in entries))
        os.replace(tmp, path)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after `offset`."""
        for base in [b for b, es in self.entries.items() if es[-1].last_offset >= offset]:
            kept = [e for e in self.entries[base] if e.last_offset < offset]
            self._rewrite(base, kept)
            if kept:
                self.entries[base] = kept
            else:
                del self.entries[base]

    def retain(self, bases: Iterable[int]) -> None:
        """Forget (and delete the files of) segments not at `bases`."""
        alive = set(bases)
        for base in [b for b in self.entries if b not in alive]:
            del self.entries[base]
            self.path(base).unlink(missing_ok=True)

    def replace(
        self,
        new_base: int,
        old_bases: list[int],
        kept: Sequence[AbortedTxn] | None,
        swap: Callable[[], None],
    ) -> None:
        """The cleaned segment at `new_base` replaces those at `old_bases` through `swap`
        (`swap.py`): its entries, `kept` or else all of theirs, are written first to
        `<new_base>.txnindex.cleaned`, which the swap puts in place with the segment."""
        entries = [e for base in old_bases for e in self.entries.get(base, [])]
        if kept is not None:
            entries = list(kept)
        cleaned = self.path(new_base).with_name(self.path(new_base).name + ".cleaned")
        with open(cleaned, "wb") as file:
            file.write(b"".join(e.to_bytes() for e in entries))
            file.flush()
            os.fsync(file.fileno())
        try:
            swap()
        finally:
            cleaned.unlink(missing_ok=True)  # left only when the swap did not start
        for base in old_bases:
            self.entries.pop(base, None)
            if base != new_base:
                self.path(base).unlink(missing_ok=True)
        if entries:
            self.entries[new_base] = entries
        else:
            self.path(new_base).unlink(missing_ok=True)

    def delete_all(self) -> None:
        self.retain(())
        for name in os.listdir(self.directory):
            if _NAME.match(name):
                (self.directory / name).unlink(missing_ok=True)

    def collect(self, fetch_offset: int, upper: int, bases: Iterable[int]) -> list[AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper), from the segments
        at `bases` (oldest first: the one read and those after it)."""
        found: list[AbortedTxn] = []
        for base in bases:
            for entry in self.entries.get(base, ()):
                if entry.last_offset >= fetch_offset and entry.first_offset < upper:
                    found.append(entry)
                if entry.last_stable_offset >= upper:
                    return found
        return found


def record_completed(
    state: ProducerStateManager, indexes: TransactionIndexes, base: int, completed: CompletedTxn
) -> None:
    """A marker in the segment at `base` completed `completed`: index it if aborted
    (with the LSO of that moment) and let it hold the LSO until replicated."""
    if completed.aborted:
        lso = state.lso_for(completed)
        indexes.append(
            base,
            AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, lso),
        )
    state.complete(completed)


def markers_of(records: Records, headers: Sequence[BatchHeader]) -> list[tuple[bool, int] | None]:
    """(commit, coordinator epoch) of each control batch in `records`, None for others."""
    view = memoryview(records)
    markers: list[tuple[bool, int] | None] = []
    position = 0
    for header in headers:
        size = LOG_OVERHEAD + header[1]
        if is_control(header):
            markers.append(read_control_marker(view[position : position + size]))
        else:
            markers.append(None)
        position += size
    return markers


def check_markers(
    state: ProducerStateManager,
    tp: TopicPartition,
    records: Records,
    headers: Sequence[BatchHeader],
) -> None:
    """The coordinator's markers: control batches the producer state accepts
    (ControlBatchError, ProducerStateError otherwise)."""
    for header, marker in zip(headers, markers_of(records, headers), strict=True):
        if marker is None:
            raise ControlBatchError(f"{tp}: a transaction marker must be a control batch")
        state.check_marker(header.producer_id, header.producer_epoch, marker[1])


def record_batches(
    state: ProducerStateManager,
    indexes: TransactionIndexes,
    base: int,
    records: Records,
    headers: Sequence[BatchHeader],
    offsets: Sequence[int],
) -> None:
    """Record batches written (at `offsets`, in the segment at `base`) in the producer
    state; a marker ends its producer's transaction, an ABORT goes to the index."""
    markers = markers_of(records, headers)
    for header, offset, marker in zip(headers, offsets, markers, strict=True):
        if header[9] >= 0:
            completed = state.update(header, offset, marker)
            if completed is not None:
                record_completed(state, indexes, base, completed)
