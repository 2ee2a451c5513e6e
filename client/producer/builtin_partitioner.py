"""Kafka 3.3's built-in partitioner (KIP-794): sticky partitions for keyless records,
switched after `batch.size` bytes, the next one weighted away from slow leaders.

How it works (sans-IO: no clock, no sockets; randomness injected):
- an explicit partition wins; a keyed record goes to murmur2's partition
  (client/producer/partitioner.py), unless `partitioner.ignore.keys` is on;
- a keyless record goes to its topic's sticky partition. `on_appended(topic, partition,
  nbytes, batch_full)` counts the bytes produced to it (a new batch's header included);
  once `batch_size` bytes went there and its open batch is full, or `2 * batch_size`
  bytes went there whatever the batch, the next record gets a new sticky partition
  (Kafka's rule). A record its open batch cannot take moves it too once `batch_size`
  bytes went there (`on_batch_full`: Kafka's "all batches full" check, so that the
  partition is not left with a batch of one record); before that, a new batch opens
  there. A batch being sent does not move it (Kafka 2.8's `on_new_batch` did; kept here
  for callers of that partitioner);
- the next partition: when adaptive partitioning is on and the accumulator gives load
  statistics (`load_source`, asked at each pick, or `update_load_stats` while a leader
  is unavailable: each available partition's queue length, in batches), a random pick
  weighted by `max + 1 - queue length` (Kafka's cumulative frequency table: the
  shorter a leader's queue, the likelier); partitions the
  accumulator left out (no leader, or a leader that has had ready batches but none
  drained for `partitioner.availability.timeout.ms`) cannot be picked. Without statistics
  (adaptive partitioning off, or all queues equal and none left out) the pick is uniform
  among the partitions that have a leader, as in Kafka.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from client.producer.partitioner import checked_partition, partition_for_key


@dataclass(frozen=True)
class PartitionerConfig:
    """Kafka's partitioner settings (names in snake_case) and `batch.size`."""

    batch_size: int = 16_384
    adaptive_partitioning_enable: bool = True  # partitioner.adaptive.partitioning.enable
    availability_timeout_ms: float = 0  # partitioner.availability.timeout.ms (0: off)
    ignore_keys: bool = False  # partitioner.ignore.keys


@dataclass(frozen=True)
class LoadStats:
    """Kafka's PartitionLoadStats: partition ids and their cumulative weights."""

    partitions: tuple[int, ...]
    cumulative: tuple[int, ...]

    @classmethod
    def of(cls, queue_sizes: Sequence[tuple[int, int]], complete: bool) -> LoadStats | None:
        """Statistics from `(partition, queue length)` of the partitions that may be
        picked; `complete`: none was left out. None (uniform picks) when there is nothing
        to pick from, or the queues are all equal and none was left out (Kafka's rule)."""
        if not queue_sizes:
            return None
        sizes = [size for _, size in queue_sizes]
        top = max(sizes)
        if complete and min(sizes) == top:
            return None
        cumulative: list[int] = []
        total = 0
        for size in sizes:
            total += top + 1 - size
            cumulative.append(total)
        return cls(tuple(p for p, _ in queue_sizes), tuple(cumulative))

    def pick(self, rng: random.Random) -> int:
        point = rng.randrange(self.cumulative[-1])
        return self.partitions[bisect.bisect_right(self.cumulative, point)]


LoadSource = Callable[[str], tuple[Sequence[tuple[int, int]], bool]]


