"""KIP-794's built-in partitioner: keyed records keep murmur2's partition, sticky
partitions switch after batch.size bytes, unavailable partitions are never picked while
another is, picks are weighted away from long queues and uniform when queues are equal;
and the accumulator's side: a leader that cannot be drained for
partitioner.availability.timeout.ms is left out, and the never-sent batches of keyless
records queued for it move to an available partition."""

from __future__ import annotations

import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from client.metadata import BrokerInfo, ClusterView, PartitionInfo, TopicInfo
from client.producer.accumulator import AccumulatorConfig, RecordAccumulator
from client.producer.builtin_partitioner import BuiltInPartitioner, LoadStats, PartitionerConfig
from client.producer.partitioner import partition_for_key
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition


class Cycling(random.Random):
    """`randrange(n)` gives 0, 1, 2, ... mod n: every switch moves to another partition."""

    def __init__(self) -> None:
        super().__init__(0)
        self.calls = 0

    def randrange(self, start, stop=None, step=1):
        n = start if stop is None else stop - start
        self.calls += 1
        return self.calls % n


@settings(max_examples=200, deadline=None)
@given(
    key=st.binary(max_size=40),
    num_partitions=st.integers(1, 50),
    available=st.sets(st.integers(0, 49)),
    adaptive=st.booleans(),
)
def test_keyed_records_always_go_to_murmur2s_partition(key, num_partitions, available, adaptive):
    partitioner = BuiltInPartitioner(
        PartitionerConfig(adaptive_partitioning_enable=adaptive), random.Random(1)
    )
    avail = sorted(p for p in available if p < num_partitions)
    partitioner.update_load_stats("t", [(p, p % 3) for p in avail], complete=False)
    expected = partition_for_key(key, num_partitions)
    assert partitioner.partition("t", key, num_partitions, avail) == expected
    partitioner.on_appended("t", expected, 10**6, num_partitions, avail)
    assert partitioner.partition("t", key, num_partitions, avail) == expected


def test_ignore_keys_makes_keyed_records_sticky():
    partitioner = BuiltInPartitioner(PartitionerConfig(ignore_keys=True), Cycling())
    first = partitioner.partition("t", b"k1", 4, [0, 1, 2, 3])
    assert partitioner.partition("t", b"another key", 4, [0, 1, 2, 3]) == first


@settings(max_examples=200, deadline=None)
@given(
    batch_size=st.integers(100, 5_000),
    appends=st.lists(st.tuples(st.integers(1, 2_000), st.booleans()), min_size=1, max_size=60),
)
def test_the_sticky_partition_switches_after_batch_size_bytes(batch_size, appends):
    """Once batch_size bytes went to it and its batch is full, or twice that went."""
    partitioner = BuiltInPartitioner(PartitionerConfig(batch_size=batch_size), Cycling())
    available = [0, 1, 2]
    produced = 0
    expected = partitioner.partition("t", None, 3, available)
    for size, full in appends:
        partition = partitioner.partition("t", None, 3, available)
        assert partition == expected
        partitioner.on_appended("t", partition, size, 3, available, batch_full=full)
        produced += size
        if produced >= 2 * batch_size or (full and produced >= batch_size):
            expected = partitioner.partition("t", None, 3, available)
            assert expected != partition  # switched: the next record goes elsewhere
            produced = 0


def test_a_full_batch_moves_the_sticky_partition_only_after_batch_size_bytes():
    partitioner = BuiltInPartitioner(PartitionerConfig(batch_size=1000), Cycling())
    every = [0, 1, 2]
    first = partitioner.partition("t", None, 3, every)
    partitioner.on_appended("t", first, 900, 3, every)
    assert partitioner.on_batch_full("t", first, 3, every) == first  # a new batch there
    partitioner.on_appended("t", first, 100, 3, every)  # 1000 bytes, the batch not full
    assert partitioner.partition("t", None, 3, every) == first
    moved = partitioner.on_batch_full("t", first, 3, every)
    assert moved != first and partitioner.partition("t", None, 3, every) == moved


@settings(max_examples=200, deadline=None)
@given(
    queues=st.dictionaries(st.integers(0, 11), st.integers(0, 20), min_size=1, max_size=12),
    unavailable=st.sets(st.integers(0, 11)),
    seed=st.integers(0, 2**32),
)
def test_an_unavailable_partition_is_never_picked_while_another_is(queues, unavailable, seed):
    usable = [(p, size) for p, size in sorted(queues.items()) if p not in unavailable]
    partitioner = BuiltInPartitioner(PartitionerConfig(batch_size=1), random.Random(seed))
    partitioner.update_load_stats("t", usable, complete=len(usable) == 12)
    every = list(range(12))
    picks = set()
    for _ in range(30):
        partition = partitioner.partition("t", None, 12, every)
        partitioner.on_appended("t", partition, 1, 12, every, batch_full=True)  # switch
        picks.add(partition)
    if usable:
        assert picks <= {p for p, _ in usable}


@settings(max_examples=200, deadline=None)
@given(
    size=st.integers(0, 50),
    partitions=st.lists(st.integers(0, 99), min_size=1, max_size=20, unique=True),
    complete=st.booleans(),
)
def test_equal_queues_give_every_partition_the_same_weight(size, partitions, complete):
    stats = LoadStats.of([(p, size) for p in partitions], complete)
    if stats is None:  # Kafka's rule: all equal and none left out, so a uniform pick
        assert complete
        return
    weights = [b - a for a, b in zip((0, *stats.cumulative), stats.cumulative, strict=False)]
    assert len(set(weights)) == 1
    assert sorted(stats.partitions) == sorted(partitions)


