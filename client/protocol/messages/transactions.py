"""Transactions (KIP-98, KIP-447, KIP-664, KIP-890): the coordinator's APIs and the markers.

How it works: messages declared with `schema.struct`, mirroring Kafka's of the same names.
A transactional producer finds its coordinator (FindCoordinator key type 1), gets its id
and epoch (InitProducerId with its `transactional_id`), then per transaction adds
partitions (AddPartitionsToTxn) and its consumer group (AddOffsetsToTxn) before writing
to them, commits offsets through the group coordinator (TxnOffsetCommit), and ends with
EndTxn. The coordinator then asks each partition's leader to append a COMMIT or ABORT
control batch (WriteTxnMarkers). A partition leader verifies a transactional batch with
AddPartitionsToTxn `verify_only` (KIP-890 part 1) before appending it. Operators list
and describe transactions (ListTransactions, DescribeTransactions, KIP-664).
"""

from __future__ import annotations

from client.protocol.schema import empty_list, struct

# --- AddPartitionsToTxn (24) ---------------------------------------------------------------
# `verify_only` (Kafka's v4, KIP-890): a partition leader asks whether the partitions are
# already part of the producer's ongoing transaction, adding nothing.


@struct
class AddPartitionsToTxnTopic:
    name: str
    partitions: list[int]


@struct
class AddPartitionsToTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    topics: list[AddPartitionsToTxnTopic]
    verify_only: bool = False


@struct
class AddPartitionsToTxnPartitionResult:
    partition: int
    error_code: int


@struct
class AddPartitionsToTxnTopicResult:
    name: str
    results: list[AddPartitionsToTxnPartitionResult]


@struct
class AddPartitionsToTxnResponse:
    throttle_time_ms: int
    results: list[AddPartitionsToTxnTopicResult]


# --- AddOffsetsToTxn (25) ------------------------------------------------------------------


@struct
class AddOffsetsToTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str


@struct
class AddOffsetsToTxnResponse:
    throttle_time_ms: int
    error_code: int


# --- EndTxn (26) ---------------------------------------------------------------------------


@struct
class EndTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool  # True: commit, False: abort


@struct
class EndTxnResponse:
    throttle_time_ms: int
    error_code: int


# --- WriteTxnMarkers (27) ------------------------------------------------------------------
# From the transaction coordinator to partition leaders: append a control batch (COMMIT if
# `transaction_result`, else ABORT) for the producer on each partition named.


@struct
class WritableTxnMarkerTopic:
    name: str
    partition_indexes: list[int]


@struct
class WritableTxnMarker:
    producer_id: int
    producer_epoch: int
    transaction_result: bool  # True: COMMIT, False: ABORT
    topics: list[WritableTxnMarkerTopic]
    coordinator_epoch: int


@struct
class WriteTxnMarkersRequest:
    markers: list[WritableTxnMarker]


@struct
class WritableTxnMarkerPartitionResult:
    partition_index: int
    error_code: int


@struct
class WritableTxnMarkerTopicResult:
    name: str
    partitions: list[WritableTxnMarkerPartitionResult]


@struct
class WritableTxnMarkerResult:
    producer_id: int
    topics: list[WritableTxnMarkerTopicResult]


@struct
class WriteTxnMarkersResponse:
    markers: list[WritableTxnMarkerResult]


# --- TxnOffsetCommit (28) ------------------------------------------------------------------
# Offsets committed as part of a transaction (KIP-447's generation/member fields let the
# group coordinator fence a zombie member).


@struct
class TxnOffsetCommitRequestPartition:
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str | None = None


@struct
class TxnOffsetCommitRequestTopic:
    name: str
    partitions: list[TxnOffsetCommitRequestPartition]


@struct
class TxnOffsetCommitRequest:
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    topics: list[TxnOffsetCommitRequestTopic]


@struct
class TxnOffsetCommitResponsePartition:
    partition_index: int
    error_code: int


@struct
class TxnOffsetCommitResponseTopic:
    name: str
    partitions: list[TxnOffsetCommitResponsePartition]


@struct
class TxnOffsetCommitResponse:
    throttle_time_ms: int
    topics: list[TxnOffsetCommitResponseTopic]


# --- DescribeTransactions (65) and ListTransactions (66), KIP-664 -------------------------


@struct
class DescribeTransactionsRequest:
    transactional_ids: list[str]


@struct
class TransactionTopicPartitions:
    topic: str
    partitions: list[int]


@struct
class TransactionState:
    error_code: int
    transactional_id: str
    transaction_state: str  # Kafka's names: Empty, Ongoing, PrepareCommit...
    transaction_timeout_ms: int
    transaction_start_time_ms: int  # -1 when no transaction is ongoing
    producer_id: int
    producer_epoch: int
    topics: list[TransactionTopicPartitions] = empty_list()


@struct
class DescribeTransactionsResponse:
    throttle_time_ms: int
    transaction_states: list[TransactionState]


@struct
class ListTransactionsRequest:
    state_filters: list[str] = empty_list()  # empty: every state
    producer_id_filters: list[int] = empty_list()  # empty: every producer


@struct
class ListedTransaction:
    transactional_id: str
    producer_id: int
    transaction_state: str


@struct
class ListTransactionsResponse:
    throttle_time_ms: int
    error_code: int
    unknown_state_filters: list[str] = empty_list()
    transaction_states: list[ListedTransaction] = empty_list()
