"""The transaction coordinator: the transaction requests' checks and state changes (sans-IO).

How it works (Kafka 2.8's TransactionCoordinator): each request is checked in Kafka's
order (is the id ours and loaded, the producer id and epoch current, no other change of
the id pending) and becomes at most one state change written through
`TxnStateManager.write` (manager.py); the answer goes to the `respond` callable once the
write is acknowledged.

- InitProducerId: a new id gets a producer id (the shell claims it: `needs_producer_id`)
  and epoch 0; a known one gets its epoch bumped (KIP-360's retry with the expected epoch
  is answered without a bump; a stale expected epoch is PRODUCER_FENCED), or a new
  producer id when the epoch is exhausted. An Ongoing transaction of the old epoch is
  aborted first, with the epoch bumped (the epoch fence: the old producer is a zombie
  whose later requests are PRODUCER_FENCED), and the caller told to retry
  (CONCURRENT_TRANSACTIONS).
- AddPartitionsToTxn / AddOffsetsToTxn: Ongoing with the partitions added; `verify`
  answers KIP-890's question (is the partition in the ongoing transaction?) adding
  nothing.
- EndTxn: PrepareCommit/PrepareAbort written, the producer answered, then the markers
  are handed to the shell (`send_markers`, a `MarkerJob`); `markers_written` completes
  the transaction (CompleteCommit/CompleteAbort). A new coordinator resends the markers
  of every PrepareX transaction it loads.
- `abort_timed_out` aborts Ongoing transactions older than their timeout (with the epoch
  fence); `expire_ids` removes ids idle past `transactional.id.expiration.ms`
  (a tombstone).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from broker.core.txn.config import TxnConfig
from broker.core.txn.manager import Append, StateLoader, TxnStateManager
from broker.core.txn.metadata import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    StateValue,
    TransactionMetadata,
    TxnState,
)
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition

log = logging.getLogger(__name__)

S = TxnState
NO_PRODUCER_ID = -1
MAX_ID_BYTES = 32767  # the record format's int16 string length
InitRespond = Callable[[ErrorCode, int, int], None]
Respond = Callable[[ErrorCode], None]


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """Markers to write: one control batch per partition, for one producer's transaction."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: frozenset[TopicPartition]


SendMarkers = Callable[[MarkerJob], None]


