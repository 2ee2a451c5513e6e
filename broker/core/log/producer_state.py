"""Idempotent and transactional producers' state on one partition (Kafka's
ProducerStateManager, KIP-98).

How it works: for every producer id that wrote to the partition, `ProducerStateEntry`
keeps its epoch, the metadata of its last five batches (`NUM_BATCHES_TO_RETAIN`: first
and last sequence, first and last offset, max timestamp) and when it last wrote. The
leader checks each incoming batch with `ProducerStateManager.check_append` before
writing, and records what was written with `update`:

- Case A, duplicate: same epoch and the exact sequence range of one of the five cached
  batches: nothing is written; the caller answers with the cached offsets (Kafka returns
  success with the original base offset).
- Case B, older epoch than the one known: INVALID_PRODUCER_EPOCH.
- Case C, newer epoch: its first sequence must be 0 (else OUT_OF_ORDER_SEQUENCE_NUMBER);
  the entry starts over with the new epoch.
- Case D, same epoch: the first sequence must follow the last one (wrapping from
  2^31-1 to 0, as Kafka's sequences do); a batch wholly at or before the last sequence
  but not in the cache is an old duplicate it cannot place (DUPLICATE_SEQUENCE_NUMBER);
  any other gap is OUT_OF_ORDER_SEQUENCE_NUMBER.
- Case E, an unknown producer id: accepted with any sequence (Kafka 2.8, KIP-360: its
  state may have expired or been removed by retention; the producer cannot be told
  apart from a new one).

Followers and recovery call `update` with what the log holds, without checks (Kafka's
Replication origin), so a follower that becomes leader dedups the same retries.
`map_end_offset` is the offset up to which the state reflects the log. The state is a
plain value: `to_bytes`/`from_bytes` give the snapshot file's contents (Kafka's
`<offset>.snapshot`, with a CRC); `producer_snapshots.py` writes, loads and deletes those
files, and `loader.py` replays the batches after a snapshot (on open and truncation).
`remove_expired` drops producers idle for longer than `transactional.id.expiration.ms`
(what Kafka 2.8 uses for producer state), never one with a transaction open.

Transactions: a producer's first transactional batch opens its transaction here
(`current_txn_first_offset`, and `ongoing_txns`: producer id -> first offset); a control
batch (COMMIT/ABORT marker, `update(..., marker=...)`) closes it and returns a
`CompletedTxn` (a marker without an open transaction completes an empty one at its own
offset, as Kafka). The leader checks a marker first (`check_marker`: an older producer
epoch is INVALID_PRODUCER_EPOCH, an older coordinator epoch than the last marker's
TRANSACTION_COORDINATOR_FENCED), and a plain batch from a producer with a transaction
open is INVALID_TXN_STATE. A completed transaction stays "unreplicated" until the high
watermark passes its marker (`complete`); the first unstable offset is the smallest
first offset of the open and unreplicated transactions, and the last stable offset (LSO)
`last_stable_offset(hw)` is the smaller of it and the HW. `lso_for(completed)` is the LSO
an aborted transaction's `.txnindex` entry records (`txn_index.py`).

No I/O, no clock: times come in as arguments.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import NamedTuple

import crc32c
import msgpack

from client.protocol.errors import ErrorCode
from client.protocol.records import ATTR_TRANSACTIONAL, NO_PRODUCER_EPOCH, BatchHeader

__all__ = [
    "NUM_BATCHES_TO_RETAIN",
    "SEQUENCE_MODULUS",
    "BatchMetadata",
    "CompletedTxn",
    "ProducerStateEntry",
    "ProducerStateError",
    "ProducerStateManager",
    "SnapshotError",
    "increment_sequence",
]

# Kafka's ProducerStateEntry.NumBatchesToRetain: the producer keeps at most five
# requests in flight per connection, so five batches cover every retry it can send.
NUM_BATCHES_TO_RETAIN = 5
# Sequences are non-negative int32 and wrap to 0 after 2^31 - 1.
SEQUENCE_MODULUS = 1 << 31
# Kafka's default transactional.id.expiration.ms (7 days).
DEFAULT_PRODUCER_EXPIRATION_MS = 7 * 24 * 3600 * 1000
_TXN_BIT = ATTR_TRANSACTIONAL
_SNAPSHOT_VERSION = 2  # 2 adds each producer's open transaction and coordinator epoch


def increment_sequence(sequence: int, increment: int) -> int:
    """`sequence + increment`, wrapping at 2^31 (Kafka's DefaultRecordBatch.incrementSequence)."""
    return (sequence + increment) % SEQUENCE_MODULUS


class ProducerStateError(Exception):
    """A batch the producer state refuses; `code` is the error code to answer with."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class SnapshotError(ValueError):
    """A snapshot file's bytes are damaged or not a snapshot."""


class CompletedTxn(NamedTuple):
    """A transaction its marker ended: from `first_offset` to the marker at `last_offset`."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class ProducerStateEntry:
    """One producer id's epoch and last batches on this partition."""

    __slots__ = (
        "producer_id",
        "producer_epoch",
        "batches",
        "last_timestamp",
        "current_txn_first_offset",
        "coordinator_epoch",
    )

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        batches: Iterable[BatchMetadata] = (),
        last_timestamp: int = -1,
        current_txn_first_offset: int = -1,
        coordinator_epoch: int = -1,
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.batches: deque[BatchMetadata] = deque(batches, maxlen=NUM_BATCHES_TO_RETAIN)
        self.last_timestamp = last_timestamp
        # The first offset of the producer's open transaction here; -1: none open.
        self.current_txn_first_offset = current_txn_first_offset
        # The coordinator epoch of the last marker written for this producer.
        self.coordinator_epoch = coordinator_epoch

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            self.batches,
            self.last_timestamp,
            self.current_txn_first_offset,
            self.coordinator_epoch,
        )

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def add(self, epoch: int, batch: BatchMetadata) -> None:
        if epoch != self.producer_epoch:
            self.batches.clear()  # a new epoch starts a new sequence space
            self.producer_epoch = epoch
        self.batches.append(batch)
        self.last_timestamp = max(self.last_timestamp, batch.timestamp)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducerStateEntry):
            return NotImplemented
        return (
            self.producer_id == other.producer_id
            and self.producer_epoch == other.producer_epoch
            and list(self.batches) == list(other.batches)
            and self.last_timestamp == other.last_timestamp
            and self.current_txn_first_offset == other.current_txn_first_offset
            and self.coordinator_epoch == other.coordinator_epoch
        )

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(pid={self.producer_id}, epoch={self.producer_epoch}, "
            f"batches={list(self.batches)}, txn_first={self.current_txn_first_offset}, "
            f"coordinator_epoch={self.coordinator_epoch})"
        )


