"""The leader-epoch cache: which leader epoch started at which offset (KIP-101/279).

How it works: two parallel sorted lists hold the entries (epoch, start offset), strictly
increasing in both. The leader adds an entry when it appends the first batch of a new
epoch; a follower adds one when it copies the first batch stamped with a new epoch.
`end_offset_for` answers OffsetForLeaderEpoch: where did the requested epoch end, as
this replica sees it, so that a new follower truncates to the point where its log and the
leader's agree (rather than to its high watermark). Truncating the log from the end or
the start truncates the cache to match. Every change is persisted at once to
`leader-epoch-checkpoint` (atomically) when the cache has a checkpoint file; a log's
checkpoint is fsynced with the log's next flush (`take_unsynced_checkpoint`).
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable
from typing import NamedTuple

from broker.core.log.checkpoint import LeaderEpochCheckpointFile

__all__ = ["UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET", "EpochEntry", "LeaderEpochCache"]

logger = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """Epoch -> start offset entries of one partition replica."""

    def __init__(
        self,
        checkpoint: LeaderEpochCheckpointFile | None = None,
        entries: Iterable[tuple[int, int]] = (),
        *,
        name: str = "",
    ) -> None:
        self._checkpoint = checkpoint
        self._name = name
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        for epoch, start_offset in entries:
            self._assign(EpochEntry(epoch, start_offset))

    # ------------------------------------------------------------------ queries

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(map(EpochEntry, self._epochs, self._offsets))

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[-1], self._offsets[-1]) if self._epochs else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[0], self._offsets[0]) if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch the record at `offset` was written in, if the cache covers it."""
        index = bisect.bisect_right(self._offsets, offset) - 1
        return self._epochs[index] if index >= 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for an OffsetForLeaderEpoch request, as Kafka 2.8 answers.

        Case A: requested is UNDEFINED or the cache is empty -> (-1, -1).
        Case B: requested is the latest epoch -> (requested, log_end_offset): the epoch
                is still being written.
        Case C: requested is above every epoch -> (-1, -1) (cannot happen on a leader).
        Case D: requested is below the first epoch -> (requested, start of the first
                epoch): the older history is gone; replicate from there.
        Case E: otherwise -> (largest epoch <= requested, start of the next higher
                epoch): where the requested epoch's history ends.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET  # Case A
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset  # Case B
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET  # Case C
        if higher == 0:
            return requested_epoch, self._offsets[0]  # Case D
        return self._epochs[higher - 1], self._offsets[higher]  # Case E

    # ------------------------------------------------------------------ changes

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; returns whether the cache changed.

        As Kafka: the same epoch at a later offset is ignored; entries that would break
        monotonicity (epoch >= the new one, or start offset >= the new one) are dropped.
        """
        changed = self._assign(EpochEntry(epoch, start_offset))
        if changed:
            self._persist()
        return changed

    def assign_if_newer(self, epoch: int, start_offset: int) -> bool:
        """`assign` when `epoch` is above every epoch known (an append's batch of a new
        epoch; the appends of a known one change nothing); returns whether it did."""
        if epoch < 0 or (self._epochs and epoch <= self._epochs[-1]):
            return False
        return self.assign(epoch, start_offset)

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop entries starting at or after `end_offset` (the log was cut there)."""
        if end_offset < 0 or not self._offsets or self._offsets[-1] < end_offset:
            return False
        keep = bisect.bisect_left(self._offsets, end_offset)
        del self._epochs[keep:]
        del self._offsets[keep:]
        self._persist()
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """Forget history before `start_offset` (the log start moved up to it).

        Entries starting at or before it go; the last of them is kept with its start
        moved up to `start_offset`, since its epoch still covers the offsets there.
        """
        if start_offset < 0 or not self._offsets or self._offsets[0] >= start_offset:
            return False
        removed = bisect.bisect_right(self._offsets, start_offset)
        last_epoch = self._epochs[removed - 1]
        del self._epochs[:removed]
        del self._offsets[:removed]
        self._epochs.insert(0, last_epoch)
        self._offsets.insert(0, start_offset)
        self._persist()
        return True

    def clear(self) -> None:
        """Drop every entry (the log was truncated fully)."""
        if self._epochs:
            self._epochs.clear()
            self._offsets.clear()
            self._persist()

    # ------------------------------------------------------------------ internals

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"leader epoch entry {entry} has a negative field")
        if self._epochs:
            last_epoch, last_offset = self._epochs[-1], self._offsets[-1]
            if entry.epoch == last_epoch and entry.start_offset >= last_offset:
                return False
        removed: list[EpochEntry] = []
        while self._epochs and (
            self._epochs[-1] >= entry.epoch or self._offsets[-1] >= entry.start_offset
        ):
            removed.append(EpochEntry(self._epochs.pop(), self._offsets.pop()))
        if len(removed) > 1 or (removed and removed[0].start_offset != entry.start_offset):
            logger.warning(
                "Leader epoch cache %s: new entry %s replaced non-monotonic entries %s",
                self._name,
                tuple(entry),
                [tuple(e) for e in reversed(removed)],
            )
        self._epochs.append(entry.epoch)
        self._offsets.append(entry.start_offset)
        return True

    def take_unsynced_checkpoint(self) -> int | None:
        """A descriptor of the checkpoint file to fsync if it was written without (see
        `LeaderEpochCheckpointFile`), else None; the caller closes it."""
        return None if self._checkpoint is None else self._checkpoint.take_unsynced_descriptor()

    def checkpoint_unsynced(self) -> None:
        """The fsync of a taken descriptor failed."""
        if self._checkpoint is not None:
            self._checkpoint.mark_unsynced()

    def _persist(self) -> None:
        if self._checkpoint is not None:
            self._checkpoint.write(zip(self._epochs, self._offsets, strict=True))
