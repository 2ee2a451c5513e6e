"""Hostile bytes never escape as anything but a `ProtocolError`.

Arbitrary bytes, mutated valid frames and schema-shaped bodies with wrong values go into
the decoders and the sans-IO connections; the only exceptions allowed out are the
protocol's own (and `TributaryError` where a broker error code is the legitimate result).
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import msgpack
from hypothesis import HealthCheck, given, settings

from client.protocol.codec import decode_request, decode_response, read_response_envelope
from client.protocol.connection import (
    Answerable,
    ClientConnection,
    ReceivedRequest,
    ServerConnection,
)
from client.protocol.errors import (
    AnswerableError,
    FramingError,
    ProtocolError,
    TributaryError,
)
from client.protocol.framing import PREFIX_BYTES, encode_frame
from client.protocol.schema import to_plain
from tests.unit.test_protocol_roundtrip import (
    SPECS,
    TEXT,
    frame_strategy,
    header_strategy,
    message_strategy,
)

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Any msgpack value (what a hostile peer can put anywhere in a body).
MSGPACK_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(1 << 63), (1 << 64) - 1)
    | st.floats(allow_nan=False)
    | TEXT
    | st.binary(max_size=16),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(TEXT, children, max_size=4),
    max_leaves=8,
)


def drain_server(server: ServerConnection) -> None:
    """Pull every event; Answerables must be answerable without error."""
    while (event := server.next_request()) is not None:
        assert isinstance(event, ReceivedRequest | Answerable)
        if isinstance(event, Answerable):
            event.response_frame()


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` with a few bytes replaced, dropped, inserted, or cut short."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(["replace", "delete", "insert", "truncate"]))
        position = draw(st.integers(0, max(len(out) - 1, 0)))
        if action == "replace" and out:
            out[position] = draw(st.integers(0, 255))
        elif action == "delete" and out:
            del out[position]
        elif action == "insert":
            out[position:position] = draw(st.binary(min_size=1, max_size=4))
        elif action == "truncate":
            del out[position:]
    return bytes(out)


@FUZZ
@given(data=st.binary(max_size=200))
def test_arbitrary_bytes_into_decode_request(data: bytes):
    try:
        decode_request(data)
    except ProtocolError:
        pass


@FUZZ
@given(data=st.binary(max_size=200), spec=st.sampled_from(SPECS))
def test_arbitrary_bytes_into_decode_response(data: bytes, spec):
    try:
        read_response_envelope(data)
        decode_response(data, spec.api_key, spec.version)
    except (ProtocolError, TributaryError):
        pass


@FUZZ
@given(data=st.binary(max_size=300))
def test_arbitrary_bytes_into_server_connection(data: bytes):
    server = ServerConnection(max_frame_bytes=1 << 16)
    server.receive_data(data)
    try:
        drain_server(server)
    except FramingError:
        pass


@FUZZ
@given(data=st.data())
def test_mutated_frames_into_server_connection(data: st.DataObject):
    frames = data.draw(st.lists(frame_strategy(), min_size=1, max_size=3))
    stream = data.draw(mutated(b"".join(frames)))
    server = ServerConnection(max_frame_bytes=1 << 16)
    server.receive_data(stream)
    try:
        drain_server(server)
    except FramingError:
        pass


@FUZZ
@given(data=st.data())
def test_mutated_frame_bodies_into_decode_request(data: st.DataObject):
    frame = data.draw(frame_strategy())
    body = data.draw(mutated(frame[PREFIX_BYTES:]))
    try:
        decode_request(body)
    except ProtocolError:
        pass


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every position inside a plain (dict/list) value."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


@FUZZ
@given(data=st.data())
def test_wrong_values_anywhere_in_a_body_are_answerable(data: st.DataObject):
    """With a readable header, no body can break the connection: INVALID_REQUEST at worst."""
    spec = data.draw(st.sampled_from(SPECS))
    header = data.draw(header_strategy(spec))
    body = to_plain(data.draw(message_strategy(spec.request_type)))
    paths = _paths(body)
    if paths:
        *parents, last = data.draw(st.sampled_from(paths))
        container = body
        for key in parents:
            container = container[key]
        if isinstance(container, dict) and data.draw(st.booleans()):
            del container[last]
        else:
            container[last] = data.draw(MSGPACK_VALUES)
    else:
        body = data.draw(MSGPACK_VALUES)
    frame_body = msgpack.packb(
        [header.api_key, header.api_version, header.correlation_id, header.client_id, body]
    )
    try:
        decode_request(frame_body)
    except AnswerableError as error:
        assert error.correlation_id == header.correlation_id


@FUZZ
@given(data=st.data())
def test_arbitrary_bytes_into_client_connection(data: st.DataObject):
    client = ClientConnection()
    for spec in data.draw(st.lists(st.sampled_from(SPECS), min_size=1, max_size=3)):
        request = data.draw(message_strategy(spec.request_type))
        client.send_request(request)
    client.receive_data(data.draw(st.binary(max_size=300)))
    try:
        while client.next_response() is not None:
            pass
    except ProtocolError:
        pass


def test_frames_split_at_every_byte_decode_the_same_in_the_server():
    frames = [
        encode_frame(b"\x95\x03\x00\x01\xa1c\x81\xa6topics\x91\xa1t"),  # Metadata ["t"]
        encode_frame(b"\x95\x03\x00\x02\xc0\x81\xa6topics\xa1x"),  # answerable: bad topics
    ]
    stream = b"".join(frames)
    expected = ServerConnection()
    expected.receive_data(stream)
    reference = [expected.next_request(), expected.next_request()]
    for cut in range(len(stream) + 1):
        server = ServerConnection()
        events = []
        for piece in (stream[:cut], stream[cut:]):
            server.receive_data(piece)
            while (event := server.next_request()) is not None:
                events.append(event)
        assert [repr(e) for e in events] == [repr(e) for e in reference]