class TransactionCoordinator:
    def __init__(
        self,
        config: TxnConfig,
        append: Append,
        send_markers: SendMarkers,
        *,
        events: Callable[[str, dict], None] | None = None,
    ) -> None:
        self.config = config
        self.state = TxnStateManager(config, append)
        self._send_markers = send_markers
        self._events = events or (lambda kind, data: None)
        self._uncompleted: dict[str, MarkerJob] = {}  # markers written, Complete not yet

    # -- ownership -------------------------------------------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        return self.state.partition_for(transactional_id)

    def begin_loading(self, partition: int, coordinator_epoch: int) -> int:
        return self.state.begin_loading(partition, coordinator_epoch)

    def is_loading(self, partition: int, token: int) -> bool:
        return self.state.is_loading(partition, token)

    def finish_loading(self, partition: int, token: int, loader: StateLoader) -> int | None:
        """Install a loaded partition and resend the markers of its PrepareX transactions."""
        installed = self.state.finish_loading(partition, token, loader)
        if installed is None:
            return None
        for md in installed:
            if md.state.is_prepare:
                self._markers_for(md)
        return len(installed)

    def unload(self, partition: int) -> int:
        for tid in [t for t in self._uncompleted if self.partition_for(t) == partition]:
            del self._uncompleted[tid]
        return self.state.unload(partition)

    def needs_producer_id(self, transactional_id: str) -> bool:
        md = self.state.txns.get(transactional_id)
        return md is None or md.epoch_exhausted

    # -- InitProducerId --------------------------------------------------------------------
    def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        new_producer_id: int | None,
        now_ms: int,
        respond: InitRespond,
    ) -> None:
        def fail(code: ErrorCode) -> None:
            respond(code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)

        if not transactional_id or len(transactional_id.encode()) > MAX_ID_BYTES:
            return fail(ErrorCode.INVALID_REQUEST)  # Kafka's strings are int16-sized
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return fail(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        code = self.state.status(transactional_id)
        if code != ErrorCode.NONE:
            return fail(code)
        md = self.state.txns.get(transactional_id)
        if md is None:
            if new_producer_id is None:
                return fail(ErrorCode.CONCURRENT_TRANSACTIONS)
            md = TransactionMetadata(
                transactional_id,
                new_producer_id,
                NO_PRODUCER_EPOCH,
                timeout_ms,
                last_update_ms=now_ms,
            )
            self.state.txns[transactional_id] = md
            new_producer_id = None
        if expected is not None and expected[0] != md.producer_id:
            return fail(ErrorCode.INVALID_PRODUCER_EPOCH)
        if (
            md.pending is not None
            or md.state not in (S.EMPTY, S.ONGOING)
            and not (md.state.is_complete)
        ):
            return fail(ErrorCode.CONCURRENT_TRANSACTIONS)
        if md.state == S.ONGOING:
            self._fence_and_abort(md, now_ms)
            return fail(ErrorCode.CONCURRENT_TRANSACTIONS)
        target = self._init_target(md, timeout_ms, expected, new_producer_id, now_ms)
        if isinstance(target, ErrorCode):
            return fail(target)

        def written(code: ErrorCode) -> None:
            if code == ErrorCode.NONE:
                self._events(
                    "txn_init",
                    {
                        "transactional_id": transactional_id,
                        "producer_id": target.producer_id,
                        "epoch": target.producer_epoch,
                    },
                )
                respond(code, target.producer_id, target.producer_epoch)
            else:
                fail(code)

        self.state.write(md, target, now_ms, written)

    def _init_target(
        self,
        md: TransactionMetadata,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        new_producer_id: int | None,
        now_ms: int,
    ) -> StateValue | ErrorCode:
        empty = frozenset[TopicPartition]()
        if md.epoch_exhausted:
            if new_producer_id is None:
                return ErrorCode.CONCURRENT_TRANSACTIONS
            return md.target(
                S.EMPTY,
                now_ms,
                producer_id=new_producer_id,
                producer_epoch=0,
                last_producer_epoch=NO_PRODUCER_EPOCH,
                timeout_ms=timeout_ms,
                partitions=empty,
                start_ms=-1,
            )
        if expected is None:
            epoch, last = md.producer_epoch + 1, NO_PRODUCER_EPOCH
        elif md.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == md.producer_epoch:
            epoch, last = md.producer_epoch + 1, md.producer_epoch
        elif expected[1] == md.last_producer_epoch:
            epoch, last = md.producer_epoch, md.last_producer_epoch  # a retry: no new bump
        else:
            return ErrorCode.PRODUCER_FENCED
        return md.target(
            S.EMPTY,
            now_ms,
            producer_epoch=epoch,
            last_producer_epoch=last,
            timeout_ms=timeout_ms,
            partitions=empty,
            start_ms=-1,
        )

    # -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------
    def _check_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[ErrorCode, TransactionMetadata | None]:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        code = self.state.status(transactional_id)
        if code != ErrorCode.NONE:
            return code, None
        md = self.state.txns.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if md.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None
        return ErrorCode.NONE, md

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        now_ms: int,
        respond: Respond,
    ) -> None:
        code, md = self._check_producer(transactional_id, producer_id, producer_epoch)
        if md is None:
            return respond(code)
        if (
            md.pending is not None
            or md.state not in (S.EMPTY, S.ONGOING)
            and not (md.state.is_complete)
        ):
            return respond(ErrorCode.CONCURRENT_TRANSACTIONS)
        added = set(partitions)
        if md.state == S.ONGOING and added <= md.partitions:
            return respond(ErrorCode.NONE)
        start = md.start_ms if md.state == S.ONGOING else now_ms
        target = md.target(
            S.ONGOING, now_ms, partitions=frozenset(md.partitions | added), start_ms=start
        )
        self.state.write(md, target, now_ms, respond)

    def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """KIP-890: is each partition part of the producer's ongoing transaction?"""
        code, md = self._check_producer(transactional_id, producer_id, producer_epoch)
        result = {}
        for tp in partitions:
            if md is None:
                result[tp] = code
            elif md.state != S.ONGOING or tp not in md.partitions:
                result[tp] = ErrorCode.INVALID_TXN_STATE
            else:
                result[tp] = ErrorCode.NONE
        return result

    # -- EndTxn ----------------------------------------------------------------------------
    def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        now_ms: int,
        respond: Respond,
    ) -> None:
        code, md = self._check_producer(transactional_id, producer_id, producer_epoch)
        if md is None:
            return respond(code)
        if md.pending is not None:
            return respond(ErrorCode.CONCURRENT_TRANSACTIONS)
        state = md.state
        if state == S.ONGOING:
            return self._prepare_end(md, commit, md.producer_epoch, now_ms, respond)
        done = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        preparing = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        if state == done:
            return respond(ErrorCode.NONE)  # a retry of an EndTxn that completed
        if state == preparing:
            return respond(ErrorCode.CONCURRENT_TRANSACTIONS)
        if state == S.PREPARE_EPOCH_FENCE:
            return respond(ErrorCode.CONCURRENT_TRANSACTIONS)
        return respond(ErrorCode.INVALID_TXN_STATE)

    def _prepare_end(
        self,
        md: TransactionMetadata,
        commit: bool,
        epoch: int,
        now_ms: int,
        respond: Respond,
    ) -> None:
        target = md.target(
            S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, now_ms, producer_epoch=epoch
        )

        def written(code: ErrorCode) -> None:
            respond(code)
            if code == ErrorCode.NONE:
                self._markers_for(md)

        self.state.write(md, target, now_ms, written)

    def _fence_and_abort(self, md: TransactionMetadata, now_ms: int) -> None:
        """Abort `md`'s Ongoing transaction with a bumped epoch (Kafka's epoch fence): its
        producer, now a zombie, is PRODUCER_FENCED from here on."""
        epoch = md.producer_epoch + 1 if md.producer_epoch < MAX_EPOCH else md.producer_epoch
        self._events(
            "txn_fence",
            {
                "transactional_id": md.transactional_id,
                "producer_id": md.producer_id,
                "epoch": epoch,
            },
        )
        self._prepare_end(md, False, epoch, now_ms, lambda code: None)

    def _markers_for(self, md: TransactionMetadata) -> None:
        epoch = self.state.coordinator_epoch(md.transactional_id)
        if epoch is None:
            return
        self._send_markers(
            MarkerJob(
                md.transactional_id,
                md.producer_id,
                md.producer_epoch,
                md.state == S.PREPARE_COMMIT,
                epoch,
                frozenset(md.partitions),
            )
        )

    def job_current(self, job: MarkerJob) -> bool:
        """Whether `job` is still this coordinator's to finish (not unloaded/superseded)."""
        md = self.state.txns.get(job.transactional_id)
        preparing = S.PREPARE_COMMIT if job.commit else S.PREPARE_ABORT
        return (
            md is not None
            and self.state.coordinator_epoch(job.transactional_id) == job.coordinator_epoch
            and (md.producer_id, md.producer_epoch, md.state)
            == (job.producer_id, job.producer_epoch, preparing)
        )

    def markers_written(self, job: MarkerJob, now_ms: int) -> None:
        """Every marker of `job` is written: complete the transaction."""
        md = self.state.txns.get(job.transactional_id)
        if md is None or not self.job_current(job):
            self._uncompleted.pop(job.transactional_id, None)
            return  # superseded (unloaded, reloaded, or completed already)
        if md.pending is not None:
            self._uncompleted[job.transactional_id] = job
            return
        target = md.target(
            S.COMPLETE_COMMIT if job.commit else S.COMPLETE_ABORT,
            now_ms,
            partitions=frozenset[TopicPartition](),
        )

        def written(code: ErrorCode) -> None:
            if code == ErrorCode.NONE or code == ErrorCode.NOT_COORDINATOR:
                self._uncompleted.pop(job.transactional_id, None)
                if code == ErrorCode.NONE:
                    self._events(
                        "txn_complete",
                        {"transactional_id": job.transactional_id, "commit": job.commit},
                    )
            else:
                self._uncompleted[job.transactional_id] = job  # retried by `tick`

        self.state.write(md, target, now_ms, written)

    # -- timers ----------------------------------------------------------------------------
    def abort_timed_out(self, now_ms: int) -> int:
        """Abort the Ongoing transactions past their timeout; retry unfinished completions."""
        for job in list(self._uncompleted.values()):
            self.markers_written(job, now_ms)
        aborted = 0
        for md in self.state.owned_txns():
            if (
                md.state == S.ONGOING
                and md.pending is None
                and md.start_ms + md.timeout_ms < now_ms
            ):
                self._fence_and_abort(md, now_ms)
                aborted += 1
        return aborted

    def expire_ids(self, now_ms: int) -> int:
        """Remove ids idle past `transactional.id.expiration.ms` (a tombstone each)."""
        expired = 0
        for md in self.state.owned_txns():
            if (
                md.state.expiration_allowed
                and md.pending is None
                and md.last_update_ms + self.config.id_expiration_ms <= now_ms
            ):
                self.state.write(md, md.target(S.DEAD, now_ms), now_ms, lambda code: None)
                expired += 1
        return expired

    # -- Describe / ListTransactions -------------------------------------------------------
    def describe(self, transactional_id: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        code = self.state.status(transactional_id)
        if code != ErrorCode.NONE:
            return code, None
        md = self.state.txns.get(transactional_id)
        if md is None:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, md

    def list_transactions(
        self, states: Iterable[str] = (), producer_ids: Iterable[int] = ()
    ) -> tuple[ErrorCode, list[str], list[TransactionMetadata]]:
        """(error, unknown state names, matching transactions)."""
        wanted = set()
        unknown = []
        for name in states:
            state = TxnState.from_name(name)
            if state is None:
                unknown.append(name)
            else:
                wanted.add(state)
        pids = set(producer_ids)
        if self.state.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, unknown, []
        found = [
            md
            for md in self.state.owned_txns()
            if (not wanted or md.state in wanted) and (not pids or md.producer_id in pids)
        ]
        return ErrorCode.NONE, unknown, found
