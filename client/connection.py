"""Trio connections to a broker: pipelined requests over one TCP stream, and a pool.

How it works: a `BrokerConnection` wraps a byte stream and a sans-IO `ClientConnection`
(client/protocol/connection.py). Any number of tasks may call `request()` at once:

- writing: frames are queued in the order their correlation ids were assigned and go
  out whole, in batches: one `send_all` at a time (what a send lock would give), written
  by a caller whose frame is in the batch; under load many small writes become one,
  which more than doubles pipelined throughput;
- reading: one reader task feeds received bytes to the protocol object, which matches
  responses to requests in order; each response wakes the task waiting for that
  correlation id with its response, or raises its `TributaryError` there;
- failure: when the peer goes away, the stream breaks or the bytes stop making sense, the
  connection closes itself and every waiting caller wakes up with `ConnectionClosedError`.
  A request that times out raises `RequestTimeoutError` and also closes the connection:
  a late answer would otherwise be taken for the next request's, so the order can no
  longer be trusted (Kafka's client disconnects on request timeout too). A task cancelled
  from outside while its frame is half written closes it for the same reason; one
  cancelled while waiting for its answer just stops waiting (the answer is dropped).

Trio shape: the reader task needs a nursery that outlives the connection's use. Scoped
use opens its own: `async with open_connection(host, port) as conn: ...`. Long-lived
owners (a producer, a follower fetcher, the controller) pass theirs:
`conn = await BrokerConnection.connect(host, port, nursery=nursery)` and later
`await conn.aclose()`; or hold a `ConnectionPool`, which connects lazily per
(host, port) and replaces a connection that has closed (`open_connection_pool()`).

All connection failures are `BrokerConnectionError`s: `TributaryError`s with a retriable
code (NETWORK_EXCEPTION, or REQUEST_TIMED_OUT for a timeout), so retry logic can treat them
like retriable broker errors. One is not retriable: `NotATributaryBrokerError`, for a peer
whose first bytes are not a Tributary frame (an HTTP server such as a metrics port, SSH,
TLS...): recognised as soon as they arrive, and named ("127.0.0.1:9192 is not a
Tributary broker: it answered like an HTTP server ('HTTP/1.1 404 Not Found')").

Handshake: the pool's connections start with an ApiVersions request, as Kafka's clients'
do, answered within `handshake_timeout_s` (a few seconds) or the connection counts as
unavailable: a broker that is paused (SIGSTOP) or wedged still completes TCP handshakes
from the kernel's backlog, and without this every request to it would wait for its full
request timeout. The ApiVersions frame ends with a blank line (`PROBE_LINE_END`), so that
a text server answers it at once and is recognised from its answer.

Where bytes go is a `Connector`: `(host, port) -> stream`, TCP (`trio.open_tcp_stream`)
unless the owner passes another (an in-process test cluster passes its in-memory
network's); every `connect`/`open_*` here takes `connector=`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from client import __version__
from client.protocol import messages as m
from client.protocol.codec import GATHER_MIN_BYTES, expects_response
from client.protocol.connection import ClientConnection
from client.protocol.errors import ErrorCode, FramingError, ProtocolError, TributaryError
from client.protocol.framing import DEFAULT_MAX_FRAME_BYTES, FrameParts, describe_foreign_peer

log = logging.getLogger(__name__)

# Kafka's `socket.connection.setup.timeout.ms` default (10 s): a broker that does not
# accept within that is treated as unavailable.
DEFAULT_CONNECT_TIMEOUT_S = 10.0
# How long a new pooled connection may take to answer its first request (ApiVersions, a
# few hundred microseconds of broker work): long enough for a busy broker on a loaded
# machine, short enough that a paused one costs a client seconds, not its request timeout.
DEFAULT_HANDSHAKE_TIMEOUT_S = 3.0
# Bytes of a peer's first answer kept to recognise a server that is not a broker.
FIRST_BYTES_KEPT = 64
# Bytes asked of the socket per read: small enough to stay below malloc's default mmap
# threshold for the read buffer; while a big response is coming, up to the rest of it
# (at most LARGE_RECEIVE_BYTES), so a 1 MiB fetch response takes one or two reads.
RECEIVE_CHUNK_BYTES = 64 * 1024
LARGE_RECEIVE_BYTES = 1024 * 1024

# Opens a byte stream to (host, port); raises OSError when nobody is there.
Connector = Callable[[str, int], Awaitable[trio.abc.Stream]]


async def tcp_connector(host: str, port: int) -> trio.abc.Stream:
    return await trio.open_tcp_stream(host, port)


class BrokerConnectionError(TributaryError):
    """The connection to a broker failed; retriable (reconnect, refresh metadata, retry)."""

    message: str  # always says what happened

    def __init__(self, message: str, code: ErrorCode = ErrorCode.NETWORK_EXCEPTION) -> None:
        super().__init__(code, message)

    @property
    def retriable(self) -> bool:
        return True


class BrokerUnavailableError(BrokerConnectionError):
    """Could not connect (refused, unreachable, name not resolved, or connect timeout)."""


class ConnectionClosedError(BrokerConnectionError):
    """The connection is closed: by the peer, by `aclose()`, or after an error."""


class NotATributaryBrokerError(ConnectionClosedError):
    """The peer answered with bytes that are not a Tributary frame: another kind of server
    (HTTP, SSH, TLS...) listens there; the connection is closed. Not retriable: asking
    again changes nothing."""

    @property
    def retriable(self) -> bool:
        return False


class RequestTimeoutError(BrokerConnectionError):
    """No response within the request's timeout; the connection has been closed."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorCode.REQUEST_TIMED_OUT)


