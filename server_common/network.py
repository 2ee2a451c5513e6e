"""Serving connections: where servers listen and connect, and one connection's request
loop (read requests, answer them in order).

Where: a `Transport` binds listeners and opens outgoing streams. Servers take one
(`TCP` unless told otherwise), so an in-process test cluster can run the real servers
over an in-memory network instead of sockets, without patching anything global.

How it works: a reader task feeds socket bytes into a sans-IO wire connection and hands
each request to the request handler *in arrival order*. The wire connection is the
native msgpack protocol's `ServerConnection` (through `NativeWire`) unless the caller
passes another `WireConnection` factory (the Kafka listener passes
`broker.kafka.wire.KafkaServerConnection`): both wire protocols share this loop,
its ordering, pipelining, backpressure and error handling. A handler returns
either the response itself, `NO_RESPONSE` (acks=0 produce), a `Reply` that a
purgatory callback fills in later (a waiting fetch, an acks=all produce), or
`CLOSE_CONNECTION` to drop the connection at once without answering (Kafka's
`closeConnection`; fault-injecting tests use it to cut connections), or
`RespondAndClose(response)` to answer and then close (a failed authentication).
`reply.then(f)` is a `Reply` whose value is `f` of another's (the Kafka translation of a
native answer).
The reader puts each of these into a bounded channel; a writer task awaits them one by
one and writes the responses, so they leave in request order while later requests are
already being processed (pipelining). A response encoded as `FrameParts` (a Fetch
response with big record batches) is written part by part, the batches as they were
read from the log. The channel's size bounds the requests read ahead per connection: a
client that sends faster than we answer is slowed down (backpressure).

Bounds: with a `MemoryPool` (`queued.max.request.bytes`, Kafka's KIP-72; a broker gives
its client listeners one to share and its inter-broker listener another), the reader
reads at most `SMALL_READ` bytes while no frame's size is known; once a frame's size
prefix is in and its body is not, it reserves the whole frame from the pool before
reading more, and reads no further than that frame's end. While the pool has no room the connection
reads nothing (the peer's TCP window fills up and it stops sending); other connections
go on. The bytes go back to the pool once the handler has returned (or the connection
closes). So buffered request bytes stay within the pool plus `SMALL_READ` per
connection, and a request of at most `SMALL_READ` bytes never waits. With an idle
timeout (`connections.max.idle.ms`) a connection that has sent nothing for that long
and waits for no answer is closed.

Security: with an SSL context the connection starts with the TLS handshake (bounded by
its own timeout; a failed one closes the connection with one log line) and the client
certificate's principal is set for the connection (server_common/security/tls.py); the
memory pool, idle timeout and frame limit then apply to the decrypted bytes. SASL runs
as the handler's gate (server_common/security/sasl_gate.py); before the connection has
authenticated, a request the wire answers without serving (an unreadable body, an
unsupported version other than ApiVersions') is answered and the connection closed.

Quotas: a handler that finds its client over a quota (broker/quota_gate.py) throttles
the connection (`CONNECTION_THROTTLE`, Kafka 2.x's muted channel): until the throttle
time is up the reader reads and serves nothing more from it and the writer holds the
answers, the throttled one first. A response path that fills the throttle time into
its answers itself (the Kafka listener's) gets it through `REQUEST_THROTTLE`.

Errors say whose fault they are: a request whose header was readable but whose body
was not is answered with an error code; broken framing (garbage, a frame over the size
limit) closes this connection with one log line. A bug in a handler answers
UNKNOWN_SERVER_ERROR for that request; nothing here can take the broker down. The wire
connection encodes both: `encode_response(header, response)` and
`encode_error(header, code, message)`.
"""

from __future__ import annotations

import contextvars
import logging
import math
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from client.protocol.api import ApiKey
from client.protocol.codec import RequestHeader
from client.protocol.connection import ServerConnection
from client.protocol.errors import ErrorCode, FramingError, ProtocolError
from client.protocol.framing import FrameParts
from server_common.memory_pool import MemoryPool
from server_common.security.principal import CLIENT_PRINCIPAL
from server_common.security.tls import accept_tls, certificate_principal

log = logging.getLogger(__name__)

