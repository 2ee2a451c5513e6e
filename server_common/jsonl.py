"""Append-only JSON-lines files: the events and metrics records servers leave for the
Spark analytics (`events.jsonl`, `metrics.jsonl`, `controller-events.jsonl`).

How it works: `JsonLinesFile(path)` opens the file for appending, line-buffered (each
record reaches the OS when written, so a killed process leaves whole lines), and
`append(record)` writes one compact JSON object per line. A failing disk never stops a
server: a file that cannot be opened or a line that cannot be written is logged and
dropped. `wall_clock_ms()` is the timestamp servers put in records.

Rotation by size: once the file reaches `max_bytes` it is renamed `<name>.1` (an older
`.1` becomes `.2`, and so on; the one beyond `keep` is deleted) and a new file is
started, so a long-running broker keeps at most (keep + 1) x max_bytes of each. Both
numbers are server configs (`ROTATION_CONFIG_KEYS`, in the broker's and the controller's
config; `Rotation.from_config` reads them): `jsonl.file.max.bytes` and
`jsonl.file.backups`.
Readers of the live file (the Spark job) see the newest records; rotated ones stay
beside it for as long as they are kept.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from server_common.properties import ConfigKey, at_least

log = logging.getLogger(__name__)


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


# A few hours of a busy local broker's metrics snapshots (about 3 MB per 25 minutes).
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
DEFAULT_KEEP = 3  # rotated files kept beside the live one

# Kafka has no such files, so no names to keep: these follow log4j's RollingFileAppender
# (MaxFileSize, MaxBackupIndex), which Kafka's own server logs use.
ROTATION_CONFIG_KEYS = [
    ConfigKey(
        "jsonl.file.max.bytes",
        "int",
        DEFAULT_MAX_BYTES,
        "rotate events.jsonl / metrics.jsonl / controller-events.jsonl at this size",
        at_least(1024),
    ),
    ConfigKey(
        "jsonl.file.backups",
        "int",
        DEFAULT_KEEP,
        "rotated JSON-lines files kept beside the live one (<name>.1 is the newest)",
        at_least(0),
    ),
]


@dataclass(frozen=True)
class Rotation:
    max_bytes: int = DEFAULT_MAX_BYTES
    keep: int = DEFAULT_KEEP

    @classmethod
    def from_config(cls, config) -> Rotation:
        return cls(config["jsonl.file.max.bytes"], config["jsonl.file.backups"])

    def open(self, path: Path) -> JsonLinesFile:
        return JsonLinesFile(path, self.max_bytes, self.keep)


class JsonLinesFile:
    def __init__(self, path: Path, max_bytes: int = DEFAULT_MAX_BYTES, keep: int = DEFAULT_KEEP):
        self.path = path
        self.max_bytes = max_bytes
        self.keep = keep
        self._file: TextIO | None = None
        self._size = 0
        self._open()

    def _open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", buffering=1)  # noqa: SIM115 - lives with the server
            self._size = self._file.tell()
        except OSError as exc:
            log.warning("cannot open %s (%s): its records will not be written", self.path, exc)

    def append(self, record: dict[str, Any]) -> None:
        if self._file is None:
            return
        try:
            line = json.dumps(record, separators=(",", ":")) + "\n"
            self._file.write(line)
            self._size += len(line)
        except (OSError, ValueError, TypeError):
            log.warning("could not write a record to %s", self.path)
            return
        if self._size >= self.max_bytes:
            self._rotate()

    def _rotate(self) -> None:
        """`name` -> `name.1` -> ... -> `name.<keep>` (dropped beyond), then a new file."""
        self.close()
        try:
            rotated = [self.path.with_name(f"{self.path.name}.{n}") for n in range(self.keep + 1)]
            rotated[0] = self.path
            if self.keep < 1:
                self.path.unlink(missing_ok=True)
            else:
                rotated[-1].unlink(missing_ok=True)
                for n in range(self.keep - 1, -1, -1):
                    if rotated[n].exists():
                        rotated[n].rename(rotated[n + 1])
        except OSError as exc:
            log.warning("cannot rotate %s (%s); appending to it", self.path, exc)
        self._open()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
