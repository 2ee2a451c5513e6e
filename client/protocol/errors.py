"""Error codes carried on the wire, and the protocol's own exception hierarchy.

How it works:
- `ErrorCode` is an IntEnum with Apache Kafka's names and numbers (clients/.../Errors.java).
  Each member also knows whether Kafka treats it as retriable (its exception class extends
  RetriableException) and has a short description. `ErrorCode.from_code(n)` maps a number
  this version does not know to UNKNOWN_SERVER_ERROR instead of raising.
- `TributaryError` is what a caller sees when the broker answered with an error code
  (`raise_for(code, message)` raises it unless the code is NONE).
- `ProtocolError` and its subclasses are raised by the decoders when bytes from a peer are
  not a valid frame or message. The subclass says whose fault it is and what to do:
  `FramingError` means the byte stream can no longer be trusted (close the connection);
  `AnswerableError` means the request header was readable, so the broker answers with an
  error code and keeps the connection; `InvalidResponseError` is a broker answer the client
  cannot read (the client closes the connection).
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    """Kafka's error codes. `code.is_retriable` and `code.description` describe each one."""

    _retriable: bool
    _description: str

    def __new__(cls, code: int, retriable: bool, description: str) -> ErrorCode:
        member = int.__new__(cls, code)
        member._value_ = code
        member._retriable = retriable
        member._description = description
        return member

    UNKNOWN_SERVER_ERROR = (
        -1,
        False,
        "The server experienced an unexpected error when processing the request.",
    )
    NONE = (0, False, "No error.")
    OFFSET_OUT_OF_RANGE = (
        1,
        False,
        "The requested offset is not within the range of offsets maintained by the server.",
    )
    CORRUPT_MESSAGE = (
        2,
        True,
        "This message has failed its CRC checksum, exceeds the valid size, or is corrupt.",
    )
    UNKNOWN_TOPIC_OR_PARTITION = (3, True, "This server does not host this topic-partition.")
    INVALID_FETCH_SIZE = (4, False, "The requested fetch size is invalid.")
    LEADER_NOT_AVAILABLE = (
        5,
        True,
        "There is no leader for this topic-partition: a leader election is in progress.",
    )
    NOT_LEADER_OR_FOLLOWER = (
        6,
        True,
        "This broker is not the leader (or not a replica) of that topic-partition.",
    )
    REQUEST_TIMED_OUT = (7, True, "The request timed out.")
    BROKER_NOT_AVAILABLE = (8, False, "The broker is not available.")
    REPLICA_NOT_AVAILABLE = (
        9,
        True,
        "The replica is not available for the requested topic-partition.",
    )
    MESSAGE_TOO_LARGE = (
        10,
        False,
        "The request included a message larger than the max message size the server accepts.",
    )
    STALE_CONTROLLER_EPOCH = (11, False, "The controller moved to another broker.")
    OFFSET_METADATA_TOO_LARGE = (
        12,
        False,
        "The metadata field of the offset request was too large.",
    )
    NETWORK_EXCEPTION = (13, True, "The server disconnected before a response was received.")
    COORDINATOR_LOAD_IN_PROGRESS = (
        14,
        True,
        "The coordinator is loading and hence can't process requests.",
    )
    COORDINATOR_NOT_AVAILABLE = (15, True, "The coordinator is not available.")
    NOT_COORDINATOR = (16, True, "This is not the correct coordinator.")
    INVALID_TOPIC_EXCEPTION = (
        17,
        False,
        "The request attempted to perform an operation on an invalid topic.",
    )
    RECORD_LIST_TOO_LARGE = (
        18,
        False,
        "The request included a batch larger than the configured segment size on the server.",
    )
    NOT_ENOUGH_REPLICAS = (
        19,
        True,
        "Messages are rejected since there are fewer in-sync replicas than required.",
    )
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = (
        20,
        True,
        "Messages are written to the log, but to fewer in-sync replicas than required.",
    )
    INVALID_REQUIRED_ACKS = (21, False, "Produce request specified an invalid value for acks.")
    ILLEGAL_GENERATION = (22, False, "Specified group generation id is not valid.")
    INCONSISTENT_GROUP_PROTOCOL = (
        23,
        False,
        "The member's supported protocols are incompatible with those of existing members.",
    )
    INVALID_GROUP_ID = (24, False, "The configured group id is invalid.")
    UNKNOWN_MEMBER_ID = (25, False, "The coordinator is not aware of this member.")
    INVALID_SESSION_TIMEOUT = (
        26,
        False,
        "The session timeout is not within the range allowed by the broker.",
    )
    REBALANCE_IN_PROGRESS = (27, False, "The group is rebalancing, so a rejoin is needed.")
    INVALID_COMMIT_OFFSET_SIZE = (28, False, "The committing offset data size is not valid.")
    TOPIC_AUTHORIZATION_FAILED = (29, False, "Topic authorization failed.")
    GROUP_AUTHORIZATION_FAILED = (30, False, "Group authorization failed.")
    CLUSTER_AUTHORIZATION_FAILED = (31, False, "Cluster authorization failed.")
    INVALID_TIMESTAMP = (32, False, "The timestamp of the message is out of acceptable range.")
    UNSUPPORTED_SASL_MECHANISM = (
        33,
        False,
        "The broker does not support the requested SASL mechanism.",
    )
    ILLEGAL_SASL_STATE = (34, False, "Request is not valid given the current SASL state.")
    UNSUPPORTED_VERSION = (35, False, "The version of API is not supported.")
    TOPIC_ALREADY_EXISTS = (36, False, "Topic with this name already exists.")
    INVALID_PARTITIONS = (37, False, "Number of partitions is invalid.")
    INVALID_REPLICATION_FACTOR = (38, False, "Replication factor is invalid.")
    INVALID_REPLICA_ASSIGNMENT = (39, False, "Replica assignment is invalid.")
    INVALID_CONFIG = (40, False, "Configuration is invalid.")
    NOT_CONTROLLER = (41, True, "This is not the correct controller for this cluster.")
    INVALID_REQUEST = (
        42,
        False,
        "The request is malformed or was sent to an incompatible broker.",
    )
    POLICY_VIOLATION = (44, False, "Request parameters do not satisfy the configured policy.")
    # --- idempotent producer (KIP-98) ---
    OUT_OF_ORDER_SEQUENCE_NUMBER = (
        45,
        False,
        "The broker received an out of order sequence number.",
    )
    DUPLICATE_SEQUENCE_NUMBER = (46, False, "The broker received a duplicate sequence number.")
    INVALID_PRODUCER_EPOCH = (
        47,
        False,
        "Producer attempted to produce with an old epoch.",
    )
    INVALID_TXN_STATE = (
        48,
        False,
        "The producer attempted a transactional operation in an invalid state.",
    )
    INVALID_PRODUCER_ID_MAPPING = (
        49,
        False,
        "The producer attempted to use a producer id which is not currently assigned to its "
        "transactional id.",
    )
    INVALID_TRANSACTION_TIMEOUT = (
        50,
        False,
        "The transaction timeout is larger than the maximum value allowed by the broker (as "
        "configured by transaction.max.timeout.ms).",
    )
    CONCURRENT_TRANSACTIONS = (
        51,
        True,
        "The producer attempted to update a transaction while another concurrent operation on "
        "the same transaction was ongoing.",
    )
    TRANSACTION_COORDINATOR_FENCED = (
        52,
        False,
        "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the "
        "current coordinator for a given producer.",
    )
    # --- end idempotent producer ---
    # --- transactions (KIP-98, KIP-447, KIP-664) ---
    UNSTABLE_OFFSET_COMMIT = (
        88,
        True,
        "There are unstable offsets that need to be cleared.",
    )
    PRODUCER_FENCED = (
        90,
        False,
        "There is a newer producer with the same transactionalId which fences the current one.",
    )
    TRANSACTIONAL_ID_NOT_FOUND = (105, False, "The transactionalId could not be found.")
    # --- end transactions ---
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = (53, False, "Transactional Id authorization failed.")
    SECURITY_DISABLED = (54, False, "Security features are disabled.")
    OPERATION_NOT_ATTEMPTED = (
        55,
        False,
        "The broker did not attempt to execute this operation. This may happen for batched "
        "RPCs where some operations in the batch failed, causing the broker to respond "
        "without trying the rest.",
    )
    KAFKA_STORAGE_ERROR = (56, True, "Disk error when trying to access log file on the disk.")
    LOG_DIR_NOT_FOUND = (
        57,
        False,
        "The user-specified log directory is not found in the broker config.",
    )
    SASL_AUTHENTICATION_FAILED = (58, False, "SASL Authentication failed.")
    UNKNOWN_PRODUCER_ID = (
        59,
        False,
        "The broker could not locate the producer metadata for this producer id.",
    )
    REASSIGNMENT_IN_PROGRESS = (60, False, "A partition reassignment is in progress.")
    NON_EMPTY_GROUP = (68, False, "The group is not empty.")
    GROUP_ID_NOT_FOUND = (69, False, "The group id does not exist.")
    FETCH_SESSION_ID_NOT_FOUND = (70, True, "The fetch session ID was not found.")
    INVALID_FETCH_SESSION_EPOCH = (71, True, "The fetch session epoch is invalid.")
    FENCED_LEADER_EPOCH = (
        74,
        True,
        "The leader epoch in the request is older than the epoch on the broker.",
    )
    UNKNOWN_LEADER_EPOCH = (
        75,
        True,
        "The leader epoch in the request is newer than the epoch on the broker.",
    )
    STALE_BROKER_EPOCH = (77, False, "Broker epoch has changed.")
    OFFSET_NOT_AVAILABLE = (
        78,
        True,
        "The leader high watermark has not caught up after a recent leader election.",
    )
    MEMBER_ID_REQUIRED = (
        79,
        False,
        "The group member needs a valid member id before entering a consumer group.",
    )
    PREFERRED_LEADER_NOT_AVAILABLE = (80, True, "The preferred leader was not available.")
    GROUP_MAX_SIZE_REACHED = (81, False, "The consumer group has reached its max size.")
    FENCED_INSTANCE_ID = (
        82,
        False,
        "The broker rejected this static consumer since another consumer with the same "
        "group.instance.id has registered with a different member.id.",
    )
    ELIGIBLE_LEADERS_NOT_AVAILABLE = (
        83,
        True,
        "Eligible topic partition leaders are not available.",
    )
    ELECTION_NOT_NEEDED = (84, True, "Leader election not needed for topic partition.")
    NO_REASSIGNMENT_IN_PROGRESS = (85, False, "No partition reassignment is in progress.")
    GROUP_SUBSCRIBED_TO_TOPIC = (
        86,
        False,
        "Deleting offsets of a topic is forbidden while the consumer group is actively "
        "subscribed to it.",
    )
    INVALID_RECORD = (
        87,
        False,
        "This record has failed the validation on broker and hence will be rejected.",
    )
    THROTTLING_QUOTA_EXCEEDED = (89, True, "The throttling quota has been exceeded.")
    RESOURCE_NOT_FOUND = (
        91,
        False,
        "A request illegally referred to a resource that does not exist.",
    )
    DUPLICATE_RESOURCE = (92, False, "A request illegally referred to the same resource twice.")
    UNACCEPTABLE_CREDENTIAL = (
        93,
        False,
        "Requested credential would not meet criteria for acceptability.",
    )
    UNKNOWN_TOPIC_ID = (100, True, "This server does not host this topic ID.")
    UNSUPPORTED_ENDPOINT_TYPE = (
        119,
        False,
        "The endpoint type is not supported by this broker (KIP-919).",
    )

    @property
    def is_retriable(self) -> bool:
        """True when retrying the same request later may succeed (Kafka's RetriableException)."""
        return self._retriable

    @property
    def description(self) -> str:
        return self._description

    @classmethod
    def from_code(cls, code: int) -> ErrorCode:
        """The member for `code`; UNKNOWN_SERVER_ERROR for numbers this version does not know."""
        try:
            return cls(code)  # type: ignore[call-arg]  # a lookup by value; mypy sees __new__
        except ValueError:
            return cls.UNKNOWN_SERVER_ERROR


