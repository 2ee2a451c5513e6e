"""One real broker, in process, for shell-level tests (long polls, ordering, bad input,
metrics).

It is a one-broker `tests.support.cluster` cluster: the real `BrokerServer` with the real
controller, leading topic `t`. Connections go over the in-memory network (`transport=
"memory"`, for tests on trio's MockClock, where real sockets would let the clock jump
while bytes are in flight) or real loopback TCP (`transport="tcp"`, as a hostile client
would connect).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from client.connection import BrokerConnection
from tests.support.cluster import ClusterBroker, open_test_cluster

TOPIC = "t"


@asynccontextmanager
async def running_broker(
    *, transport: str = "memory", partitions: int = 1, settings: dict[str, str] | None = None
) -> AsyncIterator[tuple[ClusterBroker, trio.Nursery]]:
    """Yields (broker, nursery): broker 1 leads `t` (`partitions` partitions, RF 1)."""
    async with open_test_cluster(
        1, transport=transport, broker_settings=settings, topics={TOPIC: partitions}
    ) as cluster:
        async with trio.open_nursery() as nursery:
            yield cluster.brokers[1], nursery
            nursery.cancel_scope.cancel()


async def connect(broker: ClusterBroker, nursery: trio.Nursery) -> BrokerConnection:
    """A client connection to `broker` over its cluster's network."""
    return await BrokerConnection.connect(
        broker.host, broker.port, nursery=nursery, connector=broker.cluster.connector()
    )
