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
  (`KeylessRecordError`); with `check_timestamps` (CreateTime topics that set
  `message.timestamp.difference.max.ms`: a record whose timestamp is further than that
  from the broker's clock fails the append with `InvalidTimestampError`), the checks
  that decode records.
- `recompress` (leader, topics whose `compression.type` is a codec rather than
  `producer`): each batch in another codec is decompressed and compressed again with the
  topic's, in a new batch with the same header fields (producer id, epoch, sequence,
  offsets span, timestamps), so idempotent producers' state is unchanged; either
  payload format (the codec covers the whole records section of both).
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
    InvalidTimestampError,
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
    iter_batches,
    pack_batch,
    record_entries,
    record_keys,
    stamped_header,
)
from client.protocol.records.compression import COMPRESS, decompress
from client.protocol.records.header import CODEC_MASK, Codec
from client.protocol.types import TopicPartition

__all__ = [
    "LogAppendInfo",
    "append_info",
    "assign_offsets",
    "check_keys",
    "check_timestamps",
    "duplicate_info",
    "follower_placements",
    "recompress",
]

# compression.type's codec names (Kafka's BrokerCompressionCodec).
CODECS = {
    "uncompressed": Codec.NONE,
    "gzip": Codec.GZIP,
    "snappy": Codec.SNAPPY,
    "lz4": Codec.LZ4,
    "zstd": Codec.ZSTD,
}

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


def check_timestamps(
    tp: TopicPartition,
    records: Records,
    headers: Sequence[BatchHeader],
    now_ms: int,
    max_difference_ms: int,
) -> None:
    """InvalidTimestampError if a record's CreateTime is more than `max_difference_ms`
    from `now_ms` (Kafka's LogValidator.validateTimestamp); records without a timestamp
    (-1) pass. Decodes the records."""
    view = memoryview(records)
    position = 0
    for header in headers:
        size = LOG_OVERHEAD + header[1]
        base = header.base_timestamp
        try:
            entries = record_entries(view[position : position + size], header)
        except (TypeError, IndexError, ValueError) as exc:
            raise InvalidRecordError(f"{tp}: malformed record: {exc}") from exc
        for entry in entries:
            timestamp = base + entry[1]
            if timestamp != NO_TIMESTAMP and abs(timestamp - now_ms) > max_difference_ms:
                raise InvalidTimestampError(
                    f"{tp}: timestamp {timestamp} of the record at offset delta {entry[0]} "
                    f"is out of range: it should be within [{now_ms - max_difference_ms}, "
                    f"{now_ms + max_difference_ms}] (message.timestamp.difference.max.ms "
                    f"{max_difference_ms})"
                )
        position += size


def recompress(
    records: Records, headers: Sequence[BatchHeader], codec_name: str
) -> tuple[Records, list[BatchHeader]]:
    """`records` with every batch in the codec `codec_name` (compression.type), and their
    headers. Batches already in it are kept as they are; if all are, nothing is copied."""
    target = int(CODECS[codec_name])
    if all(header.attributes & CODEC_MASK == target for header in headers):
        return records, list(headers)
    view = memoryview(records)
    parts: list[bytes | memoryview] = []
    position = 0
    for header in headers:
        size = LOG_OVERHEAD + header[1]
        batch = view[position : position + size]
        if header.attributes & CODEC_MASK == target:
            parts.append(batch)
        else:
            payload = decompress(batch, header)
            parts.append(
                pack_batch(
                    COMPRESS[target](payload),
                    base_offset=header.base_offset,
                    leader_epoch=header.partition_leader_epoch,
                    attributes=(header.attributes & ~CODEC_MASK) | target,
                    last_offset_delta=header.last_offset_delta,
                    base_timestamp=header.base_timestamp,
                    max_timestamp=header.max_timestamp,
                    producer_id=header.producer_id,
                    producer_epoch=header.producer_epoch,
                    base_sequence=header.base_sequence,
                    records_count=header.records_count,
                )
            )
        position += size
    out = b"".join(parts)
    return out, [header for _, header in iter_batches(out)]


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