class TributaryError(Exception):
    """A broker answered with an error code (request-level or, re-raised by a client, per item).

    `code` is always an `ErrorCode`; `message` is the broker's optional detail.
    """

    def __init__(self, code: ErrorCode | int, message: str | None = None) -> None:
        self.code = code if isinstance(code, ErrorCode) else ErrorCode.from_code(code)
        self.message = message
        super().__init__(self.code, message)

    @property
    def retriable(self) -> bool:
        return self.code.is_retriable

    def __str__(self) -> str:
        detail = self.message or self.code.description
        return f"{self.code.name}: {detail}"


def raise_for(code: ErrorCode | int, message: str | None = None) -> None:
    """Raise `TributaryError(code, message)` unless `code` is NONE."""
    if code != ErrorCode.NONE:
        raise TributaryError(code, message)


# --- protocol errors: bytes from a peer that are not a valid frame or message -------------


class ProtocolError(Exception):
    """Base of every decoding failure. Decoders raise nothing else on bad input."""


class FramingError(ProtocolError):
    """The byte stream cannot be trusted any more: the connection must be closed."""


class FrameTooLargeError(FramingError):
    """A frame's length prefix is over the receiver's limit."""

    def __init__(self, length: int, limit: int) -> None:
        self.length = length
        self.limit = limit
        super().__init__(f"frame of {length} bytes is over the limit of {limit} bytes")


