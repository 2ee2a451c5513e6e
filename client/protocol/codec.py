"""Request and response envelopes: message objects <-> frame bytes.

How it works:
- A request frame body is the msgpack array
  `[api_key, api_version, correlation_id, client_id, body]`, a response frame body is
  `[correlation_id, error_code, error_message, body]`; `body` is the message's map (see
  schema.py), nil in a response that carries a request-level error.
- Encoding is one `msgpack.packb` call with `schema.msgpack_default` as the hook, then
  the length prefix (framing.py). A Fetch response or Produce request carrying at least
  `GATHER_MIN_BYTES` of records is encoded by `encode_fetch_response` or
  `encode_produce_request` as `FrameParts` instead: the same msgpack, packed around the
  record batches, which are sent as they are (read from the log, built by the producer)
  rather than copied into the frame.
- Decoding reads the envelope first, then the body with the classes the registry names
  for (api_key, api_version). Failures say whose fault and what to do, as `ProtocolError`
  subclasses: an unreadable envelope is `CorruptMessageError` (close the connection);
  an unknown API or version is `UnsupportedApiError`, a body that does not match its
  schema `InvalidRequestError` (both answerable: the header is known). On the client side
  a bad response body is `InvalidResponseError`, and a request-level error code from the
  broker becomes a `TributaryError`.
- msgpack is unpacked with limits (container sizes, no ext types) and every exception it
  can raise on hostile input is turned into `CorruptMessageError`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import msgpack

from client.protocol.api import ApiKey, ApiRegistry
from client.protocol.errors import (
    CorruptMessageError,
    ErrorCode,
    FrameTooLargeError,
    InvalidRequestError,
    InvalidResponseError,
    SchemaError,
    TributaryError,
    UnsupportedApiError,
)
from client.protocol.framing import (
    LENGTH_PREFIX,
    MAX_ENCODABLE_FRAME_BYTES,
    FrameParts,
    encode_frame,
)
from client.protocol.messages import REGISTRY, FetchResponse, ProduceRequest
from client.protocol.schema import decode_struct, msgpack_default

# Most items one msgpack array or map may declare. An item costs at least one byte on the
# wire but a pointer (8 bytes) or a whole object in memory, so without a cap a 100 MiB
# frame of nils could make us allocate gigabytes. A million is far above any real list
# (partitions of a topic, topics of a cluster) and bounds one container to ~8 MiB.
MAX_CONTAINER_ITEMS = 1 << 20

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT16_MIN = -(1 << 15)
INT16_MAX = (1 << 15) - 1


@dataclasses.dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int  # an ApiKey once decoded
    api_version: int
    correlation_id: int
    client_id: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class ResponseEnvelope:
    """A response frame read as far as its header: the body is still raw msgpack data."""

    correlation_id: int
    error_code: int
    error_message: str | None
    body: Any


def expects_response(request: Any) -> bool:
    """False only for acks=0 Produce, which the broker never answers (as Kafka)."""
    return not (type(request) is ProduceRequest and request.acks == 0)


# --- requests ----------------------------------------------------------------------------


def encode_request(header: RequestHeader, request: Any, registry: ApiRegistry = REGISTRY) -> bytes:
    """The whole frame for `request` under `header`.

    Raises ValueError if the header's api/version does not carry this request type, and
    TypeError/ValueError (from msgpack) for field values that cannot be encoded.
    """
    _check_request_type(header, request, registry)
    payload = msgpack.packb(
        [
            int(header.api_key),
            header.api_version,
            header.correlation_id,
            header.client_id,
            request,
        ],
        default=msgpack_default,
    )
    return encode_frame(payload)


def _check_request_type(header: RequestHeader, request: Any, registry: ApiRegistry) -> None:
    spec = registry.spec(header.api_key, header.api_version)
    if spec is None or type(request) is not spec.request_type:
        raise ValueError(
            f"{type(request).__name__} cannot be sent as api {header.api_key} v{header.api_version}"
        )


def decode_request(
    frame_body: bytes, registry: ApiRegistry = REGISTRY
) -> tuple[RequestHeader, Any]:
    """Read a request frame body. Raises only `ProtocolError` subclasses.

    `CorruptMessageError`: the envelope is unreadable (close the connection).
    `UnsupportedApiError` / `InvalidRequestError`: answer with the error's code.
    """
    envelope = unpack_message(frame_body)
    if type(envelope) is not list or len(envelope) != 5:
        raise CorruptMessageError("a request must be a 5-item msgpack array")
    api_key, api_version, correlation_id, client_id, body = envelope
    if not (
        _is_int_in(api_key, INT16_MIN, INT16_MAX) and _is_int_in(api_version, INT16_MIN, INT16_MAX)
    ):
        raise CorruptMessageError("request header: api_key and api_version must be int16")
    if not _is_int_in(correlation_id, INT32_MIN, INT32_MAX):
        raise CorruptMessageError("request header: correlation_id must be int32")
    if client_id is not None and type(client_id) is not str:
        raise CorruptMessageError("request header: client_id must be a str or nil")
    spec = registry.spec(api_key, api_version)
    if spec is None:
        known = registry.version_range(api_key)
        reason = (
            f"unknown api key {api_key}"
            if known is None
            else f"{ApiKey(api_key).name} v{api_version} is not supported "
            f"(v{known.min_version}..v{known.max_version})"
        )
        raise UnsupportedApiError(
            reason,
            api_key=api_key,
            api_version=api_version,
            correlation_id=correlation_id,
            client_id=client_id,
        )
    header = RequestHeader(spec.api_key, api_version, correlation_id, client_id)
    try:
        request = decode_struct(spec.request_type, body)
    except SchemaError as error:
        raise InvalidRequestError(
            f"{spec.request_type.__name__}: {error}",
            api_key=spec.api_key,
            api_version=api_version,
            correlation_id=correlation_id,
            client_id=client_id,
        ) from None
    return header, request


# --- responses ---------------------------------------------------------------------------


def encode_response(
    correlation_id: int,
    response: Any = None,
    error_code: ErrorCode | int = ErrorCode.NONE,
    error_message: str | None = None,
) -> bytes:
    """The whole frame answering `correlation_id`.

    Either a response object (error_code NONE), or a request-level error code (the request
    could not be read or served at all) with no body.
    """
    if error_code == ErrorCode.NONE and response is None:
        raise ValueError("a response without a request-level error needs a body")
    payload = msgpack.packb(
        [correlation_id, int(error_code), error_message, response],
        default=msgpack_default,
    )
    return encode_frame(payload)


# Messages with at least this many bytes of records are sent as FrameParts; below it one
# contiguous frame is cheaper than a few more send calls.
GATHER_MIN_BYTES = 64 * 1024
# Packs headers and fields (autoreset: each call returns bytes); structs nested in a
# field (a Fetch answer's aborted transactions) through the same hook as packb.
_PACKER = msgpack.Packer(default=msgpack_default)
# Where a message's record batches sit: topics -> partitions -> `records`.
_RECORDS_PATH = ("topics", "partitions")


def encode_fetch_response(correlation_id: int, response: FetchResponse) -> bytes | FrameParts:
    """`encode_response` for a Fetch response: the same msgpack, but with big record
    batches as parts of their own (see `FrameParts`)."""
    if _records_bytes(response) < GATHER_MIN_BYTES:
        return encode_response(correlation_id, response)
    writer = _GatherWriter()
    pack = _PACKER.pack
    writer.raw(_PACKER.pack_array_header(4) + pack(correlation_id) + pack(0) + pack(None))
    writer.struct(response, _RECORDS_PATH)
    return writer.frame()


def encode_produce_request(
    header: RequestHeader, request: ProduceRequest, registry: ApiRegistry = REGISTRY
) -> bytes | FrameParts:
    """`encode_request` for a Produce request, big record batches as parts of their own."""
    if _records_bytes(request) < GATHER_MIN_BYTES:
        return encode_request(header, request, registry)
    _check_request_type(header, request, registry)
    writer = _GatherWriter()
    pack = _PACKER.pack
    writer.raw(
        _PACKER.pack_array_header(5)
        + pack(int(header.api_key))
        + pack(header.api_version)
        + pack(header.correlation_id)
        + pack(header.client_id)
    )
    writer.struct(request, _RECORDS_PATH)
    return writer.frame()


def _records_bytes(message: Any) -> int:
    return sum(len(p.records) for topic in message.topics for p in topic.partitions)


def _bin_header(size: int) -> bytes:
    """msgpack's bin 8/16/32 header for `size` bytes (as packb writes it)."""
    if size < 1 << 8:
        return b"\xc4" + size.to_bytes(1, "big")
    if size < 1 << 16:
        return b"\xc5" + size.to_bytes(2, "big")
    return b"\xc6" + size.to_bytes(4, "big")


