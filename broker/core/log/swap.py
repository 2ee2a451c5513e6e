"""Putting a cleaned segment in place of old ones so that a crash at any moment leaves
the old segments or the new one, never a mix (Kafka's `.cleaned`/`.swap`/`.deleted`
protocol), and finishing an interrupted replacement when the log opens.

How it works. The cleaner writes the new segment as `<base>.log.cleaned` (with
`<base>.index.cleaned` and `<base>.timeindex.cleaned`), `<base>` being the first old
segment's base offset, and fsyncs it; its aborted transactions go to
`<base>.txnindex.cleaned` (`txn_index.py`). `replace_segment_files` then:
1. renames the new `.txnindex` to `.swap`, then the new segment's files, the log file
   first: that rename is the commit point; fsyncs the directory;
2. renames each old segment's files to `.deleted`;
3. renames the new files to their final names, the `.txnindex` first (replacing the old
   first segment's); fsyncs the directory;
4. deletes the `.deleted` files (the other old segments' `.txnindex` files go with the
   in-memory update, or at the next load, which removes those without a segment).

`recover_interrupted_swaps` runs when a log opens, before its segments are read:
- `.cleaned` files: not committed: deleted (every old segment still has its name);
- `<base>.log.swap`: committed. The old segments it replaces are those whose base offset
  lies in [base, the swap's next offset): the cleaner always ends a new segment with a
  batch covering the last offset of the old ones (an empty batch if none of that batch's
  records survived), so the range is exact (Kafka derives it the same way, without that
  guarantee). What is left of them is deleted and the swap renamed to `<base>.log`. A swap
  file whose batches do not all check out (length, CRC) cannot have been committed whole
  by this code, so it is deleted instead, with a warning, and the old segments stay;
- `<base>.txnindex.swap`: renamed to `<base>.txnindex` when the swap at `<base>` is
  completed (it holds the new segment's aborted transactions), deleted otherwise;
- other index `.swap` files: deleted (the segment rebuilds its indexes when it loads);
- `.deleted` files: deleted (their replacement is in place).
A crash during recovery leaves files that the next recovery handles the same way.

All file-system steps go through a `FileOps` object; tests pass one that fails at the
k-th step to play a crash there.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path

from broker.core.log.checkpoint import fsync_dir
from broker.core.log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    BatchPlacement,
    LogSegment,
    segment_file_name,
)
from broker.core.log.txn_index import TXN_INDEX_SUFFIX
from client.protocol.records import LOG_OVERHEAD, RecordError, validate_batch

__all__ = [
    "CLEANED_SUFFIX",
    "DELETED_SUFFIX",
    "SWAP_SUFFIX",
    "FileOps",
    "recover_interrupted_swaps",
    "replace_segment_files",
]

logger = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
_SEGMENT_FILE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex)$")
# Recovery validates a swap file in chunks of this size (or one batch, if larger).
_SCAN_CHUNK = 8 * 1024 * 1024


class FileOps:
    """The file-system steps of cleaning and replacing segments, one method each."""

    def append(
        self,
        segment: LogSegment,
        buffers: Sequence[bytes | bytearray | memoryview],
        batches: Sequence[BatchPlacement],
    ) -> None:
        segment.append(buffers, batches)

    def flush(self, segment: LogSegment) -> None:
        segment.flush()

    def rename(self, source: Path, target: Path) -> None:
        os.replace(source, target)

    def unlink(self, path: Path) -> None:
        path.unlink(missing_ok=True)

    def fsync_dir(self, directory: Path) -> None:
        fsync_dir(directory)


def replace_segment_files(
    directory: Path, new: LogSegment, old: Sequence[LogSegment], ops: FileOps
) -> None:
    """Steps 1-4 above: `new` (flushed, files suffixed `.cleaned`, and its `.txnindex`
    if written) replaces `old` on disk. The old segments' handles are closed; the new
    segment stays open."""
    txn_index = directory / segment_file_name(new.base_offset, TXN_INDEX_SUFFIX)
    txn_cleaned = txn_index.with_name(txn_index.name + CLEANED_SUFFIX)
    txn_swap = txn_index.with_name(txn_index.name + SWAP_SUFFIX)
    has_txn_index = txn_cleaned.exists()
    if has_txn_index:
        ops.rename(txn_cleaned, txn_swap)
    new.change_file_suffix(CLEANED_SUFFIX, SWAP_SUFFIX, ops.rename)
    ops.fsync_dir(directory)
    for segment in old:
        segment.change_file_suffix("", DELETED_SUFFIX, ops.rename)
    if has_txn_index:
        ops.rename(txn_swap, txn_index)
    new.change_file_suffix(SWAP_SUFFIX, "", ops.rename)
    ops.fsync_dir(directory)
    for segment in old:
        segment.release()
        for path in segment.file_paths():
            ops.unlink(path)


def recover_interrupted_swaps(directory: Path, ops: FileOps | None = None) -> None:
    """Finish or undo what an interrupted replacement left in `directory` (see above)."""
    ops = ops or FileOps()
    names = sorted(os.listdir(directory))
    swaps: list[int] = []
    txn_swaps: set[int] = set()
    for name in names:
        if name.endswith((CLEANED_SUFFIX, DELETED_SUFFIX)):
            logger.info("%s: removing %s left by an interrupted cleaning", directory.name, name)
            ops.unlink(directory / name)
        elif name.endswith(SWAP_SUFFIX):
            match = _SEGMENT_FILE.match(name[: -len(SWAP_SUFFIX)])
            if match is not None and match.group(2) == LOG_SUFFIX:
                swaps.append(int(match.group(1)))
            elif match is not None and match.group(2) == TXN_INDEX_SUFFIX:
                txn_swaps.add(int(match.group(1)))
            else:
                ops.unlink(directory / name)
    for base in txn_swaps - set(swaps):  # not committed: the old segments stay
        ops.unlink(directory / (segment_file_name(base, TXN_INDEX_SUFFIX) + SWAP_SUFFIX))
    if not swaps:
        return
    present = sorted(
        int(m.group(1))
        for m in map(_SEGMENT_FILE.match, os.listdir(directory))
        if m is not None and m.group(2) == LOG_SUFFIX
    )
    for base in swaps:
        swap_path = directory / (segment_file_name(base, LOG_SUFFIX) + SWAP_SUFFIX)
        end = _next_offset_if_valid(swap_path, base)
        if end is None:
            logger.warning(
                "%s: %s is damaged; deleting it and keeping the segments it was to replace",
                directory.name,
                swap_path.name,
            )
            ops.unlink(swap_path)
            if base in txn_swaps:
                ops.unlink(directory / (segment_file_name(base, TXN_INDEX_SUFFIX) + SWAP_SUFFIX))
            continue
        replaced = [b for b in present if base <= b < max(end, base + 1)]
        logger.info(
            "%s: completing an interrupted cleaning: %s replaces segment(s) %s",
            directory.name,
            swap_path.name,
            replaced,
        )
        for old_base in replaced:
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX):
                ops.unlink(directory / segment_file_name(old_base, suffix))
            if old_base != base:
                ops.unlink(directory / segment_file_name(old_base, TXN_INDEX_SUFFIX))
        if base in txn_swaps:
            txn_index = directory / segment_file_name(base, TXN_INDEX_SUFFIX)
            ops.rename(txn_index.with_name(txn_index.name + SWAP_SUFFIX), txn_index)
        ops.rename(swap_path, directory / segment_file_name(base, LOG_SUFFIX))
        ops.fsync_dir(directory)


def _next_offset_if_valid(path: Path, base: int) -> int | None:
    """The offset after the last batch of the segment file `path`, or None when it is
    empty or any batch is torn, corrupt or below `base`."""
    size = path.stat().st_size
    next_offset = None
    position = 0
    with open(path, "rb", buffering=0) as file:
        chunk = b""
        chunk_start = 0
        while position < size:
            rel = position - chunk_start
            if rel + LOG_OVERHEAD > len(chunk):
                chunk = os.pread(file.fileno(), min(_SCAN_CHUNK, size - position), position)
                chunk_start, rel = position, 0
            if rel + LOG_OVERHEAD > len(chunk):
                return None
            length = LOG_OVERHEAD + int.from_bytes(chunk[rel + 8 : rel + 12], "big", signed=True)
            if rel + length > len(chunk):
                chunk = os.pread(file.fileno(), max(length, _SCAN_CHUNK), position)
                chunk_start, rel = position, 0
            try:
                header = validate_batch(chunk, rel, strict=False)
            except RecordError:
                return None
            if header.base_offset < (base if next_offset is None else next_offset):
                return None
            next_offset = header.next_offset
            position += header.size
    return next_offset
