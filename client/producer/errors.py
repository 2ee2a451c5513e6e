"""What the producer raises, and what a record's handle fails with.

How it works: `send()`/`send_many()` raise `ProducerClosedError`, `RecordTooLargeError`,
`ProducerTimeoutError` (no metadata or buffer memory within `max_block_ms`) and
`InvalidPartitionError` before a record is queued; a queued record's handle fails with
`DeliveryTimeoutError` once `delivery_timeout_ms` has passed, with `ProducerClosedError`
when a close abandons it, or with the broker's error (a `TributaryError`) when retries
cannot help. The `TributaryError`s carry the matching Kafka error code; `retriable` is
False where the producer has already retried for as long as it may.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from client.protocol.errors import ErrorCode, TributaryError

if TYPE_CHECKING:
    from client.producer.batch import DeliveryHandles


class ProducerClosedError(RuntimeError):
    """`send()` after `aclose()`, or records abandoned by a cancelled close."""

    # From `send_many()`: the handles of the records it queued before the error.
    queued: DeliveryHandles | None = None


class DeliveryTimeoutError(TributaryError):
    """The record was not acknowledged within `delivery_timeout_ms` (Kafka's
    TimeoutException "Expiring N record(s) for ...")."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message)

    @property
    def retriable(self) -> bool:  # the producer already retried for as long as allowed
        return False


class RecordTooLargeError(TributaryError):
    """One record is larger than `max_request_size` or `buffer_memory`."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.MESSAGE_TOO_LARGE, message)


class ProducerTimeoutError(TributaryError):
    """`send()` could not get metadata or buffer memory within `max_block_ms`."""

    # From `send_many()`: the handles of the records it queued before the error.
    queued: DeliveryHandles | None = None

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message)

    @property
    def retriable(self) -> bool:
        return False


class InvalidPartitionError(TributaryError):
    """An explicit partition that the topic does not have."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message)

    @property
    def retriable(self) -> bool:
        return False
