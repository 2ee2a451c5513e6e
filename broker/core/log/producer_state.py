"""Idempotent producers' state on one partition (Kafka's ProducerStateManager, KIP-98
without transactions).

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
(what Kafka 2.8 uses for producer state).

No I/O, no clock: times come in as arguments.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import NamedTuple

import crc32c
import msgpack

from client.protocol.errors import ErrorCode
from client.protocol.records import NO_PRODUCER_EPOCH, BatchHeader

__all__ = [
    "NUM_BATCHES_TO_RETAIN",
    "SEQUENCE_MODULUS",
    "BatchMetadata",
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
_SNAPSHOT_VERSION = 1


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


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class ProducerStateEntry:
    """One producer id's epoch and last batches on this partition."""

    __slots__ = ("producer_id", "producer_epoch", "batches", "last_timestamp")

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        batches: Iterable[BatchMetadata] = (),
        last_timestamp: int = -1,
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.batches: deque[BatchMetadata] = deque(batches, maxlen=NUM_BATCHES_TO_RETAIN)
        self.last_timestamp = last_timestamp

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id, self.producer_epoch, self.batches, self.last_timestamp
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
        )

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(pid={self.producer_id}, epoch={self.producer_epoch}, "
            f"batches={list(self.batches)})"
        )


def _seq_range(header: BatchHeader) -> tuple[int, int]:
    first = header.base_sequence
    return first, increment_sequence(first, header.last_offset_delta)


class ProducerStateManager:
    """Every producer's state on one partition, up to `map_end_offset`."""

    def __init__(self, map_end_offset: int = 0) -> None:
        self.entries: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = map_end_offset

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

    # -- recording what was written --------------------------------------------------
    def update(self, header: BatchHeader, first_offset: int | None = None) -> None:
        """Record a batch written at `first_offset` (default: the header's base offset),
        without checks: the leader after `check_append`, followers, recovery."""
        base = header.base_offset if first_offset is None else first_offset
        last_offset = base + header.last_offset_delta
        pid = header.producer_id
        if pid >= 0:
            entry = self.entries.get(pid)
            if entry is None:
                entry = self.entries[pid] = ProducerStateEntry(pid)
            first_seq, last_seq = _seq_range(header)
            if header.producer_epoch >= entry.producer_epoch:
                entry.add(
                    header.producer_epoch,
                    BatchMetadata(first_seq, last_seq, base, last_offset, header.max_timestamp),
                )
        self.map_end_offset = max(self.map_end_offset, last_offset + 1)

    def update_end_offset(self, offset: int) -> None:
        self.map_end_offset = max(self.map_end_offset, offset)

    # -- housekeeping -------------------------------------------------------------------
    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers whose last write is older than `expiration_ms`; how many."""
        doomed = [
            pid
            for pid, entry in self.entries.items()
            if now_ms - entry.last_timestamp >= expiration_ms
        ]
        for pid in doomed:
            del self.entries[pid]
        return len(doomed)

    def clear(self, map_end_offset: int) -> None:
        self.entries.clear()
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
            if version != _SNAPSHOT_VERSION:
                raise SnapshotError(f"unknown snapshot version {version}")
            state = cls(int(end_offset))
            for pid, epoch, last_ts, batches in entries:
                state.entries[pid] = ProducerStateEntry(
                    pid, epoch, (BatchMetadata(*b) for b in batches), last_ts
                )
        except SnapshotError:
            raise
        except (ValueError, TypeError) as exc:
            raise SnapshotError(f"malformed snapshot: {exc}") from None
        return state

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducerStateManager):
            return NotImplemented
        return self.map_end_offset == other.map_end_offset and self.entries == other.entries
