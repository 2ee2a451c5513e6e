"""The client's cluster view: bootstrap fallback, refresh on demand and by age, errors;
against an in-process cluster of real brokers (tests/support/cluster.py)."""

from __future__ import annotations

import pytest
import trio

from client.connection import open_connection_pool
from client.metadata import (
    Metadata,
    NoBrokersAvailableError,
    UnknownTopicError,
    open_client_nursery,
    parse_bootstrap,
)
from client.protocol import messages as m
from client.protocol.types import TopicPartition
from tests.support.cluster import open_test_cluster


def test_bootstrap_addresses_are_parsed_or_refused():
    assert parse_bootstrap("a:1, b:2,") == [("a", 1), ("b", 2)]
    assert parse_bootstrap(["[::1]:9092"]) == [("::1", 9092)]
    for bad in ("", "host", "host:", "host:port", ":9092", "h:70000"):
        with pytest.raises(ValueError):
            parse_bootstrap(bad)


async def test_a_dead_bootstrap_address_is_skipped(autojump_clock):
    async with (
        open_test_cluster(2, topics={"t": 2}) as cluster,
        open_connection_pool(connector=cluster.connector()) as pool,
    ):
        await cluster.stop_broker(1)
        dead, alive = cluster.brokers[1].address, cluster.brokers[2].address
        metadata = Metadata(pool, f"{dead},{alive}")
        metadata.add_topics("t")
        view = await metadata.refresh()
        assert view.partitions_for("t") == [0, 1]
        assert sorted(view.brokers) == [2]
        assert view.leader_for(TopicPartition("t", 1)).leader == 2
        assert view.leader_for(TopicPartition("t", 0)) is None  # its leader is down


async def test_known_brokers_are_asked_when_the_bootstrap_one_dies(autojump_clock):
    async with (
        open_test_cluster(2) as cluster,
        open_connection_pool(connector=cluster.connector()) as pool,
    ):
        metadata = Metadata(pool, cluster.brokers[1].address)
        await metadata.refresh()
        await cluster.stop_broker(1)
        view = await metadata.refresh()
        assert sorted(view.brokers) == [2]
        await cluster.stop_broker(2)
        with pytest.raises(NoBrokersAvailableError, match="cannot reach any broker at broker1"):
            await metadata.refresh()


async def test_refresh_on_request_with_backoff_and_by_age(autojump_clock):
    async with (
        open_test_cluster(topics={"t": 1}) as cluster,
        open_connection_pool(connector=cluster.connector()) as pool,
    ):
        metadata = Metadata(pool, cluster.bootstrap, max_age_ms=10_000, retry_backoff_ms=100)
        await metadata.refresh()
        async with open_client_nursery() as nursery:
            await nursery.start(metadata.run)
            start_version = metadata.version
            metadata.request_update()
            metadata.request_update()
            assert await metadata.wait_for_update(1)
            assert metadata.version == start_version + 1
            metadata.request_update()  # within the backoff of the last refresh: waits for it
            before = trio.current_time()
            await metadata.wait_for_update(1)
            assert trio.current_time() - before >= 0.1 - 1e-9
            requests = len(cluster.requests_of(m.MetadataRequest))
            await trio.sleep(10.5)  # metadata.max.age.ms passes: one more refresh
            assert len(cluster.requests_of(m.MetadataRequest)) == requests + 1
            nursery.cancel_scope.cancel()


async def test_an_unknown_topic_is_reported_after_a_grace_period(autojump_clock):
    async with (
        open_test_cluster() as cluster,
        open_connection_pool(connector=cluster.connector()) as pool,
    ):
        metadata = Metadata(pool, cluster.bootstrap)
        start = trio.current_time()
        with pytest.raises(UnknownTopicError, match="topic 'ghost' does not exist"):
            await metadata.partitions_or_error("ghost")
        assert trio.current_time() - start >= 0.5

        async def create_soon() -> None:
            await trio.sleep(0.2)
            await cluster.create_topic("late", 3)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(create_soon)
            assert await metadata.partitions_or_error("late") == [0, 1, 2]
