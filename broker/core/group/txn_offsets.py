"""Transactional offset commits (KIP-98's TxnOffsetCommit, KIP-447): offsets a
transactional producer commits for a group, pending until its transaction ends (Kafka
2.8's `GroupMetadataManager.pendingTransactionalOffsetCommits`), sans-IO.

How it works: `store` writes the offsets to the group's `__consumer_offsets` partition
through `append_txn`, the shell's acks=all append of a transactional batch of the
producer (so a partition's readers and the loader see them as part of its transaction),
and keeps them as pending for (group, producer id) once written: OffsetFetch does not
show them. When the transaction's marker lands on that partition, `complete(partition,
producer_id, committed)` (called through the replica manager's `txn_marker_listeners`)
makes them the group's committed offsets (COMMIT) or drops them (ABORT). Loading replays
the same: `PendingLoader` (metadata_manager.py) keeps each producer's transactional
records until its marker in the log, then applies or drops them; what is still open at
the end is installed as pending. Unloading a partition drops its pending offsets.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker.core.group import offsets_topic as ot
from broker.core.group.group import Group
from broker.core.group.metadata_manager import Done, Records, append_error
from client.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

# append_txn(partition, records, producer_id, producer_epoch, now_ms, done)
AppendTxn = Callable[[int, Records, int, int, int, Done], None]
OffsetsAnswer = Callable[[dict[tuple[str, int], ErrorCode]], None]
Pending = dict[tuple[str, int], ot.OffsetValue]


class TxnOffsets:
    def __init__(self, append_txn: AppendTxn, partition_for: Callable[[str], int]) -> None:
        self._append_txn = append_txn
        self._partition_for = partition_for
        self.pending: dict[str, dict[int, Pending]] = {}  # group -> producer id -> offsets

    def has_pending(self, group_id: str, tp: tuple[str, int] | None = None) -> bool:
        by_pid = self.pending.get(group_id, {})
        return any(tp is None or tp in offsets for offsets in by_pid.values())

    def store(
        self,
        group: Group,
        producer_id: int,
        producer_epoch: int,
        offsets: Pending,
        now_ms: int,
        respond: OffsetsAnswer,
        metadata_max_bytes: int,
    ) -> None:
        results: dict[tuple[str, int], ErrorCode] = {}
        valid: Pending = {}
        for tp, value in offsets.items():
            if len(value.metadata.encode()) > metadata_max_bytes:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = value
        if not valid:
            respond(results)
            return
        records: Records = [
            (ot.offset_key(group.group_id, t, p), ot.encode_offset(v))
            for (t, p), v in valid.items()
        ]

        def stored(code: ErrorCode, now_ms: int) -> None:
            code = append_error(code)
            if code is ErrorCode.NONE:
                by_pid = self.pending.setdefault(group.group_id, {})
                by_pid.setdefault(producer_id, {}).update(valid)
            results.update({tp: code for tp in valid})
            respond(results)

        self._append_txn(
            self._partition_for(group.group_id),
            records,
            producer_id,
            producer_epoch,
            now_ms,
            stored,
        )

    def complete(
        self, partition: int, producer_id: int, committed: bool, groups: dict[str, Group]
    ) -> int:
        """The producer's transaction ended on `partition`: apply (COMMIT) or drop (ABORT)
        its pending offsets there; the number of offsets applied."""
        applied = 0
        for group_id in [g for g in self.pending if self._partition_for(g) == partition]:
            by_pid = self.pending[group_id]
            offsets = by_pid.pop(producer_id, None)
            if not by_pid:
                del self.pending[group_id]
            if offsets is None or not committed:
                continue
            group = groups.get(group_id)
            if group is not None:
                group.offsets.update(offsets)
                applied += len(offsets)
        return applied

    def install(self, loaded: dict[int, dict[str, Pending]]) -> None:
        """Open transactions found by a load."""
        for pid, by_group in loaded.items():
            for group_id, offsets in by_group.items():
                self.pending.setdefault(group_id, {}).setdefault(pid, {}).update(offsets)

    def unload(self, partition: int) -> None:
        for group_id in [g for g in self.pending if self._partition_for(g) == partition]:
            del self.pending[group_id]
