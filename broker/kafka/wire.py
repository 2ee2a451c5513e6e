"""Sans-IO server end of one Kafka-protocol connection: framing, headers, kio bodies.

How it works (h11-style, like `client.protocol.connection.ServerConnection`): the shell
feeds socket bytes to `receive_data()` and pulls events with `next_request()`; the bytes
to write come back from `encode_response()` / `encode_error()`. Nothing here blocks.

A frame is an int32 size then the request. The size is checked against the limit
(`socket.request.max.bytes`) as soon as its 4 bytes are in, before any of the body is
buffered (`FrameDecoder`); `incomplete_frame()` tells the shell the size of a frame
whose body is still coming, so it can reserve that much from the broker's memory pool
before reading on. The request starts with api key, api version and correlation
id; for a supported (api, version) the rest of the header is request header v1 (a
nullable client id) or v2 (client id + tagged fields, skipped whatever their tags) as
kio's request class says (flexible versions use v2), then the body is decoded with
kio, once `bounds.check_bounds` has seen that every count and length in it fits in the
frame (kio's native reader allocates from a count before reading the elements, and a
failed allocation aborts the process). Responses get response header v0 (correlation
id) or v1 (plus empty tagged fields) the same way; ApiVersions always answers with
header v0 (kio's classes encode that rule too).

Events: `KafkaRequest(header, request)` to serve, or `KafkaAnswerable` for a request that
is answered without serving it: an ApiVersions of a version we do not speak gets
UNSUPPORTED_VERSION with our version list in a v0 body (what Kafka does, so the client
retries with a version we have), and another API's unsupported version gets an
UNSUPPORTED_VERSION response of the requested version when that response has a
top-level error code. Anything else that cannot be read (garbage, a header or body kio
cannot decode, a count or length its frame cannot hold, an unsupported version without
such a response, an oversized frame) raises `KafkaProtocolError`, the only exception
the decoder lets out: the shell logs one line and closes the connection, as Kafka does
when it cannot parse a request. After that the connection stays broken.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import struct
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from kio.serial import entity_reader, entity_writer

from broker.kafka.bounds import check_bounds
from broker.kafka.translation import (
    KafkaHeader,
    build,
    default_response,
    has_field,
    kafka_error,
    request_class,
    response_class,
    schema_class,
)
from client.protocol.errors import ErrorCode, FrameTooLargeError, FramingError
from client.protocol.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder

API_VERSIONS_KEY = 18
_HEADER_START = struct.Struct(">hhi")  # api key, api version, correlation id
_SIZE = struct.Struct(">i")


class KafkaProtocolError(FramingError):
    """Bytes from a Kafka client that cannot be read: close the connection."""


class KafkaRequest(NamedTuple):
    """A decoded request ready to serve; unpacks as `(header, request)`."""

    header: KafkaHeader
    request: Any


@dataclasses.dataclass(frozen=True, slots=True)
class KafkaAnswerable:
    """A request answered without serving it (an unsupported version)."""

    header: KafkaHeader
    error_code: ErrorCode
    error: str
    frame: bytes

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    def response_frame(self) -> bytes:
        return self.frame


class KafkaServerConnection:
    """The broker's end of one Kafka client connection."""

    def __init__(
        self,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        supported: Mapping[int, tuple[int, int]] | Callable[[], Mapping[int, tuple[int, int]]],
    ) -> None:
        """`supported` is {api_key: (min, max)} or a function returning it (versions.py)."""
        self._frames = FrameDecoder(max_frame_bytes)
        self._supported_source = supported
        self._broken: KafkaProtocolError | None = None
        self._peer_closed = False

    @property
    def supported(self) -> Mapping[int, tuple[int, int]]:
        source = self._supported_source
        return source() if callable(source) else source

    @property
    def peer_closed(self) -> bool:
        return self._peer_closed

    def receive_data(self, data: bytes) -> None:
        """Bytes read from the socket; `b""` means the peer closed its side."""
        if data:
            self._frames.feed(data)
        else:
            self._peer_closed = True

    def incomplete_frame(self) -> tuple[int, int] | None:
        """(size, bytes buffered) of a frame whose length is in but whose body is not:
        what the server must reserve before reading on (`FrameDecoder.incomplete_frame`)."""
        return self._frames.incomplete_frame()

    def next_request(self) -> KafkaRequest | KafkaAnswerable | None:
        """The next complete request, an answerable one, or None until more data.

        Raises `KafkaProtocolError` (and keeps raising it) when the stream is unreadable.
        """
        if self._broken is not None:
            raise self._broken
        try:
            try:
                frame = self._frames.next_frame()
            except FrameTooLargeError as exc:
                raise KafkaProtocolError(str(exc)) from None
            if frame is None:
                if self._peer_closed and self._frames.buffered_bytes:
                    raise KafkaProtocolError(
                        f"peer closed with {self._frames.buffered_bytes} bytes of a partial frame"
                    )
                return None
            return self._decode(frame)
        except KafkaProtocolError as exc:
            self._broken = exc
            raise
        except Exception as exc:  # kio raises many kinds; none of them may escape
            self._broken = KafkaProtocolError(f"undecodable request: {type(exc).__name__}: {exc}")
            raise self._broken from None

    def _decode(self, frame: bytes) -> KafkaRequest | KafkaAnswerable:
        if len(frame) < _HEADER_START.size:
            raise KafkaProtocolError(f"request of {len(frame)} bytes has no header")
        api_key, version, correlation_id = _HEADER_START.unpack_from(frame)
        span = self.supported.get(api_key)
        if span is None or not span[0] <= version <= span[1]:
            return self._unsupported(api_key, version, correlation_id, frame)
        request_type = request_class(api_key, version)
        try:
            client_id, used = _read_header_rest(frame, request_type.__flexible__)
        except Exception as exc:
            raise KafkaProtocolError(
                f"unreadable header of api {api_key} v{version} (correlation id "
                f"{correlation_id}): {type(exc).__name__}: {exc}"
            ) from None
        try:
            check_bounds(request_type, frame, used)  # kio must not allocate from a bad count
            request, _ = _reader(request_type)(frame, used)
        except Exception as exc:
            raise KafkaProtocolError(
                f"unreadable body of api {api_key} v{version} (correlation id "
                f"{correlation_id}): {type(exc).__name__}: {exc}"
            ) from None
        return KafkaRequest(KafkaHeader(api_key, version, correlation_id, client_id), request)

    def _unsupported(
        self, api_key: int, version: int, correlation_id: int, frame: bytes
    ) -> KafkaAnswerable:
        header = KafkaHeader(api_key, version, correlation_id, None)
        reason = f"api {api_key} v{version} is not supported"
        if api_key == API_VERSIONS_KEY:
            response_type = response_class(API_VERSIONS_KEY, 0)
            versions = schema_class(response_type, "ApiVersion")
            response = build(
                response_type,
                error_code=kafka_error(ErrorCode.UNSUPPORTED_VERSION),
                api_keys=tuple(
                    versions(api_key=k, min_version=low, max_version=high)
                    for k, (low, high) in sorted(self.supported.items())
                ),
            )
            return KafkaAnswerable(
                header, ErrorCode.UNSUPPORTED_VERSION, reason, _frame(correlation_id, response)
            )
        try:
            response_type = response_class(api_key, version)
        except Exception:
            raise KafkaProtocolError(reason + " (and kio has no schema for it)") from None
        if not has_field(response_type, "error_code"):
            raise KafkaProtocolError(reason + " (and its response has no top-level error code)")
        response = default_response(response_type, ErrorCode.UNSUPPORTED_VERSION)
        return KafkaAnswerable(
            header, ErrorCode.UNSUPPORTED_VERSION, reason, _frame(correlation_id, response)
        )

    def encode_response(self, header: KafkaHeader, response: Any) -> bytes:
        """The frame answering `header`'s request with the kio `response`."""
        return _frame(header.correlation_id, response)

    def encode_error(self, header: KafkaHeader, code: int, message: str | None = None) -> bytes:
        """A response of the request's api and version with `code` in its top-level error
        fields and everything else empty (the last resort when no translation could build
        one)."""
        response = default_response(response_class(header.api_key, header.api_version), code)
        return _frame(header.correlation_id, response)