class BuiltInPartitioner:
    """Which partition a record goes to; see the module docstring."""

    def __init__(
        self, config: PartitionerConfig | None = None, rng: random.Random | None = None
    ) -> None:
        self.config = config or PartitionerConfig()
        self._rng = rng or random.Random()
        self._sticky: dict[str, int] = {}
        self._produced: dict[str, int] = {}  # bytes produced to the sticky partition
        self._stats: dict[str, LoadStats | None] = {}
        # The accumulator's `(partition, queue length)` of a topic's available partitions
        # and whether none was left out, asked for when a new partition is picked.
        self.load_source: LoadSource | None = None

    # --- choosing --------------------------------------------------------------------

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
        if key is not None and not self.config.ignore_keys:
            return partition_for_key(key, num_partitions)
        current = self._sticky.get(topic)
        if current is not None and current < num_partitions:
            return current
        return self._switch(topic, num_partitions, available, previous=None)

    def on_appended(
        self,
        topic: str,
        partition: int,
        nbytes: int,
        num_partitions: int,
        available: Sequence[int],
        batch_full: bool = False,
    ) -> None:
        """`nbytes` went to the sticky `partition` (whose open batch is now `batch_full`):
        switch once `batch_size` bytes did and the batch is full, or twice that did."""
        if self._sticky.get(topic) != partition:
            return
        produced = self._produced.get(topic, 0) + nbytes
        self._produced[topic] = produced
        if produced >= 2 * self.config.batch_size or (
            batch_full and produced >= self.config.batch_size
        ):
            self._switch(topic, num_partitions, available, previous=partition)

    def on_batch_full(
        self, topic: str, partition: int, num_partitions: int, available: Sequence[int]
    ) -> int:
        """The open batch of the sticky `partition` cannot take the next record: move on
        if `batch_size` bytes went there, else stay (a new batch opens there)."""
        if self._sticky.get(topic) != partition:
            return partition
        if self._produced.get(topic, 0) < self.config.batch_size:
            return partition
        return self._switch(topic, num_partitions, available, previous=partition)

    def on_new_batch(
        self, topic: str, previous: int, num_partitions: int, available: Sequence[int]
    ) -> int:
        """The open batch of `previous` cannot take the record: move on, unless someone
        already did."""
        current = self._sticky.get(topic)
        if current is not None and current != previous and current < num_partitions:
            return current
        return self._switch(topic, num_partitions, available, previous=previous)

    def leave(
        self, topic: str, partition: int, num_partitions: int, available: Sequence[int]
    ) -> int | None:
        """`partition` has become unavailable: a new sticky partition if it was the
        current one, and a partition for a batch moved off it (None: none to go to)."""
        stats = self._stats.get(topic)
        if stats is None or partition in stats.partitions:
            return None
        if self._sticky.get(topic) == partition:
            return self._switch(topic, num_partitions, available, previous=partition)
        return stats.pick(self._rng)

    # --- load statistics -------------------------------------------------------------

    def update_load_stats(
        self, topic: str, queue_sizes: Sequence[tuple[int, int]], complete: bool
    ) -> None:
        """The accumulator's view of `topic`: `(partition, queue length)` of the
        partitions that may be picked; `complete`: no partition was left out."""
        if not self.config.adaptive_partitioning_enable:
            return
        self._stats[topic] = LoadStats.of(queue_sizes, complete)

    def sticky_bytes_left(self, topic: str) -> int:
        """Bytes the sticky partition takes before it must move on (twice `batch_size`
        in all): a run of records (`send_many`) stops there, as one record at a time
        would."""
        return 2 * self.config.batch_size - self._produced.get(topic, 0)

    def load_stats(self, topic: str) -> LoadStats | None:
        return self._stats.get(topic)

    def next_partition(self, topic: str, num_partitions: int, available: Sequence[int]) -> int:
        """Kafka's `nextPartition`: weighted by the load statistics (fresh from
        `load_source` if set), else uniform among the available partitions (any
        partition if none is)."""
        if self.load_source is not None:
            self.update_load_stats(topic, *self.load_source(topic))
        stats = self._stats.get(topic)
        if stats is not None and all(p < num_partitions for p in stats.partitions):
            return stats.pick(self._rng)
        candidates = [p for p in available if p < num_partitions]
        if candidates:
            return candidates[self._rng.randrange(len(candidates))]
        return self._rng.randrange(num_partitions)

    def _switch(
        self, topic: str, num_partitions: int, available: Sequence[int], previous: int | None
    ) -> int:
        chosen = self.next_partition(topic, num_partitions, available)
        self._sticky[topic] = chosen
        self._produced[topic] = 0
        return chosen