# The most bytes read at once for a frame whose size is known (and reserved).
READ_CHUNK = 256 * 1024
# The most bytes read while no frame's size is known (between requests, or before a
# size prefix is in): enough for many small pipelined requests in one read, and the
# most a connection buffers outside the memory pool. A request no bigger than this
# never waits for the pool.
SMALL_READ = 64 * 1024


@dataclass(frozen=True)
class Bound:
    """Listeners bound for one address, and the port they got (port 0 picks one)."""

    listeners: Sequence[trio.abc.Listener]
    port: int


class Transport(Protocol):
    async def bind(self, host: str, port: int) -> Bound: ...

    async def connect(self, host: str, port: int) -> trio.abc.Stream: ...


class TcpTransport:
    """Real sockets."""

    async def bind(self, host: str, port: int) -> Bound:
        listeners = await trio.open_tcp_listeners(port, host=host)
        return Bound(listeners, listeners[0].socket.getsockname()[1])

    async def connect(self, host: str, port: int) -> trio.abc.Stream:
        return await trio.open_tcp_stream(host, port)


TCP = TcpTransport()


class _NoResponse:
    def __repr__(self) -> str:
        return "NO_RESPONSE"


NO_RESPONSE = _NoResponse()


class RespondAndClose:
    """A handler's answer after which the connection closes (a failed authentication:
    Kafka answers SASL_AUTHENTICATION_FAILED, then closes)."""

    __slots__ = ("response",)

    def __init__(self, response: Any) -> None:
        self.response = response


class _CloseConnection:
    def __repr__(self) -> str:
        return "CLOSE_CONNECTION"


CLOSE_CONNECTION = _CloseConnection()


class Reply:
    """A response that will be set later (by a purgatory callback), awaited by the writer."""

    __slots__ = ("_event", "_value")

    def __init__(self) -> None:
        self._event = trio.Event()
        self._value: Any = None

    def set(self, value: Any) -> None:
        if not self._event.is_set():
            self._value = value
            self._event.set()

    async def wait(self) -> Any:
        await self._event.wait()
        return self._value

    @property
    def done(self) -> bool:
        return self._event.is_set()

    def then(self, transform: Callable[[Any], Any]) -> Reply:
        """A `Reply` whose value is `transform(value)` once this one is set."""
        return _MappedReply(self, transform)


class _MappedReply(Reply):
    __slots__ = ("_source", "_transform")

    def __init__(self, source: Reply, transform: Callable[[Any], Any]) -> None:
        super().__init__()
        self._source, self._transform = source, transform

    async def wait(self) -> Any:
        if not self._event.is_set():
            self.set(self._transform(await self._source.wait()))
        return await super().wait()

    @property
    def done(self) -> bool:
        return self._source.done


class _Frame:
    """Pre-encoded bytes to write as they are (an error answer)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes):
        self.data = data


class WireConnection(Protocol):
    """A sans-IO server connection of one wire protocol (see the module docstring).

    `next_request()` returns None (more bytes needed), a `(header, request)` tuple to
    serve, or an answerable event (`correlation_id`, `error_code`, `error`,
    `response_frame()`) to answer without serving; it raises `FramingError` when the
    stream is broken. `header` has at least `api_key` and `correlation_id`.
    """

    def receive_data(self, data: bytes) -> None: ...

    def incomplete_frame(self) -> tuple[int, int] | None: ...

    def next_request(self) -> Any: ...

    def encode_response(self, header: Any, response: Any) -> bytes | FrameParts: ...

    def encode_error(self, header: Any, code: ErrorCode | int, message: str) -> bytes: ...


class NativeWire(ServerConnection):
    """The native msgpack protocol's `ServerConnection` as a `WireConnection`."""

    def encode_response(self, header: RequestHeader, response: Any) -> bytes | FrameParts:
        return self.send_response(header.correlation_id, response)

    def encode_error(self, header: RequestHeader, code: ErrorCode | int, message: str) -> bytes:
        return self.send_error(header.correlation_id, code, message)


def native_wire(max_frame_bytes: int) -> WireConnection:
    return NativeWire(max_frame_bytes=max_frame_bytes)


