"""Checkpoint files in Kafka's text format, written atomically.

How it works: every checkpoint is a version line (`0`), a count line, then one entry per
line (`<topic> <partition> <offset>` for offset checkpoints, `<epoch> <start offset>` for
the leader-epoch checkpoint). `write_atomically` writes a temp file in the same directory,
fsyncs it, renames it over the target and fsyncs the directory, so a crash leaves either
the old or the new file, never half of one. Reading a missing file gives an empty result;
reading a malformed one raises `CheckpointError` naming the file and the line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TypeVar

from broker.core.log.errors import CheckpointError
from client.protocol.types import TopicPartition

__all__ = [
    "LeaderEpochCheckpointFile",
    "OffsetCheckpointFile",
    "fsync_dir",
    "write_atomically",
]

CHECKPOINT_VERSION = 0
_T = TypeVar("_T")


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Make a rename or a new file in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str | os.PathLike[str], text: str, *, durable: bool = True) -> None:
    """Replace `path` by `text`: temp file, fsync, rename, fsync the directory (without
    the fsyncs when not `durable`: the caller syncs the file and directory later)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    data = text.encode("utf-8")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


def _parse_entries(path: Path, parse_line: Callable[[list[str]], _T]) -> list[_T]:
    """The entries of a version-0 checkpoint file; [] when the file does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path}: unreadable checkpoint: {exc}") from exc
    lines = text.splitlines()
    if not lines:
        raise CheckpointError(f"{path}: line 1: empty file, expected version {CHECKPOINT_VERSION}")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CheckpointError(
            f"{path}: line 1: unsupported version {lines[0]!r}, expected {CHECKPOINT_VERSION}"
        )
    if len(lines) < 2:
        raise CheckpointError(f"{path}: line 2: missing entry count")
    try:
        count = int(lines[1].strip())
    except ValueError:
        raise CheckpointError(
            f"{path}: line 2: entry count {lines[1]!r} is not an integer"
        ) from None
    if count < 0:
        raise CheckpointError(f"{path}: line 2: negative entry count {count}")
    body = lines[2:]
    entries = []
    for number, line in enumerate(body, start=3):
        try:
            entries.append(parse_line(line.split()))
        except (ValueError, IndexError) as exc:
            raise CheckpointError(f"{path}: line {number}: {line!r}: {exc}") from None
    if len(body) != count:
        raise CheckpointError(
            f"{path}: line {len(lines) + 1}: expected {count} entries, found {len(body)}"
        )
    return entries


def _render(entries: list[str]) -> str:
    return f"{CHECKPOINT_VERSION}\n{len(entries)}\n" + "".join(line + "\n" for line in entries)


def _parse_offset_line(fields: list[str]) -> tuple[TopicPartition, int]:
    if len(fields) != 3:
        raise ValueError(f"expected '<topic> <partition> <offset>', got {len(fields)} fields")
    topic, partition, offset = fields
    return TopicPartition(topic, int(partition)), int(offset)


def _parse_epoch_line(fields: list[str]) -> tuple[int, int]:
    if len(fields) != 2:
        raise ValueError(f"expected '<epoch> <start offset>', got {len(fields)} fields")
    epoch, offset = int(fields[0]), int(fields[1])
    if epoch < 0 or offset < 0:
        raise ValueError("epoch and start offset must not be negative")
    return epoch, offset


class OffsetCheckpointFile:
    """`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
    `replication-offset-checkpoint`: an offset per topic-partition."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        lines = [
            f"{tp.topic} {tp.partition} {offset}"
            for tp, offset in sorted(offsets.items(), key=lambda item: tuple(item[0]))
        ]
        write_atomically(self.path, _render(lines))

    def read(self) -> dict[TopicPartition, int]:
        """The checkpointed offsets; {} if the file is missing; CheckpointError if bad."""
        return dict(_parse_entries(self.path, _parse_offset_line))


class LeaderEpochCheckpointFile:
    """A partition's `leader-epoch-checkpoint`: (epoch, start offset) pairs.

    With `sync_later` a write replaces the file atomically but without fsyncs (a new
    epoch's first append must not wait for the disk), and `take_unsynced_descriptor`
    hands the owner a descriptor to fsync, with the directory, when it next flushes the
    log. That is soon enough: after a crash, entries for offsets past the recovery point
    are rebuilt from the recovered batches, and a torn file from the log itself."""

    def __init__(self, path: str | os.PathLike[str], *, sync_later: bool = False) -> None:
        self.path = Path(path)
        self._sync_later = sync_later
        self._unsynced = False

    def write(self, entries: Iterable[tuple[int, int]]) -> None:
        text = _render([f"{epoch} {offset}" for epoch, offset in entries])
        write_atomically(self.path, text, durable=not self._sync_later)
        self._unsynced = self._sync_later

    def take_unsynced_descriptor(self) -> int | None:
        """A read-only descriptor of the file if a write has not been synced yet (then it
        counts as synced: the caller fsyncs and closes it, and the directory), else None."""
        if not self._unsynced:
            return None
        self._unsynced = False
        return os.open(self.path, os.O_RDONLY)

    def mark_unsynced(self) -> None:
        """A sync of a taken descriptor failed: hand it out again next time."""
        self._unsynced = True

    def read(self) -> list[tuple[int, int]]:
        """The checkpointed entries; [] if the file is missing; CheckpointError if bad."""
        return _parse_entries(self.path, _parse_epoch_line)
