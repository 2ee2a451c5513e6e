"""The transactional producer's state (KIP-98, KIP-447), sans-IO: Kafka's TransactionManager.

How it works: a `TransactionManager` is plain data that the producer's Trio shell
(client/producer/txn_requests.py) drives. It holds Kafka's `TxnState`s and moves between
them only along Kafka's transitions (`TRANSITIONS`): UNINITIALIZED -> INITIALIZING
(`init_transactions`) -> READY (`on_initialized`) -> IN_TRANSACTION (`begin`) ->
COMMITTING_TRANSACTION / ABORTING_TRANSACTION (`begin_commit` / `begin_abort`) -> READY
(`complete`; after a failed batch, an abort goes back through INITIALIZING: the epoch
is bumped so that sequences start over, KIP-360). An error moves it to ABORTABLE_ERROR
(the application must abort; then it may go on) or FATAL_ERROR (the producer is
unusable: fenced by a newer producer with the same transactional id, or not
authorized). An illegal call raises Kafka's error:
`TransactionError(INVALID_TXN_STATE)` (Kafka's IllegalStateException), or, in an error
state, the error that put it there (Kafka's `maybeFailWithError`).

Partitions: `maybe_add_partition` records a partition a record goes to; partitions not
yet in the transaction are *new* until the coordinator has added them
(AddPartitionsToTxn): `partitions_to_add` hands them out (as pending), `on_partitions_added`
makes them part of the transaction, and `may_send(tp)` says whether a batch for `tp`
may be drained (only once its partition is in the transaction, as Kafka's
`isSendToPartitionAllowed`). `add_partitions_backoff_ms` is how long to wait before
adding again: 20 ms, not `retry_backoff_ms`, when the first AddPartitionsToTxn of a
transaction got CONCURRENT_TRANSACTIONS (the coordinator is still writing the previous
transaction's markers: a commit answers before they are written), as Kafka's client
does; with 100 ms a producer committing back-to-back would idle ~100 ms a transaction.
`pending_offsets` keeps a `send_offsets_to_transaction` until it is done.

Errors: `classify(api, code)` says what an answer means, Kafka's way: `RETRY`
(COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS, ...), `FIND_COORDINATOR` (then
retry: NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE), `FATAL` (PRODUCER_FENCED,
INVALID_PRODUCER_EPOCH, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, INVALID_TXN_STATE, an
unexpected error) or `ABORTABLE` (most others: an unauthorized topic or group, a
member no longer in its generation, a failed batch). `on_error` applies the last two.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.types import TopicPartition

# Kafka's TransactionManager.ADD_PARTITIONS_RETRY_BACKOFF_MS (its workaround for KAFKA-5482).
ADD_PARTITIONS_RETRY_BACKOFF_MS = 20


class TxnState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = TxnState
# Kafka's TransactionManager.State.isTransitionValid: target -> the states it may follow.
TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    S.UNINITIALIZED: frozenset(),
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.ABORTING_TRANSACTION}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING_TRANSACTION: frozenset({S.IN_TRANSACTION}),
    S.ABORTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset(
        {S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR, S.INITIALIZING}
    ),
    S.FATAL_ERROR: frozenset(TxnState),
}


class TxnApi(enum.Enum):
    """The requests a transactional producer sends, for `classify`."""

    FIND_COORDINATOR = "FindCoordinator"
    INIT_PRODUCER_ID = "InitProducerId"
    ADD_PARTITIONS = "AddPartitionsToTxn"
    ADD_OFFSETS = "AddOffsetsToTxn"
    TXN_OFFSET_COMMIT = "TxnOffsetCommit"
    END_TXN = "EndTxn"
    PRODUCE = "Produce"


class Outcome(enum.Enum):
    OK = "ok"
    RETRY = "retry"  # after the backoff
    FIND_COORDINATOR = "find_coordinator"  # look the coordinator up again, then retry
    ABORTABLE = "abortable"  # the transaction must be aborted
    FATAL = "fatal"  # the producer is unusable


_FENCED = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})
_ALWAYS_FATAL = _FENCED | {ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
_COORDINATOR_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
_RETRY = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS})
# Per request, the errors that only abort the transaction (Kafka's handlers); what no
# rule names is fatal for a coordinator request ("Unexpected error in ...Response").
_ABORTABLE: dict[TxnApi, frozenset[ErrorCode]] = {
    TxnApi.FIND_COORDINATOR: frozenset({ErrorCode.GROUP_AUTHORIZATION_FAILED}),
    TxnApi.INIT_PRODUCER_ID: frozenset(),
    TxnApi.ADD_PARTITIONS: frozenset(
        {
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            ErrorCode.UNKNOWN_PRODUCER_ID,
            ErrorCode.INVALID_RECORD,
            ErrorCode.UNKNOWN_SERVER_ERROR,
        }
    ),
    TxnApi.ADD_OFFSETS: frozenset(
        {
            ErrorCode.GROUP_AUTHORIZATION_FAILED,
            ErrorCode.UNKNOWN_PRODUCER_ID,
            ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        }
    ),
    TxnApi.TXN_OFFSET_COMMIT: frozenset(
        {
            ErrorCode.GROUP_AUTHORIZATION_FAILED,
            ErrorCode.UNKNOWN_MEMBER_ID,
            ErrorCode.ILLEGAL_GENERATION,
            ErrorCode.FENCED_INSTANCE_ID,
        }
    ),
    TxnApi.END_TXN: frozenset(
        {ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    ),
}
# Extra retriable answers per request (Kafka's handlers retry these too).
_EXTRA_RETRY: dict[TxnApi, frozenset[ErrorCode]] = {
    TxnApi.ADD_PARTITIONS: frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}),
    TxnApi.TXN_OFFSET_COMMIT: frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}),
}


def classify(api: TxnApi, code: ErrorCode) -> Outcome:
    """What answer `code` to request `api` means (see the module docstring)."""
    if code is ErrorCode.NONE:
        return Outcome.OK
    if code in _ALWAYS_FATAL:
        return Outcome.FATAL
    if api is TxnApi.PRODUCE:  # a failed batch: abort (Kafka's handleFailedBatch)
        return Outcome.ABORTABLE
    if code in _COORDINATOR_MOVED or (
        api is TxnApi.TXN_OFFSET_COMMIT and code is ErrorCode.REQUEST_TIMED_OUT
    ):
        if api is TxnApi.FIND_COORDINATOR:
            return Outcome.RETRY
        return Outcome.FIND_COORDINATOR
    if code in _RETRY or code in _EXTRA_RETRY.get(api, frozenset()):
        return Outcome.RETRY
    if code in _ABORTABLE[api]:
        return Outcome.ABORTABLE
    return Outcome.FATAL


class TransactionError(TributaryError):
    """A transactional call failed. `fatal`: the producer is unusable (close it);
    `txn_requires_abort`: abort the transaction, then go on (confluent-kafka's names)."""

    def __init__(
        self,
        code: ErrorCode,
        message: str | None = None,
        *,
        fatal: bool = False,
        txn_requires_abort: bool = False,
    ) -> None:
        super().__init__(code, message)
        self.fatal = fatal
        self.txn_requires_abort = txn_requires_abort

    @property
    def retriable(self) -> bool:
        return False


class ProducerFencedError(TransactionError):
    """A newer producer with the same transactional id exists (Kafka's
    ProducerFencedException): this one must close."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(code, message, fatal=True)


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """A consumer's group and membership (KIP-447), what `send_offsets_to_transaction`
    sends so that the group coordinator can fence a zombie member. With only a group id,
    generation -1 and no member id (Kafka's `new ConsumerGroupMetadata(groupId)`)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class TransactionManager:
    """Kafka's TransactionManager's state; see the module docstring."""

    def __init__(self, transactional_id: str, transaction_timeout_ms: int = 60_000) -> None:
        if not transactional_id:
            raise ValueError("transactional_id must not be empty")
        if transaction_timeout_ms <= 0:
            raise ValueError("transaction_timeout_ms must be positive")
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.state = TxnState.UNINITIALIZED
        self.last_error: TransactionError | None = None
        self.in_transaction: set[TopicPartition] = set()  # added by the coordinator
        self.new_partitions: set[TopicPartition] = set()  # to add before sending
        self.pending_partitions: set[TopicPartition] = set()  # AddPartitionsToTxn in flight
        self.pending_offsets: tuple[ConsumerGroupMetadata, dict[TopicPartition, int]] | None = None
        self.offsets_added = False  # AddOffsetsToTxn done for the group of pending_offsets
        # Something was added (a partition, a group's offsets): EndTxn is needed.
        self.transaction_started = False
        # A batch failed: its sequence may have left a gap, so the abort ends with an
        # epoch bump (InitProducerId with this id and epoch, KIP-360), as Kafka's does.
        self.epoch_bump_required = False

    def __repr__(self) -> str:
        return f"<TransactionManager {self.transactional_id!r} {self.state.name}>"

    # --- state -----------------------------------------------------------------------

    @property
    def has_error(self) -> bool:
        return self.state in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR)

    @property
    def has_fatal_error(self) -> bool:
        return self.state is TxnState.FATAL_ERROR

    @property
    def has_producer_id(self) -> bool:
        return self.state not in (TxnState.UNINITIALIZED, TxnState.INITIALIZING)

    @property
    def is_completing(self) -> bool:
        return self.state in (TxnState.COMMITTING_TRANSACTION, TxnState.ABORTING_TRANSACTION)

    def _transition(self, target: TxnState) -> None:
        if self.state not in TRANSITIONS[target]:
            if self.has_error and self.last_error is not None:
                raise self._error_state_error()
            raise TransactionError(
                ErrorCode.INVALID_TXN_STATE,
                f"TransactionalId {self.transactional_id}: invalid transition attempted "
                f"from state {self.state.name} to state {target.name}",
            )
        self.state = target

    def _error_state_error(self) -> TransactionError:
        error = self.last_error
        assert error is not None
        if error.fatal:
            return error  # fenced or unauthorized: the same error again
        return TransactionError(
            error.code,
            "Cannot execute transactional method because we are in an error state: "
            f"{error}; the transaction must be aborted",
            txn_requires_abort=True,
        )

    def _fail_if_error(self) -> None:
        """Kafka's maybeFailWithError."""
        if self.has_error:
            raise self._error_state_error()

    def raise_if_error(self) -> None:
        """Raise the error that put the manager in its error state, if any."""
        self._fail_if_error()

    # --- the application's calls -----------------------------------------------------

    def init_transactions(self) -> None:
        """`init_transactions()` starts: FindCoordinator, then InitProducerId."""
        self._fail_if_error()
        self._transition(TxnState.INITIALIZING)

    def on_initialized(self) -> None:
        """InitProducerId answered: the producer id and epoch are the shell's to keep."""
        self._transition(TxnState.READY)
        self.epoch_bump_required = False

    def begin(self) -> None:
        self._fail_if_error()
        self._transition(TxnState.IN_TRANSACTION)

    def check_send(self) -> None:
        """Kafka's failIfNotReadyForSend: a record may be sent only in a transaction."""
        self._fail_if_error()
        if not self.has_producer_id:
            raise TransactionError(
                ErrorCode.INVALID_TXN_STATE,
                "Cannot perform a 'send' before completing a call to init_transactions "
                "when transactions are enabled",
            )
        if self.state is not TxnState.IN_TRANSACTION:
            raise TransactionError(
                ErrorCode.INVALID_TXN_STATE, f"Cannot call send in state {self.state.name}"
            )

    def maybe_add_partition(self, tp: TopicPartition) -> None:
        """A record goes to `tp`: it must be in the transaction before its batch is sent."""
        self.check_send()
        if tp not in self.in_transaction and tp not in self.pending_partitions:
            self.new_partitions.add(tp)

    def add_offsets(self, offsets: dict[TopicPartition, int], group: ConsumerGroupMetadata) -> None:
        """`send_offsets_to_transaction()` starts (AddOffsetsToTxn, then TxnOffsetCommit)."""
        self._fail_if_error()
        if self.state is not TxnState.IN_TRANSACTION:
            raise TransactionError(
                ErrorCode.INVALID_TXN_STATE,
                "Cannot send offsets to transaction either because the producer is not in "
                "an active transaction",
            )
        self.pending_offsets = (group, dict(offsets))
        self.offsets_added = False

    def on_offsets_added(self) -> None:
        """AddOffsetsToTxn answered: the group's offsets partition is in the transaction."""
        self.offsets_added = True
        self.transaction_started = True

    def offsets_done(self) -> None:
        self.pending_offsets = None
        self.offsets_added = False

    def begin_commit(self) -> None:
        self._fail_if_error()
        self._transition(TxnState.COMMITTING_TRANSACTION)

    def begin_abort(self) -> None:
        if self.state is not TxnState.ABORTABLE_ERROR:
            self._fail_if_error()
        self._transition(TxnState.ABORTING_TRANSACTION)
        self.new_partitions.clear()  # nothing more is sent in this transaction
        self.pending_offsets = None

    def complete(self) -> None:
        """EndTxn answered: the transaction is over; the next may begin, or, after a
        failed batch, first the epoch bump (INITIALIZING, then `on_initialized`)."""
        bump = self.epoch_bump_required and self.state is TxnState.ABORTING_TRANSACTION
        self._transition(TxnState.INITIALIZING if bump else TxnState.READY)
        self.in_transaction.clear()
        self.new_partitions.clear()
        self.pending_partitions.clear()
        self.pending_offsets = None
        self.offsets_added = False
        self.transaction_started = False

    # --- partitions ------------------------------------------------------------------

    def needs_adding(self, tp: TopicPartition) -> bool:
        return tp not in self.in_transaction and tp not in self.pending_partitions

    def partitions_to_add(self, queued: set[TopicPartition] | None = None) -> list[TopicPartition]:
        """The partitions to send in one AddPartitionsToTxn now (marked pending): the new
        ones, and those of `queued` batches not in the transaction yet (a batch the
        partitioner moved). Empty outside a transaction or while one is in flight."""
        if self.pending_partitions or self.state not in (
            TxnState.IN_TRANSACTION,
            TxnState.COMMITTING_TRANSACTION,
        ):
            return []
        if queued:
            self.new_partitions.update(tp for tp in queued if self.needs_adding(tp))
        out = sorted(self.new_partitions)
        self.pending_partitions.update(out)
        self.new_partitions.clear()
        return out

    def on_partitions_added(self, added: list[TopicPartition], retry: list[TopicPartition]) -> None:
        """AddPartitionsToTxn answered: `added` are in the transaction, `retry` go back."""
        self.in_transaction.update(added)
        if added:
            self.transaction_started = True
        self.pending_partitions.difference_update(added)
        self.pending_partitions.difference_update(retry)
        if self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION):
            self.new_partitions.update(retry)

    def add_partitions_backoff_ms(self, code: ErrorCode, retry_backoff_ms: float) -> float:
        """The wait before AddPartitionsToTxn is sent again after it was refused with
        `code`: short when the transaction has no partition yet and the coordinator is
        still completing the previous one (CONCURRENT_TRANSACTIONS), as Kafka's
        `maybeOverrideRetryBackoffMs`; `retry_backoff_ms` otherwise."""
        if code is ErrorCode.CONCURRENT_TRANSACTIONS and not self.in_transaction:
            return min(retry_backoff_ms, ADD_PARTITIONS_RETRY_BACKOFF_MS)
        return retry_backoff_ms

    def may_send(self, tp: TopicPartition) -> bool:
        """May a batch for `tp` be drained? (Kafka's isSendToPartitionAllowed.)"""
        if self.has_fatal_error:
            return False
        return tp in self.in_transaction

    # --- errors ----------------------------------------------------------------------

    def on_error(
        self, api: TxnApi, code: ErrorCode, message: str | None = None
    ) -> TransactionError:
        """An ABORTABLE or FATAL answer (see `classify`): move to the error state (a fatal
        one stays fatal); the error to raise."""
        outcome = classify(api, code)
        detail = f"{api.value}: {message or code.description}"
        if outcome is Outcome.FATAL:
            error: TransactionError = (
                ProducerFencedError(code, detail)
                if code in _FENCED
                else TransactionError(code, detail, fatal=True)
            )
            self.state = TxnState.FATAL_ERROR
        else:
            error = TransactionError(code, detail, txn_requires_abort=True)
            if api is TxnApi.PRODUCE and not self.has_fatal_error:
                self.epoch_bump_required = True
            if self.has_fatal_error:
                return self.last_error or error
            if self.state not in TRANSITIONS[TxnState.ABORTABLE_ERROR]:
                return error  # aborting already, or no transaction to abort
            self._transition(TxnState.ABORTABLE_ERROR)
        self.last_error = error
        return error
