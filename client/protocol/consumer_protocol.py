"""Kafka's ConsumerProtocol: the bytes a group consumer puts in JoinGroup (its
Subscription) and gets back from SyncGroup (its Assignment), and the sticky assignor's
user data. The broker never reads these bytes; consumers (and admin tools) do.

How it works: big-endian, Kafka's classic encoding. A string is an int16 length and UTF-8
bytes; an array is an int32 count and its items; bytes are an int32 length (-1: null).

    Subscription v1: int16 version, array<string> topics, nullable bytes user_data,
                     array<(string topic, array<int32> partitions)> owned_partitions
    Assignment v1:   int16 version, array<(string topic, array<int32>)> partitions,
                     nullable bytes user_data
    Sticky user data (Kafka's StickyAssignor v1): array<(string, array<int32>)>
                     previous_assignment, int32 generation (v0: no generation)

Encoders write version 1. Decoders accept version 0 (a subscription without owned
partitions) and version 1 exactly (trailing bytes are an error), and read the version 1
fields of a newer version while ignoring what follows, as Kafka does. Decoding is strict
about sizes: every length and count is checked against the bytes left before anything is
allocated, so a malformed blob raises `ConsumerProtocolError` saying what was wrong and
where, and cannot make the reader allocate more than the blob's own size. An empty
assignment blob decodes to an empty `Assignment` (the coordinator sends empty bytes to a
member the leader's plan left out).

`Subscription.group_instance_id` is not on the wire: the JoinGroup response carries it
next to each member's metadata; the assignors use it to order static members.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from client.protocol.errors import ProtocolError
from client.protocol.types import TopicPartition

CONSUMER_PROTOCOL_TYPE = "consumer"  # JoinGroup protocol_type of Kafka consumers
VERSION_0 = 0
VERSION_1 = 1
NO_GENERATION = -1  # the sticky user data of a member that never got an assignment

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
# The smallest encodings of one array item: a count check against the bytes left divides
# by these, so an absurd count fails before any list is built.
_MIN_STRING = 2  # int16 length, empty string
_MIN_INT32 = 4
_MIN_TOPIC_PARTITIONS = _MIN_STRING + 4  # topic string + empty partition array


class ConsumerProtocolError(ProtocolError):
    """Bytes that are not a valid ConsumerProtocol subscription, assignment or user data."""


@dataclass(frozen=True)
class Subscription:
    """What one member asks for: its topics, its assignor's user data and the partitions
    it owns now. Sequences are stored as tuples (lists given are converted)."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    group_instance_id: str | None = field(default=None, compare=False)  # not encoded

    def __post_init__(self) -> None:
        object.__setattr__(self, "topics", tuple(self.topics))
        object.__setattr__(
            self, "owned_partitions", tuple(TopicPartition(*tp) for tp in self.owned_partitions)
        )


@dataclass(frozen=True)
class Assignment:
    """What the leader gave one member: its partitions and the assignor's user data."""

    partitions: tuple[TopicPartition, ...] = ()
    user_data: bytes | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "partitions", tuple(TopicPartition(*tp) for tp in self.partitions))


@dataclass(frozen=True)
class StickyUserData:
    """Kafka's StickyAssignor user data: the member's last assignment and its generation."""

    previous_assignment: tuple[TopicPartition, ...] = ()
    generation: int = NO_GENERATION

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "previous_assignment",
            tuple(TopicPartition(*tp) for tp in self.previous_assignment),
        )


# --- encoding ---------------------------------------------------------------------------


def _string(out: bytearray, text: str) -> None:
    data = text.encode()
    if len(data) > 0x7FFF:
        raise ValueError(f"string of {len(data)} bytes is too long for an int16 length")
    out += _INT16.pack(len(data))
    out += data


def _nullable_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out += _INT32.pack(-1)
    else:
        out += _INT32.pack(len(data))
        out += data


def _topic_partitions(out: bytearray, partitions: Iterable[TopicPartition]) -> None:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    out += _INT32.pack(len(by_topic))
    for topic in sorted(by_topic):
        _string(out, topic)
        numbers = sorted(by_topic[topic])
        out += _INT32.pack(len(numbers))
        for number in numbers:
            out += _INT32.pack(number)


def encode_subscription(subscription: Subscription) -> bytes:
    out = bytearray(_INT16.pack(VERSION_1))
    out += _INT32.pack(len(subscription.topics))
    for topic in subscription.topics:
        _string(out, topic)
    _nullable_bytes(out, subscription.user_data)
    _topic_partitions(out, subscription.owned_partitions)
    return bytes(out)


def encode_assignment(assignment: Assignment) -> bytes:
    out = bytearray(_INT16.pack(VERSION_1))
    _topic_partitions(out, assignment.partitions)
    _nullable_bytes(out, assignment.user_data)
    return bytes(out)


