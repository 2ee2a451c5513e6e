"""Checking the batches of an append and giving them offsets (Kafka's `LogValidator`).

How it works: `Log`'s append paths call these once per append, after
`client.protocol.records.validate_batches` checked every batch's header and CRC
(without decoding records):

- `assign_offsets` (leader): checks each batch against `max.message.bytes`
  (`RecordTooLargeError`), and returns the buffers of one vectored write: for each batch a
  freshly stamped 61-byte header (offsets from the log end offset, the leader epoch, the
  append time when the topic uses LogAppendTime) followed by its untouched body, so the
  caller's buffer is not modified; and the `BatchPlacement`s the segment indexes.
- `check_keys` (leader, compacted topics only): a record without a key is refused
  (`KeylessRecordError`); the one check that decodes records.
- `follower_placements` (follower): the leader's offsets are kept, and must go forward
  from the log end offset (`UnexpectedAppendOffsetError`, `InvalidRecordError`).
- `append_info`: the `LogAppendInfo` an append answers with; `duplicate_info` when an
  idempotent producer's retry is answered with its first write's offsets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from broker.core.log.errors import (
    InvalidRecordError,
    KeylessRecordError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from broker.core.log.producer_state import BatchMetadata
from broker.core.log.segment import BatchPlacement
from client.protocol.records import (
    BATCH_OVERHEAD,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    BatchHeader,
    record_keys,
    stamped_header,
)
from client.protocol.types import TopicPartition

__all__ = [
    "LogAppendInfo",
    "append_info",
    "assign_offsets",
    "check_keys",
    "duplicate_info",
    "follower_placements",
]

Records = bytes | bytearray | memoryview


class LogAppendInfo(NamedTuple):
    """What an append did (Kafka's LogAppendInfo, the fields the broker uses)."""

    first_offset: int  # -1 when nothing was appended
    last_offset: int  # -1 when nothing was appended
    max_timestamp: int
    offset_of_max_timestamp: int
    record_count: int
    batch_count: int
    valid_bytes: int
    log_append_time_ms: int  # -1 unless LogAppendTime stamped the batches
    log_start_offset: int
    # True when the batch duplicated one already written by its idempotent producer:
    # nothing was appended, the offsets are those of the original.
    duplicate: bool = False


def assign_offsets(
    tp: TopicPartition,
    records: Records,
    headers: Sequence[BatchHeader],
    next_offset: int,
    leader_epoch: int,
    append_time: int | None,
    max_message_bytes: int,
) -> tuple[list[bytes | memoryview], list[BatchPlacement], int]:
    """The leader's write of `records` from offset `next_offset`: (buffers, placements,
    bytes)."""
    view = memoryview(records)
    buffers: list[bytes | memoryview] = []
    placements: list[BatchPlacement] = []
    position = 0
    for header in headers:
        size = LOG_OVERHEAD + header[1]
        if size > max_message_bytes:
            raise RecordTooLargeError(
                f"{tp}: batch of {size} bytes exceeds max.message.bytes {max_message_bytes}"
            )
        body = view[position + BATCH_OVERHEAD : position + size]
        buffers.append(
            stamped_header(
                header, next_offset, leader_epoch, log_append_time_ms=append_time, body=body
            )
        )
        buffers.append(body)
        last = next_offset + header[6]
        max_ts = header[8] if append_time is None else append_time
        placements.append(BatchPlacement(next_offset, last, max_ts, size))
        next_offset = last + 1
        position += size
    return buffers, placements, position


def check_keys(tp: TopicPartition, records: Records, headers: Sequence[BatchHeader]) -> None:
    """KeylessRecordError if a record has no key (Kafka's LogValidator for compacted
    topics). Decodes the records: only compacted topics pay for it."""
    view = memoryview(records)
    position = 0
    for header in headers:
        size = LOG_OVERHEAD + header[1]
        for offset, key in record_keys(view[position : position + size]):
            if key is None:
                raise KeylessRecordError(
                    f"{tp}: compacted topic cannot accept a record without a key "
                    f"(record {offset - header[0]} of a batch)"
                )
        position += size


def follower_placements(
    tp: TopicPartition, headers: Sequence[BatchHeader], log_end_offset: int
) -> list[BatchPlacement]:
    """Where a follower's batches go, at the leader's offsets. The first must not start
    below the LEO; as in Kafka, a start above it (a gap left by compaction on the leader)
    is accepted."""
    if headers[0].base_offset < log_end_offset:
        raise UnexpectedAppendOffsetError(
            f"{tp}: follower append starts at offset {headers[0].base_offset}, "
            f"below the log end offset {log_end_offset}"
        )
    placements = []
    previous_last = log_end_offset - 1
    for header in headers:
        last = header.base_offset + header.last_offset_delta
        if header.base_offset <= previous_last:
            raise InvalidRecordError(
                f"{tp}: batch offsets go backwards at offset {header.base_offset}"
            )
        placements.append(
            BatchPlacement(header.base_offset, last, header.max_timestamp, header.size)
        )
        previous_last = last
    return placements


def append_info(
    headers: Sequence[BatchHeader],
    placements: list[BatchPlacement],
    size: int,
    log_append_time_ms: int,
    log_start_offset: int,
) -> LogAppendInfo:
    """The `LogAppendInfo` of `placements` written (`size` bytes)."""
    first_offset = placements[0].base_offset
    max_timestamp = NO_TIMESTAMP
    offset_of_max = first_offset
    for placement in placements:
        if placement.max_timestamp > max_timestamp:
            max_timestamp, offset_of_max = placement.max_timestamp, placement.last_offset
    return LogAppendInfo(
        first_offset,
        placements[-1].last_offset,
        max_timestamp,
        offset_of_max,
        sum(header[12] for header in headers),
        len(headers),
        size,
        log_append_time_ms,
        log_start_offset,
    )


def duplicate_info(duplicate: BatchMetadata, log_start_offset: int) -> LogAppendInfo:
    """The answer to a retried batch: nothing appended, the original's offsets."""
    return LogAppendInfo(
        duplicate.first_offset,
        duplicate.last_offset,
        duplicate.timestamp,
        duplicate.last_offset,
        0,
        0,
        0,
        -1,
        log_start_offset,
        True,
    )
