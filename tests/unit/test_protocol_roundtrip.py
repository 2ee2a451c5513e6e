"""Every request and response type survives encode -> decode unchanged.

The hypothesis strategies are generated from the message schemas themselves, so a message
added to the registry is covered without touching this file. `message_strategy` and
`frame_strategy` are reused by the fuzz tests.
"""

from __future__ import annotations

import importlib
import pkgutil

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from client.protocol import messages
from client.protocol.api import ApiKey, ApiSpec
from client.protocol.codec import (
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from client.protocol.framing import PREFIX_BYTES
from client.protocol.messages import REGISTRY
from client.protocol.schema import INT64_MAX, INT64_MIN, Kind, TypeSpec, is_struct, schema_of

SPECS: list[ApiSpec] = [
    spec
    for key, versions in REGISTRY.supported().items()
    for version in range(versions.min_version, versions.max_version + 1)
    if (spec := REGISTRY.spec(key, version)) is not None
]

# Strings msgpack can carry: any code point but lone surrogates (not encodable as UTF-8).
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)


def value_strategy(spec: TypeSpec) -> st.SearchStrategy:
    """Values of one wire type, edge cases included (int64 bounds, empty, nil)."""
    if spec.kind is Kind.INT:
        base: st.SearchStrategy = st.integers(INT64_MIN, INT64_MAX)
    elif spec.kind is Kind.FLOAT:
        base = st.floats(allow_nan=False)
    elif spec.kind is Kind.BOOL:
        base = st.booleans()
    elif spec.kind is Kind.STR:
        base = TEXT
    elif spec.kind is Kind.BYTES:
        base = st.binary(max_size=64)
    elif spec.kind is Kind.LIST:
        assert spec.item is not None
        base = st.lists(value_strategy(spec.item), max_size=3)
    else:
        assert spec.struct is not None
        base = message_strategy(spec.struct)
    return st.none() | base if spec.nullable else base


def message_strategy(cls: type) -> st.SearchStrategy:
    """Instances of a @struct class with every field drawn from its schema."""
    fields = schema_of(cls).fields
    return st.builds(cls, **{field.name: value_strategy(field.type) for field in fields})


def header_strategy(spec: ApiSpec) -> st.SearchStrategy[RequestHeader]:
    return st.builds(
        RequestHeader,
        api_key=st.just(spec.api_key),
        api_version=st.just(spec.version),
        correlation_id=st.integers(-(1 << 31), (1 << 31) - 1),
        client_id=st.none() | TEXT,
    )


@st.composite
def frame_strategy(draw: st.DrawFn) -> bytes:
    """A valid request frame of any registered API."""
    spec = draw(st.sampled_from(SPECS))
    return encode_request(draw(header_strategy(spec)), draw(message_strategy(spec.request_type)))


def _name(spec: ApiSpec) -> str:
    return f"{spec.api_key.name}-v{spec.version}"


ROUND_TRIP = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_every_api_is_registered():
    assert {spec.api_key for spec in SPECS} == set(ApiKey)


def test_every_message_of_every_family_is_exported_and_registered():
    """Each family module's messages are re-exported by `client.protocol.messages` (so
    `m.ProduceRequest` works for all of them), and each message that no other one nests
    (a request or a response) is some API's in the registry."""
    families = [
        importlib.import_module(f"{messages.__name__}.{info.name}")
        for info in pkgutil.iter_modules(messages.__path__)
    ]
    assert len(families) > 1
    defined = [
        value
        for module in families
        for value in vars(module).values()
        if isinstance(value, type) and is_struct(value) and value.__module__ == module.__name__
    ]
    for cls in defined:
        assert getattr(messages, cls.__name__) is cls, f"{cls.__module__}.{cls.__name__}"

    def nested(spec: TypeSpec) -> set[type]:
        if spec.kind is Kind.LIST:
            assert spec.item is not None
            return nested(spec.item)
        return {spec.struct} if spec.kind is Kind.STRUCT and spec.struct else set()

    inner = {t for cls in defined for field in schema_of(cls).fields for t in nested(field.type)}
    top_level = {cls.__name__ for cls in defined if cls not in inner}
    registered = {c.__name__ for spec in SPECS for c in (spec.request_type, spec.response_type)}
    assert top_level == registered


@ROUND_TRIP
@pytest.mark.parametrize("spec", SPECS, ids=_name)
@given(data=st.data())
def test_request_round_trips(spec: ApiSpec, data: st.DataObject):
    header = data.draw(header_strategy(spec))
    request = data.draw(message_strategy(spec.request_type))
    frame = encode_request(header, request)
    assert decode_request(frame[PREFIX_BYTES:]) == (header, request)


@ROUND_TRIP
@pytest.mark.parametrize("spec", SPECS, ids=_name)
@given(data=st.data())
def test_response_round_trips(spec: ApiSpec, data: st.DataObject):
    correlation_id = data.draw(st.integers(-(1 << 31), (1 << 31) - 1))
    response = data.draw(message_strategy(spec.response_type))
    frame = encode_response(correlation_id, response)
    decoded = decode_response(frame[PREFIX_BYTES:], spec.api_key, spec.version)
    assert decoded == (correlation_id, response)