def encode_sticky_user_data(data: StickyUserData) -> bytes:
    out = bytearray()
    _topic_partitions(out, data.previous_assignment)
    out += _INT32.pack(data.generation)
    return bytes(out)


# --- decoding ---------------------------------------------------------------------------


class _Reader:
    """Reads a blob front to back; every read checks the bytes left first."""

    def __init__(self, data: bytes, what: str) -> None:
        self._data = memoryview(bytes(data))
        self._pos = 0
        self._what = what

    @property
    def remaining(self) -> int:
        return len(self._data) - self._pos

    def _fail(self, problem: str) -> ConsumerProtocolError:
        return ConsumerProtocolError(f"malformed {self._what} at byte {self._pos}: {problem}")

    def _take(self, size: int, field_name: str) -> memoryview:
        if size > self.remaining:
            raise self._fail(f"{field_name} needs {size} bytes but only {self.remaining} are left")
        chunk = self._data[self._pos : self._pos + size]
        self._pos += size
        return chunk

    def int16(self, field_name: str) -> int:
        return _INT16.unpack(self._take(2, field_name))[0]

    def int32(self, field_name: str) -> int:
        return _INT32.unpack(self._take(4, field_name))[0]

    def string(self, field_name: str) -> str:
        length = self.int16(f"the length of {field_name}")
        if length < 0:
            raise self._fail(f"{field_name} is null (length {length})")
        raw = self._take(length, field_name)
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as exc:
            raise self._fail(f"{field_name} is not UTF-8 ({exc.reason})") from None

    def nullable_bytes(self, field_name: str) -> bytes | None:
        length = self.int32(f"the length of {field_name}")
        if length == -1:
            return None
        if length < 0:
            raise self._fail(f"{field_name} has a negative length ({length})")
        return bytes(self._take(length, field_name))

    def count(self, field_name: str, min_item_size: int) -> int:
        count = self.int32(f"the count of {field_name}")
        if count < 0:
            raise self._fail(f"{field_name} has a negative count ({count})")
        if count * min_item_size > self.remaining:
            raise self._fail(
                f"{field_name} claims {count} items but only {self.remaining} bytes are left"
            )
        return count

    def topic_partitions(self, field_name: str) -> tuple[TopicPartition, ...]:
        out: list[TopicPartition] = []
        for _ in range(self.count(field_name, _MIN_TOPIC_PARTITIONS)):
            topic = self.string(f"a topic of {field_name}")
            for _ in range(self.count(f"the partitions of {topic!r}", _MIN_INT32)):
                out.append(TopicPartition(topic, self.int32("a partition number")))
        return tuple(out)

    def version(self) -> int:
        version = self.int16("the version")
        if version < 0:
            raise self._fail(f"unsupported version {version}")
        return version

    def end(self, version: int) -> None:
        """Known versions must be read to the last byte; newer ones may carry more."""
        if version <= VERSION_1 and self.remaining:
            raise self._fail(f"{self.remaining} unexpected bytes after a version {version} blob")


def decode_subscription(data: bytes, group_instance_id: str | None = None) -> Subscription:
    """A member's JoinGroup metadata; raises `ConsumerProtocolError` if malformed."""
    reader = _Reader(data, "subscription")
    version = reader.version()
    topics = tuple(reader.string("a topic") for _ in range(reader.count("the topics", _MIN_STRING)))
    user_data = reader.nullable_bytes("the user data")
    owned: tuple[TopicPartition, ...] = ()
    if version >= VERSION_1:
        owned = reader.topic_partitions("the owned partitions")
    reader.end(version)
    return Subscription(topics, user_data, owned, group_instance_id)


def decode_assignment(data: bytes) -> Assignment:
    """A member's SyncGroup assignment; raises `ConsumerProtocolError` if malformed.
    Empty bytes are an empty assignment."""
    if not data:
        return Assignment()
    reader = _Reader(data, "assignment")
    version = reader.version()
    partitions = reader.topic_partitions("the assigned partitions")
    user_data = reader.nullable_bytes("the user data")
    reader.end(version)
    return Assignment(partitions, user_data)


def decode_sticky_user_data(data: bytes) -> StickyUserData:
    """Kafka's StickyAssignor user data, v1 (with generation) or v0 (without)."""
    reader = _Reader(data, "sticky assignor user data")
    previous = reader.topic_partitions("the previous assignment")
    generation = NO_GENERATION
    if reader.remaining:
        generation = reader.int32("the generation")
    if reader.remaining:
        raise reader._fail(f"{reader.remaining} unexpected bytes after the generation")
    return StickyUserData(previous, generation)