class _GatherWriter:
    """Packs a message as packb would, into small packed pieces (joined) and big record
    batches (kept as they are)."""

    def __init__(self) -> None:
        self.parts: list[bytes | bytearray] = []
        self.pending = bytearray()

    def raw(self, data: bytes) -> None:
        self.pending += data

    def struct(self, value: Any, path: tuple[str, ...]) -> None:
        """Pack the struct `value`: the field `path[0]` is a list of structs packed the same
        way with `path[1:]`; at the end of the path, a struct with its `records`."""
        fields = type(value).__wire_encode__(value)
        if not path:
            self._with_records(fields)
            return
        self.pending += _PACKER.pack_map_header(len(fields))
        for key, item in fields.items():
            self.pending += _PACKER.pack(key)
            if key == path[0]:
                self.pending += _PACKER.pack_array_header(len(item))
                for element in item:
                    self.struct(element, path[1:])
            else:
                self.pending += msgpack.packb(item, default=msgpack_default)

    def _with_records(self, fields: dict[str, Any]) -> None:
        records = fields["records"]
        if len(records) < GATHER_MIN_BYTES:
            self.pending += msgpack.packb(fields, default=msgpack_default)
            return
        self.pending += _PACKER.pack_map_header(len(fields))
        for key, value in fields.items():
            self.pending += _PACKER.pack(key)
            if key == "records":
                self.pending += _bin_header(len(records))
                self.parts.append(self.pending)
                self.parts.append(records)
                self.pending = bytearray()
            else:
                self.pending += _PACKER.pack(value)

    def frame(self) -> FrameParts:
        if self.pending:
            self.parts.append(self.pending)
        size = sum(len(part) for part in self.parts)
        if size > MAX_ENCODABLE_FRAME_BYTES:
            raise FrameTooLargeError(size, MAX_ENCODABLE_FRAME_BYTES)
        return FrameParts([LENGTH_PREFIX.pack(size), *self.parts])


