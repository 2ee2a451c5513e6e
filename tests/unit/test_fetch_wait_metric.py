"""A Fetch's long-poll wait is recorded apart from its total time (`fetch_wait_seconds`),
so the analytics can tell waiting from slowness: scraped from a real broker's /metrics."""

from __future__ import annotations

import trio
import trio.lowlevel

from client.connection import open_connection
from client.protocol import messages as m
from tests.unit.broker_harness import TOPIC, running_broker
from tests.unit.test_metrics_endpoint import (
    WITH_METRICS,
    http_get,
    produce_and_fetch,
    samples_by_family,
    value,
)

WAIT_MS = 300


async def fetch_at_the_end(port: int, offset: int) -> None:
    """A consumer's fetch with nothing to read: it waits WAIT_MS in the purgatory."""
    async with open_connection("127.0.0.1", port) as conn:
        await conn.request(
            m.FetchRequest(
                replica_id=-1,
                max_wait_ms=WAIT_MS,
                min_bytes=1,
                max_bytes=1 << 20,
                topics=[
                    m.FetchTopic(
                        topic=TOPIC,
                        partitions=[
                            m.FetchPartition(
                                partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
                            )
                        ],
                    )
                ],
            ),
            timeout_s=10,
        )


async def test_fetch_wait_is_its_own_histogram():
    async with running_broker(transport="tcp", settings=WITH_METRICS) as (broker, _):
        await produce_and_fetch(broker.port)  # one fetch answered at once
        await fetch_at_the_end(broker.port, offset=12)  # one long poll at the log end
        await trio.lowlevel.checkpoint()

        _, _, body = await http_get(broker.server.metrics_port, "/metrics")
        kind, waits = samples_by_family(body)["tributary_fetch_wait_seconds"]
        assert kind == "histogram"
        labels = {"request": "Fetch", "fetcher": "consumer"}
        count = value(waits, "tributary_fetch_wait_seconds_count", **labels)
        waited = value(waits, "tributary_fetch_wait_seconds_sum", **labels)
        assert count == 2  # both fetches, the one answered at once with a wait of 0
        assert WAIT_MS / 1000 * 0.9 <= waited
        total = value(
            samples_by_family(body)["tributary_request_latency_seconds"][1],
            "tributary_request_latency_seconds_sum",
            request="Fetch",
        )
        # The wait is part of the Fetch's total time. The broker's clock counts whole
        # milliseconds, the request timer fractions of them: one ms of slack per fetch.
        assert total >= waited - count * 0.001
