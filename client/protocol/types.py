"""Small value types shared across the protocol, broker and controller."""

from __future__ import annotations

from typing import NamedTuple, TypeVar


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


# The key of a mapping from partitions that the public APIs take: TopicPartitions or plain
# (topic, partition) tuples. A type variable because a Mapping's key type is invariant:
# Mapping[tuple[str, int], int] would refuse a dict keyed by TopicPartition.
PartitionKey = TypeVar("PartitionKey", bound=tuple[str, int])


MAX_TOPIC_NAME_LENGTH = 249  # Kafka's limit: leaves room for "-<partition>" in a 255-byte name
_LEGAL_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def topic_name_problem(name: object) -> str | None:
    """Why `name` cannot be a topic name (Kafka's rules), or None if it can."""
    if not isinstance(name, str) or not name:
        return "topic name must be a non-empty string"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters"
    bad = sorted(set(name) - _LEGAL_TOPIC_CHARS)
    if bad:
        return (
            f"topic name {name!r} contains illegal characters {''.join(bad)!r} "
            "(allowed: a-z A-Z 0-9 . _ -)"
        )
    return None
