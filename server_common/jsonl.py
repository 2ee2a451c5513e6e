"""Append-only JSON-lines files: the events and metrics records servers leave for the
Spark analytics (`events.jsonl`, `metrics.jsonl`, `controller-events.jsonl`).

How it works: `JsonLinesFile(path)` opens the file for appending, line-buffered (each
record reaches the OS when written, so a killed process leaves whole lines), and
`append(record)` writes one compact JSON object per line. A failing disk never stops a
server: a file that cannot be opened or a line that cannot be written is logged and
dropped. `wall_clock_ms()` is the timestamp servers put in records.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class JsonLinesFile:
    def __init__(self, path: Path):
        self.path = path
        self._file = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "a", buffering=1)  # noqa: SIM115 - lives with the server
        except OSError as exc:
            log.warning("cannot open %s (%s): its records will not be written", path, exc)

    def append(self, record: dict[str, Any]) -> None:
        if self._file is None:
            return
        try:
            self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
        except (OSError, ValueError, TypeError):
            log.warning("could not write a record to %s", self.path)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
