"""A Trio TCP proxy in front of each broker's inter-broker listener, to cut the link
between two brokers without touching the rest of the network.

How it works: the chaos cluster (tests/chaos/cluster.py) gives each broker a third
listener, REPLICATION, made the inter-broker listener and advertised at this proxy's
port for that broker, so followers' fetchers and the controller reach a broker only
through `LinkProxy`; clients keep using PLAINTEXT directly. Every connection names its
source in the client id of its first request (Tributary's native frames: a 4-byte
length, then a msgpack array whose fourth item is the client id): a follower's fetcher
sends `replica-fetcher-<follower>-<leader>`, the scrubber `scrubber-<id>`, the
controller `controller-<id>`. The proxy reads that first frame, works out the link
(source broker, target broker) and then either pipes bytes both ways or, if the link is
cut, holds the connection open and silent (a black hole, as a dropped network would:
the peer waits out its socket timeout). `cut(a, b)` also silences the link's open
connections at once; `heal(a, b)` closes every held connection of the link, so the
peers reconnect afresh. Connections from the controller are never cut.

Over TLS (a secure chaos cluster) the first frame is a TLS handshake, which names no
client: then `identify(client_port, proxy_port)`, if set, says where the connection comes
from (a broker id or "controller"; the chaos cluster looks the connecting process up
in /proc, `socket_owner.py`), and the bytes are piped through untouched.

The proxy runs its own Trio loop in a daemon thread (`start()` / `close()`); the test's
thread calls `add_route`, `cut`, `heal` and `heal_all` through `trio.from_thread`.
"""

from __future__ import annotations

import re
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from client.protocol.codec import unpack_message

# Bytes the first frame may have before we give up classifying it (a Fetch request
# header comes first; the body may be large but we only need the header).
MAX_FIRST_FRAME = 64 * 1024 * 1024
_SOURCE = re.compile(r"^(?:replica-fetcher|scrubber|broker)-(\d+)")
CONTROLLER = "controller"


def source_of(client_id: str | None) -> int | str | None:
    """The broker id (or "controller") a connection comes from, by its client id."""
    if not client_id:
        return None
    if client_id.startswith("controller-"):
        return CONTROLLER
    found = _SOURCE.match(client_id)
    return int(found.group(1)) if found else None


def _link(a: int, b: int) -> frozenset[int]:
    return frozenset((a, b))


@dataclass(eq=False)
class _Conn:
    link: frozenset[int] | None
    pump_scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    held: bool = False


