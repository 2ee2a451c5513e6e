"""BrokerConnection and ConnectionPool against tiny Trio brokers on loopback port 0.

Each test's broker is a `ServerConnection` loop with a test-specific policy: answer at
once, hold answers back, close mid-flight, never answer, or send garbage.
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing

from client.connection import (
    BrokerConnection,
    BrokerConnectionError,
    BrokerUnavailableError,
    ConnectionClosedError,
    ConnectionPool,
    RequestTimeoutError,
    open_connection,
    open_connection_pool,
)
from client.protocol import messages as m
from client.protocol.connection import Answerable, ReceivedRequest, ServerConnection
from client.protocol.errors import ErrorCode, ProtocolError, TributaryError

# A policy gets each request and the means to answer it; returning False closes the
# connection.
Policy = Callable[[ReceivedRequest, trio.SocketStream, ServerConnection], Awaitable[bool]]


def metadata(topic: str) -> m.MetadataRequest:
    return m.MetadataRequest(topics=[topic])


def metadata_response(topics: list[str]) -> m.MetadataResponse:
    return m.MetadataResponse(
        brokers=[],
        cluster_id=None,
        controller_id=1,
        topics=[
            m.MetadataResponseTopic(error_code=0, name=name, is_internal=False, partitions=[])
            for name in topics
        ],
    )


async def answer(event: ReceivedRequest, stream: trio.SocketStream, conn: ServerConnection):
    header, request = event
    await stream.send_all(conn.send_response(header.correlation_id, echo(request)))


def echo(request: Any) -> Any:
    if isinstance(request, m.MetadataRequest):
        return metadata_response(request.topics or [])
    if isinstance(request, m.ApiVersionsRequest):  # a pool's handshake
        return m.api_versions_response()
    return m.HeartbeatResponse(throttle_time_ms=0, error_code=0)


async def serve_connection(policy: Policy, stream: trio.SocketStream) -> None:
    conn = ServerConnection()
    async with stream:
        try:
            while data := await stream.receive_some():
                conn.receive_data(data)
                while (event := conn.next_request()) is not None:
                    if isinstance(event, Answerable):
                        await stream.send_all(event.response_frame())
                    elif not await policy(event, stream, conn):
                        return
        except trio.BrokenResourceError:
            pass


async def start_broker(nursery: trio.Nursery, policy: Policy) -> int:
    listeners = await nursery.start(
        partial(trio.serve_tcp, partial(serve_connection, policy), 0, host="127.0.0.1")
    )
    return listeners[0].socket.getsockname()[1]


async def answer_at_once(event, stream, conn) -> bool:
    await answer(event, stream, conn)
    return True


async def connect(nursery: trio.Nursery, port: int) -> BrokerConnection:
    return await BrokerConnection.connect("127.0.0.1", port, nursery=nursery, client_id="test")


# --- pipelining ----------------------------------------------------------------------------


async def test_pipelined_requests_each_get_their_own_response(nursery):
    held: list[ReceivedRequest] = []

    async def answer_when_all_100_are_in(event, stream, conn) -> bool:
        # A client that waited for each answer before sending the next would hang here.
        held.append(event)
        if len(held) == 100:
            for waiting in held:
                await answer(waiting, stream, conn)
        return True

    port = await start_broker(nursery, answer_when_all_100_are_in)
    connection = await connect(nursery, port)
    results: dict[int, m.MetadataResponse] = {}

    async def ask(i: int) -> None:
        results[i] = await connection.request(metadata(f"topic-{i}"))

    with trio.fail_after(10):
        async with trio.open_nursery() as callers:
            for i in range(100):
                callers.start_soon(ask, i)
    assert {i: r.topics[0].name for i, r in results.items()} == {
        i: f"topic-{i}" for i in range(100)
    }
    assert connection.in_flight == 0
    await connection.aclose()


async def test_request_level_error_raises_and_the_connection_lives_on(nursery):
    async def refuse_heartbeats(event, stream, conn) -> bool:
        if isinstance(event.request, m.HeartbeatRequest):
            frame = conn.send_error(
                event.header.correlation_id, ErrorCode.NOT_COORDINATOR, "try broker 2"
            )
            await stream.send_all(frame)
        else:
            await answer(event, stream, conn)
        return True

    port = await start_broker(nursery, refuse_heartbeats)
    connection = await connect(nursery, port)
    heartbeat = m.HeartbeatRequest(group_id="g", generation_id=1, member_id="m")
    with pytest.raises(TributaryError) as caught:
        await connection.request(heartbeat)
    assert caught.value.code is ErrorCode.NOT_COORDINATOR
    assert caught.value.message == "try broker 2"
    assert (await connection.request(metadata("a"))).topics[0].name == "a"
    assert not connection.closed


async def test_acks_0_produce_is_sent_without_waiting(nursery):
    seen: list[Any] = []

    async def record(event, stream, conn) -> bool:
        seen.append(event.request)
        if not (isinstance(event.request, m.ProduceRequest) and event.request.acks == 0):
            await answer(event, stream, conn)
        return True

    port = await start_broker(nursery, record)
    connection = await connect(nursery, port)
    produce = m.ProduceRequest(
        acks=0,
        timeout_ms=100,
        topics=[
            m.ProduceTopic(name="t", partitions=[m.ProducePartition(partition=0, records=b"x")])
        ],
    )
    await connection.send_no_response(produce)
    response = await connection.request(metadata("after"))
    assert response.topics[0].name == "after"
    assert seen == [produce, metadata("after")]
    with pytest.raises(ValueError):
        await connection.request(produce)
    with pytest.raises(ValueError):
        await connection.send_no_response(metadata("x"))


async def test_a_cancelled_caller_does_not_disturb_the_others(nursery, autojump_clock):
    held: list[ReceivedRequest] = []

    async def answer_in_pairs(event, stream, conn) -> bool:
        held.append(event)
        if len(held) == 2:
            for waiting in held:
                await answer(waiting, stream, conn)
        return True

    port = await start_broker(nursery, answer_in_pairs)
    connection = await connect(nursery, port)
    with trio.move_on_after(1):
        await connection.request(metadata("abandoned"))  # no answer until a second request
    with trio.fail_after(10):
        response = await connection.request(metadata("wanted"))
    assert response.topics[0].name == "wanted"
    assert not connection.closed


# --- failures --------------------------------------------------------------------------


async def test_server_closing_mid_flight_wakes_every_waiter(nursery):
    received: list[ReceivedRequest] = []

    async def close_after_ten(event, stream, conn) -> bool:
        received.append(event)
        return len(received) < 10

    port = await start_broker(nursery, close_after_ten)
    connection = await connect(nursery, port)
    errors: list[BaseException] = []

    async def ask(i: int) -> None:
        try:
            await connection.request(metadata(f"t{i}"))
        except ConnectionClosedError as error:
            errors.append(error)

    with trio.fail_after(10):
        async with trio.open_nursery() as callers:
            for i in range(10):
                callers.start_soon(ask, i)
    assert len(errors) == 10
    assert all(error.retriable for error in errors)
    assert connection.closed
    with pytest.raises(ConnectionClosedError):
        await connection.request(metadata("late"))


async def test_timeout_raises_and_closes_the_connection(nursery, autojump_clock):
    async def never_answer(event, stream, conn) -> bool:
        return True

    port = await start_broker(nursery, never_answer)
    connection = await connect(nursery, port)
    other_error: list[BaseException] = []

    async def patient_caller() -> None:
        try:
            await connection.request(metadata("patient"))
        except ConnectionClosedError as error:
            other_error.append(error)

    async with trio.open_nursery() as callers:
        callers.start_soon(patient_caller)
        start = trio.current_time()
        with pytest.raises(RequestTimeoutError) as caught:
            await connection.request(metadata("hurried"), timeout_s=5)
        assert trio.current_time() - start == pytest.approx(5, abs=0.5)
    assert caught.value.code is ErrorCode.REQUEST_TIMED_OUT
    assert caught.value.retriable
    assert len(other_error) == 1  # woken, not left hanging
    assert connection.closed


async def test_garbage_from_the_server_closes_the_connection(nursery):
    async def babble(event, stream, conn) -> bool:
        await stream.send_all(b"\x00\x00\x00\x02\xc1\xc1")  # a frame holding invalid msgpack
        return True

    port = await start_broker(nursery, babble)
    connection = await connect(nursery, port)
    with trio.fail_after(10), pytest.raises(ConnectionClosedError) as caught:
        await connection.request(metadata("x"))
    assert isinstance(caught.value.__cause__, ProtocolError)


async def test_a_caller_cancelled_mid_write_closes_the_connection(nursery, autojump_clock):
    client_end, broker_end = trio.testing.lockstep_stream_pair()  # writes wait for the reader
    connection = BrokerConnection(client_end, nursery=nursery, peer="lockstep")
    big = m.ProduceRequest(
        acks=1,
        timeout_ms=100,
        topics=[
            m.ProduceTopic(
                name="t", partitions=[m.ProducePartition(partition=0, records=b"r" * 100_000)]
            )
        ],
    )
    with trio.move_on_after(1):
        async with trio.open_nursery() as writers:
            writers.start_soon(connection.request, big)
            await broker_end.receive_some(10)  # the broker takes a few bytes, then stalls
            await trio.sleep_forever()
    assert connection.closed  # the next frame would follow half a frame: unusable
    with pytest.raises(ConnectionClosedError, match="cancelled while writing"):
        await connection.request(metadata("x"))


async def test_connect_to_a_closed_port_is_broker_unavailable(nursery):
    with socket.socket() as probe:  # a port nobody listens on once this is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(BrokerUnavailableError) as caught:
        await BrokerConnection.connect("127.0.0.1", port, nursery=nursery, connect_timeout_s=5)
    assert isinstance(caught.value, BrokerConnectionError)
    assert caught.value.retriable
    with pytest.raises(BrokerUnavailableError):  # not wrapped in an ExceptionGroup
        async with open_connection("127.0.0.1", port):
            pass


async def test_aclose_wakes_waiters_and_is_idempotent(nursery):
    async def never_answer(event, stream, conn) -> bool:
        return True

    port = await start_broker(nursery, never_answer)
    connection = await connect(nursery, port)
    errors: list[BaseException] = []

    async def waiting() -> None:
        with pytest.raises(ConnectionClosedError) as caught:
            await connection.request(metadata("x"))
        errors.append(caught.value)

    with trio.fail_after(10):
        async with trio.open_nursery() as callers:
            callers.start_soon(waiting)
            await trio.testing.wait_all_tasks_blocked()
            await connection.aclose()
            await connection.aclose()
    assert len(errors) == 1


# --- open_connection and the pool ----------------------------------------------------------


async def test_open_connection_lets_errors_out_unwrapped(nursery):
    async def refuse(event, stream, conn) -> bool:
        frame = conn.send_error(event.header.correlation_id, ErrorCode.INVALID_REQUEST)
        await stream.send_all(frame)
        return True

    port = await start_broker(nursery, refuse)
    with pytest.raises(TributaryError) as caught:
        async with open_connection("127.0.0.1", port) as connection:
            await connection.request(metadata("x"))
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert connection.closed


async def test_pool_shares_connections_and_replaces_closed_ones(nursery):
    async def close_on_heartbeat(event, stream, conn) -> bool:
        if isinstance(event.request, m.HeartbeatRequest):
            return False
        await answer(event, stream, conn)
        return True

    port = await start_broker(nursery, close_on_heartbeat)
    async with open_connection_pool(client_id="pool") as pool:
        assert isinstance(pool, ConnectionPool)
        got: list[BrokerConnection] = []

        async def get() -> None:
            got.append(await pool.get("127.0.0.1", port))

        async with trio.open_nursery() as getters:
            for _ in range(5):
                getters.start_soon(get)
        assert len({id(c) for c in got}) == 1  # one connect, shared

        first = got[0]
        with pytest.raises(ConnectionClosedError):
            await pool.request(
                "127.0.0.1", port, m.HeartbeatRequest(group_id="g", generation_id=1, member_id="m")
            )
        assert first.closed
        response = await pool.request("127.0.0.1", port, metadata("again"))
        assert response.topics[0].name == "again"
        assert await pool.get("127.0.0.1", port) is not first
    with pytest.raises(ConnectionClosedError):
        await pool.get("127.0.0.1", port)
