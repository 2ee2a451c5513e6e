"""The producer-state snapshot files of one partition directory (the file half of
Kafka's `ProducerStateManager`; the state itself is `producer_state.py`, a plain value).

How it works: a snapshot is `<offset, 20 digits>.snapshot` beside the segments, holding
`ProducerStateManager.to_bytes()` of the state at that offset (the log end offset when it
was taken). The log takes one when a segment rolls and when it closes cleanly (`write`:
written to `.tmp` and renamed into place; the newest `SNAPSHOTS_RETAINED` are kept).
Recovery and truncation ask `load_newest(end)` for the newest readable snapshot at or
below the log end: newer ones are deleted (they describe offsets the log no longer
holds), as are unreadable ones (with a warning); the loader (`loader.py`) replays the
batches after it. Retention deletes snapshots below the log start offset
(`delete_below`), a full truncation all of them (`delete_all`).
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from broker.core.log.producer_state import ProducerStateManager, SnapshotError

__all__ = ["SNAPSHOT_SUFFIX", "SNAPSHOTS_RETAINED", "ProducerSnapshots"]

logger = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOT_NAME = re.compile(r"^(\d{20})\.snapshot$")
# Producer state snapshots kept (Kafka keeps those above the log start offset; two are
# enough to survive one damaged file).
SNAPSHOTS_RETAINED = 2


class ProducerSnapshots:
    """The `<offset>.snapshot` files in `directory`; `name` labels log lines."""

    def __init__(self, directory: Path, name: str) -> None:
        self.directory = directory
        self.name = name

    def offsets(self) -> list[int]:
        """The offsets of the snapshots on disk, oldest first."""
        return sorted(
            int(m.group(1))
            for m in map(_SNAPSHOT_NAME.match, os.listdir(self.directory))
            if m is not None
        )

    def path(self, offset: int) -> Path:
        return self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def write(self, state: ProducerStateManager, end_offset: int) -> bool:
        """Snapshot `state` at `end_offset` (the LEO), empty or not (as Kafka does: a
        snapshot spares the next start or truncation a scan of the log from its start);
        keep the newest `SNAPSHOTS_RETAINED`. False when one at that offset exists."""
        offsets = self.offsets()
        if offsets and offsets[-1] == end_offset:
            return False
        state.update_end_offset(end_offset)
        path = self.path(end_offset)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(state.to_bytes())
        os.replace(tmp, path)
        for offset in offsets[: max(0, len(offsets) + 1 - SNAPSHOTS_RETAINED)]:
            self.path(offset).unlink(missing_ok=True)
        return True

    def load_newest(self, end: int) -> ProducerStateManager | None:
        """The state of the newest readable snapshot at or below `end` (its
        `map_end_offset` set to the snapshot's offset); newer and unreadable snapshots
        are deleted. None when there is none."""
        for offset in reversed(self.offsets()):
            path = self.path(offset)
            if offset > end:
                path.unlink(missing_ok=True)
                continue
            try:
                state = ProducerStateManager.from_bytes(path.read_bytes())
            except (OSError, SnapshotError) as exc:
                logger.warning("Log %s: ignoring snapshot %s: %s", self.name, path.name, exc)
                path.unlink(missing_ok=True)
                continue
            state.map_end_offset = offset
            return state
        return None

    def delete_below(self, offset: int) -> None:
        """Delete the snapshots below `offset` (the new log start offset)."""
        for found in self.offsets():
            if found < offset:
                self.path(found).unlink(missing_ok=True)

    def delete_all(self) -> None:
        for found in self.offsets():
            self.path(found).unlink(missing_ok=True)
