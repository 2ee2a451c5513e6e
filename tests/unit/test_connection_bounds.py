"""The memory pool, the connection counts and the connection loop's bounds
(`server_common.memory_pool`, `connection_limits`, `network.serve_connection` with a pool
and an idle timeout), on in-memory streams and trio's autojump clock."""

from __future__ import annotations

import struct
from typing import NamedTuple

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from broker.config import BrokerConfig
from client.protocol.framing import FrameDecoder, encode_frame
from server_common.connection_limits import (
    NO_LIMIT,
    ConnectionCreationRate,
    ConnectionLimits,
    parse_overrides,
)
from server_common.memory_pool import MemoryPool
from server_common.network import SMALL_READ, Reply, serve_connection
from server_common.properties import ConfigError

KiB = 1024


# -- MemoryPool ---------------------------------------------------------------------------
async def test_pool_serves_waiters_first_fit_and_cancelled_waiters_hold_nothing():
    pool = MemoryPool(100)
    assert pool.try_reserve(70)
    assert not pool.try_reserve(40)
    order = []

    async def want(size, name):
        await pool.reserve(size)
        order.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(want, 60, "big")
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(want, 20, "small")  # fits now: not queued behind "big"
        await trio.testing.wait_all_tasks_blocked()
        assert order == ["small"] and pool.used == 90 and pool.waiting == 1
        with trio.CancelScope() as scope:
            scope.cancel()
            with pytest.raises(trio.Cancelled):
                await pool.reserve(50)
        assert pool.waiting == 1 and pool.used == 90
        pool.release(70)
        await trio.testing.wait_all_tasks_blocked()
        assert order == ["small", "big"] and pool.used == 80
    with pytest.raises(ValueError):
        await pool.reserve(101)  # could never fit: refused, not waited for


def test_unbounded_pool_never_refuses():
    pool = MemoryPool(-1)
    assert pool.try_reserve(10**12) and pool.available is None


# -- ConnectionLimits ---------------------------------------------------------------------
def test_connection_limits_count_per_broker_and_per_address():
    limits = ConnectionLimits(max_connections=3, max_per_ip=2, overrides={"10.0.0.9": 0})
    assert limits.try_open("10.0.0.1") is None
    assert limits.try_open("10.0.0.1") is None
    assert "limit 2" in limits.try_open("10.0.0.1")
    assert "limit 0" in limits.try_open("10.0.0.9")
    assert limits.try_open("10.0.0.2") is None
    assert "max.connections" in limits.try_open("10.0.0.3")
    limits.close("10.0.0.1")
    assert limits.try_open("10.0.0.3") is None
    assert limits.refused == 3


# -- ConnectionCreationRate (max.connection.creation.rate) --------------------------------
@given(
    rate=st.integers(1, 500),
    arrivals=st.lists(st.floats(0, 5, allow_nan=False), min_size=1, max_size=300),
)
def test_new_connections_are_served_at_the_rate_whatever_their_arrival(rate, arrivals):
    """However connections arrive, those served in any window of T seconds are at most
    rate x T plus the burst (a tenth of a second's worth), none is served before it
    arrived, and an idle limiter serves the first at once."""
    limiter = ConnectionCreationRate(rate)
    served = sorted(now + limiter.reserve(now) for now in sorted(arrivals))
    assert served[0] == min(arrivals)
    burst = max(1.0, rate / 10) + 1
    for i, start in enumerate(served):
        for window in (0.1, 1.0):
            inside = sum(1 for t in served[i:] if t < start + window - 1e-9)
            assert inside <= rate * window + burst


def test_no_rate_means_no_wait_and_a_flood_is_spread_out():
    assert ConnectionCreationRate(NO_LIMIT).reserve(0.0) == 0.0
    limiter = ConnectionCreationRate(100)
    waits = [limiter.reserve(10.0) for _ in range(1000)]  # 1,000 at the same instant
    assert waits[:11] == [0.0] * 11  # the burst: a tenth of a second's worth, and one
    assert 9.8 < max(waits) < 10.0 and limiter.throttled == 989
    assert ConnectionCreationRate(100).reserve(10.0) == 0.0


def test_per_ip_overrides_parse_like_kafka():
    assert parse_overrides("127.0.0.2:5, broker-1:200,[::1]:7") == {
        "127.0.0.2": 5,
        "broker-1": 200,
        "::1": 7,
    }
    assert parse_overrides("") == {}
    for bad in ("host", "host:x", ":3", "host:-1"):
        with pytest.raises(ConfigError):
            parse_overrides(bad)


# -- the connection loop --------------------------------------------------------------------
class _Header(NamedTuple):
    api_key: int
    correlation_id: int


class _RawWire:
    """A minimal wire protocol: every frame is a request; the answer is its length."""

    def __init__(self, max_frame_bytes: int) -> None:
        self._frames = FrameDecoder(max_frame_bytes)
        self._count = 0

    def receive_data(self, data: bytes) -> None:
        if data:
            self._frames.feed(data)

    def incomplete_frame(self):
        return self._frames.incomplete_frame()

    def next_request(self):
        frame = self._frames.next_frame()
        if frame is None:
            return None
        self._count += 1
        return _Header(0, self._count), frame

    def encode_response(self, header, response) -> bytes:
        return encode_frame(struct.pack(">I", response))

    def encode_error(self, header, code, message) -> bytes:
        return encode_frame(b"error")


