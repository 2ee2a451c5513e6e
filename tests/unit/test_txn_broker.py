"""The transaction coordinator inside real brokers (in-process cluster, fake clock):
FindCoordinator key type 1 creates `__transaction_state`, InitProducerId bumps epochs
and fences a zombie, AddPartitionsToTxn/EndTxn move the state that Describe/
ListTransactions show, markers go out to the partition leaders and are retried, and the
state survives the loss of the coordinator's broker."""

from __future__ import annotations

import trio

from broker.core.txn.state_log import TRANSACTION_STATE_TOPIC
from broker.tasks.txn_verifier import CoordinatorVerifier
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition
from tests.support.cluster import open_test_cluster
from tests.unit.test_group_broker import ask, find_coordinator

SETTINGS = {
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}


async def find_txn_coordinator(cluster, tid: str) -> int:
    for _ in range(300):
        for broker in cluster.live():
            answer = await ask(cluster, broker.id, m.FindCoordinatorRequest(key=tid, key_type=1))
            if answer.error_code == ErrorCode.NONE:
                return answer.node_id
        await trio.sleep(0.1)
    raise AssertionError(f"no coordinator for {tid}")


async def retrying(cluster, node: int, request, code_of=lambda r: r.error_code):
    """Ask until the answer is not a retriable coordinator error (loading, moving)."""
    retriable = {
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
    }
    for _ in range(300):
        answer = await ask(cluster, node, request)
        if code_of(answer) not in retriable:
            return answer
        await trio.sleep(0.1)
    raise AssertionError(f"{request} kept answering {code_of(answer)}")


def init(tid: str, timeout_ms: int = 60_000) -> m.InitProducerIdRequest:
    return m.InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout_ms)


def add(tid, pid, epoch, topic="t", partitions=(0, 1), verify_only=False):
    return m.AddPartitionsToTxnRequest(
        transactional_id=tid,
        producer_id=pid,
        producer_epoch=epoch,
        topics=[m.AddPartitionsToTxnTopic(name=topic, partitions=list(partitions))],
        verify_only=verify_only,
    )


def add_code(answer: m.AddPartitionsToTxnResponse) -> ErrorCode:
    codes = {p.error_code for t in answer.results for p in t.results}
    assert len(codes) == 1, answer
    return ErrorCode(codes.pop())


async def describe(cluster, node: int, tid: str) -> m.TransactionState:
    answer = await ask(cluster, node, m.DescribeTransactionsRequest(transactional_ids=[tid]))
    [state] = answer.transaction_states
    return state