class CorruptMessageError(FramingError):
    """A whole frame arrived but its envelope is unreadable (bad msgpack, bad header).

    Without a correlation id nothing can be answered, so the connection is closed, as
    Kafka does when it cannot parse a request header.
    """


class SchemaError(ProtocolError):
    """A decoded value does not match a message schema.

    `path` names the offending field ("topics[0].partitions[2].fetch_offset"); the codec
    turns this into `InvalidRequestError` or `InvalidResponseError`.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self._reversed_path: list[str] = []

    def add_field(self, name: str) -> None:
        """Prefix the path with a field name (called while the error travels outwards)."""
        self._reversed_path.append(name)

    def add_index(self, index: int) -> None:
        """Prefix the path with a list index."""
        self._reversed_path.append(f"[{index}]")

    @property
    def path(self) -> str:
        text = ""
        for part in reversed(self._reversed_path):
            if text and not part.startswith("["):
                text += "."
            text += part
        return text

    def __str__(self) -> str:
        path = self.path
        return f"{path}: {self.reason}" if path else self.reason


class AnswerableError(ProtocolError):
    """The request header was readable but the request cannot be served.

    The broker answers `correlation_id` with `error_code` (and no body) and keeps the
    connection open.
    """

    error_code: ErrorCode = ErrorCode.INVALID_REQUEST

    def __init__(
        self,
        message: str,
        *,
        api_key: int,
        api_version: int,
        correlation_id: int,
        client_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id


class InvalidRequestError(AnswerableError):
    """The request body does not match its schema (answered with INVALID_REQUEST)."""

    error_code = ErrorCode.INVALID_REQUEST


class UnsupportedApiError(AnswerableError):
    """Unknown api key, or a version this broker does not speak (UNSUPPORTED_VERSION)."""

    error_code = ErrorCode.UNSUPPORTED_VERSION


class InvalidResponseError(ProtocolError):
    """A response the client cannot read (bad envelope fields or body)."""
