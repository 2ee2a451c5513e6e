"""Kafka's transaction APIs on the Kafka listener: AddPartitionsToTxn 0-3,
AddOffsetsToTxn 0-3, EndTxn 0-3, TxnOffsetCommit 0-3 (v3: KIP-447's generation, member
and instance id), DescribeTransactions 0 and ListTransactions 0, to and
from the native messages (client/protocol/messages/transactions.py) the transaction
handlers serve. InitProducerId (translate_data.py) and FindCoordinator
(translate_groups.py) already carry the transactional id and key type 1.

How it works: each request maps field for field onto its native message. KIP-588: a
client of AddPartitionsToTxn, AddOffsetsToTxn or EndTxn below v2 does not know
PRODUCER_FENCED (90) and gets INVALID_PRODUCER_EPOCH instead, as Kafka answers it.
AddPartitionsToTxn v4+ (KIP-890: batched, `verify_only`) is broker-to-broker and native
here, so it is not advertised.
"""

from __future__ import annotations

import datetime
from typing import Any

from broker.kafka.translation import (
    KafkaHeader,
    Translation,
    build,
    default_response,
    response_class,
)
from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.errors import ErrorCode

PRODUCER_FENCED_SINCE = 2  # the first version of these APIs that knows PRODUCER_FENCED


def _fenced(code: int, version: int) -> int:
    if code == ErrorCode.PRODUCER_FENCED and version < PRODUCER_FENCED_SINCE:
        return int(ErrorCode.INVALID_PRODUCER_EPOCH)
    return int(code)


def _response(api_key: int, version: int, **values: Any) -> Any:
    values.setdefault("throttle_time", 0)
    return build(response_class(api_key, version), **values)


# --- AddPartitionsToTxn (24) -------------------------------------------------------------


def _add_partitions_to_native(request: Any, header: KafkaHeader) -> m.AddPartitionsToTxnRequest:
    return m.AddPartitionsToTxnRequest(
        transactional_id=request.v3_and_below_transactional_id,
        producer_id=int(request.v3_and_below_producer_id),
        producer_epoch=int(request.v3_and_below_producer_epoch),
        topics=[
            m.AddPartitionsToTxnTopic(name=t.name, partitions=[int(p) for p in t.partitions])
            for t in request.v3_and_below_topics
        ],
    )


def _add_partitions_result(topics: list[tuple[str, list[tuple[int, int]]]], version: int) -> Any:
    return _response(
        ApiKey.ADD_PARTITIONS_TO_TXN,
        version,
        results_by_topic_v3_and_below=[
            {
                "name": name,
                "results_by_partition": [
                    {"partition_index": p, "partition_error_code": _fenced(code, version)}
                    for p, code in parts
                ],
            }
            for name, parts in topics
        ],
    )


def _add_partitions_from_native(response: m.AddPartitionsToTxnResponse, version: int) -> Any:
    return _add_partitions_result(
        [(t.name, [(r.partition, r.error_code) for r in t.results]) for t in response.results],
        version,
    )


def _add_partitions_error(request: Any, version: int, code: int) -> Any:
    return _add_partitions_result(
        [(t.name, [(int(p), code) for p in t.partitions]) for t in request.v3_and_below_topics],
        version,
    )


ADD_PARTITIONS_TO_TXN = Translation(
    api_key=ApiKey.ADD_PARTITIONS_TO_TXN,
    min_version=0,
    max_version=3,
    to_native=_add_partitions_to_native,
    from_native=_add_partitions_from_native,
    error_response=_add_partitions_error,
)


# --- AddOffsetsToTxn (25) and EndTxn (26) -------------------------------------------------


def _add_offsets_to_native(request: Any, header: KafkaHeader) -> m.AddOffsetsToTxnRequest:
    return m.AddOffsetsToTxnRequest(
        transactional_id=request.transactional_id,
        producer_id=int(request.producer_id),
        producer_epoch=int(request.producer_epoch),
        group_id=request.group_id,
    )


def _end_txn_to_native(request: Any, header: KafkaHeader) -> m.EndTxnRequest:
    return m.EndTxnRequest(
        transactional_id=request.transactional_id,
        producer_id=int(request.producer_id),
        producer_epoch=int(request.producer_epoch),
        committed=bool(request.committed),
    )


def _code_only(api_key: int) -> tuple[Any, Any]:
    def from_native(response: Any, version: int) -> Any:
        return _response(api_key, version, error_code=_fenced(response.error_code, version))

    def error(request: Any, version: int, code: int) -> Any:
        return _response(api_key, version, error_code=_fenced(code, version))

    return from_native, error


_add_offsets_from, _add_offsets_error = _code_only(ApiKey.ADD_OFFSETS_TO_TXN)
_end_txn_from, _end_txn_error = _code_only(ApiKey.END_TXN)

ADD_OFFSETS_TO_TXN = Translation(
    api_key=ApiKey.ADD_OFFSETS_TO_TXN,
    min_version=0,
    max_version=3,
    to_native=_add_offsets_to_native,
    from_native=_add_offsets_from,
    error_response=_add_offsets_error,
)

END_TXN = Translation(
    api_key=ApiKey.END_TXN,
    min_version=0,
    max_version=3,
    to_native=_end_txn_to_native,
    from_native=_end_txn_from,
    error_response=_end_txn_error,
)


# --- TxnOffsetCommit (28) ------------------------------------------------------------------