async def test_transactions_through_the_brokers_and_a_coordinator_failover(autojump_clock):
    async with open_test_cluster(3, topics={"t": 2}, broker_settings=SETTINGS) as cluster:
        coordinator = await find_txn_coordinator(cluster, "tx")
        assert TRANSACTION_STATE_TOPIC in cluster.brokers[coordinator].server.metadata_cache.topics
        other = next(b.id for b in cluster.live() if b.id != coordinator)
        refused = await ask(cluster, other, init("tx"))
        assert refused.error_code == ErrorCode.NOT_COORDINATOR
        too_long = await retrying(cluster, coordinator, init("tx", timeout_ms=10**9))
        assert too_long.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT

        first = await retrying(cluster, coordinator, init("tx"))
        assert (first.error_code, first.producer_epoch) == (ErrorCode.NONE, 0)
        pid = first.producer_id
        answer = await retrying(cluster, coordinator, add("tx", pid, 0), add_code)
        assert add_code(answer) == ErrorCode.NONE
        state = await describe(cluster, coordinator, "tx")
        assert (state.transaction_state, state.producer_id, state.producer_epoch) == (
            "Ongoing",
            pid,
            0,
        )
        assert [(t.topic, sorted(t.partitions)) for t in state.topics] == [("t", [0, 1])]
        unknown = await ask(cluster, coordinator, add("tx", pid, 0, topic="nope", partitions=[0]))
        assert add_code(unknown) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        verified = await ask(
            cluster, coordinator, add("tx", pid, 0, partitions=[0], verify_only=True)
        )
        assert add_code(verified) == ErrorCode.NONE

        # A second producer with the same id: the zombie's transaction is aborted with a
        # bumped epoch (the new producer is told to retry until the abort completes:
        # its markers need the partition leaders' WriteTxnMarkers, which this branch's
        # brokers do not serve yet, so they are retried meanwhile).
        second = await ask(cluster, coordinator, init("tx"))
        assert second.error_code == ErrorCode.CONCURRENT_TRANSACTIONS
        state = await describe(cluster, coordinator, "tx")
        assert (state.transaction_state, state.producer_epoch) in {
            ("PrepareAbort", 1),
            ("CompleteAbort", 1),
        }
        fenced = await ask(cluster, coordinator, add("tx", pid, 0))
        assert add_code(fenced) == ErrorCode.PRODUCER_FENCED
        end = m.EndTxnRequest(
            transactional_id="tx", producer_id=pid, producer_epoch=0, committed=True
        )
        assert (await ask(cluster, coordinator, end)).error_code == ErrorCode.PRODUCER_FENCED
        sender = cluster.brokers[coordinator].server.transactions.markers
        # Retried while no leader can write them; written at once where they can.
        await cluster.until(lambda: sender.stats.requests >= 1, "marker requests sent")

        # Another producer commits: PrepareCommit, then markers to the leaders.
        coordinator2 = await find_txn_coordinator(cluster, "tx2")
        other_pid = (await retrying(cluster, coordinator2, init("tx2"))).producer_id
        answer = await retrying(cluster, coordinator2, add("tx2", other_pid, 0), add_code)
        assert add_code(answer) == ErrorCode.NONE
        end = m.EndTxnRequest(
            transactional_id="tx2", producer_id=other_pid, producer_epoch=0, committed=True
        )
        assert (await ask(cluster, coordinator2, end)).error_code == ErrorCode.NONE
        state = await describe(cluster, coordinator2, "tx2")
        assert state.transaction_state in ("PrepareCommit", "CompleteCommit")
        listed = await ask(cluster, coordinator, m.ListTransactionsRequest(state_filters=["Bogus"]))
        assert listed.unknown_state_filters == ["Bogus"]
        listed = await ask(cluster, coordinator, m.ListTransactionsRequest())
        listed_ids = [(t.transactional_id, t.producer_id) for t in listed.transaction_states]
        if coordinator == coordinator2:
            assert listed_ids == [("tx", pid), ("tx2", other_pid)]
        else:
            assert listed_ids == [("tx", pid)]

        # The coordinator's broker dies: another one loads __transaction_state and
        # describes the same transaction (and resends its markers).
        await cluster.stop_broker(coordinator)
        successor = await find_txn_coordinator(cluster, "tx")
        assert successor != coordinator
        for _ in range(100):
            state = await describe(cluster, successor, "tx")
            if state.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                break
            await trio.sleep(0.1)
        assert (state.error_code, state.producer_id, state.producer_epoch) == (
            ErrorCode.NONE,
            pid,
            1,
        )
        assert state.transaction_state in ("PrepareAbort", "CompleteAbort")
        resent = cluster.brokers[successor].server.transactions.markers
        if state.transaction_state == "PrepareAbort":
            await cluster.until(lambda: resent.stats.requests >= 1, "markers resent")
        fenced = await ask(cluster, successor, add("tx", pid, 0))
        assert add_code(fenced) == ErrorCode.PRODUCER_FENCED


async def test_the_kip890_verifier_asks_the_coordinator_from_any_broker(autojump_clock):
    async with open_test_cluster(3, topics={"t": 2}, broker_settings=SETTINGS) as cluster:
        coordinator = await find_txn_coordinator(cluster, "v")
        got = await retrying(cluster, coordinator, init("v"))
        pid = got.producer_id
        assert (
            add_code(
                await retrying(cluster, coordinator, add("v", pid, 0, partitions=[0]), add_code)
            )
            == 0
        )
        t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
        for broker in cluster.live():  # the coordinator itself, and the others over the network
            verifier = broker.server.replica_manager.txn_verifier
            answer = await verifier.verify("v", pid, 0, [t0, t1])
            assert answer == {t0: ErrorCode.NONE, t1: ErrorCode.INVALID_TXN_STATE}, broker.id
            fenced = await verifier.verify("v", pid, 1, [t0])
            assert fenced == {t0: ErrorCode.PRODUCER_FENCED}
            unknown = await verifier.verify("nobody", 5, 0, [t0])
            assert unknown[t0] in (
                ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                ErrorCode.NOT_ENOUGH_REPLICAS,
            )


async def test_a_timed_out_transaction_is_aborted_and_its_producer_fenced(autojump_clock):
    async with open_test_cluster(1, topics={"t": 2}, broker_settings=SETTINGS) as cluster:
        coordinator = await find_txn_coordinator(cluster, "slow")
        got = await retrying(cluster, coordinator, init("slow", timeout_ms=2000))
        pid = got.producer_id
        assert add_code(await retrying(cluster, coordinator, add("slow", pid, 0), add_code)) == 0
        await trio.sleep(4)
        state = await describe(cluster, coordinator, "slow")
        assert state.transaction_state in ("PrepareAbort", "CompleteAbort")
        assert state.producer_epoch == 1
        end = m.EndTxnRequest(
            transactional_id="slow", producer_id=pid, producer_epoch=0, committed=True
        )
        assert (await ask(cluster, coordinator, end)).error_code == ErrorCode.PRODUCER_FENCED


