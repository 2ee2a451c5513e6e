"""What one cleaning pass does with transactions (Kafka's CleanedTransactionMetadata and
the producer-retention part of its cleaner's batch filter).

How it works: the cleaner shows every batch of the segments it rewrites, in offset
order, to `CleanedTransactions`, which is given the aborted transactions of the log's
`.txnindex` (sorted by first offset) and, per producer in the producer state, its last
record (Kafka's lastRecordsOfActiveProducers). An aborted transaction becomes "ongoing"
once a batch at or after its first offset is read; a data batch of an ongoing aborted
transaction is discarded (`on_batch` returns True) and noted as seen; a transactional
batch of any other producer marks that producer's transaction as committed-and-seen.
A marker (`on_marker`) ends its producer's transaction and says whether it may go:

- an ABORT marker may go once no batch of its transaction was read in this pass (the
  pass that removes them keeps it; the next one, if nothing was kept, may drop it);
- a COMMIT marker likewise: once no batch of its transaction was read in this pass,
  i.e. every record of it was superseded or removed by an earlier pass;
- any other control batch (unknown type, damaged) always stays.

The cleaner removes an eligible marker only past the delete horizon (the tombstones'
one) and never the last record of a producer (`is_last_of_producer`: the batch holding
its last data offset, or, when it has none, its last marker with its current epoch),
which keeps idempotent producers' sequences and epochs across cleaning and recovery.
Every ABORT marker kept goes with its `.txnindex` entry into the cleaned segment
(`keep_abort`/`take_kept`), so the cleaned index lists exactly the aborted transactions
whose marker is still in the log.

No I/O, no clock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping

from broker.core.log.producer_state import ProducerStateEntry
from broker.core.log.txn_index import AbortedTxn
from client.protocol.records import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    BatchHeader,
    InvalidRecordError,
    read_control_marker,
)

__all__ = ["CleanedTransactions", "LastRecord", "last_records_of", "marker_kind"]

# A producer's last record: (last data offset or None, producer epoch).
LastRecord = tuple[int | None, int]


def last_records_of(entries: Mapping[int, ProducerStateEntry]) -> dict[int, LastRecord]:
    """Kafka's lastRecordsOfActiveProducers over the producer state's entries."""
    return {
        pid: (entry.last_offset if entry.batches else None, entry.producer_epoch)
        for pid, entry in entries.items()
    }


def marker_kind(batch: bytes | bytearray | memoryview) -> bool | None:
    """True for a COMMIT marker, False for an ABORT, None for any other control batch."""
    try:
        return read_control_marker(batch)[0]
    except InvalidRecordError:
        return None


class CleanedTransactions:
    """The transactions met by one cleaning pass (see the module docstring)."""

    def __init__(self, aborted: Iterable[AbortedTxn], last_records: dict[int, LastRecord]) -> None:
        self._pending = deque(sorted(set(aborted), key=lambda t: t.first_offset))
        self._last_records = last_records
        self._ongoing_aborted: dict[int, AbortedTxn] = {}  # by producer id
        self._seen_aborted: set[int] = set()  # producers whose ongoing one had a batch read
        self._ongoing_committed: set[int] = set()
        self._kept: list[AbortedTxn] = []

    def _start_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0].first_offset <= offset:
            txn = pending.popleft()
            self._ongoing_aborted.setdefault(txn.producer_id, txn)

    def on_batch(self, header: BatchHeader) -> bool:
        """A data batch read: True when it belongs to an aborted transaction (discard)."""
        last = header.base_offset + header.last_offset_delta
        self._start_up_to(last)
        if not header.attributes & ATTR_TRANSACTIONAL:
            return False
        if header.producer_id in self._ongoing_aborted:
            self._seen_aborted.add(header.producer_id)
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_marker(self, header: BatchHeader, commit: bool | None) -> bool:
        """A control batch read (`commit`: `marker_kind`): True when it may be removed."""
        self._start_up_to(header.base_offset + header.last_offset_delta)
        pid = header.producer_id
        if commit is None:
            return False
        if commit:
            seen = pid in self._ongoing_committed
            self._ongoing_committed.discard(pid)
            return not seen
        self._ongoing_aborted.pop(pid, None)
        seen = pid in self._seen_aborted
        self._seen_aborted.discard(pid)
        return not seen

    def is_last_of_producer(self, header: BatchHeader) -> bool:
        """The batch holds its producer's last record (Kafka's isBatchLastRecordOfProducer)."""
        if header.producer_id < 0:
            return False
        last = self._last_records.get(header.producer_id)
        if last is None:
            return False
        data_offset, epoch = last
        if data_offset is not None:
            return header.base_offset + header.last_offset_delta == data_offset
        return bool(header.attributes & ATTR_CONTROL) and header.producer_epoch == epoch

    def keep_abort(
        self, header: BatchHeader, entries: Mapping[tuple[int, int], AbortedTxn]
    ) -> None:
        """An ABORT marker stays: its `.txnindex` entry goes to the cleaned segment."""
        entry = entries.get((header.producer_id, header.base_offset))
        if entry is not None:
            self._kept.append(entry)

    def take_kept(self) -> list[AbortedTxn]:
        """The entries of the ABORT markers kept since the last call (one cleaned segment)."""
        kept, self._kept = self._kept, []
        return kept