def _seq_range(header: BatchHeader) -> tuple[int, int]:
    first = header.base_sequence
    return first, increment_sequence(first, header.last_offset_delta)


class ProducerStateManager:
    """Every producer's state on one partition, up to `map_end_offset`."""

    def __init__(self, map_end_offset: int = 0) -> None:
        self.entries: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = map_end_offset
        # Open transactions: producer id -> first offset.
        self.ongoing_txns: dict[int, int] = {}
        # Completed transactions whose marker the HW has not passed yet (by marker offset).
        self.unreplicated_txns: list[CompletedTxn] = []

    # -- the leader's checks ------------------------------------------------------
    def check_append(self, headers: Iterable[BatchHeader]) -> BatchMetadata | None:
        """Check a leader append's batches in order (module docstring, cases A-E).

        Returns the cached metadata of a duplicate batch (Case A: append nothing, answer
        with its offsets), None when every batch may be written; raises
        ProducerStateError otherwise. Changes nothing: call `update` after writing.
        """
        staged: dict[int, ProducerStateEntry] = {}
        for header in headers:
            pid = header.producer_id
            if pid < 0:
                continue
            entry = staged.get(pid) or self.entries.get(pid)
            epoch = header.producer_epoch
            first_seq, last_seq = _seq_range(header)
            if entry is not None:
                duplicate = entry.find_duplicate(epoch, first_seq, last_seq)
                if duplicate is not None:
                    return duplicate  # Case A
                self._check(entry, epoch, first_seq, last_seq)
                if entry.current_txn_first_offset >= 0 and not header.attributes & _TXN_BIT:
                    raise ProducerStateError(
                        ErrorCode.INVALID_TXN_STATE,
                        f"producer {pid}: a non-transactional batch while its transaction "
                        f"from offset {entry.current_txn_first_offset} is open",
                    )
            staged_entry = entry.copy() if entry is not None else ProducerStateEntry(pid)
            # Offsets are not known yet; only sequences matter for the next batch's check.
            staged_entry.add(epoch, BatchMetadata(first_seq, last_seq, -1, -1, -1))
            staged[pid] = staged_entry
        return None

    @staticmethod
    def _check(entry: ProducerStateEntry, epoch: int, first_seq: int, last_seq: int) -> None:
        pid = entry.producer_id
        if epoch < entry.producer_epoch:  # Case B
            raise ProducerStateError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {pid}: epoch {epoch} is older than the last seen epoch "
                f"{entry.producer_epoch}",
            )
        if epoch > entry.producer_epoch:  # Case C
            if first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                raise ProducerStateError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {pid}: a new epoch {epoch} must start at sequence 0, not "
                    f"{first_seq}",
                )
            return
        if not entry.batches:  # Case D
            return
        last = entry.last_seq
        if first_seq == increment_sequence(last, 1):
            return
        # How far the batch lies behind the last sequence, modulo the sequence space.
        behind = (last - last_seq) % SEQUENCE_MODULUS
        if behind < SEQUENCE_MODULUS // 2 and (last - first_seq) % SEQUENCE_MODULUS >= behind:
            raise ProducerStateError(
                ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
                f"producer {pid}: batch with sequences {first_seq}-{last_seq} was already "
                f"written (last sequence {last}) but is no longer in the cache",
            )
        raise ProducerStateError(
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
            f"producer {pid}: out of order sequence {first_seq} (expected "
            f"{increment_sequence(last, 1)})",
        )

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """The leader's checks of a COMMIT/ABORT marker before writing it (Kafka's
        appendEndTxnMarker): ProducerStateError when the producer's epoch is older than
        the one known, or the coordinator's epoch older than the last marker's."""
        entry = self.entries.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.producer_epoch:
            raise ProducerStateError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {producer_id}: marker epoch {producer_epoch} is older than the last "
                f"seen epoch {entry.producer_epoch}",
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise ProducerStateError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"producer {producer_id}: coordinator epoch {coordinator_epoch} is older than "
                f"the last marker's {entry.coordinator_epoch}",
            )

    # -- recording what was written --------------------------------------------------
    def update(
        self,
        header: BatchHeader,
        first_offset: int | None = None,
        marker: tuple[bool, int] | None = None,
    ) -> CompletedTxn | None:
        """Record a batch written at `first_offset` (default: the header's base offset),
        without checks: the leader after `check_append`, followers, recovery. A control
        batch comes with its `marker` (commit, coordinator epoch) and returns the
        transaction it completed (call `complete` with it once it is indexed)."""
        base = header.base_offset if first_offset is None else first_offset
        last_offset = base + header.last_offset_delta
        pid = header.producer_id
        completed = None
        if pid >= 0:
            entry = self.entries.get(pid)
            if entry is None:
                entry = self.entries[pid] = ProducerStateEntry(pid)
            if marker is not None:
                completed = self._end_txn(entry, header, last_offset, marker)
            elif header.producer_epoch >= entry.producer_epoch:
                first_seq, last_seq = _seq_range(header)
                entry.add(
                    header.producer_epoch,
                    BatchMetadata(first_seq, last_seq, base, last_offset, header.max_timestamp),
                )
                if header.attributes & _TXN_BIT and entry.current_txn_first_offset < 0:
                    entry.current_txn_first_offset = base
                    self.ongoing_txns[pid] = base
        self.map_end_offset = max(self.map_end_offset, last_offset + 1)
        return completed

    def _end_txn(
        self,
        entry: ProducerStateEntry,
        header: BatchHeader,
        offset: int,
        marker: tuple[bool, int],
    ) -> CompletedTxn:
        commit, coordinator_epoch = marker
        first = entry.current_txn_first_offset
        if first < 0:
            first = offset  # a marker without an open transaction ends an empty one
        if header.producer_epoch > entry.producer_epoch:
            entry.batches.clear()  # a new epoch starts a new sequence space
            entry.producer_epoch = header.producer_epoch
        entry.current_txn_first_offset = -1
        entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
        entry.last_timestamp = max(entry.last_timestamp, header.max_timestamp)
        self.ongoing_txns.pop(entry.producer_id, None)
        return CompletedTxn(entry.producer_id, first, offset, not commit)

    def lso_for(self, completed: CompletedTxn) -> int:
        """The LSO an aborted transaction's index entry records (Kafka's
        lastStableOffset(completedTxn)): the first offset of the earliest transaction
        still open by another producer, else just past the marker."""
        others = [first for pid, first in self.ongoing_txns.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def complete(self, completed: CompletedTxn) -> None:
        """`completed` is indexed: it holds the LSO until the HW passes its marker."""
        self.unreplicated_txns.append(completed)

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forget the completed transactions whose marker is below the HW now."""
        pending = self.unreplicated_txns
        if pending and pending[0].last_offset < high_watermark:
            self.unreplicated_txns = [t for t in pending if t.last_offset >= high_watermark]

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of the earliest transaction open, or completed with its
        marker not yet below `high_watermark`; None when there is none."""
        pending = self.unreplicated_txns
        if not pending and not self.ongoing_txns:
            return None
        if pending and pending[0].last_offset < high_watermark:
            self.on_high_watermark_updated(high_watermark)
            pending = self.unreplicated_txns
        firsts = [t.first_offset for t in pending]
        if self.ongoing_txns:
            firsts.append(min(self.ongoing_txns.values()))
        return min(firsts) if firsts else None

    def first_open_offset(self) -> int | None:
        """The first offset of the earliest transaction open or not known replicated (no
        HW needed, nothing forgotten: the log cleaner's bound)."""
        firsts = [t.first_offset for t in self.unreplicated_txns]
        firsts.extend(self.ongoing_txns.values())
        return min(firsts) if firsts else None

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO: read_committed consumers read below it (never past the HW)."""
        first = self.first_unstable_offset(high_watermark)
        return high_watermark if first is None else min(first, high_watermark)

    def update_end_offset(self, offset: int) -> None:
        self.map_end_offset = max(self.map_end_offset, offset)

    # -- housekeeping -------------------------------------------------------------------
    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers whose last write is older than `expiration_ms`; how many."""
        doomed = [
            pid
            for pid, entry in self.entries.items()
            if now_ms - entry.last_timestamp >= expiration_ms and entry.current_txn_first_offset < 0
        ]
        for pid in doomed:
            del self.entries[pid]
        return len(doomed)

    def clear(self, map_end_offset: int) -> None:
        self.entries.clear()
        self.ongoing_txns.clear()
        self.unreplicated_txns.clear()
        self.map_end_offset = map_end_offset

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.entries.get(producer_id)

    # -- snapshots ----------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """The snapshot: msgpack [version, map_end_offset, entries], then a CRC-32C."""
        body = msgpack.packb(
            [
                _SNAPSHOT_VERSION,
                self.map_end_offset,
                [
                    [
                        e.producer_id,
                        e.producer_epoch,
                        e.last_timestamp,
                        [list(b) for b in e.batches],
                        e.current_txn_first_offset,
                        e.coordinator_epoch,
                    ]
                    for e in self.entries.values()
                ],
            ]
        )
        return body + crc32c.crc32c(body).to_bytes(4, "big")

    @classmethod
    def from_bytes(cls, data: bytes) -> ProducerStateManager:
        if len(data) < 5:
            raise SnapshotError("snapshot too short")
        body, crc = data[:-4], int.from_bytes(data[-4:], "big")
        if crc32c.crc32c(body) != crc:
            raise SnapshotError("snapshot CRC mismatch")
        try:
            version, end_offset, entries = msgpack.unpackb(body)
            if version not in (1, _SNAPSHOT_VERSION):
                raise SnapshotError(f"unknown snapshot version {version}")
            state = cls(int(end_offset))
            for pid, epoch, last_ts, batches, *txn in entries:
                first, coordinator_epoch = txn if version >= 2 else (-1, -1)
                state.entries[pid] = ProducerStateEntry(
                    pid,
                    epoch,
                    (BatchMetadata(*b) for b in batches),
                    last_ts,
                    first,
                    coordinator_epoch,
                )
                if first >= 0:
                    state.ongoing_txns[pid] = first
        except SnapshotError:
            raise
        except (ValueError, TypeError) as exc:
            raise SnapshotError(f"malformed snapshot: {exc}") from None
        return state

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducerStateManager):
            return NotImplemented
        return self.map_end_offset == other.map_end_offset and self.entries == other.entries
