"""Request handlers for the transaction APIs: FindCoordinator for a transactional id,
InitProducerId with a transactional id, AddPartitionsToTxn (and KIP-890's `verify_only`),
AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeTransactions and ListTransactions.

How it works: as the group handlers, each handler turns a message into one call on the
sans-IO `TransactionCoordinator` (through `TxnService`) before any `await`, and the
coordinator's callback fills a `Reply` once `__transaction_state` has the change.
FindCoordinator key type 1 is answered from the metadata cache on the listener the
request came in on: the leader of `__transaction_state` partition
`abs(javaHash(transactional.id)) % N`, the topic created on first use
(COORDINATOR_NOT_AVAILABLE meanwhile). InitProducerId takes a new producer id from the
idempotent producers' blocks only when the coordinator needs one. AddPartitionsToTxn
answers UNKNOWN_TOPIC_OR_PARTITION for partitions the metadata cache does not know and
OPERATION_NOT_ATTEMPTED for the others of the request, as Kafka does; AddOffsetsToTxn
adds the group's `__consumer_offsets` partition; TxnOffsetCommit goes to the group
coordinator (`commit_txn_offsets`: pending until the producer's marker).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.core.group.coordinator import GroupCoordinator
from broker.core.group.offsets_topic import OFFSETS_TOPIC, OffsetValue
from broker.core.group.offsets_topic import partition_for as offsets_partition_for
from broker.core.metadata_cache import MetadataCache
from broker.core.txn.metadata import TransactionMetadata
from broker.core.txn.state_log import TRANSACTION_STATE_TOPIC
from broker.handlers.coordinators import coordinator_answer, locate_coordinator
from broker.handlers.producer_ids import ProducerIdHandlers
from broker.tasks.txn_service import TxnService
from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition
from server_common.network import Reply

TRANSACTION_KEY_TYPE = 1


def _partitions(topics: list[m.AddPartitionsToTxnTopic]) -> list[TopicPartition]:
    return [TopicPartition(t.name, p) for t in topics for p in t.partitions]


def add_partitions_answer(results: dict[TopicPartition, ErrorCode]) -> m.AddPartitionsToTxnResponse:
    by_topic: dict[str, list[m.AddPartitionsToTxnPartitionResult]] = {}
    for tp, code in results.items():
        by_topic.setdefault(tp.topic, []).append(
            m.AddPartitionsToTxnPartitionResult(partition=tp.partition, error_code=code)
        )
    return m.AddPartitionsToTxnResponse(
        throttle_time_ms=0,
        results=[
            m.AddPartitionsToTxnTopicResult(name=name, results=parts)
            for name, parts in by_topic.items()
        ],
    )


def transaction_state(md: TransactionMetadata) -> m.TransactionState:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(md.partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return m.TransactionState(
        error_code=ErrorCode.NONE,
        transactional_id=md.transactional_id,
        transaction_state=md.state.display,
        transaction_timeout_ms=md.timeout_ms,
        transaction_start_time_ms=md.start_ms,
        producer_id=md.producer_id,
        producer_epoch=md.producer_epoch,
        topics=[m.TransactionTopicPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()],
    )


class TransactionHandlers:
    def __init__(
        self,
        service: TxnService,
        metadata_cache: MetadataCache,
        producer_ids: ProducerIdHandlers,
        *,
        offsets_partitions: int,
        clock: Callable[[], int],
        groups: GroupCoordinator | None = None,
    ) -> None:
        self.groups = groups
        self.service = service
        self.coordinator = service.coordinator
        self.cache = metadata_cache
        self.producer_ids = producer_ids
        self.offsets_partitions = offsets_partitions
        self.now_ms = clock

    def dispatch(self) -> dict[int, Callable[[Any], Any]]:
        """API key -> handler, for `RequestHandlers`' table."""
        return {
            ApiKey.ADD_PARTITIONS_TO_TXN: self.add_partitions_to_txn,
            ApiKey.ADD_OFFSETS_TO_TXN: self.add_offsets_to_txn,
            ApiKey.END_TXN: self.end_txn,
            ApiKey.DESCRIBE_TRANSACTIONS: self.describe_transactions,
            ApiKey.LIST_TRANSACTIONS: self.list_transactions,
            ApiKey.TXN_OFFSET_COMMIT: self.txn_offset_commit,
        }

    # -- FindCoordinator (key type 1) ------------------------------------------------------
    async def find_coordinator(
        self, request: m.FindCoordinatorRequest, listener: str | None
    ) -> m.FindCoordinatorResponse:
        if not request.key:
            return coordinator_answer(
                listener, ErrorCode.INVALID_REQUEST, "the transactional id is empty"
            )
        return await locate_coordinator(
            self.cache,
            listener,
            TRANSACTION_STATE_TOPIC,
            self.coordinator.partition_for(request.key),
            self.service.ensure_state_topic,
        )

    # -- InitProducerId with a transactional id --------------------------------------------
    async def init_producer_id(self, request: m.InitProducerIdRequest) -> Any:
        tid = request.transactional_id or ""
        new_pid = None
        timeout_ok = 0 < request.transaction_timeout_ms <= self.coordinator.config.max_timeout_ms
        if tid and timeout_ok and self.coordinator.needs_producer_id(tid):
            if self.coordinator.state.status(tid) == ErrorCode.NONE:
                code, pid = await self.producer_ids.next_producer_id()
                if code != ErrorCode.NONE:
                    return m.InitProducerIdResponse(
                        throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1
                    )
                new_pid = pid
        expected = None
        if request.producer_id >= 0 or request.producer_epoch >= 0:
            expected = (request.producer_id, request.producer_epoch)
        reply = Reply()

        def respond(code: ErrorCode, pid: int, epoch: int) -> None:
            reply.set(
                m.InitProducerIdResponse(
                    throttle_time_ms=0, error_code=code, producer_id=pid, producer_epoch=epoch
                )
            )

        self.coordinator.init_producer_id(
            tid, request.transaction_timeout_ms, expected, new_pid, self.now_ms(), respond
        )
        return reply

    # -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------
    async def add_partitions_to_txn(self, request: m.AddPartitionsToTxnRequest) -> Any:
        partitions = _partitions(request.topics)
        if request.verify_only:
            return add_partitions_answer(
                self.coordinator.verify(
                    request.transactional_id,
                    request.producer_id,
                    request.producer_epoch,
                    partitions,
                )
            )
        unknown = {
            tp for tp in partitions if tp.partition not in self.cache.topics.get(tp.topic, {})
        }
        if unknown:
            return add_partitions_answer(
                {
                    tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    if tp in unknown
                    else ErrorCode.OPERATION_NOT_ATTEMPTED
                    for tp in partitions
                }
            )
        reply = Reply()

        def respond(code: ErrorCode) -> None:
            reply.set(add_partitions_answer({tp: code for tp in partitions}))

        self.coordinator.add_partitions(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            partitions,
            self.now_ms(),
            respond,
        )
        return reply

    async def add_offsets_to_txn(self, request: m.AddOffsetsToTxnRequest) -> Any:
        tp = TopicPartition(
            OFFSETS_TOPIC, offsets_partition_for(request.group_id, self.offsets_partitions)
        )
        reply = Reply()

        def respond(code: ErrorCode) -> None:
            reply.set(m.AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=code))

        if not request.group_id:
            respond(ErrorCode.INVALID_GROUP_ID)
            return reply
        self.coordinator.add_partitions(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            [tp],
            self.now_ms(),
            respond,
        )
        return reply

    # -- EndTxn ----------------------------------------------------------------------------
    async def end_txn(self, request: m.EndTxnRequest) -> Any:
        reply = Reply()

        def respond(code: ErrorCode) -> None:
            reply.set(m.EndTxnResponse(throttle_time_ms=0, error_code=code))

        self.coordinator.end_txn(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.committed,
            self.now_ms(),
            respond,
        )
        return reply

    # -- TxnOffsetCommit (through the group coordinator) ----------------------------------
    async def txn_offset_commit(self, request: m.TxnOffsetCommitRequest) -> Any:
        offsets = {
            (t.name, p.partition_index): OffsetValue(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch,
                metadata=p.committed_metadata or "",
                commit_timestamp_ms=self.now_ms(),
            )
            for t in request.topics
            for p in t.partitions
        }
        reply = Reply()

        def respond(results: dict[tuple[str, int], ErrorCode]) -> None:
            by_topic: dict[str, list[m.TxnOffsetCommitResponsePartition]] = {}
            for (topic, partition), code in results.items():
                by_topic.setdefault(topic, []).append(
                    m.TxnOffsetCommitResponsePartition(partition_index=partition, error_code=code)
                )
            reply.set(
                m.TxnOffsetCommitResponse(
                    throttle_time_ms=0,
                    topics=[
                        m.TxnOffsetCommitResponseTopic(name=name, partitions=parts)
                        for name, parts in by_topic.items()
                    ],
                )
            )

        if self.groups is None:
            respond({tp: ErrorCode.COORDINATOR_NOT_AVAILABLE for tp in offsets})
            return reply
        self.groups.commit_txn_offsets(
            request.group_id,
            request.producer_id,
            request.producer_epoch,
            request.generation_id,
            request.member_id,
            request.group_instance_id,
            offsets,
            self.now_ms(),
            respond,
        )
        return reply

    # -- Describe / ListTransactions -------------------------------------------------------
    async def describe_transactions(
        self, request: m.DescribeTransactionsRequest
    ) -> m.DescribeTransactionsResponse:
        states = []
        for tid in request.transactional_ids:
            code, md = self.coordinator.describe(tid)
            if md is None:
                states.append(
                    m.TransactionState(
                        error_code=code,
                        transactional_id=tid,
                        transaction_state="",
                        transaction_timeout_ms=0,
                        transaction_start_time_ms=-1,
                        producer_id=-1,
                        producer_epoch=-1,
                    )
                )
            else:
                states.append(transaction_state(md))
        return m.DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)

    async def list_transactions(
        self, request: m.ListTransactionsRequest
    ) -> m.ListTransactionsResponse:
        code, unknown, found = self.coordinator.list_transactions(
            request.state_filters, request.producer_id_filters
        )
        return m.ListTransactionsResponse(
            throttle_time_ms=0,
            error_code=code,
            unknown_state_filters=unknown,
            transaction_states=[
                m.ListedTransaction(
                    transactional_id=md.transactional_id,
                    producer_id=md.producer_id,
                    transaction_state=md.state.display,
                )
                for md in sorted(found, key=lambda md: md.transactional_id)
            ],
        )
