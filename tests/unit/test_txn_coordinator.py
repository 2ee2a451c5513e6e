"""The sans-IO transaction coordinator: InitProducerId, fencing, AddPartitions, EndTxn,
markers, timeouts, expiration, loading after a failover, and Kafka's record format.

Driven by a manual clock and an in-memory `__transaction_state` (every write is kept per
partition, so a second coordinator can load what the first wrote, as after a failover).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.core.txn import state_log
from broker.core.txn.config import TxnConfig
from broker.core.txn.coordinator import MarkerJob, TransactionCoordinator
from broker.core.txn.manager import StateLoader
from broker.core.txn.metadata import StateValue, TxnState
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition

CONFIG = TxnConfig(state_partitions=3, max_timeout_ms=60_000, id_expiration_ms=100_000)
T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


@dataclass
class StateTopic:
    records: dict[int, list[tuple[bytes, bytes | None]]] = field(default_factory=dict)
    fail_with: ErrorCode | None = None
    held: list = field(default_factory=list)  # writes not yet answered (hold=True)
    hold: bool = False

    def append(self, partition, key, value, now_ms, done) -> None:
        if self.fail_with is not None:
            done(self.fail_with)
            return
        self.records.setdefault(partition, []).append((key, value))
        if self.hold:
            self.held.append(done)
        else:
            done(ErrorCode.NONE)

    def release(self) -> None:
        held, self.held = self.held, []
        for done in held:
            done(ErrorCode.NONE)


class Harness:
    def __init__(self, topic: StateTopic | None = None, epoch: int = 0) -> None:
        self.topic = topic or StateTopic()
        self.jobs: list[MarkerJob] = []
        self.coordinator = TransactionCoordinator(CONFIG, self.topic.append, self.jobs.append)
        self.next_pid = 1000
        for p in range(CONFIG.state_partitions):
            loader = StateLoader()
            for key, value in self.topic.records.get(p, []):
                loader.add(key, value)
            token = self.coordinator.begin_loading(p, epoch)
            self.coordinator.finish_loading(p, token, loader)

    def init(self, tid, timeout=10_000, expected=None, now=0):
        out = []
        pid = None
        if self.coordinator.needs_producer_id(tid):
            pid = self.next_pid
            self.next_pid += 1
        self.coordinator.init_producer_id(
            tid, timeout, expected, pid, now, lambda c, p, e: out.append((c, p, e))
        )
        return out[0] if out else None

    def add(self, tid, pid, epoch, partitions, now=0):
        out = []
        self.coordinator.add_partitions(tid, pid, epoch, partitions, now, out.append)
        return out[0] if out else None

    def end(self, tid, pid, epoch, commit, now=0):
        out = []
        self.coordinator.end_txn(tid, pid, epoch, commit, now, out.append)
        return out[0] if out else None

    def state(self, tid):
        return self.coordinator.describe(tid)[1]


def test_init_gives_a_producer_id_and_bumps_the_epoch_each_time():
    h = Harness()
    code, pid, epoch = h.init("a")
    assert (code, epoch) == (ErrorCode.NONE, 0)
    assert h.init("a") == (ErrorCode.NONE, pid, 1)
    assert h.state("a").state == TxnState.EMPTY


def test_timeout_bounded_by_max_and_empty_id_refused():
    h = Harness()
    assert (
        h.init("a", timeout=CONFIG.max_timeout_ms + 1)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    )
    assert h.init("a", timeout=0)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert h.init("")[0] == ErrorCode.INVALID_REQUEST
    assert h.init("x" * 40_000)[0] == ErrorCode.INVALID_REQUEST  # beyond an int16 string


def test_a_second_producer_fences_the_zombie_and_aborts_its_transaction():
    h = Harness()
    _, pid, epoch = h.init("a")
    assert h.add("a", pid, epoch, [T0, T1]) == ErrorCode.NONE
    assert h.state("a").state == TxnState.ONGOING
    # The new producer: the ongoing transaction is aborted with a bumped epoch first.
    assert h.init("a")[0] == ErrorCode.CONCURRENT_TRANSACTIONS
    md = h.state("a")
    assert md.state == TxnState.PREPARE_ABORT and md.producer_epoch == epoch + 1
    assert h.jobs[-1] == MarkerJob("a", pid, epoch + 1, False, 0, frozenset({T0, T1}))
    # The zombie is fenced wherever it goes.
    assert h.add("a", pid, epoch, [T0]) == ErrorCode.PRODUCER_FENCED
    assert h.end("a", pid, epoch, True) == ErrorCode.PRODUCER_FENCED
    assert h.init("a")[0] == ErrorCode.CONCURRENT_TRANSACTIONS  # markers not written yet
    h.coordinator.markers_written(h.jobs[-1], 1)
    assert h.state("a").state == TxnState.COMPLETE_ABORT
    assert h.init("a") == (ErrorCode.NONE, pid, epoch + 2)
    assert h.end("a", pid, epoch, True) == ErrorCode.PRODUCER_FENCED


def test_commit_flow_and_retries():
    h = Harness()
    _, pid, epoch = h.init("a")
    assert h.end("a", pid, epoch, True) == ErrorCode.INVALID_TXN_STATE  # nothing to end
    assert h.add("a", pid, epoch, [T0], now=5) == ErrorCode.NONE
    assert h.add("a", pid, epoch, [T0], now=6) == ErrorCode.NONE  # already in: no write
    assert h.state("a").start_ms == 5
    assert h.end("a", pid, epoch, True) == ErrorCode.NONE
    assert h.state("a").state == TxnState.PREPARE_COMMIT
    assert h.end("a", pid, epoch, True) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert h.end("a", pid, epoch, False) == ErrorCode.INVALID_TXN_STATE
    assert h.add("a", pid, epoch, [T1]) == ErrorCode.CONCURRENT_TRANSACTIONS
    h.coordinator.markers_written(h.jobs[-1], 10)
    md = h.state("a")
    assert md.state == TxnState.COMPLETE_COMMIT and not md.partitions
    assert h.end("a", pid, epoch, True) == ErrorCode.NONE  # retry of a completed commit
    assert h.add("a", pid + 1, epoch, [T0]) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert h.add("a", pid, epoch, [T1]) == ErrorCode.NONE  # the next transaction


def test_verify_only_answers_whether_a_partition_is_in_the_transaction():
    h = Harness()
    _, pid, epoch = h.init("a")
    h.add("a", pid, epoch, [T0])
    v = h.coordinator.verify
    assert v("a", pid, epoch, [T0, T1]) == {T0: ErrorCode.NONE, T1: ErrorCode.INVALID_TXN_STATE}
    assert v("a", pid, epoch + 1, [T0]) == {T0: ErrorCode.PRODUCER_FENCED}
    assert v("b", pid, epoch, [T0]) == {T0: ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    assert h.state("a").partitions == {T0}  # verification added nothing


def test_pending_write_makes_others_wait_and_failed_write_changes_nothing():
    h = Harness()
    _, pid, epoch = h.init("a")
    h.topic.hold = True
    out = []
    h.coordinator.add_partitions("a", pid, epoch, [T0], 0, out.append)
    assert out == [] and h.add("a", pid, epoch, [T1]) == ErrorCode.CONCURRENT_TRANSACTIONS
    h.topic.release()
    assert out == [ErrorCode.NONE]
    h.topic.hold = False
    h.topic.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS
    assert h.end("a", pid, epoch, True) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert h.state("a").state == TxnState.ONGOING and h.state("a").pending is None


def test_timed_out_transaction_is_aborted_with_the_epoch_fence():
    h = Harness()
    _, pid, epoch = h.init("a", timeout=1000)
    h.add("a", pid, epoch, [T0], now=100)
    assert h.coordinator.abort_timed_out(1000) == 0
    assert h.coordinator.abort_timed_out(1101) == 1
    md = h.state("a")
    assert md.state == TxnState.PREPARE_ABORT and md.producer_epoch == epoch + 1
    assert h.end("a", pid, epoch, True) == ErrorCode.PRODUCER_FENCED


def test_idle_ids_expire_with_a_tombstone():
    h = Harness()
    h.init("a", now=0)
    assert h.coordinator.expire_ids(CONFIG.id_expiration_ms - 1) == 0
    assert h.coordinator.expire_ids(CONFIG.id_expiration_ms) == 1
    assert h.coordinator.describe("a")[0] == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    p = h.coordinator.partition_for("a")
    assert h.topic.records[p][-1][1] is None
    assert Harness(h.topic).coordinator.describe("a")[0] == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


def test_a_new_coordinator_loads_the_state_and_resends_unfinished_markers():
    h = Harness()
    _, pid, epoch = h.init("a")
    h.add("a", pid, epoch, [T0, T1], now=3)
    h.end("a", pid, epoch, True)
    _, pid_b, epoch_b = h.init("b")
    h.add("b", pid_b, epoch_b, [T1])
    # The coordinator's broker dies; another one loads with a new coordinator epoch.
    h2 = Harness(h.topic, epoch=7)
    md = h2.state("a")
    assert (md.state, md.producer_id, md.producer_epoch) == (TxnState.PREPARE_COMMIT, pid, epoch)
    assert md.partitions == {T0, T1} and md.start_ms == 3
    assert h2.jobs == [MarkerJob("a", pid, epoch, True, 7, frozenset({T0, T1}))]
    assert h2.state("b").state == TxnState.ONGOING
    # A job of the old coordinator epoch changes nothing; the new one completes.
    h2.coordinator.markers_written(h.jobs[-1], 5)
    assert h2.state("a").state == TxnState.PREPARE_COMMIT
    h2.coordinator.markers_written(h2.jobs[-1], 5)
    assert h2.state("a").state == TxnState.COMPLETE_COMMIT


def test_not_coordinator_and_loading():
    h = Harness()
    p = h.coordinator.partition_for("a")
    h.coordinator.unload(p)
    assert h.init("a")[0] == ErrorCode.NOT_COORDINATOR
    h.coordinator.begin_loading(p, 1)
    assert h.init("a")[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert h.coordinator.describe("a")[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def test_write_answered_after_unload_is_not_coordinator():
    h = Harness()
    _, pid, epoch = h.init("a")
    h.topic.hold = True
    out = []
    h.coordinator.add_partitions("a", pid, epoch, [T0], 0, out.append)
    h.coordinator.unload(h.coordinator.partition_for("a"))
    h.topic.release()
    assert out == [ErrorCode.NOT_COORDINATOR]


def test_list_transactions_filters():
    h = Harness()
    _, pid, epoch = h.init("a")
    h.add("a", pid, epoch, [T0])
    _, pid_b, _ = h.init("b")
    code, unknown, found = h.coordinator.list_transactions(["Ongoing", "Bogus"])
    assert (code, unknown, [md.transactional_id for md in found]) == (
        ErrorCode.NONE,
        ["Bogus"],
        ["a"],
    )
    _, _, found = h.coordinator.list_transactions([], [pid_b])
    assert [md.transactional_id for md in found] == ["b"]


def test_record_format_is_kafkas():
    # TransactionLogKey v0: int16 version, string id.
    assert state_log.encode_key("tx") == b"\x00\x00\x00\x02tx"
    value = StateValue(5, 2, 60000, TxnState.ONGOING, frozenset({T0, T1}), 10, 9)
    data = state_log.encode_value(value)
    assert data[:2] == b"\x00\x00" and data[2:10] == (5).to_bytes(8, "big")
    assert data[16] == 1  # the Ongoing status byte
    assert state_log.decode_value(data) == value
    assert state_log.decode_key(state_log.encode_key("tx")) == "tx"
    assert state_log.decode_value(None) is None
    loader = StateLoader()
    loader.add(b"\x00\x09junk", b"\x01")
    loader.add(state_log.encode_key("x"), data[:-3])
    assert loader.skipped == 2 and not loader.values


def test_partition_is_kafkas_hash():
    # Java: Utils.abs("my-txn".hashCode()) % 50
    h = 0
    for ch in "my-txn":
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h & 0x80000000 else h
    assert state_log.partition_for("my-txn", 50) == abs(h) % 50