class _Waiter:
    """Where the reader task leaves one caller's response (or error)."""

    __slots__ = ("event", "outcome")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.outcome: Any = None

    @property
    def done(self) -> bool:
        return self.event.is_set()

    def set(self, outcome: Any) -> None:
        if not self.event.is_set():
            self.outcome = outcome
            self.event.set()


class BrokerConnection:
    """One pipelined connection to a broker. Build it with `connect()` or `open_connection()`."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        *,
        nursery: trio.Nursery,
        peer: str = "broker",
        client_id: str | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        """Wrap an open stream and start the reader task in `nursery`."""
        self.peer = peer
        self._stream = stream
        self._protocol = ClientConnection(client_id, max_frame_bytes=max_frame_bytes)
        # The frames of the next batch, in correlation id order.
        self._outgoing: list[bytes | FrameParts] = []
        self._batches_started = 0
        self._batches_written = 0
        self._writing = False
        self._write_done = trio.Event()  # set when the batch being written is done
        self._waiters: dict[int, _Waiter] = {}
        self._reader_scope = trio.CancelScope()
        self._close_reason: str | None = None
        self._close_cause: BaseException | None = None
        self._first_bytes = b""  # the start of what the peer sent, until a response decodes
        self._answered = False  # a response decoded: the peer speaks Tributary
        self._foreign: NotATributaryBrokerError | None = None
        nursery.start_soon(self._read_loop, name=f"tributary-reader-{peer}")

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        *,
        nursery: trio.Nursery,
        client_id: str | None = None,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        connector: Connector | None = None,
    ) -> BrokerConnection:
        """Open a connection (TCP unless `connector` says otherwise); raises
        `BrokerUnavailableError` if that fails."""
        peer = f"{host}:{port}"
        try:
            with trio.fail_after(connect_timeout_s):
                stream = await (connector or tcp_connector)(host, port)
        except trio.TooSlowError:
            raise BrokerUnavailableError(
                f"connecting to {peer} timed out after {connect_timeout_s}s"
            ) from None
        except OSError as error:
            raise BrokerUnavailableError(f"cannot connect to {peer}: {error}") from error
        log.debug("connected to %s", peer)
        return cls(
            stream,
            nursery=nursery,
            peer=peer,
            client_id=client_id,
            max_frame_bytes=max_frame_bytes,
        )

    @property
    def closed(self) -> bool:
        return self._close_reason is not None

    @property
    def in_flight(self) -> int:
        """Requests sent (or queued to be) whose responses have not arrived."""
        return self._protocol.in_flight

    async def request(self, request: Any, timeout_s: float | None = None) -> Any:
        """Send `request` and return its response.

        Raises `TributaryError` for a request-level error code from the broker,
        `RequestTimeoutError` after `timeout_s` (None: wait as long as the connection
        lives), `ConnectionClosedError` if the connection is or becomes closed.
        """
        if not expects_response(request):
            raise ValueError("acks=0 Produce gets no response: use send_no_response()")
        self._raise_if_closed()
        waiter = _Waiter()
        deadline = math.inf if timeout_s is None else trio.current_time() + timeout_s
        correlation_id: int | None = None
        try:
            with trio.move_on_at(deadline) as timeout_scope:
                correlation_id, batch = self._enqueue(request, waiter)
                await self._wait_written(batch)
                await waiter.event.wait()
        finally:
            if correlation_id is not None and not waiter.done:
                self._waiters.pop(correlation_id, None)  # cancelled: the answer is dropped
        answered = waiter.done and not isinstance(waiter.outcome, BrokerConnectionError)
        if timeout_scope.cancelled_caught and not answered:
            message = f"{type(request).__name__} to {self.peer} timed out after {timeout_s}s"
            log.warning("%s; closing the connection", message)
            await self._close(f"a request timed out after {timeout_s}s")
            raise RequestTimeoutError(message)
        if isinstance(waiter.outcome, BaseException):
            raise waiter.outcome
        return waiter.outcome

    async def send_no_response(self, request: Any) -> None:
        """Write a request the broker will not answer (acks=0 Produce)."""
        if expects_response(request):
            raise ValueError(f"{type(request).__name__} gets a response: use request()")
        _, batch = self._enqueue(request, None)
        await self._wait_written(batch)

    async def aclose(self) -> None:
        """Close the connection; pending callers get `ConnectionClosedError`. Idempotent."""
        await self._close("closed by this client")

    # --- internals -----------------------------------------------------------------------

    def _enqueue(self, request: Any, waiter: _Waiter | None) -> tuple[int, int]:
        """Assign a correlation id, register the waiter, queue the frame.

        Returns (correlation id, number of the batch the frame will be written in).
        """
        self._raise_if_closed()
        correlation_id, frame = self._protocol.send_request(request)
        if waiter is not None:
            self._waiters[correlation_id] = waiter
        self._outgoing.append(frame)
        return correlation_id, self._batches_started

    async def _wait_written(self, batch: int) -> None:
        """Return once `batch` has been written, writing it ourselves if nobody is.

        Frames queue in correlation id order and go out in batches, one `send_all` each:
        a caller whose batch is not written and finds nobody writing writes the queued
        batch (its own frame and any queued since); the others wait. Under load many
        small writes become one, and a caller only ever writes a batch with its own
        frame, so its timeout or cancellation cannot cut someone else's write short.
        """
        while self._batches_written <= batch:
            if self._writing:
                await self._write_done.wait()  # cancelled here: the frame stays queued
                self._raise_if_closed()
            else:
                await self._write_batch()

    async def _write_batch(self) -> None:
        buffers = _coalesce(self._outgoing)
        self._outgoing.clear()
        self._batches_started += 1
        self._write_done = written = trio.Event()
        self._writing = True
        try:
            for data in buffers:
                await self._stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as error:
            await self._close(f"writing failed: {error!r}", error)
            raise self._closed_error() from error
        except BaseException:
            # Cancelled (or worse) mid-write: part of a frame may be on the wire.
            await self._close("cancelled while writing a request")
            raise
        finally:
            self._writing = False
            written.set()
        self._batches_written += 1

    async def _read_loop(self) -> None:
        with self._reader_scope:
            try:
                while True:
                    missing = self._protocol.missing_bytes()
                    size = min(max(missing, RECEIVE_CHUNK_BYTES), LARGE_RECEIVE_BYTES)
                    data = await self._stream.receive_some(size)
                    if not data:
                        if not self._answered and self._first_bytes:
                            self._mark_foreign()
                        self._mark_closed(f"{self.peer} closed the connection")
                        break
                    if not self._answered and len(self._first_bytes) < FIRST_BYTES_KEPT:
                        self._first_bytes += data[: FIRST_BYTES_KEPT - len(self._first_bytes)]
                    self._protocol.receive_data(data)
                    while (item := self._protocol.next_response()) is not None:
                        self._answered = True
                        correlation_id, outcome = item
                        waiter = self._waiters.pop(correlation_id, None)
                        if waiter is not None:
                            waiter.set(outcome)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as error:
                self._mark_closed(f"reading failed: {error!r}", error)
            except ProtocolError as error:
                if not self._answered and isinstance(error, FramingError):
                    self._mark_foreign()
                log.warning("protocol error from %s: %s; closing the connection", self.peer, error)
                self._mark_closed(f"protocol error: {error}", error)
            finally:
                self._mark_closed("the reader task stopped")
                await trio.aclose_forcefully(self._stream)

    async def _close(self, reason: str, cause: BaseException | None = None) -> None:
        self._mark_closed(reason, cause)
        await trio.aclose_forcefully(self._stream)

    def _mark_closed(self, reason: str, cause: BaseException | None = None) -> None:
        """Record why (first reason wins), wake every waiter, stop the reader."""
        if self._close_reason is None:
            self._close_reason = reason
            self._close_cause = cause
            log.debug("connection to %s closed: %s", self.peer, reason)
        self._reader_scope.cancel()
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            waiter.set(self._closed_error())

    def _mark_foreign(self) -> None:
        """The peer's first bytes are not a Tributary answer: say what it looks like."""
        kind = describe_foreign_peer(self._first_bytes)
        self._foreign = NotATributaryBrokerError(f"{self.peer} is not a Tributary broker: {kind}")

    def _closed_error(self) -> BrokerConnectionError:
        if self._foreign is not None:
            foreign = NotATributaryBrokerError(self._foreign.message)
            foreign.__cause__ = self._close_cause
            return foreign
        error = ConnectionClosedError(f"connection to {self.peer} is closed: {self._close_reason}")
        error.__cause__ = self._close_cause
        return error

    def _raise_if_closed(self) -> None:
        if self._close_reason is not None:
            raise self._closed_error()


