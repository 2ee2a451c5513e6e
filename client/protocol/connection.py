"""Sans-IO connection state machines for both ends of a Tributary connection (h11-style).

How it works: the I/O shell (a Trio task, a test, a simulator) feeds whatever bytes it
read into `receive_data()` and pulls complete events with `next_request()` /
`next_response()`; whatever must be written comes back from `send_*()` as bytes. Nothing
here blocks, reads a clock or touches a socket.

- `ServerConnection` (broker side) yields `ReceivedRequest(header, request)` for a good
  request and `Answerable` for one whose header was readable but whose body was not (or
  whose api/version is unknown): the shell writes `answerable.response_frame()` and carries
  on. A broken byte stream raises `FramingError`: the shell closes the connection. A frame
  is decoded only once all its bytes are in.
- `ClientConnection` assigns increasing correlation ids, remembers (api, version) for each
  request that will be answered (everything but acks=0 Produce), and matches responses in
  order: the broker answers one connection's requests in the order it received them, so a
  response for any other correlation id is a `FramingError`. A request-level error code
  comes out as a `TributaryError` value for that correlation id.

After raising a `ProtocolError`, either object stays broken and raises it again.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, NamedTuple

from client.protocol.api import ApiRegistry
from client.protocol.codec import (
    INT32_MAX,
    RequestHeader,
    decode_request,
    decode_response_or_error,
    encode_fetch_response,
    encode_produce_request,
    encode_request,
    encode_response,
    expects_response,
    read_response_envelope,
)
from client.protocol.errors import (
    AnswerableError,
    ErrorCode,
    FramingError,
    ProtocolError,
    TributaryError,
)
from client.protocol.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, FrameParts
from client.protocol.messages import REGISTRY, FetchResponse, ProduceRequest


class ReceivedRequest(NamedTuple):
    """A request ready to serve; unpacks as `(header, request)`."""

    header: RequestHeader
    request: Any


@dataclasses.dataclass(frozen=True, slots=True)
class Answerable:
    """A request that cannot be served but can be answered with an error code."""

    error: AnswerableError

    @property
    def correlation_id(self) -> int:
        return self.error.correlation_id

    @property
    def error_code(self) -> ErrorCode:
        return self.error.error_code

    def response_frame(self) -> bytes:
        """The bytes to write back: a request-level error response without a body."""
        return encode_response(
            self.error.correlation_id,
            error_code=self.error.error_code,
            error_message=str(self.error),
        )


class ServerConnection:
    """The broker's end of one client connection."""

    def __init__(
        self,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        registry: ApiRegistry = REGISTRY,
    ) -> None:
        self._frames = FrameDecoder(max_frame_bytes, assemble_large=True)
        self._registry = registry
        self._broken: ProtocolError | None = None
        self._peer_closed = False

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

    def next_request(self) -> ReceivedRequest | Answerable | None:
        """The next complete request, an `Answerable` error, or None until more data.

        Raises `FramingError` when the stream is broken (also for a partial frame left when
        the peer closed).
        """
        if self._broken is not None:
            raise self._broken
        try:
            frame = self._frames.next_frame()
            if frame is None:
                if self._peer_closed and self._frames.buffered_bytes:
                    raise FramingError(
                        f"peer closed with {self._frames.buffered_bytes} bytes of a partial frame"
                    )
                return None
            header, request = decode_request(frame, self._registry)
        except AnswerableError as error:
            return Answerable(error)
        except FramingError as error:
            self._broken = error
            raise
        return ReceivedRequest(header, request)

    def send_response(self, correlation_id: int, response: Any) -> bytes | FrameParts:
        """The bytes answering `correlation_id` with `response` (a Fetch response with big
        record batches as `FrameParts`, to be sent in order)."""
        if type(response) is FetchResponse:
            return encode_fetch_response(correlation_id, response)
        return encode_response(correlation_id, response)

    def send_error(
        self, correlation_id: int, error_code: ErrorCode | int, error_message: str | None = None
    ) -> bytes:
        """The bytes answering `correlation_id` with a request-level error and no body."""
        return encode_response(correlation_id, error_code=error_code, error_message=error_message)


@dataclasses.dataclass(frozen=True, slots=True)
class _InFlight:
    correlation_id: int
    api_key: int
    api_version: int


class ClientConnection:
    """The client's end of one broker connection."""

    def __init__(
        self,
        client_id: str | None = None,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        registry: ApiRegistry = REGISTRY,
        first_correlation_id: int = 0,
    ) -> None:
        if not 0 <= first_correlation_id <= INT32_MAX:
            raise ValueError("first_correlation_id must be a non-negative int32")
        self.client_id = client_id
        self._frames = FrameDecoder(max_frame_bytes, assemble_large=True)
        self._registry = registry
        self._next_correlation_id = first_correlation_id
        self._in_flight: collections.deque[_InFlight] = collections.deque()
        self._broken: ProtocolError | None = None

    @property
    def in_flight(self) -> int:
        """Requests sent whose response has not been read yet."""
        return len(self._in_flight)

    def send_request(
        self, request: Any, *, api_version: int | None = None
    ) -> tuple[int, bytes | FrameParts]:
        """(correlation id, bytes to write: a Produce request with big record batches as
        `FrameParts`). acks=0 Produce is not tracked: no answer comes.

        `api_version` defaults to the newest version this side speaks.
        """
        if self._broken is not None:
            raise self._broken
        api_key = self._registry.api_key_of(type(request))
        version = self._registry.latest_version(api_key) if api_version is None else api_version
        correlation_id = self._next_correlation_id
        header = RequestHeader(api_key, version, correlation_id, self.client_id)
        if type(request) is ProduceRequest:
            frame = encode_produce_request(header, request, self._registry)
        else:
            frame = encode_request(header, request, self._registry)
        self._next_correlation_id = 0 if correlation_id == INT32_MAX else correlation_id + 1
        if expects_response(request):
            self._in_flight.append(_InFlight(correlation_id, api_key, version))
        return correlation_id, frame

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        self._frames.feed(data)

    def missing_bytes(self) -> int:
        """Bytes still to come of a response whose length is in (0 if none is): how much
        the reader may ask of the socket at once."""
        progress = self._frames.incomplete_frame()
        return 0 if progress is None else progress[0] - progress[1]

    def next_response(self) -> tuple[int, Any | TributaryError] | None:
        """(correlation id, response or request-level `TributaryError`), or None until more data.

        Raises `FramingError` for a broken stream or an out-of-order / unexpected correlation
        id, `InvalidResponseError` for a body that does not match its schema.
        """
        if self._broken is not None:
            raise self._broken
        try:
            frame = self._frames.next_frame()
            if frame is None:
                return None
            envelope = read_response_envelope(frame)
            if not self._in_flight:
                raise FramingError(
                    f"response for correlation id {envelope.correlation_id} "
                    "with no request in flight"
                )
            expected = self._in_flight[0]
            if envelope.correlation_id != expected.correlation_id:
                raise FramingError(
                    f"expected the response for correlation id {expected.correlation_id}, "
                    f"got {envelope.correlation_id}"
                )
            self._in_flight.popleft()
            result = decode_response_or_error(
                envelope, expected.api_key, expected.api_version, self._registry
            )
        except ProtocolError as error:
            self._broken = error
            raise
        return envelope.correlation_id, result
