"""An in-memory network for in-process clusters: a `Transport` without sockets.

How it works: `MemoryNetwork.bind(host, port)` registers a listener under (host, port)
(port 0 picks a fresh one); `connect(host, port)` makes a `trio.testing` memory stream
pair and hands one end to that listener's `accept()`, or raises ECONNREFUSED when nobody
listens there. A listener closed (its server stopped) leaves the address free, so later
connects are refused, as with TCP. Nothing waits on the kernel, so tests on trio's
`MockClock(autojump_threshold=0)` stay deterministic.

The servers (`BrokerServer`, `ControllerServer`) take it as their `transport`; clients
take `network.connect` as their `connector`.
"""

from __future__ import annotations

import errno
import itertools
import math

import trio
import trio.testing

from server_common.network import Bound

# Ports handed out for port 0 (any number works: nothing is bound for real).
FIRST_PORT = 30_000


class MemoryListener(trio.abc.Listener[trio.abc.Stream]):
    def __init__(self, network: MemoryNetwork, address: tuple[str, int]):
        self.network = network
        self.address = address
        self._send, self._receive = trio.open_memory_channel[trio.abc.Stream](math.inf)

    def deliver(self, stream: trio.abc.Stream) -> None:
        self._send.send_nowait(stream)

    async def accept(self) -> trio.abc.Stream:
        try:
            return await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise trio.ClosedResourceError("listener closed") from None

    async def aclose(self) -> None:
        self.network._unbind(self)
        self._send.close()
        self._receive.close()
        await trio.lowlevel.checkpoint()


class MemoryNetwork:
    def __init__(self) -> None:
        self._listeners: dict[tuple[str, int], MemoryListener] = {}
        self._ports = itertools.count(FIRST_PORT)

    async def bind(self, host: str, port: int) -> Bound:
        await trio.lowlevel.checkpoint()
        if port == 0:
            port = next(p for p in self._ports if (host, p) not in self._listeners)
        address = (host, port)
        if address in self._listeners:
            raise OSError(errno.EADDRINUSE, f"address in use: {host}:{port}")
        listener = MemoryListener(self, address)
        self._listeners[address] = listener
        return Bound([listener], port)

    async def connect(self, host: str, port: int) -> trio.abc.Stream:
        await trio.lowlevel.checkpoint()
        listener = self._listeners.get((host, port))
        if listener is None:
            raise OSError(errno.ECONNREFUSED, f"Connection refused ({host}:{port})")
        client, server = trio.testing.memory_stream_pair()
        listener.deliver(server)
        return client

    def listening(self, host: str, port: int) -> bool:
        return (host, port) in self._listeners

    def _unbind(self, listener: MemoryListener) -> None:
        if self._listeners.get(listener.address) is listener:
            del self._listeners[listener.address]