@asynccontextmanager
async def _open_nursery() -> AsyncIterator[trio.Nursery]:
    """A nursery that lets a lone exception from the caller's block through as itself.

    Trio wraps every exception leaving a nursery block in an ExceptionGroup; the reader
    tasks in ours never raise, so a group of one is the caller's own error, and callers of
    `open_connection()` should be able to `except TributaryError` around their block.
    """
    try:
        async with trio.open_nursery() as nursery:
            yield nursery
    except BaseExceptionGroup as group:
        if len(group.exceptions) != 1:
            raise
        only = group.exceptions[0]
        context = only.__context__
        try:
            raise only
        finally:
            only.__context__ = context  # not "during handling of the group"
            del only


@asynccontextmanager
async def open_connection(
    host: str,
    port: int,
    *,
    client_id: str | None = None,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    connector: Connector | None = None,
) -> AsyncIterator[BrokerConnection]:
    """A connection (with its own nursery for the reader task) closed on exit."""
    async with _open_nursery() as nursery:
        connection = await BrokerConnection.connect(
            host,
            port,
            nursery=nursery,
            client_id=client_id,
            connect_timeout_s=connect_timeout_s,
            max_frame_bytes=max_frame_bytes,
            connector=connector,
        )
        try:
            yield connection
        finally:
            await connection.aclose()


