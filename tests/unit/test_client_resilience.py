"""Client resilience against peers that are not (or no longer) answering brokers: a
foreign server recognised from its first bytes, a silent peer caught by the pool's
ApiVersions handshake, and Metadata racing its candidates so that a silent first address
costs about a second (issue 15)."""

from __future__ import annotations

import time

import pytest
import trio

from client.connection import (
    BrokerUnavailableError,
    NotATributaryBrokerError,
    open_connection_pool,
)
from client.metadata import HEDGE_DELAY_MS, Metadata, NoBrokersAvailableError
from client.protocol import messages as m
from client.protocol.connection import ServerConnection
from client.protocol.framing import describe_foreign_peer
from server_common.metrics import MetricsRegistry
from server_common.metrics_http import serve_metrics


async def _silent(stream: trio.SocketStream) -> None:
    """Accepts and reads, never answers (a paused broker, as clients see it)."""
    async with stream:
        while await stream.receive_some():
            pass


async def _answering_broker(stream: trio.SocketStream) -> None:
    conn = ServerConnection()
    async with stream:
        while data := await stream.receive_some():
            conn.receive_data(data)
            while (event := conn.next_request()) is not None:
                header, request = event
                if isinstance(request, m.ApiVersionsRequest):
                    body = m.api_versions_response()
                else:
                    body = m.MetadataResponse(
                        brokers=[], cluster_id="c", controller_id=-1, topics=[]
                    )
                await stream.send_all(conn.send_response(header.correlation_id, body))


async def _serve(nursery: trio.Nursery, handler) -> int:
    listeners = await nursery.start(trio.serve_tcp, handler, 0)
    return listeners[0].socket.getsockname()[1]


def test_foreign_first_bytes_are_named():
    assert describe_foreign_peer(b"HTTP/1.1 404 Not Found\r\nContent-Type: x") == (
        "it answered like an HTTP server ('HTTP/1.1 404 Not Found')"
    )
    assert describe_foreign_peer(b"SSH-2.0-OpenSSH_9.6\r\n").startswith("it answered like an SSH")
    assert describe_foreign_peer(b"\x00\x01") == "its first bytes were b'\\x00\\x01'"


async def test_a_metrics_port_is_reported_as_not_a_broker_at_once(nursery):
    port = await nursery.start(serve_metrics, MetricsRegistry(), "127.0.0.1", 0)
    started = time.monotonic()
    async with open_connection_pool() as pool:
        with pytest.raises(NotATributaryBrokerError) as caught:
            await pool.get("127.0.0.1", port)
    assert time.monotonic() - started < 2.0  # the bound; it takes milliseconds
    assert "is not a Tributary broker: it answered like an HTTP server ('HTTP/1.1" in str(
        caught.value
    )
    assert not caught.value.retriable


async def test_a_silent_peer_fails_the_handshake(nursery, autojump_clock):
    port = await _serve(nursery, _silent)
    async with open_connection_pool(handshake_timeout_s=2) as pool:
        with pytest.raises(BrokerUnavailableError, match="did not answer within 2 s"):
            await pool.get("127.0.0.1", port)


async def test_metadata_asks_the_next_address_when_the_first_is_silent(nursery):
    silent = await _serve(nursery, _silent)
    broker = await _serve(nursery, _answering_broker)
    async with open_connection_pool(handshake_timeout_s=30) as pool:
        metadata = Metadata(pool, f"127.0.0.1:{silent},127.0.0.1:{broker}")
        started = time.monotonic()
        await metadata.refresh()
        elapsed = time.monotonic() - started
    assert metadata.preferred_address == ("127.0.0.1", broker)
    # The second address is asked HEDGE_DELAY_MS after the first: far below the 30 s
    # the silent one could hold us (generous bound for a loaded machine).
    assert HEDGE_DELAY_MS / 1000 <= elapsed < 10


async def test_metadata_names_every_failing_address(nursery):
    port = await nursery.start(serve_metrics, MetricsRegistry(), "127.0.0.1", 0)
    with trio.socket.socket() as closed:
        await closed.bind(("127.0.0.1", 0))
        refused = closed.getsockname()[1]
    async with open_connection_pool() as pool:
        metadata = Metadata(pool, f"127.0.0.1:{refused},127.0.0.1:{port}")
        with pytest.raises(NoBrokersAvailableError) as caught:
            await metadata.refresh()
    text = str(caught.value)
    assert f"127.0.0.1:{refused}: Error connecting to" in text and "Connection refused" in text
    assert f"; 127.0.0.1:{port} is not a Tributary broker: it answered like an HTTP" in text
