"""Hostile SASL clients for tests/integration/test_security_hostile.py and
tests/bench/bench_security.py: Kafka-protocol requests written byte by byte (SaslHandshake
v1, SaslAuthenticate v1, Metadata v1, ApiVersions v0) and their answers read back, native
requests through the client's own sans-IO connection, over TLS sockets that trust the
cluster's CA; and a storm of failed logins (wrong PLAIN passwords, on both wires, a
bounded number at a time) whose outcomes are counted."""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import trio

from client.protocol import messages as m
from client.protocol.connection import ClientConnection
from client.protocol.errors import ProtocolError

API_VERSIONS, METADATA, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 3, 17, 36
ANSWER_BOUND_S = 30.0  # "answered at all", not a speed requirement
_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")


# -- Kafka-protocol requests, byte by byte -------------------------------------------------
def kafka_request(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    """A whole frame: size, request header v1 (client id "hostile"), `body`."""
    client = b"hostile"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client
    return _I32.pack(len(header) + len(body)) + header + body


def kafka_string(text: str) -> bytes:
    data = text.encode()
    return _I16.pack(len(data)) + data


def handshake_body(mechanism: str) -> bytes:
    return kafka_string(mechanism)


def authenticate_body(token: bytes) -> bytes:
    return _I32.pack(len(token)) + token


def plain_token(user: str, password: str) -> bytes:
    return b"\0" + user.encode() + b"\0" + password.encode()


@dataclass(frozen=True)
class KafkaAnswer:
    correlation_id: int
    error_code: int
    mechanisms: list[str]  # SaslHandshake
    error_message: str | None  # SaslAuthenticate


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, count: int) -> bytes:
        chunk = self.data[self.at : self.at + count]
        self.at += count
        return chunk

    def i16(self) -> int:
        return _I16.unpack(self.take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self.take(4))[0]

    def string(self) -> str | None:
        size = self.i16()
        return None if size < 0 else self.take(size).decode()


def parse_handshake(frame: bytes) -> KafkaAnswer:
    r = _Reader(frame)
    correlation_id, error = r.i32(), r.i16()
    mechanisms = [r.string() or "" for _ in range(r.i32())]
    return KafkaAnswer(correlation_id, error, mechanisms, None)


def parse_authenticate(frame: bytes) -> KafkaAnswer:
    r = _Reader(frame)
    correlation_id, error = r.i32(), r.i16()
    return KafkaAnswer(correlation_id, error, [], r.string())


# -- blocking sockets ----------------------------------------------------------------------
def tls_socket(port: int, cafile: str) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=cafile)
    raw = socket.create_connection(("127.0.0.1", port), timeout=ANSWER_BOUND_S)
    return context.wrap_socket(raw, server_hostname="127.0.0.1")


def _recv_exactly(sock: socket.socket, count: int) -> bytes | None:
    data = b""
    while len(data) < count:
        try:
            chunk = sock.recv(count - len(data))
        except (ConnectionResetError, ssl.SSLError):
            return None
        if not chunk:
            return None
        data += chunk
    return data


def read_frame(sock: socket.socket) -> bytes | None:
    """The next frame's body, or None if the peer closed first."""
    size = _recv_exactly(sock, 4)
    if size is None:
        return None
    return _recv_exactly(sock, _I32.unpack(size)[0])


def send_ignoring_close(sock: socket.socket, data: bytes) -> None:
    """Send `data`, or as much as the peer takes before it closes (a broker may close on
    a frame's 4-byte prefix while the rest is still being sent)."""
    try:
        sock.sendall(data)
    except (BrokenPipeError, ConnectionResetError, ssl.SSLEOFError, ssl.SSLZeroReturnError):
        pass


def closed_without_answer(sock: socket.socket) -> bool:
    """True if the peer closes `sock` without sending a byte (within the bound)."""
    sock.settimeout(ANSWER_BOUND_S)
    try:
        return sock.recv(4096) == b""
    except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
        return True
    except TimeoutError:
        return False


def native_ask(sock: socket.socket, protocol: ClientConnection, request: Any) -> Any:
    """Send a native request, return its answer (None if the peer closed first)."""
    _, frame = protocol.send_request(request)
    sock.sendall(frame if isinstance(frame, bytes) else b"".join(frame))
    while True:
        item = protocol.next_response()
        if item is not None:
            return item[1]
        try:
            data = sock.recv(65536)
        except (ConnectionResetError, ssl.SSLError):
            return None
        if not data:
            return None
        protocol.receive_data(data)