def _read_header_rest(frame: bytes, flexible: bool) -> tuple[str | None, int]:
    """(client id, header size) of a request header v1, or v2 when `flexible`.

    Read here rather than by kio because kio refuses tagged fields it does not know, and
    Kafka ignores them (KIP-482): a newer client may send header tags we have never heard
    of. The client id is a nullable int16-length string in both versions.
    """
    position = _HEADER_START.size
    (length,) = struct.unpack_from(">h", frame, position)
    position += 2
    client_id = None
    if length >= 0:
        if position + length > len(frame):
            raise ValueError("client id runs past the frame")
        client_id = frame[position : position + length].decode()
        position += length
    elif length != -1:
        raise ValueError(f"client id length {length}")
    if flexible:
        count, position = _read_uvarint(frame, position)
        for _ in range(count):
            _tag, position = _read_uvarint(frame, position)
            size, position = _read_uvarint(frame, position)
            position += size
            if position > len(frame):
                raise ValueError("a tagged field runs past the frame")
    return client_id, position


def _read_uvarint(frame: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if position >= len(frame):
            raise ValueError("varint runs past the frame")
        byte = frame[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7
        if shift > 28:
            raise ValueError("varint is too long")


def _frame(correlation_id: int, response: Any) -> bytes:
    response_type = type(response)
    header_type = response_type.__header_schema__
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    _writer(header_type)(out, header_type(correlation_id=correlation_id))
    # A class is hashable; mypy says type[Any] is not (python/mypy#11470).
    _writer(response_type)(out, response)  # type: ignore[arg-type]
    data = out.getbuffer()
    _SIZE.pack_into(data, 0, len(data) - 4)
    del data
    return out.getvalue()


@functools.cache
def _reader(entity_type: type) -> Callable[[Any, int], tuple[Any, int]]:
    return entity_reader(entity_type)


@functools.cache
def _writer(entity_type: type) -> Callable[[Any, Any], None]:
    return entity_writer(entity_type)
