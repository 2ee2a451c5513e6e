"""Small, explicit helpers for real-process tests: raw protocol calls (so a test sees the
exact error codes; `kafka_call` on a Kafka listener), ZooKeeper reads, and polling with a
deadline. Against a secure cluster (`LocalCluster(secure=True)`) the native calls log in
as its `admin` user."""

from __future__ import annotations

import io
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

import trio

from client.connection import open_connection
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.records import Record, build_batch
from client.security.secure_connector import with_security
from tools.cluster.inspect import read_cluster
from tools.cluster.launcher import LocalCluster


def kafka_call(port: int, request: Any, *, client_id: str = "tests", timeout_s: float = 30) -> Any:
    """One Kafka request (a kio request object) to the Kafka listener on `port` over a
    plain socket, blocking; its decoded response."""
    from kio.index import load_response_from_request
    from kio.serial import entity_reader, entity_writer

    header_cls = type(request).__header_schema__
    out = io.BytesIO()
    entity_writer(header_cls)(
        out,
        header_cls(
            request_api_key=type(request).__api_key__,
            request_api_version=type(request).__version__,
            correlation_id=1,
            client_id=client_id,
        ),
    )
    entity_writer(type(request))(out, request)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(struct.pack(">i", out.tell()) + out.getvalue())
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = sock.recv(1 << 16)
            assert chunk, "the broker closed the connection"
            data += chunk
    response_cls = load_response_from_request(type(request))
    frame = data[4:]
    _, used = entity_reader(response_cls.__header_schema__)(frame, 0)
    response, _ = entity_reader(response_cls)(frame, used)
    return response


def wait_until(predicate: Callable[[], object], timeout_s: float, interval_s: float = 0.1):
    """Poll until `predicate()` is truthy; returns its value, or raises with the elapsed time."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s")
        time.sleep(interval_s)


def admin_properties(cluster: LocalCluster) -> str | None:
    """The cluster's `admin.properties` (SCRAM-SHA-512 over SASL_SSL) if it is a secure
    one, else None."""
    if cluster.state is None or not cluster.state.settings.get("secure"):
        return None
    return str(cluster.directory / "admin.properties")


def admin_security(cluster: LocalCluster) -> dict:
    """The client library's security keyword arguments for the cluster's `admin` user
    ({} for a plaintext cluster)."""
    path = admin_properties(cluster)
    if path is None:
        return {}
    from tools.commands.common import security_options

    return security_options(path)


def partition_state(cluster: LocalCluster, topic: str, partition: int):
    return read_cluster(cluster.state.zookeeper_connect).partition(topic, partition)


def broker_port(cluster: LocalCluster, broker_id: int) -> int:
    return cluster.process(f"broker-{broker_id}").port


def create_topic(cluster: LocalCluster, name: str, partitions: int, rf: int, **config) -> None:
    async def go():
        port = cluster.state.brokers()[0].port
        connector = with_security(None, admin_security(cluster))
        async with open_connection("127.0.0.1", port, connector=connector) as conn:
            response = await conn.request(
                m.CreateTopicsRequest(
                    topics=[
                        m.CreateTopicsTopic(
                            name=name,
                            num_partitions=partitions,
                            replication_factor=rf,
                            configs=[
                                m.CreateTopicsConfig(name=k, value=str(v))
                                for k, v in config.items()
                            ],
                        )
                    ],
                    timeout_ms=30_000,
                ),
                timeout_s=40,
            )
        result = response.topics[0]
        assert result.error_code == ErrorCode.NONE, (result.error_code, result.error_message)

    trio.run(go)


def produce(
    cluster: LocalCluster,
    broker_id: int,
    topic: str,
    partition: int,
    values: list[bytes],
    *,
    acks: int = -1,
    timeout_ms: int = 10_000,
) -> tuple[ErrorCode, int]:
    """One Produce request straight to a broker: (error code, base offset)."""

    async def go():
        batch = build_batch(
            [Record(key=None, value=v, timestamp_ms=int(time.time() * 1000)) for v in values]
        )
        async with open_connection("127.0.0.1", broker_port(cluster, broker_id)) as conn:
            response = await conn.request(
                m.ProduceRequest(
                    acks=acks,
                    timeout_ms=timeout_ms,
                    topics=[
                        m.ProduceTopic(
                            name=topic,
                            partitions=[m.ProducePartition(partition=partition, records=batch)],
                        )
                    ],
                ),
                timeout_s=timeout_ms / 1000 + 10,
            )
        part = response.topics[0].partitions[0]
        return ErrorCode.from_code(part.error_code), part.base_offset

    return trio.run(go)
