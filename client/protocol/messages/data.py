"""The data plane: Produce, Fetch, ListOffsets and InitProducerId.

How it works: messages declared with `schema.struct` (the conventions are in the package
docstring). Producers send Produce (record batches as opaque `bytes`, see
`client.protocol.records`) to partition leaders, after InitProducerId when idempotent;
consumers and follower brokers send Fetch (a follower with its broker id as
`replica_id`, a consumer with `CONSUMER_REPLICA_ID`), in a fetch session (KIP-227) or
without one; ListOffsets asks a leader for an offset by time, for the log start or end
(`EARLIEST_TIMESTAMP`, `LATEST_TIMESTAMP`), or the record with the largest timestamp
(`MAX_TIMESTAMP`).
"""

from __future__ import annotations

from client.protocol.schema import empty_list, struct
from client.protocol.topic_ids import ZERO_TOPIC_ID_BYTES

# ListOffsets special timestamps (Kafka's ListOffsetsRequest constants): the log end (the
# high watermark for a consumer), the log start, the record with the largest timestamp
# (KIP-734), and the local log start (KIP-405; the log start, there being no tiering).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
# Fetch/ListOffsets replica_id of a consumer (anything >= 0 is a follower broker).
CONSUMER_REPLICA_ID = -1


# --- Produce (0) ---------------------------------------------------------------------------


@struct
class ProducePartition:
    partition: int
    records: bytes


@struct
class ProduceTopic:
    name: str
    partitions: list[ProducePartition]


@struct
class ProduceRequest:
    transactional_id: str | None = None
    acks: int  # 0: no response, 1: leader append, -1: all ISR
    timeout_ms: int
    topics: list[ProduceTopic]


@struct
class ProduceResponsePartition:
    partition: int
    error_code: int
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    error_message: str | None


@struct
class ProduceResponseTopic:
    name: str
    partitions: list[ProduceResponsePartition]


@struct
class ProduceResponse:
    topics: list[ProduceResponseTopic]
    throttle_time_ms: int


# --- Fetch (1) -----------------------------------------------------------------------------


@struct
class FetchPartition:
    partition: int
    current_leader_epoch: int = -1
    fetch_offset: int
    last_fetched_epoch: int = -1
    log_start_offset: int = -1
    partition_max_bytes: int


@struct
class FetchTopic:
    topic: str  # "" when the topic is named by its id
    partitions: list[FetchPartition]
    # The topic id (16 bytes, client/protocol/topic_ids.py): when not zero, the topic is
    # named by it (Kafka's Fetch v13+) and the answer names it the same way.
    topic_id: bytes = ZERO_TOPIC_ID_BYTES


@struct
class FetchForgottenTopic:
    topic: str
    partitions: list[int]
    topic_id: bytes = ZERO_TOPIC_ID_BYTES  # as in FetchTopic


@struct
class FetchRequest:
    replica_id: int  # CONSUMER_REPLICA_ID (-1) for consumers, the broker id for followers
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int = 0
    # KIP-227 (client/protocol/fetch_session.py): 0 and -1, the defaults, fetch without a
    # session; epoch 0 asks for one; an incremental fetch names the session and its epoch
    # and lists only changed partitions in `topics`, and those to drop here.
    session_id: int = 0
    session_epoch: int = -1
    topics: list[FetchTopic]
    forgotten_topics_data: list[FetchForgottenTopic] = empty_list()
    rack_id: str = ""  # KIP-392: the consumer's `client.rack`, "" when it has none
    # KIP-392: the fetch carries client metadata even without a rack (Kafka's Fetch v11+
    # always does): a follower may serve it. A rack implies it.
    client_metadata: bool = False


@struct
class AbortedTransaction:
    producer_id: int
    first_offset: int


@struct
class FetchResponsePartition:
    partition: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: bytes
    # read_committed: the aborted transactions overlapping the records returned.
    aborted_transactions: list[AbortedTransaction] = empty_list()
    preferred_read_replica: int = -1  # KIP-392: the replica the consumer should fetch from


@struct
class FetchResponseTopic:
    topic: str
    partitions: list[FetchResponsePartition]
    topic_id: bytes = ZERO_TOPIC_ID_BYTES  # the id the request named the topic by, if any


@struct
class FetchResponse:
    throttle_time_ms: int
    error_code: int  # a session error (FETCH_SESSION_ID_NOT_FOUND...) comes with no topics
    topics: list[FetchResponseTopic]
    session_id: int = 0  # the fetch session (KIP-227); 0: none


# --- ListOffsets (2) -----------------------------------------------------------------------


@struct
class ListOffsetsPartition:
    partition: int
    current_leader_epoch: int = -1
    timestamp: int  # LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, or a time in ms


@struct
class ListOffsetsTopic:
    name: str
    partitions: list[ListOffsetsPartition]


@struct
class ListOffsetsRequest:
    replica_id: int = CONSUMER_REPLICA_ID
    isolation_level: int = 0
    topics: list[ListOffsetsTopic]


@struct
class ListOffsetsResponsePartition:
    partition: int
    error_code: int
    timestamp: int
    offset: int
    leader_epoch: int


@struct
class ListOffsetsResponseTopic:
    name: str
    partitions: list[ListOffsetsResponsePartition]


@struct
class ListOffsetsResponse:
    topics: list[ListOffsetsResponseTopic]


# --- InitProducerId (22) --------------------------------------------------------------------
# The idempotent producer's id and epoch (KIP-98). Tributary has no transactions: a
# request naming a transactional id is refused. `producer_id`/`producer_epoch` (Kafka's
# v3 fields, KIP-360) name the producer's current id and epoch, -1 for a new producer.


@struct
class InitProducerIdRequest:
    transactional_id: str | None = None
    transaction_timeout_ms: int = -1
    producer_id: int = -1
    producer_epoch: int = -1


@struct
class InitProducerIdResponse:
    throttle_time_ms: int
    error_code: int
    producer_id: int
    producer_epoch: int
