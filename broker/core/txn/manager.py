"""The transactional ids this broker coordinates, and their writes to `__transaction_state`.

How it works (Kafka 2.8's TransactionStateManager): a broker coordinates the ids of the
`__transaction_state` partitions it leads. When it becomes leader the shell calls
`begin_loading(partition, coordinator_epoch)` (the partition's leader epoch: the markers
carry it so a partition leader can refuse a stale coordinator), feeds the records it reads
to a `StateLoader` and calls `finish_loading`, which installs the ids (the latest record of
each wins; a tombstone removes it) and returns them. While loading, requests for its ids
are answered COORDINATOR_LOAD_IN_PROGRESS; for ids of partitions not led here,
NOT_COORDINATOR. `unload` drops a partition's ids at once.

`write` holds a state change as pending (`TransactionMetadata.prepare`), appends the
record through the `append` callable the shell gives (acks=all) and, when the ISR has it,
applies it. An answer arriving after the partition was unloaded or reloaded (another
coordinator epoch) is NOT_COORDINATOR and changes nothing; append errors are mapped as
Kafka maps them.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable

from broker.core.txn import state_log
from broker.core.txn.config import TxnConfig
from broker.core.txn.metadata import StateValue, TransactionMetadata
from client.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

# append(partition, key, value or None for a tombstone, now_ms, done(error_code))
Append = Callable[[int, bytes, bytes | None, int, Callable[[ErrorCode], None]], None]
WriteDone = Callable[[ErrorCode], None]

_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}


def append_error(code: ErrorCode) -> ErrorCode:
    """The coordinator's answer for a failed `__transaction_state` append."""
    return _APPEND_ERRORS.get(code, ErrorCode.UNKNOWN_SERVER_ERROR)


class StateLoader:
    """The latest value of each transactional id read from one partition."""

    def __init__(self) -> None:
        self.values: dict[str, StateValue | None] = {}
        self.skipped = 0

    def add(self, key: bytes | None, value: bytes | None) -> None:
        try:
            tid = state_log.decode_key(key)
            self.values[tid] = state_log.decode_value(value)
        except state_log.BadStateRecord as exc:
            self.skipped += 1
            log.warning("skipping a %s record: %s", state_log.TRANSACTION_STATE_TOPIC, exc)


class TxnStateManager:
    def __init__(self, config: TxnConfig, append: Append) -> None:
        self.config = config
        self._append = append
        self.txns: dict[str, TransactionMetadata] = {}
        self.owned: dict[int, int] = {}  # partition -> coordinator epoch (loaded)
        self._loading: dict[int, tuple[int, int]] = {}  # partition -> (token, epoch)
        self._tokens = itertools.count(1)

    def partition_for(self, transactional_id: str) -> int:
        return state_log.partition_for(transactional_id, self.config.state_partitions)

    def status(self, transactional_id: str) -> ErrorCode:
        """NONE if this broker answers for the id now."""
        p = self.partition_for(transactional_id)
        if p in self.owned:
            return ErrorCode.NONE
        if p in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    def coordinator_epoch(self, transactional_id: str) -> int | None:
        return self.owned.get(self.partition_for(transactional_id))

    @property
    def loading(self) -> bool:
        return bool(self._loading)

    # -- loading ---------------------------------------------------------------------------
    def begin_loading(self, partition: int, coordinator_epoch: int) -> int:
        self.unload(partition)
        token = next(self._tokens)
        self._loading[partition] = (token, coordinator_epoch)
        return token

    def is_loading(self, partition: int, token: int) -> bool:
        entry = self._loading.get(partition)
        return entry is not None and entry[0] == token

    def finish_loading(
        self, partition: int, token: int, loader: StateLoader
    ) -> list[TransactionMetadata] | None:
        """Install what was loaded; None if the load was superseded or cancelled."""
        if not self.is_loading(partition, token):
            return None
        _, epoch = self._loading.pop(partition)
        installed = []
        for tid, value in loader.values.items():
            if value is None or self.partition_for(tid) != partition:
                continue
            md = TransactionMetadata.loaded(tid, value)
            self.txns[tid] = md
            installed.append(md)
        self.owned[partition] = epoch
        return installed

    def unload(self, partition: int) -> int:
        self._loading.pop(partition, None)
        self.owned.pop(partition, None)
        gone = [tid for tid in self.txns if self.partition_for(tid) == partition]
        for tid in gone:
            del self.txns[tid]
        return len(gone)

    def owned_txns(self) -> list[TransactionMetadata]:
        return list(self.txns.values())

    # -- writes ----------------------------------------------------------------------------
    def write(
        self, md: TransactionMetadata, target: StateValue, now_ms: int, done: WriteDone
    ) -> None:
        """Append `target` for `md` and apply it once written (pending meanwhile)."""
        p = self.partition_for(md.transactional_id)
        epoch = self.owned.get(p)
        if epoch is None:
            done(self.status(md.transactional_id))
            return
        md.prepare(target)
        tombstone = target.state.name == "DEAD"
        value = None if tombstone else state_log.encode_value(target)

        def written(code: ErrorCode) -> None:
            if self.owned.get(p) != epoch or self.txns.get(md.transactional_id) is not md:
                done(ErrorCode.NOT_COORDINATOR)  # unloaded or reloaded meanwhile
                return
            if code != ErrorCode.NONE:
                md.abandon()
                done(append_error(code))
                return
            md.complete(target)
            if tombstone:
                del self.txns[md.transactional_id]
            done(ErrorCode.NONE)

        self._append(p, state_log.encode_key(md.transactional_id), value, now_ms, written)
