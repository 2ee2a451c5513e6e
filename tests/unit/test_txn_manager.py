"""The transactional producer's sans-IO state (client/producer/transactions.py): Kafka's
states and transitions, partitions added before sending, and what each answer means."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client.producer.transactions import (
    TRANSITIONS,
    ConsumerGroupMetadata,
    Outcome,
    ProducerFencedError,
    TransactionError,
    TransactionManager,
    TxnApi,
    TxnState,
    classify,
)
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
E = ErrorCode


def ready() -> TransactionManager:
    manager = TransactionManager("tx")
    manager.init_transactions()
    manager.on_initialized()
    return manager


def in_txn() -> TransactionManager:
    manager = ready()
    manager.begin()
    return manager


def test_a_transaction_commits_and_the_next_begins():
    manager = TransactionManager("tx", 30_000)
    assert manager.state is TxnState.UNINITIALIZED
    manager.init_transactions()
    assert manager.state is TxnState.INITIALIZING
    manager.on_initialized()
    manager.begin()
    manager.maybe_add_partition(T0)
    assert manager.partitions_to_add() == [T0]
    assert not manager.may_send(T0)  # not before the coordinator added it
    manager.on_partitions_added([T0], [])
    assert manager.may_send(T0) and manager.transaction_started
    manager.begin_commit()
    manager.complete()
    assert manager.state is TxnState.READY and not manager.in_transaction
    assert not manager.transaction_started
    manager.begin()  # the next one
    assert not manager.may_send(T0)  # partitions are added again in each transaction


@pytest.mark.parametrize(
    "call",
    ["begin_commit", "begin_abort", "check_send", "begin"],
)
def test_calls_before_init_transactions_raise_invalid_txn_state(call):
    manager = TransactionManager("tx")
    with pytest.raises(TransactionError) as info:
        getattr(manager, call)()
    assert info.value.code is E.INVALID_TXN_STATE and not info.value.fatal


def test_commit_or_abort_outside_a_transaction_is_illegal():
    manager = ready()
    for call in (manager.begin_commit, manager.begin_abort):
        with pytest.raises(TransactionError, match="invalid transition.*READY"):
            call()
    with pytest.raises(TransactionError, match="Cannot call send in state READY"):
        manager.check_send()
    with pytest.raises(TransactionError, match="not in an active transaction"):
        manager.add_offsets({T0: 5}, ConsumerGroupMetadata("g"))
    manager.begin()
    with pytest.raises(TransactionError, match="invalid transition"):
        manager.begin()  # no nested transactions
    assert manager.state is TxnState.IN_TRANSACTION


def test_send_before_init_transactions_says_so():
    with pytest.raises(TransactionError, match="before completing a call to init_transactions"):
        TransactionManager("tx").check_send()


def test_a_failed_batch_requires_an_abort_then_the_producer_goes_on():
    manager = in_txn()
    error = manager.on_error(TxnApi.PRODUCE, E.NOT_ENOUGH_REPLICAS)
    assert error.txn_requires_abort and not error.fatal
    assert manager.state is TxnState.ABORTABLE_ERROR
    with pytest.raises(TransactionError, match="must be aborted") as info:
        manager.begin_commit()
    assert info.value.txn_requires_abort
    with pytest.raises(TransactionError):
        manager.check_send()
    assert manager.epoch_bump_required
    manager.begin_abort()
    manager.complete()
    # KIP-360: the failed batch may have left a sequence gap: a new epoch first.
    assert manager.state is TxnState.INITIALIZING
    with pytest.raises(TransactionError, match="INITIALIZING to state IN_TRANSACTION"):
        manager.begin()
    manager.on_initialized()
    assert not manager.epoch_bump_required
    manager.begin()
    assert manager.state is TxnState.IN_TRANSACTION


def test_a_coordinator_error_aborts_without_an_epoch_bump():
    manager = in_txn()
    manager.on_error(TxnApi.ADD_OFFSETS, E.GROUP_AUTHORIZATION_FAILED)
    manager.begin_abort()
    manager.complete()
    assert manager.state is TxnState.READY


@pytest.mark.parametrize("code", [E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH])
def test_a_fenced_producer_is_done_for_good(code):
    manager = in_txn()
    error = manager.on_error(TxnApi.END_TXN, code)
    assert isinstance(error, ProducerFencedError) and error.fatal
    assert manager.state is TxnState.FATAL_ERROR
    for call in (manager.begin_abort, manager.begin_commit, manager.check_send):
        with pytest.raises(ProducerFencedError):
            call()
    # A later abortable error does not make it abortable again.
    manager.on_error(TxnApi.PRODUCE, E.NOT_ENOUGH_REPLICAS)
    assert manager.state is TxnState.FATAL_ERROR
    assert not manager.may_send(T0)


def test_an_error_while_aborting_does_not_stop_the_abort():
    manager = in_txn()
    manager.begin_abort()
    manager.on_error(TxnApi.PRODUCE, E.NOT_ENOUGH_REPLICAS)
    assert manager.state is TxnState.ABORTING_TRANSACTION
    manager.complete()
    assert manager.state is TxnState.INITIALIZING  # then the epoch bump


@pytest.mark.parametrize(
    ("api", "code", "outcome"),
    [
        (TxnApi.INIT_PRODUCER_ID, E.NONE, Outcome.OK),
        (TxnApi.INIT_PRODUCER_ID, E.NOT_COORDINATOR, Outcome.FIND_COORDINATOR),
        (TxnApi.INIT_PRODUCER_ID, E.COORDINATOR_NOT_AVAILABLE, Outcome.FIND_COORDINATOR),
        (TxnApi.INIT_PRODUCER_ID, E.COORDINATOR_LOAD_IN_PROGRESS, Outcome.RETRY),
        (TxnApi.INIT_PRODUCER_ID, E.CONCURRENT_TRANSACTIONS, Outcome.RETRY),
        (TxnApi.INIT_PRODUCER_ID, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Outcome.FATAL),
        (TxnApi.INIT_PRODUCER_ID, E.UNSUPPORTED_VERSION, Outcome.FATAL),
        (TxnApi.FIND_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, Outcome.RETRY),
        (TxnApi.ADD_PARTITIONS, E.CONCURRENT_TRANSACTIONS, Outcome.RETRY),
        (TxnApi.ADD_PARTITIONS, E.UNKNOWN_TOPIC_OR_PARTITION, Outcome.RETRY),
        (TxnApi.ADD_PARTITIONS, E.TOPIC_AUTHORIZATION_FAILED, Outcome.ABORTABLE),
        (TxnApi.ADD_PARTITIONS, E.PRODUCER_FENCED, Outcome.FATAL),
        (TxnApi.ADD_PARTITIONS, E.INVALID_TXN_STATE, Outcome.FATAL),
        (TxnApi.ADD_OFFSETS, E.GROUP_AUTHORIZATION_FAILED, Outcome.ABORTABLE),
        (TxnApi.TXN_OFFSET_COMMIT, E.ILLEGAL_GENERATION, Outcome.ABORTABLE),
        (TxnApi.TXN_OFFSET_COMMIT, E.UNKNOWN_MEMBER_ID, Outcome.ABORTABLE),
        (TxnApi.TXN_OFFSET_COMMIT, E.REQUEST_TIMED_OUT, Outcome.FIND_COORDINATOR),
        (TxnApi.END_TXN, E.INVALID_PRODUCER_EPOCH, Outcome.FATAL),
        (TxnApi.END_TXN, E.INVALID_TXN_STATE, Outcome.FATAL),
        (TxnApi.END_TXN, E.UNKNOWN_PRODUCER_ID, Outcome.ABORTABLE),
        (TxnApi.PRODUCE, E.NOT_ENOUGH_REPLICAS, Outcome.ABORTABLE),
        (TxnApi.PRODUCE, E.REQUEST_TIMED_OUT, Outcome.ABORTABLE),
        (TxnApi.PRODUCE, E.PRODUCER_FENCED, Outcome.FATAL),
    ],
)
def test_answers_are_classified_as_kafka_does(api, code, outcome):
    assert classify(api, code) is outcome


def test_partitions_are_added_once_and_retried_when_the_coordinator_was_busy():
    manager = in_txn()
    manager.maybe_add_partition(T0)
    manager.maybe_add_partition(T0)
    assert manager.partitions_to_add({T1}) == [T0, T1]  # a moved batch's partition too
    assert manager.partitions_to_add({T1}) == []  # one request at a time
    manager.on_partitions_added([T0], [T1])  # T1: CONCURRENT_TRANSACTIONS
    assert manager.may_send(T0) and not manager.may_send(T1)
    assert manager.partitions_to_add() == [T1]
    manager.on_partitions_added([T1], [])
    manager.maybe_add_partition(T0)
    assert manager.partitions_to_add() == []


def test_group_metadata_carries_kip447_fields():
    manager = in_txn()
    group = ConsumerGroupMetadata("g", 7, "member-1", "static-1")
    manager.add_offsets({T0: 12}, group)
    assert manager.pending_offsets == (group, {T0: 12})
    manager.on_offsets_added()
    assert manager.transaction_started
    manager.offsets_done()
    assert manager.pending_offsets is None


# --- the state machine as a whole --------------------------------------------------------

_ACTIONS = [
    "init_transactions",
    "on_initialized",
    "begin",
    "begin_commit",
    "begin_abort",
    "complete",
    "send",
    "added",
    "produce_error",
    "fenced",
]


def _apply(manager: TransactionManager, action: str) -> None:
    if action == "send":
        manager.maybe_add_partition(T0)
    elif action == "added":
        manager.on_partitions_added(manager.partitions_to_add(), [])
    elif action == "produce_error":
        manager.on_error(TxnApi.PRODUCE, E.NOT_ENOUGH_REPLICAS)
    elif action == "fenced":
        manager.on_error(TxnApi.ADD_PARTITIONS, E.PRODUCER_FENCED)
    else:
        getattr(manager, action)()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_ACTIONS), max_size=30))
def test_every_sequence_of_calls_keeps_kafkas_rules(actions):
    """Whatever the application and the network do: a call either moves along one of
    Kafka's transitions or raises `TransactionError` and changes nothing; FATAL_ERROR is
    never left; records go only to partitions added in the current transaction."""
    manager = TransactionManager("tx")
    for action in actions:
        before = manager.state
        fatal_before = manager.has_fatal_error
        try:
            _apply(manager, action)
        except TransactionError as error:
            assert manager.state is before
            if fatal_before:
                assert error.fatal
            continue
        if manager.state is not before:
            assert before in TRANSITIONS[manager.state]
        if fatal_before:
            assert manager.state is TxnState.FATAL_ERROR
        if manager.state is TxnState.READY:
            assert not manager.in_transaction and not manager.transaction_started
        for tp in manager.in_transaction:
            assert manager.may_send(tp) != manager.has_fatal_error
        assert not manager.new_partitions & manager.in_transaction


def test_a_busy_coordinator_at_the_first_add_is_asked_again_soon():
    """The previous transaction is still completing (CONCURRENT_TRANSACTIONS on the
    first AddPartitionsToTxn of the next one): retry after 20 ms, as Kafka's client,
    not after retry_backoff_ms; later in a transaction, or for other answers, the
    configured backoff."""
    manager = in_txn()
    busy = E.CONCURRENT_TRANSACTIONS
    assert manager.add_partitions_backoff_ms(busy, 100) == 20
    assert manager.add_partitions_backoff_ms(busy, 5) == 5  # never longer than configured
    assert manager.add_partitions_backoff_ms(E.COORDINATOR_LOAD_IN_PROGRESS, 100) == 100
    manager.maybe_add_partition(T0)
    manager.on_partitions_added(manager.partitions_to_add(), [])
    assert manager.add_partitions_backoff_ms(busy, 100) == 100