Handler = Callable[[RequestHeader, Any], Awaitable[Any]]
Observer = Callable[[int, float, int, int], None]  # api_key, seconds, bytes in, bytes out


# The address of the client whose request is being handled ("host:port", "?" when the
# transport has none): set per connection, read by handlers that record who asked
# (the group coordinator's member hosts).
CLIENT_ADDRESS: contextvars.ContextVar[str] = contextvars.ContextVar("client_address", default="?")


class ConnectionThrottle:
    """When a throttled connection may be served again (Kafka 2.x's muted channel): a
    handler that found its client over a quota calls `throttle(ms)`; until then the
    connection reads and serves nothing more from the peer and holds its responses."""

    __slots__ = ("until",)

    def __init__(self) -> None:
        self.until = 0.0  # trio.current_time() when the throttle ends

    def throttle(self, ms: int) -> None:
        if ms > 0:
            self.until = max(self.until, trio.current_time() + ms / 1000)

    async def wait(self) -> None:
        """Return once the connection is no longer throttled."""
        if self.until > trio.current_time():
            await trio.sleep_until(self.until)


# The throttle of the connection whose request is being handled (set per connection).
CONNECTION_THROTTLE: contextvars.ContextVar[ConnectionThrottle | None] = contextvars.ContextVar(
    "connection_throttle", default=None
)


class RequestThrottle:
    """The throttle time a quota gave one request, for a response path that writes it
    into its answers itself (the Kafka listener, broker/kafka/dispatcher.py): the
    dispatcher sets a fresh one in `REQUEST_THROTTLE` before handing the request on, the
    quota gate notes the throttle time in it (`note`) before the answer is translated."""

    __slots__ = ("ms",)

    def __init__(self) -> None:
        self.ms = 0

    def note(self, ms: int) -> None:
        self.ms = max(self.ms, ms)


# The note of the request being handled, when its response path wants one.
REQUEST_THROTTLE: contextvars.ContextVar[RequestThrottle | None] = contextvars.ContextVar(
    "request_throttle", default=None
)


def client_host() -> str:
    """The host part of the current request's client address."""
    address = CLIENT_ADDRESS.get()
    return address.rsplit(":", 1)[0] if ":" in address else address