async def _serve(nursery, handle, **kwargs) -> trio.abc.Stream:
    client, server = trio.testing.memory_stream_pair()
    nursery.start_soon(
        lambda: serve_connection(
            server, handle, max_frame_bytes=10 * 1024 * KiB, max_queued=4, wire=_RawWire, **kwargs
        )
    )
    return client


async def _answer(stream: trio.abc.Stream) -> int:
    data = b""
    while len(data) < 8:
        chunk = await stream.receive_some(8 - len(data))
        assert chunk, "closed instead of answering"
        data += chunk
    return struct.unpack(">I", data[4:])[0]


async def test_a_frame_waits_for_the_pool_without_being_read_and_others_go_on():
    pool = MemoryPool(300 * KiB)
    handled = []

    async def handle(header, frame):
        handled.append(len(frame))
        return len(frame)

    async with trio.open_nursery() as nursery:
        first = await _serve(nursery, handle, pool=pool)
        second = await _serve(nursery, handle, pool=pool)
        small = await _serve(nursery, handle, pool=pool)
        big = bytes(200 * KiB)
        await first.send_all(struct.pack(">I", len(big)) + big[: 100 * KiB])
        await trio.testing.wait_all_tasks_blocked()
        assert pool.used == 200 * KiB + 4
        await second.send_all(struct.pack(">I", len(big)) + big[: 100 * KiB])
        await trio.testing.wait_all_tasks_blocked()
        # The second frame's size is known but the pool has no room: it waits.
        assert pool.waiting == 1 and pool.used == 200 * KiB + 4
        # A small request on a third connection is served meanwhile.
        await small.send_all(encode_frame(b"ping"))
        assert await _answer(small) == 4
        # The first frame completes and is handled: its bytes go back, the second goes on.
        await first.send_all(big[100 * KiB :])
        assert await _answer(first) == len(big)
        await trio.testing.wait_all_tasks_blocked()
        assert pool.waiting == 0 and pool.used == 200 * KiB + 4
        await second.send_all(big[100 * KiB :])
        assert await _answer(second) == len(big)
        await trio.testing.wait_all_tasks_blocked()
        assert pool.used == 0
        # A frame that could never fit is refused: the connection is closed.
        await second.send_all(struct.pack(">I", 400 * KiB) + bytes(SMALL_READ))
        assert await second.receive_some(10) == b""
        for stream in (first, small):
            await stream.aclose()
    assert pool.used == 0 and handled == [4, len(big), len(big)]


async def test_closing_mid_frame_gives_the_reservation_back():
    pool = MemoryPool(1024 * KiB)

    async def handle(header, frame):
        return len(frame)

    async with trio.open_nursery() as nursery:
        client = await _serve(nursery, handle, pool=pool)
        await client.send_all(struct.pack(">I", 500 * KiB) + bytes(SMALL_READ * 2))
        await trio.testing.wait_all_tasks_blocked()
        assert pool.used == 500 * KiB + 4
        await client.aclose()
    assert pool.used == 0


async def test_idle_connections_are_closed_but_not_while_an_answer_is_pending(autojump_clock):
    pending = Reply()

    async def handle(header, frame):
        return pending if frame == b"wait" else len(frame)

    async with trio.open_nursery() as nursery:
        quiet = await _serve(nursery, handle, idle_timeout_s=10)
        waiting = await _serve(nursery, handle, idle_timeout_s=10)

        async def answer_later():
            await trio.sleep(25)
            pending.set(7)

        started = trio.current_time()
        await waiting.send_all(encode_frame(b"wait"))
        nursery.start_soon(answer_later)
        assert await quiet.receive_some(10) == b""  # closed for being idle
        assert trio.current_time() - started == pytest.approx(10, abs=0.1)
        assert await _answer(waiting) == 7  # kept open while it waited for us
        answered = trio.current_time()
        assert answered - started == pytest.approx(25, abs=0.1)
        assert await waiting.receive_some(10) == b""  # then idle like any other
        assert trio.current_time() - answered == pytest.approx(10, abs=0.1)


# -- configuration ----------------------------------------------------------------------------
def test_bound_configs_have_documented_defaults_and_clear_errors():
    config = BrokerConfig({"broker.id": 1})
    assert config["queued.max.request.bytes"] == 256 * 1024 * 1024
    assert config["max.connections"] == config["max.connections.per.ip"] == 2**31 - 1
    assert config["connections.max.idle.ms"] == 600_000
    assert config.max_connections_per_ip_overrides == {}
    config = BrokerConfig({"broker.id": 1, "max.connections.per.ip.overrides": "10.1.2.3:7"})
    assert config.max_connections_per_ip_overrides == {"10.1.2.3": 7}
    for key, value in (
        ("max.connections.per.ip.overrides", "10.1.2.3"),
        ("queued.max.request.bytes", "-2"),
        ("max.connections", "-1"),
    ):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            BrokerConfig({"broker.id": 1, key: value})