def test_uniform_picks_over_the_available_partitions():
    partitioner = BuiltInPartitioner(rng=random.Random(42))
    counts = Counter(partitioner.next_partition("t", 6, [0, 2, 4]) for _ in range(6_000))
    assert set(counts) == {0, 2, 4}
    assert all(1_700 < n < 2_300 for n in counts.values())


def test_shorter_queues_are_likelier():
    stats = LoadStats.of([(0, 0), (1, 3), (2, 1)], complete=True)
    assert stats is not None
    assert stats.cumulative == (4, 5, 8)  # weights max + 1 - size: 4, 1, 3
    rng = random.Random(5)
    counts = Counter(stats.pick(rng) for _ in range(8_000))
    assert counts[0] > counts[2] > counts[1]


# --- the accumulator's side --------------------------------------------------------------


def _cluster(leaders: dict[int, int]) -> ClusterView:
    brokers = [BrokerInfo(n, "127.0.0.1", 9000 + n) for n in set(leaders.values())]
    parts = {
        p: PartitionInfo("t", p, leader, 0, (leader,), (leader,), ())
        for p, leader in leaders.items()
    }
    return ClusterView(brokers, [TopicInfo("t", ErrorCode.NONE, False, parts)])


def _accumulator(
    timeout_ms: float, cluster: ClusterView
) -> tuple[RecordAccumulator, BuiltInPartitioner]:
    """An accumulator and its partitioner, wired as the producer wires them."""
    partitioner = BuiltInPartitioner(
        PartitionerConfig(availability_timeout_ms=timeout_ms), random.Random(3)
    )
    acc = RecordAccumulator(AccumulatorConfig(availability_timeout_ms=timeout_ms), partitioner)

    def load_source(topic: str):
        sizes, left_out = acc.queue_sizes(cluster, topic)
        return sizes, not left_out

    partitioner.load_source = load_source
    return acc, partitioner


def _queue_keyless(acc: RecordAccumulator, partition: int, now_ms: float) -> None:
    batch = acc.new_batch(TopicPartition("t", partition), now_ms)
    batch.movable = True
    acc.append(batch, None, b"v", 0, (), 10)


def test_a_leader_not_drained_for_the_timeout_is_left_out_and_its_batches_move():
    cluster = _cluster({0: 1, 1: 2, 2: 3, 3: 1, 4: 2, 5: 3})
    acc, partitioner = _accumulator(500, cluster)
    _queue_keyless(acc, 0, 0)  # led by broker 1, which does not answer
    check = acc.ready(cluster, 0)
    assert 1 in check.nodes
    acc.update_node_latency(1, 0, can_drain=False)
    acc.ready(cluster, 400)
    acc.update_node_latency(1, 400, can_drain=False)
    acc.ready(cluster, 400)
    partitioner.next_partition("t", 6, range(6))  # a pick asks for fresh statistics
    stats = partitioner.load_stats("t")  # not yet past the timeout: 0 is still in
    assert stats is not None and set(stats.partitions) == set(range(6))
    acc.update_node_latency(1, 600, can_drain=False)
    acc.ready(cluster, 600)
    stats = partitioner.load_stats("t")
    assert stats is not None and set(stats.partitions) == {1, 2, 4, 5}
    moved = [tp.partition for tp, queue in acc.queues.items() for _ in queue]
    assert moved and all(p in (1, 2, 4, 5) for p in moved)
    for _ in range(50):
        assert partitioner.next_partition("t", 6, [0, 1, 2, 3, 4, 5]) in (1, 2, 4, 5)
    # The leader answers again: drained, it is back in the choice.
    acc.update_node_latency(1, 700, can_drain=True)
    acc.ready(cluster, 700)
    partitioner.next_partition("t", 6, range(6))
    stats = partitioner.load_stats("t")
    assert stats is not None and 0 in stats.partitions


def test_keyed_or_sent_batches_never_move():
    cluster = _cluster({0: 1, 1: 2})
    acc, _ = _accumulator(100, cluster)
    pinned = acc.new_batch(TopicPartition("t", 0), 0)
    acc.append(pinned, b"key", b"v", 0, (), 10)  # not movable
    retried = acc.new_batch(TopicPartition("t", 0), 0)
    retried.movable = True
    retried.attempts = 1  # sent once: the old leader may have written it
    acc.update_node_latency(1, 0, can_drain=False)
    acc.update_node_latency(1, 500, can_drain=False)
    acc.ready(cluster, 500)
    assert list(acc.queues[TopicPartition("t", 0)]) == [pinned, retried]


def test_without_a_timeout_no_leader_is_left_out():
    cluster = _cluster({0: 1, 1: 2})
    acc, partitioner = _accumulator(0, cluster)
    _queue_keyless(acc, 0, 0)
    acc.update_node_latency(1, 0, can_drain=False)
    acc.update_node_latency(1, 10_000, can_drain=False)
    acc.ready(cluster, 10_000)
    assert not acc.node_unavailable(1)
    assert len(acc.queues[TopicPartition("t", 0)]) == 1
