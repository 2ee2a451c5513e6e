"""What one Kafka API's translation is, plus small helpers every translation module shares.

How it works: a `Translation` holds three pure functions for one API key and the range of
versions it handles: `to_native` (kio request + `KafkaHeader` -> native request from
`client.protocol.messages`, of the same API unless `native_api_key` names another),
`from_native` (native response + version -> kio response) and `error_response` (kio
request + version + error code -> a kio response carrying that code wherever the API
puts errors). Each translate module exposes a
`TRANSLATIONS: dict[int, Translation]`; versions.py merges them for the dispatcher
(dispatcher.py).

A Kafka request that batches several native requests (KIP-699's FindCoordinator,
KIP-709's OffsetFetch) is translated to a `NativeBatch`: the native handlers serve each,
and `from_native` gets every (request, answer) pair.

A translation that finds a request it cannot serve as a whole (before the native handler
runs) raises `KafkaRequestError(code)`: the dispatcher answers it with
`error_response(request, version, code)`. Any other exception from a translation is
answered with UNKNOWN_SERVER_ERROR the same way.

One function can serve every version of an API: kio generates one class per version with
the same nested class names, so `build(cls, **values)` keeps only the fields that version
has (converting plain values: native error codes, milliseconds, lists of dicts) and
`schema_class(cls, "Name")` finds the nested class of the same version.

The helpers convert between the two worlds: `kafka_error` turns a native error code
(`ErrorCode` or int) into kio's `ErrorCode` (kio refuses plain ints), `timedelta_ms` /
`ms_of` convert kio's timedelta fields, `request_class` / `response_class` find kio's
schema classes, and `default_response` builds a response whose every field is empty or
zero except the error codes, for error answers of simple APIs.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import sys
import types
import typing
import uuid
from collections.abc import Callable
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.static.protocol import RequestPayload, ResponsePayload

from client.protocol.codec import RequestHeader


@dataclasses.dataclass(frozen=True, slots=True)
class KafkaHeader:
    """A Kafka request header (v1 or v2; tagged header fields are not kept)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None

    def native(self, api_key: int | None = None) -> RequestHeader:
        """The header the broker's native request handlers take: the same api key (or
        `api_key`, for an API served by another native request), correlation id and
        client id; version 0, the version of the native messages `to_native` makes."""
        key = self.api_key if api_key is None else api_key
        return RequestHeader(key, 0, self.correlation_id, self.client_id)


@dataclasses.dataclass(frozen=True)
class Translation:
    """How one Kafka API maps onto the native request handlers, for a range of versions."""

    api_key: int
    min_version: int
    max_version: int
    to_native: Callable[[Any, KafkaHeader], Any]  # kio request -> native request
    from_native: Callable[[Any, int], Any]  # native response, version -> kio response
    error_response: Callable[[Any, int, int], Any]  # kio request, version, code -> kio response
    # The native API `to_native`'s request is, when not the same key (DescribeCluster is
    # served by a native Metadata request).
    native_api_key: int | None = None


@dataclasses.dataclass(frozen=True)
class NativeBatch:
    """What `to_native` returns for a Kafka request that batches what the native request
    takes one at a time (FindCoordinator v4+'s keys, OffsetFetch v8+'s groups): the
    dispatcher serves each request in turn and hands `from_native` a list of
    (request, answer) pairs, an error answer given as its `ErrorCode`."""

    requests: list[Any]


class KafkaRequestError(Exception):
    """Raised by `to_native`: answer the whole request with `error_response(..., code)`."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message or f"error code {int(code)}")
        self.code = int(code)


def build(cls: type, /, **values: Any) -> Any:
    """An instance of kio's `cls` from version-independent `values`: names the class lacks
    are ignored, a field it lacks a value and a default for raises `TypeError`, and each
    kept value is converted to what kio's writer expects (`error_code` fields from native
    codes, `timedelta_*` fields from milliseconds, lists of dicts to tuples of the nested
    class the type hint names, other lists to tuples)."""
    kwargs = {}
    for name, kafka_type, hint in _fields(cls):
        if name in values:
            kwargs[name] = _convert(values[name], kafka_type, hint)
    return cls(**kwargs)


def has_field(cls: type, name: str) -> bool:
    return name in field_names(cls)


def field_names(cls: type) -> frozenset[str]:
    """The names of the fields kio's class `cls` has (what one version carries)."""
    return frozenset(name for name, _, _ in _fields(cls))


