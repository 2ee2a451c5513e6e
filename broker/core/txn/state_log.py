"""What `__transaction_state` holds, in Kafka's TransactionLog format, and which of its
partitions coordinates a transactional id.

How it works: the topic is compacted; each record is keyed by the transactional id and
its value is the id's latest `TransactionMetadata` (a null value, a tombstone, removes an
expired id). Both are Kafka 2.8's binary schemas (TransactionLogKey/Value, version 0),
big-endian:

- key: int16 version (0), string transactional_id;
- value: int16 version (0), int64 producer_id, int16 producer_epoch, int32
  transaction_timeout_ms, int8 transaction_status (the state's id), array of
  (string topic, array of int32 partitions), int64 last_update_timestamp_ms, int64
  start_timestamp_ms.

Strings are an int16 length and UTF-8; arrays an int32 count. A record this version cannot
read raises `BadStateRecord` (the loader skips it and logs it). `partition_for` is Kafka's
placement: `Utils.abs(transactionalId.hashCode) % partitions`.
"""

from __future__ import annotations

import struct

from broker.core.group.offsets_topic import partition_for as _java_partition_for
from broker.core.txn.metadata import StateValue, TxnState
from client.protocol.types import TopicPartition

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0
MAX_PARTITIONS_IN_VALUE = 1_000_000  # a bound on a corrupt count, not a limit of use


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """The `__transaction_state` partition whose leader coordinates `transactional_id`."""
    return _java_partition_for(transactional_id, num_partitions)


class BadStateRecord(ValueError):
    """A key or value in `__transaction_state` this version cannot read."""


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def encode_key(transactional_id: str) -> bytes:
    return struct.pack(">h", KEY_VERSION) + _string(transactional_id)


def encode_value(value: StateValue) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for tp in value.partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    parts = [
        struct.pack(
            ">hqhib",
            VALUE_VERSION,
            value.producer_id,
            value.producer_epoch,
            value.timeout_ms,
            value.state.id,
        ),
        struct.pack(">i", len(by_topic)),
    ]
    for topic in sorted(by_topic):
        ids = sorted(by_topic[topic])
        parts.append(_string(topic))
        parts.append(struct.pack(f">i{len(ids)}i", len(ids), *ids))
    parts.append(struct.pack(">qq", value.last_update_ms, value.start_ms))
    return b"".join(parts)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> tuple:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise BadStateRecord("truncated")
        out = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return out

    def string(self) -> str:
        (n,) = self.take(">h")
        if n < 0 or self.pos + n > len(self.data):
            raise BadStateRecord("bad string length")
        text = self.data[self.pos : self.pos + n]
        self.pos += n
        try:
            return text.decode()
        except UnicodeDecodeError:
            raise BadStateRecord("a string that is not UTF-8") from None

    def count(self) -> int:
        (n,) = self.take(">i")
        if n < 0 or n > MAX_PARTITIONS_IN_VALUE:
            raise BadStateRecord(f"bad array length {n}")
        return n


def decode_key(key: bytes | None) -> str:
    if key is None:
        raise BadStateRecord("a record without a key")
    reader = _Reader(bytes(key))
    (version,) = reader.take(">h")
    if version != KEY_VERSION:
        raise BadStateRecord(f"unknown key version {version}")
    return reader.string()


def decode_value(value: bytes | None) -> StateValue | None:
    """The value, or None for a tombstone."""
    if value is None:
        return None
    reader = _Reader(bytes(value))
    version, pid, epoch, timeout, status = reader.take(">hqhib")
    if version != VALUE_VERSION:
        raise BadStateRecord(f"unknown value version {version}")
    try:
        state = TxnState.from_id(status)
    except ValueError:
        raise BadStateRecord(f"unknown transaction status {status}") from None
    partitions = set()
    for _ in range(reader.count()):
        topic = reader.string()
        for _ in range(reader.count()):
            (p,) = reader.take(">i")
            partitions.add(TopicPartition(topic, p))
    last_update, start = reader.take(">qq")
    return StateValue(pid, epoch, timeout, state, frozenset(partitions), last_update, start)
