"""Control batches: the COMMIT/ABORT markers that end a transaction (Kafka's
`EndTransactionMarker` and `ControlRecordType`).

How it works: a marker is a batch with the transactional and control attribute bits
set (`ATTR_TRANSACTIONAL | ATTR_CONTROL`), the producer id and epoch of the transaction
it ends, no sequence, and exactly one record in Kafka's varint format (so every reader,
Kafka clients included, can read it as it is): its key is the control record type
(int16 version 0, int16 type: 0 ABORT, 1 COMMIT), its value the end-transaction marker
(int16 version 0, int32 coordinator epoch). The partition leader builds one with
`build_control_batch` when the transaction coordinator asks (WriteTxnMarkers); the log,
followers, recovery and consumers read it back with `read_control_marker`.
"""

from __future__ import annotations

import struct

from client.protocol.records.batches import decode_records
from client.protocol.records.header import (
    ATTR_CONTROL,
    BatchHeader,
    read_header,
)
from client.protocol.records.kafka_format import build_kafka_batch
from client.protocol.records.types import InvalidRecordError, Record

__all__ = [
    "CONTROL_TYPE_ABORT",
    "CONTROL_TYPE_COMMIT",
    "build_control_batch",
    "is_control",
    "read_control_marker",
]

# Kafka's ControlRecordType ids (2 and 3, the KRaft ones, never appear here).
CONTROL_TYPE_ABORT = 0
CONTROL_TYPE_COMMIT = 1
_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinator epoch
_CONTROL_KEY_VERSION = 0
_MARKER_VERSION = 0


def is_control(header: BatchHeader) -> bool:
    """Whether the batch with this header is a control batch."""
    return bool(header.attributes & ATTR_CONTROL)


def build_control_batch(
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp_ms: int,
) -> bytes:
    """A COMMIT (`commit`) or ABORT marker of the producer's transaction, at offset 0
    (the leader gives it its offset as any batch)."""
    key = _KEY.pack(_CONTROL_KEY_VERSION, CONTROL_TYPE_COMMIT if commit else CONTROL_TYPE_ABORT)
    value = _VALUE.pack(_MARKER_VERSION, coordinator_epoch)
    return build_kafka_batch(
        [Record(key, value, timestamp_ms)],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )


def read_control_marker(batch: bytes | bytearray | memoryview) -> tuple[bool, int]:
    """(commit, coordinator epoch) of the control batch `batch` (the whole batch);
    `InvalidRecordError` when it is not a transaction marker."""
    header = read_header(batch)
    if not header.attributes & ATTR_CONTROL:
        raise InvalidRecordError("not a control batch")
    records = decode_records(batch)
    if len(records) != 1:
        raise InvalidRecordError(f"a control batch holds {len(records)} records, not 1")
    key, value = records[0].key, records[0].value
    if key is None or len(key) < _KEY.size:
        raise InvalidRecordError("control record without a type")
    _, kind = _KEY.unpack_from(key)
    if kind not in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT):
        raise InvalidRecordError(f"control record type {kind} is not a transaction marker")
    if value is None or len(value) < _VALUE.size:
        raise InvalidRecordError("transaction marker without a coordinator epoch")
    version, coordinator_epoch = _VALUE.unpack_from(value)
    if version < 0:
        raise InvalidRecordError(f"transaction marker version {version}")
    return kind == CONTROL_TYPE_COMMIT, coordinator_epoch