class LinkProxy:
    def __init__(self) -> None:
        self._token: trio.lowlevel.TrioToken | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._nursery: trio.Nursery | None = None
        self._stop: trio.Event | None = None
        self._cut: set[frozenset[int]] = set()
        self._healed: dict[frozenset[int], trio.Event] = {}
        self._conns: set[_Conn] = set()
        self.ports: dict[int, int] = {}  # target broker -> proxy port
        self.connections = 0
        self.held_connections = 0
        self._error: BaseException | None = None
        self.errors: list[str] = []  # connections that failed inside the proxy
        # (client port, proxy port) -> source, for connections whose first frame names none.
        self.identify: Callable[[int, int], int | str | None] | None = None

    # -- the test's side ------------------------------------------------------------
    def start(self) -> LinkProxy:
        self._thread = threading.Thread(target=self._run, name="link-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError(f"the link proxy did not start: {self._error!r}")
        return self

    def close(self) -> None:
        if self._token is not None and self._thread is not None and self._thread.is_alive():
            try:
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass
            self._thread.join(10)

    def _call(self, fn: Callable, *args):
        return trio.from_thread.run(fn, *args, trio_token=self._token)

    def add_route(self, target: int, target_port: int) -> int:
        """Listen for broker `target` (which listens on `target_port`); the proxy port."""
        port = self._call(self._add_route, target, target_port)
        self.ports[target] = port
        return port

    def cut(self, a: int, b: int) -> None:
        trio.from_thread.run_sync(self._do_cut, _link(a, b), trio_token=self._token)

    def heal(self, a: int, b: int) -> None:
        trio.from_thread.run_sync(self._do_heal, _link(a, b), trio_token=self._token)

    def heal_all(self) -> None:
        for link in list(self._cut):
            trio.from_thread.run_sync(self._do_heal, link, trio_token=self._token)

    @property
    def cut_links(self) -> set[frozenset[int]]:
        return set(self._cut)

    # -- the proxy's loop -----------------------------------------------------------
    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # noqa: BLE001 - reported by start()
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._ready.set()
            await self._stop.wait()
            nursery.cancel_scope.cancel()

    async def _add_route(self, target: int, target_port: int) -> int:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]

        async def serve(stream: trio.SocketStream) -> None:
            try:
                await self._serve(stream, target, target_port)
            except Exception as exc:  # noqa: BLE001 - one connection never stops the proxy
                self.errors.append(repr(exc))

        self._nursery.start_soon(trio.serve_listeners, serve, listeners)
        return port

    def _do_cut(self, link: frozenset[int]) -> None:
        if link in self._cut:
            return
        self._cut.add(link)
        self._healed[link] = trio.Event()
        for conn in self._conns:
            if conn.link == link:
                conn.pump_scope.cancel()  # stop piping; the connection is then held

    def _do_heal(self, link: frozenset[int]) -> None:
        self._cut.discard(link)
        event = self._healed.pop(link, None)
        if event is not None:
            event.set()

    async def _serve(self, client: trio.SocketStream, target: int, target_port: int) -> None:
        self.connections += 1
        async with client:
            first = await _read_first_frame(client)
            if first is None:
                return
            link = None
            source = source_of(_client_id(first))
            if source is None and self.identify is not None:
                client_port = client.socket.getpeername()[1]
                source = self.identify(client_port, client.socket.getsockname()[1])
            if isinstance(source, int) and source != target:
                link = _link(source, target)
            conn = _Conn(link)
            self._conns.add(conn)
            try:
                if link is None or link not in self._cut:
                    with conn.pump_scope:
                        try:
                            upstream = await trio.open_tcp_stream("127.0.0.1", target_port)
                        except OSError:
                            return
                        async with upstream:
                            await upstream.send_all(first)
                            async with trio.open_nursery() as pumps:
                                pumps.start_soon(_pump, client, upstream, pumps.cancel_scope)
                                pumps.start_soon(_pump, upstream, client, pumps.cancel_scope)
                    if not conn.pump_scope.cancelled_caught:
                        return  # one side closed: done
                # Cut: hold the connection silent until the link heals, then close it.
                conn.held = True
                self.held_connections += 1
                healed = self._healed.get(link) if link is not None else None
                if healed is not None:
                    await healed.wait()
            finally:
                self._conns.discard(conn)


async def _pump(src: trio.SocketStream, dst: trio.SocketStream, scope: trio.CancelScope) -> None:
    try:
        while data := await src.receive_some(65536):
            await dst.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    scope.cancel()


async def _read_first_frame(stream: trio.SocketStream) -> bytes | None:
    buf = bytearray()
    try:
        while len(buf) < 4:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return None
            buf += chunk
        (length,) = struct.unpack_from(">I", buf)
        if length > MAX_FIRST_FRAME:
            return bytes(buf)  # not ours to judge: pass it on unclassified
        while len(buf) < 4 + length:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return None
            buf += chunk
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return None
    return bytes(buf)


def _client_id(buf: bytes) -> str | None:
    """The client id in the first frame of `buf` (None if it is not a native request)."""
    (length,) = struct.unpack_from(">I", buf)
    try:
        envelope = unpack_message(buf[4 : 4 + length])
    except Exception:  # noqa: BLE001 - an unreadable frame is simply not classified
        return None
    if type(envelope) is list and len(envelope) == 5 and isinstance(envelope[3], str):
        return envelope[3]
    return None
