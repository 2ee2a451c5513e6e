"""What `__consumer_offsets` holds, and which of its partitions coordinates a group.

How it works: the topic is compacted, so every record is a keyed fact and only the latest
value of a key matters (a record with a null value, a tombstone, deletes the key):

- an offset commit: key `[1, group, topic, partition]` -> `OffsetValue` (offset, leader
  epoch, metadata string, commit timestamp);
- a group's metadata: key `[2, group]` -> `GroupValue` (protocol type, generation,
  chosen protocol, leader, members with their subscription and assignment bytes), written
  when a generation's assignment is stored and when the group empties.

Keys and values are msgpack (Kafka uses its own binary schemas with the same fields and
the same versioned key prefixes: 0/1 for offsets, 2 for group metadata). A record whose
key cannot be read is skipped by the loader and logged, never fatal: a broker must be
able to load whatever an older or newer version wrote.

`partition_for(group_id, n)` is Kafka's placement, `abs(groupId.hashCode) % n` with
Java's `String.hashCode`, so a group lands on the same partition number it would in Kafka
and the mapping never depends on Python's salted `hash`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgpack

OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode` (UTF-16 code units, 32-bit signed overflow)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """The `__consumer_offsets` partition whose leader coordinates `group_id`."""
    h = java_string_hash(group_id)
    # Kafka's Utils.abs: Math.abs, except that Integer.MIN_VALUE maps to 0.
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    state_timestamp_ms: int
    members: tuple[MemberValue, ...] = field(default_factory=tuple)


# -- encoding ----------------------------------------------------------------------------


def offset_key(group_id: str, topic: str, partition: int) -> bytes:
    return msgpack.packb([OFFSET_KEY_VERSION, group_id, topic, partition], use_bin_type=True)


def group_key(group_id: str) -> bytes:
    return msgpack.packb([GROUP_KEY_VERSION, group_id], use_bin_type=True)


def encode_offset(value: OffsetValue) -> bytes:
    return msgpack.packb(
        [value.offset, value.leader_epoch, value.metadata, value.commit_timestamp_ms],
        use_bin_type=True,
    )


def encode_group(value: GroupValue) -> bytes:
    members = [
        [
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            m.session_timeout_ms,
            m.subscription,
            m.assignment,
        ]
        for m in value.members
    ]
    return msgpack.packb(
        [
            value.protocol_type,
            value.generation,
            value.protocol,
            value.leader,
            value.state_timestamp_ms,
            members,
        ],
        use_bin_type=True,
    )


# -- decoding ----------------------------------------------------------------------------


class BadOffsetsRecord(ValueError):
    """A key or value in `__consumer_offsets` this version cannot read."""


@dataclass(frozen=True, slots=True)
class OffsetRecord:
    group_id: str
    topic: str
    partition: int
    value: OffsetValue | None  # None: a tombstone


@dataclass(frozen=True, slots=True)
class GroupRecord:
    group_id: str
    value: GroupValue | None  # None: a tombstone


def _unpack(data: bytes) -> object:
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several types for bad input
        raise BadOffsetsRecord(f"not msgpack: {exc}") from None


def _unpack_list(data: bytes, what: str) -> list[Any]:
    """A value written as a msgpack array: its items are checked by the caller (a wrong
    count or type raises ValueError/TypeError, which `decode_record` reports)."""
    fields = _unpack(data)
    if not isinstance(fields, list):
        raise BadOffsetsRecord(f"bad {what}")
    return fields


def decode_record(key: bytes | None, value: bytes | None) -> OffsetRecord | GroupRecord:
    """One `__consumer_offsets` record as an offset commit or a group's metadata."""
    if key is None:
        raise BadOffsetsRecord("a record without a key")
    fields = _unpack(key)
    if not isinstance(fields, list) or not fields or not isinstance(fields[0], int):
        raise BadOffsetsRecord("a key that is not a versioned list")
    version = fields[0]
    try:
        if version in (0, OFFSET_KEY_VERSION):
            _, group_id, topic, partition = fields
            _check(isinstance(group_id, str) and isinstance(topic, str), "offset key names")
            _check(isinstance(partition, int), "offset key partition")
            return OffsetRecord(group_id, topic, partition, _offset_value(value))
        if version == GROUP_KEY_VERSION:
            _, group_id = fields
            _check(isinstance(group_id, str), "group key name")
            return GroupRecord(group_id, _group_value(value))
    except (ValueError, TypeError) as exc:
        raise BadOffsetsRecord(f"key version {version}: {exc}") from None
    raise BadOffsetsRecord(f"unknown key version {version}")


def _check(condition: bool, what: str) -> None:
    if not condition:
        raise BadOffsetsRecord(f"bad {what}")


def _offset_value(value: bytes | None) -> OffsetValue | None:
    if value is None:
        return None
    offset, leader_epoch, metadata, commit_ts = _unpack_list(value, "offset value")
    _check(isinstance(offset, int) and isinstance(leader_epoch, int), "offset value")
    return OffsetValue(offset, leader_epoch, metadata or "", commit_ts)


def _group_value(value: bytes | None) -> GroupValue | None:
    if value is None:
        return None
    protocol_type, generation, protocol, leader, state_ts, members = _unpack_list(
        value, "group value"
    )
    _check(isinstance(generation, int) and isinstance(members, list), "group value")
    return GroupValue(
        protocol_type=protocol_type or "",
        generation=generation,
        protocol=protocol,
        leader=leader,
        state_timestamp_ms=state_ts,
        members=tuple(
            MemberValue(
                member_id=m[0],
                group_instance_id=m[1],
                client_id=m[2],
                client_host=m[3],
                rebalance_timeout_ms=m[4],
                session_timeout_ms=m[5],
                subscription=bytes(m[6]),
                assignment=bytes(m[7]),
            )
            for m in members
        ),
    )