async def serve_connection(
    stream: trio.SocketStream,
    handle: Handler,
    *,
    max_frame_bytes: int,
    max_queued: int,
    observe: Observer | None = None,
    wire: Callable[[int], WireConnection] = native_wire,
    pool: MemoryPool | None = None,
    idle_timeout_s: float | None = None,
    tls: ssl.SSLContext | None = None,
    tls_handshake_timeout_s: float = 10.0,
    authenticated: Callable[[], bool] | None = None,
    max_frame_bytes_before_auth: int | None = None,
) -> None:
    """Serve one connection until the peer is done; `wire(max_frame_bytes)` makes the
    sans-IO connection (native msgpack by default). With a `pool`, a frame bigger than
    one small read is reserved from it before its body is read (see the module
    docstring); with `idle_timeout_s`, a connection that sends nothing and waits for
    nothing that long is closed (`connections.max.idle.ms`). With `tls`, the TLS
    handshake comes first (within `tls_handshake_timeout_s`, else the connection closes)
    and the client certificate's principal becomes the connection's. Until
    `authenticated()` says so, reads are at most `max_frame_bytes_before_auth` bytes and
    a frame announcing more closes the connection before it is reserved from the pool or
    read further (Kafka's `sasl.server.max.receive.size`)."""
    peer = _peer_name(stream)
    CLIENT_ADDRESS.set(peer)
    throttle = ConnectionThrottle()
    CONNECTION_THROTTLE.set(throttle)
    if tls is not None:
        secured = await accept_tls(stream, tls, tls_handshake_timeout_s, peer)
        if secured is None:
            return
        CLIENT_PRINCIPAL.set(certificate_principal(secured))
        stream = secured  # type: ignore[assignment]  # any Stream is served (see broker)
    protocol = wire(max_frame_bytes)
    send_queue, receive_queue = trio.open_memory_channel(max_queued)
    activity = _Activity(trio.current_time())
    held = 0  # bytes this connection holds in the pool (its frame in progress)

    def release_held() -> None:
        nonlocal held
        if held:
            assert pool is not None
            pool.release(held)
            held = 0

    async def receive() -> bytes | None:
        """The next bytes from the peer (b"" when it closed), None when idle too long."""
        nonlocal held
        while True:
            if max_frame_bytes_before_auth is not None and authenticated is not None:
                progress = protocol.incomplete_frame()
                if progress is not None and progress[0] > max_frame_bytes_before_auth:
                    if not authenticated():
                        raise FramingError(
                            f"a frame of {progress[0]} bytes before authentication (at most "
                            f"{max_frame_bytes_before_auth}, sasl.server.max.receive.size)"
                        )
            deadline = math.inf if idle_timeout_s is None else activity.last + idle_timeout_s
            with trio.move_on_at(deadline):
                size = READ_CHUNK if pool is None else SMALL_READ
                if pool is not None and (progress := protocol.incomplete_frame()) is not None:
                    total, buffered = progress
                    if pool.bounded and total > pool.capacity:
                        raise FramingError(
                            f"a frame of {total} bytes can never fit the memory pool "
                            f"({pool.capacity} bytes, queued.max.request.bytes)"
                        )
                    if total > held:
                        # Reserve the whole frame before buffering more of it; while the
                        # pool has no room, nothing more is read from this peer.
                        if not pool.try_reserve(total - held):
                            await pool.reserve(total - held)
                        held = total
                    size = min(READ_CHUNK, total - buffered)  # no further than its end
                if max_frame_bytes_before_auth is not None and authenticated is not None:
                    if not authenticated():  # no frame over the limit completes in one read
                        size = min(size, max_frame_bytes_before_auth)
                data = await stream.receive_some(size)
                activity.last = trio.current_time()
                return data
            assert idle_timeout_s is not None  # no deadline without an idle timeout
            now = trio.current_time()
            if now < activity.last + idle_timeout_s:
                continue  # something moved since this deadline was set
            if activity.outstanding == 0:
                return None
            activity.last = now  # it waits for our answer: not idle

    async def reader() -> bool:
        """Read and dispatch until the peer is done; True if a handler asked to close."""
        async with send_queue:
            while True:
                await throttle.wait()  # a throttled connection reads nothing (muted)
                try:
                    data = await receive()
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return False
                except FramingError as exc:
                    log.warning("closing connection from %s: %s", peer, exc)
                    return False
                if data is None:
                    log.debug(
                        "closing connection from %s: idle for %g s (connections.max.idle.ms)",
                        peer,
                        idle_timeout_s,
                    )
                    return True
                protocol.receive_data(data)
                while True:
                    try:
                        event = protocol.next_request()
                    except FramingError as exc:
                        log.warning("closing connection from %s: %s", peer, exc)
                        _forget_frames(exc)
                        return False
                    if event is None:
                        break
                    if not isinstance(event, tuple):  # answerable without serving
                        release_held()
                        log.info(
                            "answering %s from %s with %s: %s",
                            event.correlation_id,
                            peer,
                            event.error_code.name,
                            event.error,
                        )
                        activity.outstanding += 1
                        await send_queue.send((None, 0.0, _Frame(event.response_frame())))
                        if _closes_before_authentication(event, authenticated):
                            log.info(
                                "closing connection from %s: an unreadable request before "
                                "authentication",
                                peer,
                            )
                            return False  # the writer sends the answer, then it closes
                        continue
                    header, request = event
                    del event
                    await throttle.wait()  # nor serves what it had read already
                    started = time.perf_counter()
                    outcome = await _call_handler(handle, header, request, peer)
                    del request
                    release_held()  # handled: its bytes are the handler's business now
                    if outcome is CLOSE_CONNECTION:
                        log.info("closing connection from %s as its handler asked", peer)
                        return True
                    if isinstance(outcome, RespondAndClose):
                        activity.outstanding += 1
                        await send_queue.send((header, started, outcome.response))
                        return False  # the writer sends it, then the connection closes
                    if outcome is NO_RESPONSE:
                        if observe is not None:
                            observe(header.api_key, time.perf_counter() - started, 0, 0)
                        continue
                    activity.outstanding += 1
                    await send_queue.send((header, started, outcome))
                if not data:
                    return False

    async def writer() -> None:
        async with receive_queue:
            async for header, started, outcome in receive_queue:
                payload: bytes | FrameParts
                if isinstance(outcome, _Frame):
                    payload = outcome.data
                else:
                    if isinstance(outcome, Reply):
                        outcome = await outcome.wait()
                    await throttle.wait()  # a throttled answer leaves when its time is up
                    payload = _encode(protocol, header, outcome)
                try:
                    if isinstance(payload, FrameParts):
                        for part in payload:  # big record batches as read, not copied
                            await stream.send_all(part)
                    else:
                        await stream.send_all(payload)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
                activity.outstanding -= 1
                activity.last = trio.current_time()
                if observe is not None and header is not None:
                    sent = payload.nbytes if type(payload) is FrameParts else len(payload)
                    observe(header.api_key, time.perf_counter() - started, 0, sent)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer)
            if await reader():
                nursery.cancel_scope.cancel()  # drop: nothing more is written
            # Otherwise the reader is done (peer closed or bad framing): let the writer
            # flush what is already queued, then close.
    finally:
        release_held()
        with trio.CancelScope(shield=True):
            await stream.aclose()


