"""An in-process broker for shell-level tests: the real BrokerServer's storage, core,
handlers and connection loop, without ZooKeeper or a controller.

The test plays the controller: the broker is made leader of `t-0` (RF 1) through its own
LeaderAndIsr and UpdateMetadata handlers. Connections are served either over real
loopback TCP (`serve_tcp`) or over in-memory streams (`connect_memory`), the latter for
tests on trio's MockClock, where real sockets would let the clock jump while bytes are in
flight.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path

import trio
import trio.testing

from broker.config import BrokerConfig
from broker.server import BrokerServer
from client.connection import BrokerConnection
from client.protocol import messages as m
from server_common.network import serve_connection

TOPIC = "t"


def trio_clock_ms() -> int:
    return int(trio.current_time() * 1000)


def make_server(log_dir: Path, **overrides) -> BrokerServer:
    values = {
        "broker.id": 1,
        "log.dirs": str(log_dir),
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "zookeeper.connect": "127.0.0.1:1",  # never contacted
        **overrides,
    }
    server = BrokerServer(BrokerConfig(values), clock=trio_clock_ms)
    server.open_storage()
    return server


async def make_leader(server: BrokerServer, partitions: int = 1) -> None:
    server.topic_configs.set(TOPIC, server.topic_configs.default)  # no ZooKeeper to read it
    await server.handlers.leader_and_isr(
        m.LeaderAndIsrRequest(
            controller_id=1000,
            controller_epoch=1,
            partition_states=[
                m.LeaderAndIsrPartitionState(
                    topic=TOPIC,
                    partition=p,
                    controller_epoch=1,
                    leader=1,
                    leader_epoch=0,
                    isr=[1],
                    zk_version=0,
                    replicas=[1],
                    is_new=True,
                )
                for p in range(partitions)
            ],
            live_leaders=[m.LeaderAndIsrLiveLeader(broker_id=1, host="127.0.0.1", port=1)],
        )
    )
    await server.handlers.update_metadata(
        m.UpdateMetadataRequest(
            controller_id=1000,
            controller_epoch=1,
            partition_states=[
                m.UpdateMetadataPartitionState(
                    topic=TOPIC,
                    partition=p,
                    controller_epoch=1,
                    leader=1,
                    leader_epoch=0,
                    isr=[1],
                    zk_version=0,
                    replicas=[1],
                )
                for p in range(partitions)
            ],
            live_brokers=[m.UpdateMetadataBroker(id=1, host="127.0.0.1", port=1)],
        )
    )


def _serve(server: BrokerServer, stream) -> trio.abc.Stream:
    return serve_connection(
        stream,
        server.handlers.handle,
        max_frame_bytes=server.config["socket.request.max.bytes"],
        max_queued=server.config["queued.max.requests.per.connection"],
    )


@asynccontextmanager
async def running_broker(log_dir: Path, partitions: int = 1, **overrides):
    """Yields (server, nursery) with the reaper running; storage closed at the end."""
    server = make_server(log_dir, **overrides)
    await make_leader(server, partitions)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.background.reaper)
            yield server, nursery
            nursery.cancel_scope.cancel()
    finally:
        server.close_storage()


async def serve_tcp(server: BrokerServer, nursery: trio.Nursery) -> int:
    """Serve real loopback TCP; returns the port."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    nursery.start_soon(trio.serve_listeners, lambda s: _serve(server, s), listeners)
    return port


def connect_memory(server: BrokerServer, nursery: trio.Nursery) -> BrokerConnection:
    """A client connection over an in-memory stream pair (safe with MockClock)."""
    client_stream, server_stream = trio.testing.memory_stream_pair()
    nursery.start_soon(_serve, server, server_stream)
    return BrokerConnection(client_stream, nursery=nursery, peer="in-memory broker")
