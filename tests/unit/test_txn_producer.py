"""The transactional producer's requests, against an in-process cluster whose transaction
APIs are answered by a scripted coordinator (so that busy, moved and fencing
coordinators can be chosen; tests/integration/test_txn_producer.py runs against real
brokers).

The script keeps Kafka's rules a client must follow: a partition is added to the
transaction (AddPartitionsToTxn) before a batch is produced to it, the batches carry the
transactional bit, the producer id and epoch of InitProducerId and the transactional id,
and a newer InitProducerId fences the older epoch (PRODUCER_FENCED).

The last test runs on the in-process brokers' own transaction coordinator."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import pytest
import trio

from client.consumer import open_consumer
from client.producer import (
    ConsumerGroupMetadata,
    ProducerFencedError,
    TransactionError,
    open_producer,
)
from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.records import ATTR_TRANSACTIONAL, iter_batches
from client.protocol.types import TopicPartition
from tests.support.cluster import TestCluster, open_test_cluster
from tests.unit.test_group_consumer import cluster_for_groups, group_consumer

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


class ScriptedCoordinator:
    """Answers the transaction APIs (and transactional Produce) as a coordinator and
    leaders would, recording what happened in `log` and any broken rule in `violations`."""

    def __init__(self, cluster: TestCluster) -> None:
        self.cluster = cluster
        self.log: list[tuple[Any, ...]] = []
        self.violations: list[str] = []
        self.epochs: dict[str, tuple[int, int]] = {}  # transactional id -> (id, epoch)
        self.in_txn: set[TopicPartition] = set()
        self.offsets: dict[TopicPartition, int] = defaultdict(int)
        self.busy: dict[ApiKey, list[ErrorCode]] = defaultdict(list)  # answers to give first
        self.produce_errors: dict[TopicPartition, ErrorCode] = {}
        self.next_id = 1000
        self.ended: list[bool] = []  # each transaction's outcome, as the coordinator took it
        # (producer id, epoch, partition) -> the next sequence the "leader" expects
        self.sequences: dict[tuple[int, int, TopicPartition], int] = defaultdict(int)
        for api, answer in {
            ApiKey.FIND_COORDINATOR: self.find,
            ApiKey.INIT_PRODUCER_ID: self.init,
            ApiKey.ADD_PARTITIONS_TO_TXN: self.add_partitions,
            ApiKey.ADD_OFFSETS_TO_TXN: self.add_offsets,
            ApiKey.TXN_OFFSET_COMMIT: self.txn_offset_commit,
            ApiKey.END_TXN: self.end_txn,
            ApiKey.PRODUCE: self.produce,
        }.items():
            cluster.script(api, answer)

    def _busy(self, api: ApiKey) -> ErrorCode | None:
        return self.busy[api].pop(0) if self.busy[api] else None

    def _fenced(self, txn_id: str, producer_id: int, epoch: int) -> bool:
        return self.epochs.get(txn_id) != (producer_id, epoch)

    def find(self, broker: int, request: m.FindCoordinatorRequest) -> Any:
        if request.key_type != 1:
            return None  # groups: the real broker answers
        self.log.append(("find", broker))
        coordinator = self.cluster.brokers[1]
        return m.FindCoordinatorResponse(
            throttle_time_ms=0,
            error_code=self._busy(ApiKey.FIND_COORDINATOR) or ErrorCode.NONE,
            error_message=None,
            node_id=1,
            host=coordinator.host,
            port=coordinator.port,
        )

    def init(self, broker: int, request: m.InitProducerIdRequest) -> Any:
        if request.transactional_id is None:
            return None
        entry = ("init", request.transactional_id, request.transaction_timeout_ms)
        if request.producer_id >= 0:  # KIP-360: a bump of the current epoch
            entry += (request.producer_id, request.producer_epoch)
            if self._fenced(request.transactional_id, request.producer_id, request.producer_epoch):
                self.violations.append(f"an epoch bump from a stale epoch: {request}")
        self.log.append(entry)
        code = self._busy(ApiKey.INIT_PRODUCER_ID)
        if code is not None:
            return m.InitProducerIdResponse(
                throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1
            )
        pid, epoch = self.epochs.get(request.transactional_id, (self.next_id, -1))
        self.epochs[request.transactional_id] = (pid, epoch + 1)
        self.in_txn.clear()  # the open transaction of the older epoch is aborted
        return m.InitProducerIdResponse(
            throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=pid, producer_epoch=epoch + 1
        )

    def add_partitions(self, broker: int, request: m.AddPartitionsToTxnRequest) -> Any:
        tps = [TopicPartition(t.name, p) for t in request.topics for p in t.partitions]
        self.log.append(("add", tuple(sorted(tps))))
        code = self._busy(ApiKey.ADD_PARTITIONS_TO_TXN)
        if code is None:
            fenced = self._fenced(
                request.transactional_id, request.producer_id, request.producer_epoch
            )
            code = ErrorCode.PRODUCER_FENCED if fenced else ErrorCode.NONE
        if code is ErrorCode.NONE:
            self.in_txn.update(tps)
        return m.AddPartitionsToTxnResponse(
            throttle_time_ms=0,
            results=[
                m.AddPartitionsToTxnTopicResult(
                    name=t.name,
                    results=[
                        m.AddPartitionsToTxnPartitionResult(partition=p, error_code=code)
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ],
        )

    def add_offsets(self, broker: int, request: m.AddOffsetsToTxnRequest) -> Any:
        self.log.append(("add_offsets", request.group_id))
        return m.AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.NONE)

    def txn_offset_commit(self, broker: int, request: m.TxnOffsetCommitRequest) -> Any:
        self.log.append(
            ("txn_offset_commit", request.group_id, request.generation_id, request.member_id)
        )
        return m.TxnOffsetCommitResponse(
            throttle_time_ms=0,
            topics=[
                m.TxnOffsetCommitResponseTopic(
                    name=t.name,
                    partitions=[
                        m.TxnOffsetCommitResponsePartition(
                            partition_index=p.partition_index, error_code=ErrorCode.NONE
                        )
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ],
        )

    def end_txn(self, broker: int, request: m.EndTxnRequest) -> Any:
        self.log.append(("end", request.committed))
        code = self._busy(ApiKey.END_TXN)
        if code is None:
            fenced = self._fenced(
                request.transactional_id, request.producer_id, request.producer_epoch
            )
            code = ErrorCode.PRODUCER_FENCED if fenced else ErrorCode.NONE
        if code is ErrorCode.NONE:
            self.in_txn.clear()
            self.ended.append(request.committed)
        return m.EndTxnResponse(throttle_time_ms=0, error_code=code)

    def produce(self, broker: int, request: m.ProduceRequest) -> Any:
        if request.transactional_id is None:
            return None
        topics = []
        for topic in request.topics:
            parts = []
            for part in topic.partitions:
                tp = TopicPartition(topic.name, part.partition)
                headers = [header for _, header in iter_batches(part.records)]
                self.log.append(("produce", tp, sum(h.records_count for h in headers)))
                code = self.produce_errors.get(tp, ErrorCode.NONE)
                for header in headers:
                    key = (header.producer_id, header.producer_epoch, tp)
                    if header.base_sequence != self.sequences[key]:
                        code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
                    if not header.attributes & ATTR_TRANSACTIONAL:
                        self.violations.append(f"a batch for {tp} is not transactional")
                    if self._fenced(
                        request.transactional_id, header.producer_id, header.producer_epoch
                    ):
                        code = ErrorCode.INVALID_PRODUCER_EPOCH
                if tp not in self.in_txn and code is ErrorCode.NONE:
                    self.violations.append(f"produced to {tp} before it was added")
                base = self.offsets[tp]
                if code is ErrorCode.NONE:
                    self.offsets[tp] += sum(h.records_count for h in headers)
                    for h in headers:
                        key = (h.producer_id, h.producer_epoch, tp)
                        self.sequences[key] = h.base_sequence + h.records_count
                parts.append(
                    m.ProduceResponsePartition(
                        partition=part.partition,
                        error_code=code,
                        base_offset=base if code is ErrorCode.NONE else -1,
                        log_append_time_ms=-1,
                        log_start_offset=0,
                        error_message=None,
                    )
                )
            topics.append(m.ProduceResponseTopic(name=topic.name, partitions=parts))
        return m.ProduceResponse(topics=topics, throttle_time_ms=0)

    def kinds(self) -> list[str]:
        return [entry[0] for entry in self.log]


def txn_producer(cluster: TestCluster, txn_id: str = "tx", **config: Any):
    return open_producer(
        cluster.bootstrap,
        connector=cluster.connector(),
        transactional_id=txn_id,
        transaction_timeout_ms=30_000,
        **config,
    )


async def test_a_transaction_adds_its_partitions_before_producing_then_commits(autojump_clock):
    async with open_test_cluster(1, topics={"t": 2}) as cluster:
        script = ScriptedCoordinator(cluster)
        async with txn_producer(cluster) as producer:
            await producer.init_transactions()
            assert script.log == [("find", 1), ("init", "tx", 30_000)]
            producer.begin_transaction()
            handles = [await producer.send("t", b"v%d" % i, partition=i % 2) for i in range(10)]
            await producer.commit_transaction()
            offsets = sorted([(h.topic_partition.partition, (await h).offset) for h in handles])
            assert offsets == [(p, o) for p in (0, 1) for o in range(5)]
            # The next transaction adds its partitions again.
            producer.begin_transaction()
            await producer.send("t", b"again", partition=1)
            await producer.commit_transaction()
        produce_requests = cluster.requests_of(m.ProduceRequest)
        assert produce_requests and all(r.transactional_id == "tx" for r in produce_requests)
        assert all(r.acks == -1 for r in produce_requests)
    assert script.violations == []
    kinds = script.kinds()
    assert kinds.count("end") == 2 and script.log[-1] == ("end", True)
    first_end = kinds.index("end")
    assert "produce" not in kinds[first_end + 1 : kinds.index("add", first_end)]
    assert all(kind != "produce" for kind in kinds[kinds.index("end", first_end + 1) :])


async def test_abort_drops_unsent_records_and_ends_with_an_abort(autojump_clock):
    async with open_test_cluster(1, topics={"t": 2}) as cluster:
        script = ScriptedCoordinator(cluster)
        async with txn_producer(cluster, linger_ms=60_000) as producer:
            await producer.init_transactions()
            producer.begin_transaction()
            handle = await producer.send("t", b"never", partition=0)
            await trio.sleep(1)  # the sender adds the partition; the batch lingers
            await producer.abort_transaction()
            with pytest.raises(TransactionError, match="aborted"):
                await handle
            # The producer goes on: the next transaction commits.
            producer.begin_transaction()
            kept = await producer.send("t", b"kept", partition=0)
            await producer.commit_transaction()
            assert (await kept).offset == 0
    assert script.violations == []
    assert [e for e in script.log if e[0] in ("add", "produce", "end")] == [
        ("add", (T0,)),
        ("end", False),
        ("add", (T0,)),
        ("produce", T0, 1),
        ("end", True),
    ]


async def test_nothing_sent_means_no_end_txn(autojump_clock):
    async with open_test_cluster(1, topics={"t": 1}) as cluster:
        script = ScriptedCoordinator(cluster)
        async with txn_producer(cluster) as producer:
            await producer.init_transactions()
            producer.begin_transaction()
            await producer.commit_transaction()
            producer.begin_transaction()
            await producer.abort_transaction()
    assert script.kinds() == ["find", "init"]


async def test_a_newer_producer_with_the_same_id_fences_the_older(autojump_clock):
    async with open_test_cluster(1, topics={"t": 2}) as cluster:
        script = ScriptedCoordinator(cluster)
        async with txn_producer(cluster) as zombie:
            await zombie.init_transactions()
            zombie.begin_transaction()
            await (await zombie.send("t", b"before", partition=0))  # sent under epoch 0
            async with txn_producer(cluster) as successor:
                await successor.init_transactions()  # epoch 1: fences the zombie
                successor.begin_transaction()
                await successor.send("t", b"ok", partition=1)
                await successor.commit_transaction()
            late = await zombie.send("t", b"late", partition=0)  # partition already added
            with pytest.raises(TransactionError) as info:
                await zombie.commit_transaction()
            assert isinstance(info.value, ProducerFencedError)
            with pytest.raises(TributaryError) as record_error:
                await late
            assert record_error.value.code is ErrorCode.INVALID_PRODUCER_EPOCH
            with pytest.raises(ProducerFencedError):
                await zombie.abort_transaction()
            with pytest.raises(ProducerFencedError):
                zombie.begin_transaction()
    assert script.violations == []
    assert ("end", True) in script.log


async def test_a_fenced_add_partitions_is_fatal(autojump_clock):
    async with open_test_cluster(1, topics={"t": 1}) as cluster:
        script = ScriptedCoordinator(cluster)
        async with txn_producer(cluster) as zombie:
            await zombie.init_transactions()
            async with txn_producer(cluster) as successor:
                await successor.init_transactions()
            zombie.begin_transaction()
            handle = await zombie.send("t", b"x")
            with pytest.raises(ProducerFencedError):
                await zombie.commit_transaction()
            with pytest.raises(ProducerFencedError):
                await handle
    assert "produce" not in script.kinds()


async def test_busy_and_moved_coordinators_are_retried(autojump_clock):
    async with open_test_cluster(1, topics={"t": 1}) as cluster:
        script = ScriptedCoordinator(cluster)
        script.busy[ApiKey.FIND_COORDINATOR] = [ErrorCode.COORDINATOR_NOT_AVAILABLE]
        script.busy[ApiKey.INIT_PRODUCER_ID] = [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]
        script.busy[ApiKey.ADD_PARTITIONS_TO_TXN] = [ErrorCode.CONCURRENT_TRANSACTIONS]
        script.busy[ApiKey.END_TXN] = [ErrorCode.NOT_COORDINATOR]
        async with txn_producer(cluster) as producer:
            await producer.init_transactions()
            producer.begin_transaction()
            handle = await producer.send("t", b"x")
            await producer.commit_transaction()
            assert (await handle).offset == 0
    assert script.violations == []
    assert script.kinds() == [
        "find",  # COORDINATOR_NOT_AVAILABLE
        "find",
        "init",  # COORDINATOR_LOAD_IN_PROGRESS
        "init",
        "add",  # CONCURRENT_TRANSACTIONS
        "add",
        "produce",
        "end",  # NOT_COORDINATOR: looked up again
        "find",
        "end",
    ]


async def test_the_next_transaction_waits_briefly_for_the_previous_ones_markers(autojump_clock):
    """A commit is answered before its markers are written, so the next transaction's
    first AddPartitionsToTxn may get CONCURRENT_TRANSACTIONS: it is sent again 20 ms
    later (Kafka's client), not after retry_backoff_ms (here 1 s)."""
    async with open_test_cluster(1, topics={"t": 1}) as cluster:
        script = ScriptedCoordinator(cluster)
        add_times: list[float] = []
        answer = script.add_partitions

        def timed_add(broker: int, request: m.AddPartitionsToTxnRequest) -> Any:
            add_times.append(trio.current_time())
            return answer(broker, request)

        cluster.script(ApiKey.ADD_PARTITIONS_TO_TXN, timed_add)
        async with txn_producer(cluster, retry_backoff_ms=1000) as producer:
            await producer.init_transactions()
            producer.begin_transaction()
            await producer.send("t", b"first")
            await producer.commit_transaction()
            script.busy[ApiKey.ADD_PARTITIONS_TO_TXN] = [ErrorCode.CONCURRENT_TRANSACTIONS] * 3
            producer.begin_transaction()
            handle = await producer.send("t", b"second")
            await producer.commit_transaction()
            assert (await handle).offset == 1
    assert script.violations == []
    retries = add_times[1:]
    assert len(retries) == 4  # three busy answers, then added
    gaps = [later - earlier for earlier, later in zip(retries, retries[1:], strict=False)]
    assert all(0.019 < gap < 0.5 for gap in gaps), gaps  # not 1 s


async def test_a_failed_record_makes_commit_raise_and_abort_recover(autojump_clock):
    async with open_test_cluster(1, topics={"t": 2}) as cluster:
        script = ScriptedCoordinator(cluster)
        script.produce_errors[T1] = ErrorCode.INVALID_RECORD
        async with txn_producer(cluster) as producer:
            await producer.init_transactions()
            producer.begin_transaction()
            await producer.send("t", b"fine", partition=0)
            await producer.send("t", b"bad", partition=1)
            with pytest.raises(TransactionError) as info:
                await producer.commit_transaction()
            assert info.value.txn_requires_abort and not info.value.fatal
            with pytest.raises(TransactionError, match="must be aborted"):
                await producer.send("t", b"more", partition=0)
            await producer.abort_transaction()  # then the epoch is bumped
            del script.produce_errors[T1]
            producer.begin_transaction()
            handles = [await producer.send("t", b"next", partition=p) for p in (0, 1)]
            await producer.commit_transaction()
            assert [(await h).offset for h in handles] == [1, 0]
    assert script.violations == []
    assert [e for e in script.log if e[0] in ("init", "end")] == [
        ("init", "tx", 30_000),
        ("end", False),
        ("init", "tx", 30_000, 1000, 0),  # KIP-360: the next epoch, sequences from 0
        ("end", True),
    ]


async def test_offsets_join_the_transaction_with_the_members_generation(autojump_clock):
    async with open_test_cluster(1, topics={"t": 1, "in": 1}) as cluster:
        script = ScriptedCoordinator(cluster)
        async with txn_producer(cluster) as producer:
            await producer.init_transactions()
            producer.begin_transaction()
            await producer.send("t", b"x")
            group = ConsumerGroupMetadata("g", generation_id=3, member_id="m-1")
            await producer.send_offsets_to_transaction({TopicPartition("in", 0): 42}, group)
            await producer.commit_transaction()
            producer.begin_transaction()
            await producer.send_offsets_to_transaction({("in", 0): 43}, "g")
            await producer.commit_transaction()
        commits = cluster.requests_of(m.TxnOffsetCommitRequest)
    assert [c.topics[0].partitions[0].committed_offset for c in commits] == [42, 43]
    assert [e for e in script.log if e[0] in ("add_offsets", "txn_offset_commit", "end")] == [
        ("add_offsets", "g"),
        ("txn_offset_commit", "g", 3, "m-1"),
        ("end", True),
        ("add_offsets", "g"),
        ("txn_offset_commit", "g", -1, ""),
        ("end", True),
    ]


async def test_illegal_calls_raise_kafkas_errors(autojump_clock):
    async with open_test_cluster(1, topics={"t": 1}) as cluster:
        ScriptedCoordinator(cluster)
        async with txn_producer(cluster) as producer:
            with pytest.raises(TransactionError, match="init_transactions"):
                await producer.send("t", b"x")
            await producer.init_transactions()
            with pytest.raises(TransactionError, match="Cannot call send in state READY"):
                await producer.send("t", b"x")
            with pytest.raises(TransactionError, match="invalid transition"):
                await producer.commit_transaction()
        async with open_producer(cluster.bootstrap, connector=cluster.connector()) as plain:
            with pytest.raises(TransactionError, match="non-transactional"):
                await plain.init_transactions()
    with pytest.raises(ValueError, match="idempotence"):
        async with txn_producer(cluster, enable_idempotence=False):
            pass
    with pytest.raises(ValueError, match="acks"):
        async with txn_producer(cluster, acks=1):
            pass


async def test_init_transactions_times_out_and_may_be_called_again(autojump_clock):
    async with open_test_cluster(1, topics={"t": 1}) as cluster:
        script = ScriptedCoordinator(cluster)
        script.busy[ApiKey.INIT_PRODUCER_ID] = [ErrorCode.CONCURRENT_TRANSACTIONS] * 50
        async with txn_producer(cluster, max_block_ms=1_000) as producer:
            with pytest.raises(Exception, match="no answer within"):
                await producer.init_transactions()
            script.busy[ApiKey.INIT_PRODUCER_ID].clear()
            await producer.init_transactions()
            producer.begin_transaction()
            with trio.fail_after(60):
                await producer.send("t", b"x")
                await producer.commit_transaction()


async def test_a_consume_transform_produce_loop_commits_with_the_members_generation(
    autojump_clock,
):
    """KIP-447: the offsets go with the consumer's group metadata (generation, member)."""
    async with cluster_for_groups(topics={"in": 1, "t": 1}) as cluster:
        script = ScriptedCoordinator(cluster)
        await cluster.append(("in", 0), b"a", b"b", b"c")
        async with group_consumer(cluster, "copier", auto_offset_reset="earliest") as consumer:
            consumer.subscribe(["in"])
            async with txn_producer(cluster) as producer:
                await producer.init_transactions()
                copied: list[bytes] = []
                with trio.fail_after(60):
                    while len(copied) < 3:
                        records = await consumer.poll(500)
                        if not records:
                            continue
                        producer.begin_transaction()
                        for record in records:
                            await producer.send("t", record.value.upper())
                        copied += [r.value for r in records]
                        next_offsets = {TopicPartition("in", 0): records[-1].offset + 1}
                        await producer.send_offsets_to_transaction(
                            next_offsets, consumer.group_metadata()
                        )
                        await producer.commit_transaction()
            membership = consumer.group.membership.generation
    commits = [entry for entry in script.log if entry[0] == "txn_offset_commit"]
    assert commits and all(
        entry == ("txn_offset_commit", "copier", membership.generation_id, membership.member_id)
        for entry in commits
    )
    assert membership.generation_id >= 1 and membership.member_id
    assert script.violations == []


async def test_random_busy_coordinators_never_break_the_rules(autojump_clock):
    """Twenty transactions, each committed or aborted at random, with the coordinator
    busy, moved or loading at random before each of its answers: every partition is
    added before it is produced to, each transaction ends once as decided, and exactly
    the records of committed transactions are acknowledged as written in them."""
    rng = random.Random(2028)
    busy = [
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ]
    apis = [ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN]
    decisions: list[bool] = []
    async with open_test_cluster(1, topics={"t": 3}) as cluster:
        script = ScriptedCoordinator(cluster)
        async with txn_producer(cluster, linger_ms=rng.choice([0, 5])) as producer:
            await producer.init_transactions()
            for _ in range(20):
                for api in apis:
                    script.busy[api] = rng.choices(busy, k=rng.randrange(3))
                producer.begin_transaction()
                handles = [
                    await producer.send("t", b"x", partition=rng.randrange(3))
                    for _ in range(rng.randrange(1, 8))
                ]
                if rng.random() < 0.3:
                    await producer.send_offsets_to_transaction({("in", 0): 1}, "g")
                commit = rng.random() < 0.5
                decisions.append(commit)
                if commit:
                    await producer.commit_transaction()
                    assert all([(await h).offset >= 0 for h in handles])
                else:
                    await producer.abort_transaction()
    assert script.violations == []
    # Each commit ends with EndTxn(commit), in order; an abort ends with EndTxn(abort)
    # unless it came before anything was added to its transaction.
    ended = iter(script.ended)
    for commit in decisions:
        if commit:
            assert next(end for end in ended if end) is True
    assert sum(decisions) == sum(script.ended)
    assert len(script.ended) > sum(decisions)  # and the aborts that had begun


# --- against the brokers' own transaction coordinator -----------------------------------


SINGLE_BROKER_TXN_SETTINGS = {
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "3",
}


async def test_a_failed_record_then_abort_and_epoch_bump_on_real_brokers(autojump_clock):
    """The brokers' own coordinator: a record answered with an error (injected: it is not
    written, so its sequence leaves a gap) makes the commit fail; the abort bumps the
    epoch (KIP-360) and the next transaction is written and read with read_committed."""
    tp = TopicPartition("t", 1)
    async with open_test_cluster(
        1, topics={"t": 2}, broker_settings=SINGLE_BROKER_TXN_SETTINGS
    ) as cluster:
        async with txn_producer(cluster, "real") as producer:
            with trio.fail_after(120):
                await producer.init_transactions()
            epoch = producer.idempotence.producer_epoch
            producer.begin_transaction()
            await (await producer.send("t", b"aborted", partition=1))
            cluster.fail(ApiKey.PRODUCE, ErrorCode.INVALID_RECORD, tp=tp)
            await producer.send("t", b"failed", partition=1)
            with pytest.raises(TransactionError) as info:
                await producer.commit_transaction()
            assert info.value.txn_requires_abort
            await producer.abort_transaction()
            assert producer.idempotence.producer_epoch == epoch + 1
            producer.begin_transaction()
            await producer.send("t", b"committed", partition=1)
            await producer.commit_transaction()
        async with open_consumer(
            cluster.bootstrap, connector=cluster.connector(), isolation_level="read_committed"
        ) as consumer:
            consumer.assign([tp])
            consumer.seek_to_beginning([tp])
            values: list[bytes] = []
            with trio.move_on_after(10):
                while not values:
                    values += [r.value for r in await consumer.poll(500)]
    assert values == [b"committed"]
