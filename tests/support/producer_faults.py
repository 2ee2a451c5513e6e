"""Retriable trouble for the producer's property tests: hypothesis strategies of faults
and one run of 60 records through them on an in-process cluster (tests/support/cluster.py).

A fault is `("error", code, partition)` (the next Produce for that partition answers
`code`), `("drop", after_append, broker)` (a Produce connection to `broker` drops, before
or after the leader appended) or `("move", i, partition)` (after record i is sent, the
partition's leadership moves to the other broker). `send_under_faults` injects them,
sends records "0".."59" round-robin to partitions 0-2 of topic "t" (RF 2, so a move
keeps the data) and returns the delivery handles once the producer has closed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import trio
from hypothesis import strategies as st

from client.producer import DeliveryHandle, open_producer
from client.protocol.api import ApiKey
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition
from tests.support.cluster import TestCluster

RECORDS = 60


def fault_lists(errors: Sequence[ErrorCode]) -> st.SearchStrategy:
    return st.lists(
        st.one_of(
            st.tuples(st.just("error"), st.sampled_from(list(errors)), st.integers(0, 2)),
            st.tuples(st.just("drop"), st.booleans(), st.integers(1, 2)),
            st.tuples(st.just("move"), st.integers(0, RECORDS - 1), st.integers(0, 2)),
        ),
        max_size=6,
    )


async def send_under_faults(
    cluster: TestCluster, faults, **producer_options: Any
) -> list[DeliveryHandle]:
    await cluster.create_topic("t", 3, replication_factor=2)
    moves = inject(cluster, faults)
    async with open_producer(
        cluster.bootstrap, connector=cluster.connector(), retry_backoff_ms=10, **producer_options
    ) as p:
        handles = []
        for i in range(RECORDS):
            handles.append(await p.send("t", str(i), partition=i % 3))
            if i in moves:
                tp = TopicPartition("t", moves[i])
                await cluster.move_leader(tp, 3 - cluster.partition(tp).leader)
            if i % 7 == 0:
                await trio.sleep(0.001)
    return handles


def inject(cluster: TestCluster, faults) -> dict[int, int]:
    """Arm the errors and drops of `faults` on topic "t"; the moves it asks for, as
    {after record i: partition}."""
    moves = {}
    for kind, a, b in faults:
        if kind == "error":
            cluster.fail(ApiKey.PRODUCE, a, tp=TopicPartition("t", b))
        elif kind == "drop":
            cluster.drop(ApiKey.PRODUCE, broker=b, after_append=a)
        else:
            moves[a] = b
    return moves