@functools.cache
def _fields(cls: type) -> tuple[tuple[str, str | None, Any], ...]:
    """(name, kafka_type, type hint) of each field of kio's dataclass `cls`."""
    hints = typing.get_type_hints(cls)
    return tuple(
        (f.name, f.metadata.get("kafka_type"), hints[f.name]) for f in dataclasses.fields(cls)
    )


def _convert(value: Any, kafka_type: str | None, hint: Any) -> Any:
    if value is None:
        return None
    if kafka_type == "error_code":
        return kafka_error(value)
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return value if isinstance(value, datetime.timedelta) else timedelta_ms(value)
    element = _tuple_element(hint)
    if element is None:
        return value
    if isinstance(element, type) and dataclasses.is_dataclass(element):
        return tuple(
            item if isinstance(item, element) else build(element, **item) for item in value
        )
    return tuple(value)


def _tuple_element(hint: Any) -> Any:
    """X for `tuple[X, ...]` or `tuple[X, ...] | None`; None for anything else."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return _tuple_element(inner[0]) if len(inner) == 1 else None
    if origin is tuple:
        return typing.get_args(hint)[0]
    return None


@functools.cache
def schema_class(entity_type: type, name: str) -> type:
    """The class called `name` in the kio module (same API and version) of `entity_type`."""
    return getattr(sys.modules[entity_type.__module__], name)


def kafka_error(code: int) -> KioErrorCode:
    """kio's member for a native error code; UNKNOWN_SERVER_ERROR for numbers kio lacks."""
    try:
        return KioErrorCode(int(code))
    except ValueError:
        return KioErrorCode.unknown_server_error


NO_ERROR = KioErrorCode.none


def timedelta_ms(ms: int) -> datetime.timedelta:
    """A kio `timedelta_i32`/`timedelta_i64` field value from milliseconds."""
    return datetime.timedelta(milliseconds=ms)


ZERO_MS = datetime.timedelta(0)


def ms_of(value: datetime.timedelta | int) -> int:
    """Milliseconds of a kio timedelta field (ints pass through)."""
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


def request_class(api_key: int, version: int) -> type[RequestPayload]:
    """kio's request class for (api_key, version); raises if kio has none."""
    return load_request_schema(api_key, version)


def response_class(api_key: int, version: int) -> type[ResponsePayload]:
    """kio's response class for (api_key, version); raises if kio has none."""
    return load_response_schema(api_key, version)


def default_response(response_type: type, error_code: int, **overrides: Any) -> Any:
    """An instance of kio's `response_type` with `overrides` set, its top-level
    `error_code`-typed fields set to `error_code`, fields with a schema default left at it,
    and every other field empty (0, "", b"", (), None where nullable)."""
    hints = typing.get_type_hints(response_type)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(response_type):
        if field.name in overrides:
            values[field.name] = overrides[field.name]
            continue
        has_default = (
            field.default is not dataclasses.MISSING
            or field.default_factory is not dataclasses.MISSING
        )
        if field.metadata.get("kafka_type") == "error_code":
            values[field.name] = kafka_error(error_code)
        elif not has_default:
            values[field.name] = _empty(hints[field.name])
    return response_type(**values)


def _empty(hint: Any) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        return None
    if origin is tuple:
        return ()
    if isinstance(hint, type):
        if issubclass(hint, datetime.timedelta):
            return ZERO_MS
        if issubclass(hint, KioErrorCode):
            return NO_ERROR
        if issubclass(hint, bool):
            return False
        if issubclass(hint, int):
            return 0
        if issubclass(hint, str):
            return ""
        if issubclass(hint, bytes):
            return b""
        if issubclass(hint, uuid.UUID):
            return uuid.UUID(int=0)
        if dataclasses.is_dataclass(hint):
            return default_response(hint, 0)
    raise TypeError(f"no empty value for {hint!r}")
