"""Which partition a record goes to: Kafka 2.8's default partitioner.

How it works (sans-IO, no clock, no sockets):
- an explicit partition wins;
- a keyed record goes to `to_positive(murmur2(key)) % num_partitions`, with the same
  32-bit murmur2 as Kafka's Java `Utils.murmur2` (seed 0x9747b28c), so a key lands on
  the same partition number as it would with a Java producer;
- a keyless record goes to the topic's *sticky* partition (KIP-480): one partition,
  chosen at random among those with a leader, is used until the producer closes the
  batch it was filling (full, or drained by the sender); then `on_new_batch()` picks a
  different available one. Sticking fills bigger batches than round-robin does, which is
  what lowers latency under light load.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

_MURMUR2_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 of `data` as a signed 32-bit int (same numbers as the Java one)."""
    length = len(data)
    h = (_MURMUR2_SEED ^ length) & _MASK32
    whole = length & ~3
    for i in range(0, whole, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    tail = length & 3
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's `Utils.toPositive`: clear the sign bit (not `abs`, which breaks on MIN_INT)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner gives `key` among `num_partitions`."""
    if num_partitions <= 0:
        raise ValueError(f"a topic has at least one partition, not {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitionCache:
    """The sticky partition per topic (Kafka's `StickyPartitionCache`)."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._sticky: dict[str, int] = {}

    def partition(self, topic: str, num_partitions: int, available: Sequence[int]) -> int:
        """The topic's current sticky partition, choosing one if there is none yet."""
        current = self._sticky.get(topic)
        if current is not None and current < num_partitions:
            return current
        return self._choose(topic, num_partitions, available, previous=None)

    def on_new_batch(
        self, topic: str, previous: int, num_partitions: int, available: Sequence[int]
    ) -> int:
        """The batch for `previous` was closed: move on, unless someone already did."""
        current = self._sticky.get(topic)
        if current is not None and current != previous and current < num_partitions:
            return current
        return self._choose(topic, num_partitions, available, previous=previous)

    def _choose(
        self, topic: str, num_partitions: int, available: Sequence[int], previous: int | None
    ) -> int:
        candidates = [p for p in available if p < num_partitions]
        if len(candidates) > 1 and previous is not None:
            candidates = [p for p in candidates if p != previous]
        if candidates:
            chosen = candidates[self._rng.randrange(len(candidates))]
        else:  # no partition has a leader: any partition (the record waits for one)
            others = [p for p in range(num_partitions) if p != previous] or [0]
            chosen = others[self._rng.randrange(len(others))]
        self._sticky[topic] = chosen
        return chosen


def checked_partition(topic: str, partition: int, num_partitions: int) -> int:
    """An explicitly chosen partition, if the topic has it (ValueError otherwise)."""
    if not 0 <= partition < num_partitions:
        raise ValueError(
            f"partition {partition} is not in topic {topic!r}, which has "
            f"{num_partitions} partition(s)"
        )
    return partition


class DefaultPartitioner:
    """Kafka 2.8's `DefaultPartitioner`: explicit partition, else key hash, else sticky."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.sticky = StickyPartitionCache(rng)

    def partition(
        self,
        topic: str,
        key: bytes | None,
        num_partitions: int,
        available: Sequence[int],
        explicit: int | None = None,
    ) -> int:
        """The partition for one record. `available`: partitions that have a leader."""
        if explicit is not None:
            return checked_partition(topic, explicit, num_partitions)
        if key is not None:
            return partition_for_key(key, num_partitions)
        return self.sticky.partition(topic, num_partitions, available)

    def on_new_batch(
        self, topic: str, previous: int, num_partitions: int, available: Sequence[int]
    ) -> int:
        """A keyless record would have opened a new batch on `previous`: pick anew."""
        return self.sticky.on_new_batch(topic, previous, num_partitions, available)