async def test_transactional_offsets_become_visible_with_the_commit(autojump_clock):
    async with open_test_cluster(3, topics={"t": 2}, broker_settings=SETTINGS) as cluster:
        coordinator = await find_txn_coordinator(cluster, "ctp")
        got = await retrying(cluster, coordinator, init("ctp"))
        pid = got.producer_id
        added = await retrying(
            cluster,
            coordinator,
            m.AddOffsetsToTxnRequest(
                transactional_id="ctp", producer_id=pid, producer_epoch=0, group_id="g"
            ),
        )
        assert added.error_code == ErrorCode.NONE
        group_coordinator = await find_coordinator(cluster, "g")

        def commit(partition: int, offset: int) -> m.TxnOffsetCommitRequest:
            return m.TxnOffsetCommitRequest(
                transactional_id="ctp",
                group_id="g",
                producer_id=pid,
                producer_epoch=0,
                topics=[
                    m.TxnOffsetCommitRequestTopic(
                        name="t",
                        partitions=[
                            m.TxnOffsetCommitRequestPartition(
                                partition_index=partition, committed_offset=offset
                            )
                        ],
                    )
                ],
            )

        def code_of(answer: m.TxnOffsetCommitResponse) -> ErrorCode:
            return ErrorCode(answer.topics[0].partitions[0].error_code)

        for partition, offset in ((0, 5), (1, 7)):  # two writes of one producer and epoch
            answer = await retrying(
                cluster, group_coordinator.node_id, commit(partition, offset), code_of
            )
            assert code_of(answer) == ErrorCode.NONE

        fetch = m.OffsetFetchRequest(
            group_id="g",
            topics=[m.OffsetFetchTopic(name="t", partition_indexes=[0, 1])],
            require_stable=True,
        )
        pending = await ask(cluster, group_coordinator.node_id, fetch)
        assert {p.error_code for p in pending.topics[0].partitions} == {
            ErrorCode.UNSTABLE_OFFSET_COMMIT
        }
        end = m.EndTxnRequest(
            transactional_id="ctp", producer_id=pid, producer_epoch=0, committed=True
        )
        assert (await ask(cluster, coordinator, end)).error_code == ErrorCode.NONE
        for _ in range(300):
            fetched = await ask(cluster, group_coordinator.node_id, fetch)
            offsets = {p.partition_index: p.committed_offset for p in fetched.topics[0].partitions}
            if offsets == {0: 5, 1: 7}:
                break
            await trio.sleep(0.1)
        assert offsets == {0: 5, 1: 7}
        txns = cluster.brokers[coordinator].server.transactions.coordinator

        def completed() -> bool:
            md = txns.describe("ctp")[1]
            return md is not None and md.state.display == "CompleteCommit"

        await cluster.until(completed, "the transaction completes")


async def test_verification_can_be_turned_off(autojump_clock):
    settings = {**SETTINGS, "transaction.partition.verification.enable": "false"}
    async with open_test_cluster(1, broker_settings=settings) as cluster:
        rm = cluster.brokers[1].server.replica_manager
        assert not isinstance(getattr(rm, "txn_verifier", None), CoordinatorVerifier)


async def test_a_commit_completes_as_soon_as_its_markers_are_written(autojump_clock):
    """Once the leaders have written the COMMIT markers the coordinator writes
    CompleteCommit at once, not after the marker sender's retry backoff (100 ms): the
    producer's next transaction is refused (CONCURRENT_TRANSACTIONS) until then, so that
    wait was paid by every transaction."""
    async with open_test_cluster(3, topics={"t": 2}, broker_settings=SETTINGS) as cluster:
        coordinator = await find_txn_coordinator(cluster, "quick")
        pid = (await retrying(cluster, coordinator, init("quick"))).producer_id
        assert add_code(await retrying(cluster, coordinator, add("quick", pid, 0), add_code)) == 0
        end = m.EndTxnRequest(
            transactional_id="quick", producer_id=pid, producer_epoch=0, committed=True
        )
        assert (await ask(cluster, coordinator, end)).error_code == ErrorCode.NONE
        answered = trio.current_time()
        sender = cluster.brokers[coordinator].server.transactions.markers
        while (await describe(cluster, coordinator, "quick")).transaction_state != "CompleteCommit":
            await trio.sleep(0.005)
        assert sender.stats.retries == 0
        assert trio.current_time() - answered < sender.retry_backoff_s
