"""KIP-890 part 1 on the produce path (broker/handlers/txn_verify.py): a transaction's
first batch on a partition is verified with the broker's `txn_verifier` before it is
appended; a refused partition gets the verifier's error and nothing is written; later
batches of the open transaction are not asked about again; transactional records
without a transactional id are refused as Kafka does. And a read_committed fetch on the
replica manager reads below the LSO with the aborted transactions of its range."""

from __future__ import annotations

import pytest
import trio

from broker.core.delayed_fetch import FetchParams, FetchPartitionRequest
from broker.core.log.config import LogConfig
from broker.core.log.manager import LogManager
from broker.core.partition import PartitionStateUpdate
from broker.core.replica_manager import ReplicaManager, ReplicationConfig
from broker.core.txn_verification import ALLOW_ALL
from broker.handlers.txn_verify import verify_transactional_writes
from client.protocol.errors import ErrorCode
from client.protocol.records import Record, build_batch, build_control_batch
from client.protocol.types import TopicPartition

TP = TopicPartition("orders", 0)
T0 = 1_000_000


@pytest.fixture
def rm(tmp_path):
    """Broker 1 leading `orders-0` alone (replicas and ISR: 1)."""
    config = LogConfig()
    manager = LogManager.open(tmp_path / "b1", config, now_ms=T0)
    rm = ReplicaManager(
        1, manager, ReplicationConfig(), log_config_for=lambda topic: config, now_ms=T0
    )
    state = PartitionStateUpdate("orders", 0, 1, 1, 0, (1,), 0, (1,))
    assert rm.become_leader_or_follower(T0, 1, [state]).partition_errors[TP] == ErrorCode.NONE
    yield rm
    manager.close()


def txn(pid: int, seq: int, value: bytes) -> bytes:
    return build_batch(
        [Record(None, value, T0)],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        transactional=True,
    )


class Recording:
    """A verifier that answers `code` and records what it was asked."""

    def __init__(self, code: ErrorCode) -> None:
        self.code = code
        self.asked: list[tuple[str, int, int, list[TopicPartition]]] = []

    async def verify(self, transactional_id, producer_id, producer_epoch, partitions):
        self.asked.append((transactional_id, producer_id, producer_epoch, list(partitions)))
        return {tp: self.code for tp in partitions}


def append(rm: ReplicaManager, entries) -> dict:
    results: list = []
    rm.append_records(T0, acks=1, timeout_ms=1000, entries=entries, respond=results.append)
    return results[0]


def test_the_first_batch_of_a_transaction_is_verified_and_may_be_refused(rm):
    assert rm.txn_verifier is ALLOW_ALL
    refusing = Recording(ErrorCode.INVALID_TXN_STATE)
    rm.txn_verifier = refusing
    entries = {TP: txn(7, 0, b"late")}
    refused = trio.run(verify_transactional_writes, rm, "tx", entries)
    assert refused[TP].error_code is ErrorCode.INVALID_TXN_STATE
    assert entries == {}  # nothing is appended
    assert refusing.asked == [("tx", 7, 0, [TP])]
    assert rm.get_partition(TP).log_end_offset == 0

    allowing = Recording(ErrorCode.NONE)
    rm.txn_verifier = allowing
    entries = {TP: txn(7, 0, b"first")}
    assert trio.run(verify_transactional_writes, rm, "tx", entries) == {}
    assert append(rm, entries)[TP].error_code is ErrorCode.NONE
    entries = {TP: txn(7, 1, b"second")}  # the transaction is open here: not asked again
    assert trio.run(verify_transactional_writes, rm, "tx", entries) == {}
    assert len(allowing.asked) == 1


def test_plain_batches_are_not_verified_and_ids_are_required(rm):
    asked = Recording(ErrorCode.NONE)
    rm.txn_verifier = asked
    plain = {TP: build_batch([Record(None, b"p", T0)])}
    assert trio.run(verify_transactional_writes, rm, None, plain) == {}
    entries = {TP: txn(8, 0, b"x")}
    refused = trio.run(verify_transactional_writes, rm, None, entries)
    assert refused[TP].error_code is ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert asked.asked == []


def consumer_fetch(rm: ReplicaManager, offset: int, isolation_level: int):
    answers: list = []
    rm.fetch_messages(
        T0,
        FetchParams(-1, 0, 0, 1 << 20, isolation_level=isolation_level),
        {TP: FetchPartitionRequest(offset, -1, 1 << 20)},
        answers.append,
    )
    return answers[0][TP]


def test_read_committed_fetch_and_list_offsets_stop_at_the_lso(rm):
    assert append(rm, {TP: txn(1, 0, b"a")})[TP].error_code is ErrorCode.NONE  # 0
    assert append(rm, {TP: txn(2, 0, b"b")})[TP].error_code is ErrorCode.NONE  # 1
    results: list = []
    rm.append_records(
        T0,
        acks=-1,
        timeout_ms=1000,
        entries={TP: build_control_batch(1, 0, False, 0, T0)},  # 2: abort producer 1
        respond=results.append,
        origin="coordinator",
    )
    assert results[0][TP].error_code is ErrorCode.NONE
    committed = consumer_fetch(rm, 0, 1)
    assert committed.last_stable_offset == 1  # producer 2 is still open
    assert committed.aborted_transactions == ((1, 0),)
    assert committed.high_watermark == 3
    uncommitted = consumer_fetch(rm, 0, 0)
    assert len(uncommitted.records) > len(committed.records)
    assert rm.list_offset(TP, -1, -1, from_consumer=True, read_committed=True)[2] == 1
    assert rm.list_offset(TP, -1, -1, from_consumer=True)[2] == 3


def test_a_transactional_batch_behind_a_plain_one_is_verified_too(rm):
    refusing = Recording(ErrorCode.INVALID_TXN_STATE)
    rm.txn_verifier = refusing
    entries = {TP: build_batch([Record(None, b"p", T0)]) + txn(9, 0, b"hidden")}
    refused = trio.run(verify_transactional_writes, rm, "tx", entries)
    assert refused[TP].error_code is ErrorCode.INVALID_TXN_STATE
    assert refusing.asked == [("tx", 9, 0, [TP])]