# -- a storm of failed logins --------------------------------------------------------------
async def _tls_stream(port: int, context: ssl.SSLContext) -> trio.SSLStream | None:
    """A TLS connection, or None if the broker closed it during the handshake (it does
    after `tls_handshake_timeout_s`, which a loaded machine can reach: a close under
    load, as the callers count it)."""
    tcp = await trio.open_tcp_stream("127.0.0.1", port)
    stream = trio.SSLStream(tcp, context, server_hostname="127.0.0.1")
    try:
        await stream.do_handshake()
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        await trio.aclose_forcefully(stream)
        return None
    return stream


async def _read_frame_async(stream: trio.abc.Stream, buffer: bytearray) -> bytes | None:
    while True:
        if len(buffer) >= 4:
            size = _I32.unpack(buffer[:4])[0]
            if len(buffer) >= 4 + size:
                frame = bytes(buffer[4 : 4 + size])
                del buffer[: 4 + size]
                return frame
        data = await stream.receive_some(65536)
        if not data:
            return None
        buffer += data


async def kafka_failed_login(port: int, context: ssl.SSLContext, user: str, password: str) -> str:
    """One PLAIN login on the Kafka wire: 'refused' (SASL_AUTHENTICATION_FAILED),
    'closed' (no answer), or what else came back."""
    stream = await _tls_stream(port, context)
    if stream is None:
        return "closed"
    buffer = bytearray()
    try:
        await stream.send_all(kafka_request(SASL_HANDSHAKE, 1, 1, handshake_body("PLAIN")))
        frame = await _read_frame_async(stream, buffer)
        if frame is None:
            return "closed"
        if (shake := parse_handshake(frame)).error_code != 0:
            return f"handshake error {shake.error_code}"
        token = plain_token(user, password)
        await stream.send_all(kafka_request(SASL_AUTHENTICATE, 1, 2, authenticate_body(token)))
        frame = await _read_frame_async(stream, buffer)
        if frame is None:
            return "closed"
        code = parse_authenticate(frame).error_code
        return "refused" if code == 58 else f"authenticate error {code}"
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return "closed"
    finally:
        await trio.aclose_forcefully(stream)


async def native_failed_login(port: int, context: ssl.SSLContext, user: str, password: str) -> str:
    """One PLAIN login on the native wire, with the same outcomes."""
    stream = await _tls_stream(port, context)
    if stream is None:
        return "closed"
    protocol = ClientConnection("hostile")
    try:
        for request in (
            m.SaslHandshakeRequest(mechanism="PLAIN"),
            m.SaslAuthenticateRequest(auth_bytes=plain_token(user, password)),
        ):
            _, frame = protocol.send_request(request)
            await stream.send_all(frame if isinstance(frame, bytes) else b"".join(frame))
            while (item := protocol.next_response()) is None:
                data = await stream.receive_some(65536)
                if not data:
                    return "closed"
                protocol.receive_data(data)
            if item[1].error_code != 0:
                return "refused" if item[1].error_code == 58 else f"error {item[1].error_code}"
        return "accepted"
    except (trio.BrokenResourceError, trio.ClosedResourceError, ProtocolError):
        return "closed"
    finally:
        await trio.aclose_forcefully(stream)


async def failed_login_storm(
    targets: Sequence[tuple[str, int]],
    cafile: str,
    user: str,
    *,
    count: int = 1000,
    concurrency: int = 50,
) -> dict[str, int]:
    """`count` PLAIN logins with a wrong password for `user` from 127.0.0.1, `concurrency`
    at a time, taking turns over `targets` (("native" or "kafka", port) of SASL_SSL
    listeners); how many ended how ("refused": SASL_AUTHENTICATION_FAILED)."""
    context = ssl.create_default_context(cafile=cafile)
    outcomes: dict[str, int] = {}
    limiter = trio.CapacityLimiter(concurrency)

    async def one(i: int) -> None:
        wire, port = targets[i % len(targets)]
        login = kafka_failed_login if wire == "kafka" else native_failed_login
        async with limiter:
            try:
                with trio.fail_after(ANSWER_BOUND_S):
                    outcome = await login(port, context, user, f"storm-secret-{i}-q7")
            except trio.TooSlowError:
                outcome = "unanswered"
            except OSError as exc:
                outcome = f"connect failed: {type(exc).__name__}"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1

    async with trio.open_nursery() as nursery:
        for i in range(count):
            nursery.start_soon(one, i)
    return outcomes


def run_failed_login_storm(
    targets: Sequence[tuple[str, int]], cafile: str, user: str, count: int, concurrency: int
) -> dict[str, int]:
    """`failed_login_storm` in a trio run of its own (for a process pool)."""
    return trio.run(
        lambda: failed_login_storm(targets, cafile, user, count=count, concurrency=concurrency)
    )
