"""One transactional id's state: Kafka's transaction states and the transitions allowed.

How it works (Kafka 2.8's TransactionMetadata): a change is made in two steps. `prepare`
checks the transition is legal (`IllegalTransition` otherwise), records the target as
the pending state (which makes other requests wait: CONCURRENT_TRANSACTIONS) and returns
it as a `StateValue`, the record the coordinator writes to `__transaction_state`; once
the write is acknowledged `complete` applies it, or `abandon` drops it if the write
failed. So what this broker answers never runs ahead of what a new coordinator would load.

States (ids as in Kafka's log): Empty (no transaction), Ongoing (partitions added),
PrepareCommit/PrepareAbort (EndTxn accepted, markers being written), CompleteCommit/
CompleteAbort (markers written), Dead (the id expired, about to be removed) and
PrepareEpochFence (an Ongoing transaction is being aborted by the coordinator with a
bumped epoch: a new producer took the id, or the transaction timed out).
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field

from client.protocol.types import TopicPartition

__all__ = ["IllegalTransition", "StateValue", "TransactionMetadata", "TxnState"]

NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767


class TxnState(enum.Enum):
    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def display(self) -> str:
        return self.value[1]

    @classmethod
    def from_id(cls, state_id: int) -> TxnState:
        for state in cls:
            if state.id == state_id:
                return state
        raise ValueError(f"unknown transaction state id {state_id}")

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        for state in cls:
            if state.display == name:
                return state
        return None

    @property
    def is_complete(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def is_prepare(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def expiration_allowed(self) -> bool:
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


S = TxnState
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


class IllegalTransition(RuntimeError):
    """A transition Kafka's state machine does not allow (a coordinator bug)."""


@dataclass(frozen=True, slots=True)
class StateValue:
    """What `__transaction_state` holds for one id: a state to move to, or loaded."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    last_update_ms: int
    start_ms: int
    last_producer_epoch: int = NO_PRODUCER_EPOCH  # not in the log record (as Kafka 2.8 v0)


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    pending: TxnState | None = None

    @classmethod
    def loaded(cls, transactional_id: str, value: StateValue) -> TransactionMetadata:
        return cls(
            transactional_id,
            value.producer_id,
            value.producer_epoch,
            value.timeout_ms,
            value.state,
            set(value.partitions),
            value.start_ms,
            value.last_update_ms,
            value.last_producer_epoch,
        )

    def current(self) -> StateValue:
        return StateValue(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            self.state,
            frozenset(self.partitions),
            self.last_update_ms,
            self.start_ms,
            self.last_producer_epoch,
        )

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= MAX_EPOCH - 1

    def prepare(self, target: StateValue) -> StateValue:
        """Check the move to `target` and hold it as pending until `complete`/`abandon`."""
        if self.pending is not None:
            raise IllegalTransition(
                f"{self.transactional_id}: {target.state.display} while "
                f"{self.pending.display} is pending"
            )
        check_transition(self.state, target.state)
        if target.producer_id == self.producer_id and target.producer_epoch < self.producer_epoch:
            raise IllegalTransition(f"{self.transactional_id}: the epoch would go back")
        self.pending = target.state
        return target

    def complete(self, target: StateValue) -> None:
        if self.pending != target.state:
            raise IllegalTransition(
                f"{self.transactional_id}: completing {target.state.display}, "
                f"pending {self.pending.display if self.pending else None}"
            )
        self.pending = None
        self.producer_id = target.producer_id
        self.producer_epoch = target.producer_epoch
        self.last_producer_epoch = target.last_producer_epoch
        self.timeout_ms = target.timeout_ms
        self.state = target.state
        self.partitions = set(target.partitions)
        self.start_ms = target.start_ms
        self.last_update_ms = target.last_update_ms

    def abandon(self) -> None:
        self.pending = None

    def target(self, state: TxnState, now_ms: int, **changes) -> StateValue:
        """The current value moved to `state` at `now_ms`, with `changes` applied."""
        current = StateValue(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            state,
            frozenset(self.partitions),
            now_ms,
            self.start_ms,
            self.last_producer_epoch,
        )
        return dataclasses.replace(current, **changes)


def check_transition(old: TxnState, new: TxnState) -> None:
    if old not in VALID_PREVIOUS[new]:
        raise IllegalTransition(f"{old.display} -> {new.display}")