def _forget_frames(error: BaseException) -> None:
    """Drop the tracebacks (and chained exceptions) of an error the wire connection
    keeps: their frames hold the request's bytes and the connection itself, a cycle
    that would keep a 100 MiB frame alive until the cycle collector happens to run."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        following = current.__cause__ or current.__context__
        current.__traceback__ = None
        current.__cause__ = current.__context__ = None
        current = following


class _Activity:
    """When a connection last moved bytes, and how many answers it still waits for."""

    __slots__ = ("last", "outstanding")

    def __init__(self, now: float) -> None:
        self.last = now
        self.outstanding = 0


async def _call_handler(handle: Handler, header: RequestHeader, request: Any, peer: str) -> Any:
    try:
        return await handle(header, request)
    except ProtocolError as exc:
        log.info("bad request %s from %s: %s", header.correlation_id, peer, exc)
        return _ErrorAnswer(ErrorCode.INVALID_REQUEST, str(exc))
    except Exception as exc:
        log.exception("handler for api %s failed (request from %s)", header.api_key, peer)
        return _ErrorAnswer(ErrorCode.UNKNOWN_SERVER_ERROR, f"{type(exc).__name__}: {exc}")


def _closes_before_authentication(event: Any, authenticated: Callable[[], bool] | None) -> bool:
    """A request answered without serving it (unreadable, or a version we do not speak)
    closes a connection that has not authenticated, as Kafka's SASL server closes on a
    request it cannot parse; an ApiVersions of an unknown version does not (the client
    asks again with a version we have, as Kafka lets it)."""
    if authenticated is None or authenticated():
        return False
    header = getattr(event, "header", None)
    return getattr(header, "api_key", None) != ApiKey.API_VERSIONS


class _ErrorAnswer:
    """A request-level error answer (no body)."""

    __slots__ = ("code", "message")

    def __init__(self, code: ErrorCode, message: str):
        self.code, self.message = code, message


def error_answer(code: ErrorCode, message: str) -> _ErrorAnswer:
    return _ErrorAnswer(code, message)


def is_error_answer(outcome: Any) -> bool:
    """True for what `error_answer` returns (it has `code` and `message`)."""
    return isinstance(outcome, _ErrorAnswer)


def _encode(protocol: WireConnection, header: Any, outcome: Any) -> bytes | FrameParts:
    if isinstance(outcome, _ErrorAnswer):
        return protocol.encode_error(header, outcome.code, outcome.message)
    try:
        return protocol.encode_response(header, outcome)
    except Exception as exc:  # a response we cannot encode is our bug, not the client's
        log.exception("cannot encode the response to api %s", header.api_key)
        return protocol.encode_error(
            header, ErrorCode.UNKNOWN_SERVER_ERROR, f"{type(exc).__name__}"
        )


def _peer_name(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
        return f"{host}:{port}"
    except (OSError, AttributeError):
        return "?"