def _txn_offset_commit_to_native(request: Any, header: KafkaHeader) -> m.TxnOffsetCommitRequest:
    return m.TxnOffsetCommitRequest(
        transactional_id=request.transactional_id,
        group_id=request.group_id,
        producer_id=int(request.producer_id),
        producer_epoch=int(request.producer_epoch),
        generation_id=int(getattr(request, "generation_id", -1)),
        member_id=getattr(request, "member_id", ""),
        group_instance_id=getattr(request, "group_instance_id", None),
        topics=[
            m.TxnOffsetCommitRequestTopic(
                name=t.name,
                partitions=[
                    m.TxnOffsetCommitRequestPartition(
                        partition_index=int(p.partition_index),
                        committed_offset=int(p.committed_offset),
                        committed_leader_epoch=int(getattr(p, "committed_leader_epoch", -1)),
                        committed_metadata=p.committed_metadata,
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )


def _txn_offset_commit_result(topics: list[tuple[str, list[tuple[int, int]]]], version: int) -> Any:
    return _response(
        ApiKey.TXN_OFFSET_COMMIT,
        version,
        topics=[
            {
                "name": name,
                "partitions": [{"partition_index": p, "error_code": code} for p, code in parts],
            }
            for name, parts in topics
        ],
    )


def _txn_offset_commit_from_native(response: m.TxnOffsetCommitResponse, version: int) -> Any:
    return _txn_offset_commit_result(
        [
            (t.name, [(p.partition_index, p.error_code) for p in t.partitions])
            for t in response.topics
        ],
        version,
    )


def _txn_offset_commit_error(request: Any, version: int, code: int) -> Any:
    return _txn_offset_commit_result(
        [(t.name, [(int(p.partition_index), code) for p in t.partitions]) for t in request.topics],
        version,
    )


TXN_OFFSET_COMMIT = Translation(
    api_key=ApiKey.TXN_OFFSET_COMMIT,
    min_version=0,
    max_version=3,
    to_native=_txn_offset_commit_to_native,
    from_native=_txn_offset_commit_from_native,
    error_response=_txn_offset_commit_error,
)


# --- DescribeTransactions (65) and ListTransactions (66), KIP-664 -------------------------


def _timestamp(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def _describe_to_native(request: Any, header: KafkaHeader) -> m.DescribeTransactionsRequest:
    return m.DescribeTransactionsRequest(transactional_ids=list(request.transactional_ids))


def _describe_from_native(response: m.DescribeTransactionsResponse, version: int) -> Any:
    return _response(
        ApiKey.DESCRIBE_TRANSACTIONS,
        version,
        transaction_states=[
            {
                "error_code": s.error_code,
                "transactional_id": s.transactional_id,
                "transaction_state": s.transaction_state,
                "transaction_timeout": s.transaction_timeout_ms,
                "transaction_start_time": _timestamp(s.transaction_start_time_ms),
                "producer_id": s.producer_id,
                "producer_epoch": s.producer_epoch,
                "topics": [{"topic": t.topic, "partitions": t.partitions} for t in s.topics],
            }
            for s in response.transaction_states
        ],
    )


def _describe_error(request: Any, version: int, code: int) -> Any:
    return _describe_from_native(
        m.DescribeTransactionsResponse(
            throttle_time_ms=0,
            transaction_states=[
                m.TransactionState(
                    error_code=code,
                    transactional_id=t,
                    transaction_state="",
                    transaction_timeout_ms=0,
                    transaction_start_time_ms=-1,
                    producer_id=-1,
                    producer_epoch=-1,
                )
                for t in request.transactional_ids
            ],
        ),
        version,
    )


def _list_to_native(request: Any, header: KafkaHeader) -> m.ListTransactionsRequest:
    return m.ListTransactionsRequest(
        state_filters=list(request.state_filters),
        producer_id_filters=[int(p) for p in request.producer_id_filters],
    )


def _list_from_native(response: m.ListTransactionsResponse, version: int) -> Any:
    return _response(
        ApiKey.LIST_TRANSACTIONS,
        version,
        error_code=response.error_code,
        unknown_state_filters=response.unknown_state_filters,
        transaction_states=[
            {
                "transactional_id": t.transactional_id,
                "producer_id": t.producer_id,
                "transaction_state": t.transaction_state,
            }
            for t in response.transaction_states
        ],
    )


def _list_error(request: Any, version: int, code: int) -> Any:
    return default_response(response_class(ApiKey.LIST_TRANSACTIONS, version), code)


DESCRIBE_TRANSACTIONS = Translation(
    api_key=ApiKey.DESCRIBE_TRANSACTIONS,
    min_version=0,
    max_version=0,
    to_native=_describe_to_native,
    from_native=_describe_from_native,
    error_response=_describe_error,
)

LIST_TRANSACTIONS = Translation(
    api_key=ApiKey.LIST_TRANSACTIONS,
    min_version=0,
    max_version=0,
    to_native=_list_to_native,
    from_native=_list_from_native,
    error_response=_list_error,
)

TRANSLATIONS: dict[int, Translation] = {
    int(t.api_key): t
    for t in (
        ADD_PARTITIONS_TO_TXN,
        ADD_OFFSETS_TO_TXN,
        END_TXN,
        TXN_OFFSET_COMMIT,
        DESCRIBE_TRANSACTIONS,
        LIST_TRANSACTIONS,
    )
}
