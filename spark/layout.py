"""Finding broker log dirs, partition logs, checkpoints and JSON-lines files on disk.

How it works: `find_log_dirs(root)` walks `root` (never following symlinks) for
partition directories: a directory named `<topic>-<partition>` holding at least one
`<20 digits>.log` segment. Its parent is a broker log dir. So `root` may be one broker's
log dir, a partition dir, the local cluster's directory (`broker-N/data/...`) or any folder
above several brokers' dirs. Directories Kafka leaves behind for deletion
(`<tp>.<uuid>-delete`) or future replicas (`-future`) do not match the name pattern.

A log dir's broker id comes from `meta.properties` (`broker.id=N`), else from a
`broker-N` directory name (the log dir's own, or its parent's, as the launcher lays out
`broker-N/data`), else it is unknown (None).

Everything here tolerates a live cluster: files and directories that vanish or change
while they are listed are skipped, never an exception. `read_checkpoints` returns each
log dir's high watermarks, log start offsets and recovery points (Kafka's checkpoint text
format, read with `broker.core.log.checkpoint`); an unreadable file counts as empty,
logged.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "CONTROLLER_EVENTS_FILE",
    "EVENTS_FILE",
    "METRICS_FILE",
    "CheckpointRow",
    "LogDir",
    "PartitionDir",
    "SegmentFile",
    "broker_id_of",
    "find_files",
    "find_log_dirs",
    "read_checkpoints",
]

logger = logging.getLogger(__name__)

EVENTS_FILE = "events.jsonl"
METRICS_FILE = "metrics.jsonl"
CONTROLLER_EVENTS_FILE = "controller-events.jsonl"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
META_PROPERTIES = "meta.properties"

_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")
_BROKER_DIR = re.compile(r"^broker-(\d+)$")


@dataclass(frozen=True)
class SegmentFile:
    path: str
    base_offset: int
    size: int


@dataclass(frozen=True)
class PartitionDir:
    topic: str
    partition: int
    path: str
    segments: tuple[SegmentFile, ...]


@dataclass
class LogDir:
    path: str
    broker: int | None
    partitions: list[PartitionDir] = field(default_factory=list)


@dataclass(frozen=True)
class CheckpointRow:
    """One partition's checkpointed offsets in one log dir (None: not checkpointed)."""

    log_dir: str
    broker: int | None
    topic: str
    partition: int
    high_watermark: int | None
    log_start_offset: int | None
    recovery_point: int | None


def _read_broker_id(meta: Path) -> int | None:
    try:
        text = meta.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and name.strip() == "broker.id":
            try:
                return int(value.strip())
            except ValueError:
                logger.warning("%s: broker.id %r is not an integer", meta, value.strip())
                return None
    return None


def broker_id_of(log_dir: str | os.PathLike[str]) -> int | None:
    """The broker id of a log dir: meta.properties, else a `broker-N` dir name, else None."""
    path = Path(log_dir)
    broker = _read_broker_id(path / META_PROPERTIES)
    if broker is not None:
        return broker
    for name in (path.name, path.parent.name):
        match = _BROKER_DIR.match(name)
        if match:
            return int(match.group(1))
    return None


def _segments_of(directory: str, names: list[str]) -> tuple[SegmentFile, ...]:
    segments = []
    for name in names:
        match = _SEGMENT_NAME.match(name)
        if match is None:
            continue
        path = os.path.join(directory, name)
        try:
            size = os.path.getsize(path)
        except OSError:
            continue  # deleted while we looked (retention, truncation)
        segments.append(SegmentFile(path, int(match.group(1)), size))
    segments.sort(key=lambda s: s.base_offset)
    return tuple(segments)


def _walk(root: str) -> Iterator[tuple[str, list[str], list[str]]]:
    # onerror=None: unreadable or vanished directories are skipped silently.
    yield from os.walk(root, followlinks=False)


def find_log_dirs(root: str | os.PathLike[str]) -> list[LogDir]:
    """Every broker log dir at or under `root` with its partition logs, sorted by path."""
    root = os.path.abspath(root)
    by_path: dict[str, LogDir] = {}
    for directory, subdirs, files in _walk(root):
        segments = _segments_of(directory, files)
        if not segments:
            continue
        match = _PARTITION_DIR.match(os.path.basename(directory))
        if match is None:
            continue
        subdirs[:] = []  # a partition dir holds no log dirs
        parent = os.path.dirname(directory)
        log_dir = by_path.get(parent)
        if log_dir is None:
            log_dir = by_path[parent] = LogDir(parent, broker_id_of(parent))
        log_dir.partitions.append(
            PartitionDir(match.group(1), int(match.group(2)), directory, segments)
        )
    for log_dir in by_path.values():
        log_dir.partitions.sort(key=lambda p: (p.topic, p.partition))
    return [by_path[path] for path in sorted(by_path)]


def _rotation(file_name: str, name: str) -> int | None:
    """0 for `name` itself, N for its rotated `name.N` (server_common/jsonl.py), else None."""
    if file_name == name:
        return 0
    prefix, _, number = file_name.rpartition(".")
    if prefix == name and number.isdigit() and not number.startswith("0"):
        return int(number)
    return None


def find_files(root: str | os.PathLike[str], name: str) -> list[str]:
    """Every file called `name` at or under `root`, e.g. each broker's events, with the
    rotated ones beside it (`name.1`, `name.2`...: older the higher the number): by
    directory, oldest first (`name.2`, `name.1`, `name`)."""
    root = os.path.abspath(root)
    if os.path.isfile(root):
        return [root] if _rotation(os.path.basename(root), name) is not None else []
    found = []
    for directory, _subdirs, files in _walk(root):
        numbered = [(n, f) for f in files if (n := _rotation(f, name)) is not None]
        for _, file_name in sorted(numbered, reverse=True):
            found.append(os.path.join(directory, file_name))
    return sorted(found, key=lambda path: os.path.dirname(path))


def _read_offsets(path: Path) -> dict:
    # Imported here: only the driver reads checkpoints; executors need not have `broker`.
    from broker.core.log.checkpoint import OffsetCheckpointFile
    from broker.core.log.errors import CheckpointError

    try:
        return OffsetCheckpointFile(path).read()
    except CheckpointError as exc:
        logger.warning("ignoring an unreadable checkpoint: %s", exc)
        return {}
    except OSError as exc:
        logger.warning("cannot read %s (%s); ignored", path, exc)
        return {}


def read_checkpoints(log_dirs: list[LogDir]) -> list[CheckpointRow]:
    """Per log dir and partition log in it: checkpointed HW, log start, recovery point."""
    rows = []
    for log_dir in log_dirs:
        path = Path(log_dir.path)
        hws = _read_offsets(path / HIGH_WATERMARK_CHECKPOINT)
        starts = _read_offsets(path / LOG_START_OFFSET_CHECKPOINT)
        recovery = _read_offsets(path / RECOVERY_POINT_CHECKPOINT)
        for partition in log_dir.partitions:
            key = (partition.topic, partition.partition)
            rows.append(
                CheckpointRow(
                    log_dir.path,
                    log_dir.broker,
                    partition.topic,
                    partition.partition,
                    hws.get(key),
                    starts.get(key),
                    recovery.get(key),
                )
            )
    return rows