def read_response_envelope(frame_body: bytes) -> ResponseEnvelope:
    """Read a response frame's header fields; `CorruptMessageError` if unreadable."""
    envelope = unpack_message(frame_body)
    if type(envelope) is not list or len(envelope) != 4:
        raise CorruptMessageError("a response must be a 4-item msgpack array")
    correlation_id, error_code, error_message, body = envelope
    if not _is_int_in(correlation_id, INT32_MIN, INT32_MAX):
        raise CorruptMessageError("response header: correlation_id must be int32")
    if not _is_int_in(error_code, INT16_MIN, INT16_MAX):
        raise CorruptMessageError("response header: error_code must be int16")
    if error_message is not None and type(error_message) is not str:
        raise CorruptMessageError("response header: error_message must be a str or nil")
    return ResponseEnvelope(correlation_id, error_code, error_message, body)


def decode_response_or_error(
    envelope: ResponseEnvelope,
    api_key: int,
    api_version: int,
    registry: ApiRegistry = REGISTRY,
) -> Any | TributaryError:
    """The response object, or the request-level error as a `TributaryError` value.

    Raises `InvalidResponseError` if the body does not match the response schema.
    """
    if envelope.error_code != ErrorCode.NONE:
        return TributaryError(ErrorCode.from_code(envelope.error_code), envelope.error_message)
    spec = registry.spec(api_key, api_version)
    if spec is None:
        raise ValueError(f"api {api_key} v{api_version} is not registered")
    try:
        return decode_struct(spec.response_type, envelope.body)
    except SchemaError as error:
        raise InvalidResponseError(
            f"{spec.response_type.__name__} (correlation id {envelope.correlation_id}): {error}"
        ) from None


def decode_response(
    frame_body: bytes,
    api_key: int,
    api_version: int,
    registry: ApiRegistry = REGISTRY,
) -> tuple[int, Any]:
    """(correlation_id, response). Raises `TributaryError` for a request-level error code
    and `ProtocolError` subclasses for anything unreadable."""
    envelope = read_response_envelope(frame_body)
    result = decode_response_or_error(envelope, api_key, api_version, registry)
    if isinstance(result, TributaryError):
        raise result
    return envelope.correlation_id, result


# --- msgpack -----------------------------------------------------------------------------


def unpack_message(frame_body: bytes) -> Any:
    """msgpack-decode one frame body with limits; `CorruptMessageError` on any failure."""
    try:
        return msgpack.unpackb(
            frame_body,
            raw=False,
            use_list=True,
            strict_map_key=True,
            max_array_len=MAX_CONTAINER_ITEMS,
            max_map_len=MAX_CONTAINER_ITEMS,
            max_ext_len=0,
            ext_hook=_reject_ext,
        )
    # msgpack reports hostile input through many types (ValueError and its FormatError,
    # StackError, ExtraData subclasses, UnicodeDecodeError, TypeError for unhashable map
    # keys, MemoryError...). Unpacking is a pure function, so any failure means "not a
    # message".
    except Exception as error:
        # str, never repr: ExtraData's and UnicodeDecodeError's reprs carry the bytes
        # (a 100 MiB garbage frame would make a 400 MB message and log line).
        failure = f"{type(error).__name__}: {error}"
        if len(failure) > _MAX_ERROR_DETAIL:
            failure = f"{failure[:_MAX_ERROR_DETAIL]}... ({len(frame_body)}-byte frame)"
    # Raised outside the handler so that msgpack's error (ExtraData keeps every extra
    # byte) is not chained to ours and kept alive with it.
    raise CorruptMessageError(f"not a valid msgpack message: {failure}")


# Characters of a decoding error quoted in the error message.
_MAX_ERROR_DETAIL = 200


def _reject_ext(code: int, data: bytes) -> Any:
    raise ValueError(f"msgpack ext type {code} is not allowed")


def _is_int_in(value: Any, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high
