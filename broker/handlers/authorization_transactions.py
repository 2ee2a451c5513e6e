"""Authorization of the transaction APIs, as Kafka's KafkaApis checks them.

How it works: AddPartitionsToTxn needs Write on the TransactionalId (else every partition
is TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then Write on each topic: refused topics'
partitions are TOPIC_AUTHORIZATION_FAILED and the rest OPERATION_NOT_ATTEMPTED (nothing
is added). Its `verify_only` form comes from partition leaders (KIP-890) and needs
ClusterAction on the cluster. AddOffsetsToTxn needs Write on the TransactionalId, then
Read on the group; EndTxn, Write on the TransactionalId; TxnOffsetCommit, Write on the
TransactionalId, Read on the group, then Read on each topic; WriteTxnMarkers (from the
coordinator to partition leaders), ClusterAction on the cluster. DescribeTransactions
answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED for each id the principal may not
Describe; ListTransactions lists only the ids it may Describe (KIP-664).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from broker.handlers.authorization_check import (
    CLUSTER_DENIED,
    GROUP_DENIED,
    TOPIC_DENIED,
    TXN_DENIED,
    Call,
    Check,
    Op,
    cluster,
    replace,
    then,
)
from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.errors import ErrorCode
from server_common.security.acls import ResourceType

TXN_ID = ResourceType.TRANSACTIONAL_ID


def _add_partitions_answer(request: m.AddPartitionsToTxnRequest, code_of) -> Any:
    return m.AddPartitionsToTxnResponse(
        throttle_time_ms=0,
        results=[
            m.AddPartitionsToTxnTopicResult(
                name=t.name,
                results=[
                    m.AddPartitionsToTxnPartitionResult(partition=p, error_code=code_of(t.name))
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )


async def _add_partitions(check: Check, request: m.AddPartitionsToTxnRequest, call: Call) -> Any:
    if request.verify_only:
        if not check.cluster(Op.CLUSTER_ACTION):
            return _add_partitions_answer(request, lambda name: CLUSTER_DENIED)
        return await call(request)
    if not check(Op.WRITE, TXN_ID, request.transactional_id):
        return _add_partitions_answer(request, lambda name: TXN_DENIED)
    denied = {t.name for t in request.topics if not check.topic(Op.WRITE, t.name)}
    if denied:
        return _add_partitions_answer(
            request,
            lambda name: TOPIC_DENIED if name in denied else ErrorCode.OPERATION_NOT_ATTEMPTED,
        )
    return await call(request)


async def _add_offsets(check: Check, request: m.AddOffsetsToTxnRequest, call: Call) -> Any:
    if not check(Op.WRITE, TXN_ID, request.transactional_id):
        return m.AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=TXN_DENIED)
    if not check(Op.READ, ResourceType.GROUP, request.group_id):
        return m.AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=GROUP_DENIED)
    return await call(request)


async def _end_txn(check: Check, request: m.EndTxnRequest, call: Call) -> Any:
    if not check(Op.WRITE, TXN_ID, request.transactional_id):
        return m.EndTxnResponse(throttle_time_ms=0, error_code=TXN_DENIED)
    return await call(request)


async def _txn_offset_commit(check: Check, request: m.TxnOffsetCommitRequest, call: Call) -> Any:
    def answer(code_of) -> m.TxnOffsetCommitResponse:
        return m.TxnOffsetCommitResponse(
            throttle_time_ms=0,
            topics=[
                m.TxnOffsetCommitResponseTopic(
                    name=t.name,
                    partitions=[
                        m.TxnOffsetCommitResponsePartition(
                            partition_index=p.partition_index, error_code=code_of(t.name)
                        )
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ],
        )

    if not check(Op.WRITE, TXN_ID, request.transactional_id):
        return answer(lambda name: TXN_DENIED)
    if not check(Op.READ, ResourceType.GROUP, request.group_id):
        return answer(lambda name: GROUP_DENIED)
    denied = {t.name for t in request.topics if not check.topic(Op.READ, t.name)}
    if not denied:
        return await call(request)
    refused = [t for t in request.topics if t.name in denied]
    allowed = [t for t in request.topics if t.name not in denied]
    refused_answer = answer(lambda name: TOPIC_DENIED).topics
    refused_answer = [t for t in refused_answer if t.name in {r.name for r in refused}]
    if not allowed:
        return m.TxnOffsetCommitResponse(throttle_time_ms=0, topics=refused_answer)
    outcome = await call(replace(request, topics=allowed))
    return then(outcome, lambda r: replace(r, topics=[*r.topics, *refused_answer]))


async def _describe_transactions(
    check: Check, request: m.DescribeTransactionsRequest, call: Call
) -> Any:
    allowed = [t for t in request.transactional_ids if check(Op.DESCRIBE, TXN_ID, t)]
    refused = [
        m.TransactionState(
            error_code=TXN_DENIED,
            transactional_id=t,
            transaction_state="",
            transaction_timeout_ms=0,
            transaction_start_time_ms=-1,
            producer_id=-1,
            producer_epoch=-1,
        )
        for t in request.transactional_ids
        if t not in allowed
    ]
    if not refused:
        return await call(request)
    outcome = await call(replace(request, transactional_ids=allowed))
    return then(outcome, lambda r: replace(r, transaction_states=[*r.transaction_states, *refused]))


async def _list_transactions(check: Check, request: m.ListTransactionsRequest, call: Call) -> Any:
    outcome = await call(request)
    return then(
        outcome,
        lambda r: replace(
            r,
            transaction_states=[
                t
                for t in r.transaction_states
                if check.quietly(Op.DESCRIBE, TXN_ID, t.transactional_id)
            ],
        ),
    )


TXN_RULES: dict[int, Callable[[Check, Any, Call], Awaitable[Any]]] = {
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions,
    ApiKey.ADD_OFFSETS_TO_TXN: _add_offsets,
    ApiKey.END_TXN: _end_txn,
    ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit,
    ApiKey.WRITE_TXN_MARKERS: cluster(Op.CLUSTER_ACTION),
    ApiKey.DESCRIBE_TRANSACTIONS: _describe_transactions,
    ApiKey.LIST_TRANSACTIONS: _list_transactions,
}