class ConnectionPool:
    """Connections keyed by (host, port), opened on first use and reopened after closing.

    A connection that failed (peer gone, timeout, protocol error) is closed by itself; the
    next `get()` for its address replaces it. Concurrent `get()`s share one connect.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        client_id: str | None = None,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        connector: Connector | None = None,
        handshake_timeout_s: float | None = DEFAULT_HANDSHAKE_TIMEOUT_S,
    ) -> None:
        self._nursery = nursery
        self._client_id = client_id
        self._connect_timeout_s = connect_timeout_s
        self._handshake_timeout_s = handshake_timeout_s
        self._max_frame_bytes = max_frame_bytes
        self._connector = connector
        self._connections: dict[tuple[str, int], BrokerConnection] = {}
        self._connect_locks: dict[tuple[str, int], trio.Lock] = {}
        self._closed = False

    async def get(self, host: str, port: int) -> BrokerConnection:
        """An open connection to (host, port); raises `BrokerUnavailableError`."""
        key = (host, port)
        connection = self._connections.get(key)
        if connection is not None and not connection.closed:
            return connection
        async with self._connect_locks.setdefault(key, trio.Lock()):
            if self._closed:
                raise ConnectionClosedError("the connection pool is closed")
            connection = self._connections.get(key)
            if connection is None or connection.closed:
                connection = await BrokerConnection.connect(
                    host,
                    port,
                    nursery=self._nursery,
                    client_id=self._client_id,
                    connect_timeout_s=self._connect_timeout_s,
                    max_frame_bytes=self._max_frame_bytes,
                    connector=self._connector,
                )
                if self._handshake_timeout_s is not None:
                    await handshake(connection, self._handshake_timeout_s)
                self._connections[key] = connection
            return connection

    def connected(self, host: str, port: int) -> bool:
        """Whether an open (handshaken) connection to (host, port) is ready for use."""
        connection = self._connections.get((host, port))
        return connection is not None and not connection.closed

    async def request(
        self, host: str, port: int, request: Any, timeout_s: float | None = None
    ) -> Any:
        """`get(host, port)` then `request()` on it."""
        connection = await self.get(host, port)
        return await connection.request(request, timeout_s=timeout_s)

    async def discard(self, host: str, port: int) -> None:
        """Close and forget the connection to (host, port), if any."""
        connection = self._connections.pop((host, port), None)
        if connection is not None:
            await connection.aclose()

    async def aclose(self) -> None:
        """Close every connection; later `get()`s raise `ConnectionClosedError`."""
        self._closed = True
        connections, self._connections = self._connections, {}
        for connection in connections.values():
            await connection.aclose()


async def handshake(connection: BrokerConnection, timeout_s: float) -> m.ApiVersionsResponse:
    """The first request of a connection: ApiVersions within `timeout_s`, else the
    connection is closed and `BrokerUnavailableError` raised (or `NotATributaryBrokerError`
    when the peer's answer shows it is some other server)."""
    probe = m.ApiVersionsRequest(
        client_software_name="tributary-python",
        client_software_version=__version__,
        line_end=m.PROBE_LINE_END,
    )
    try:
        return await connection.request(probe, timeout_s=timeout_s)
    except RequestTimeoutError:
        raise BrokerUnavailableError(
            f"{connection.peer} accepted the connection but did not answer within "
            f"{timeout_s:g} s (a paused or overloaded broker, or not a Tributary broker)"
        ) from None
    except BaseException:
        await connection.aclose()
        raise


@asynccontextmanager
async def open_connection_pool(
    *,
    client_id: str | None = None,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    connector: Connector | None = None,
    handshake_timeout_s: float | None = DEFAULT_HANDSHAKE_TIMEOUT_S,
) -> AsyncIterator[ConnectionPool]:
    """A pool with its own nursery for the connections' reader tasks, closed on exit."""
    async with _open_nursery() as nursery:
        pool = ConnectionPool(
            nursery,
            client_id=client_id,
            connect_timeout_s=connect_timeout_s,
            max_frame_bytes=max_frame_bytes,
            connector=connector,
            handshake_timeout_s=handshake_timeout_s,
        )
        try:
            yield pool
        finally:
            await pool.aclose()


def _coalesce(frames: list[bytes | FrameParts]) -> list[bytes | bytearray | memoryview]:
    """The queued frames as few buffers to send in order: small pieces joined, the big
    record batches of `FrameParts` kept as they are (not copied into one buffer)."""
    if len(frames) == 1 and type(frame := frames[0]) is not FrameParts:
        return [frame]
    buffers: list[bytes | bytearray | memoryview] = []
    pending = bytearray()
    for frame in frames:
        pieces = frame if type(frame) is FrameParts else (frame,)
        for piece in pieces:
            if len(piece) >= GATHER_MIN_BYTES:
                if pending:
                    buffers.append(pending)
                    pending = bytearray()
                buffers.append(piece)
            else:
                pending += piece
    if pending:
        buffers.append(pending)
    return buffers
