"""The default partitioner: Kafka's murmur2 numbers, key hashing, sticky keyless records."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client.producer.partitioner import (
    DefaultPartitioner,
    StickyPartitionCache,
    murmur2,
    partition_for_key,
    to_positive,
)

# From Kafka's clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java
# (testMurmur2), and the values Akka's Murmur2Spec checks against Kafka's implementation.
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
    b"1": -1993445489,
    b"12": 126087238,
    b"123": -267702483,
    b"1234": -1614185708,
    b"12345": -1188365604,
}


@pytest.mark.parametrize("data, expected", sorted(KAFKA_VECTORS.items()))
def test_murmur2_gives_the_same_numbers_as_kafka(data, expected):
    assert murmur2(data) == expected


def test_a_key_lands_where_a_java_producer_would_put_it():
    # toPositive clears the sign bit (it is not abs()): -973932308 -> 1173551340.
    assert to_positive(-973932308) == 1173551340
    assert partition_for_key(b"21", 7) == 1173551340 % 7
    assert partition_for_key(b"abc", 10) == 479470107 % 10


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=1000))
def test_key_partition_is_stable_and_in_range(key, partitions):
    chosen = partition_for_key(key, partitions)
    assert 0 <= chosen < partitions
    assert chosen == partition_for_key(bytes(key), partitions)
    assert -(2**31) <= murmur2(key) < 2**31


def test_explicit_partition_wins_over_the_key():
    partitioner = DefaultPartitioner(random.Random(1))
    assert partitioner.partition("t", b"key", 8, range(8), explicit=5) == 5
    with pytest.raises(ValueError, match="partition 9"):
        partitioner.partition("t", b"key", 8, range(8), explicit=9)


def test_keyless_records_stick_to_one_partition_until_its_batch_closes():
    partitioner = DefaultPartitioner(random.Random(7))
    first = {partitioner.partition("t", None, 6, range(6)) for _ in range(50)}
    assert len(first) == 1
    (sticky,) = first
    moved = partitioner.on_new_batch("t", sticky, 6, range(6))
    assert moved != sticky
    assert {partitioner.partition("t", None, 6, range(6)) for _ in range(50)} == {moved}


def test_a_stale_new_batch_call_does_not_move_the_partition_twice():
    cache = StickyPartitionCache(random.Random(3))
    sticky = cache.partition("t", 4, [0, 1, 2, 3])
    moved = cache.on_new_batch("t", sticky, 4, [0, 1, 2, 3])
    # Another record still thinking of the old partition: the cache has moved already.
    assert cache.on_new_batch("t", sticky, 4, [0, 1, 2, 3]) == moved


def test_sticky_partition_is_chosen_among_partitions_with_a_leader():
    cache = StickyPartitionCache(random.Random(11))
    for _ in range(20):
        chosen = cache.on_new_batch("t", cache.partition("t", 5, [1, 3]), 5, [1, 3])
        assert chosen in (1, 3)
    # One available partition: stay on it even when its batch closes.
    only = StickyPartitionCache(random.Random(1))
    assert only.partition("u", 3, [2]) == 2
    assert only.on_new_batch("u", 2, 3, [2]) == 2
    # None available: any partition (the record waits for a leader there).
    assert 0 <= StickyPartitionCache().partition("v", 3, []) < 3


def test_each_topic_has_its_own_sticky_partition():
    cache = StickyPartitionCache(random.Random(5))
    a = cache.partition("a", 100, range(100))
    b = cache.partition("b", 100, range(100))
    cache.on_new_batch("a", a, 100, range(100))
    assert cache.partition("b", 100, range(100)) == b
