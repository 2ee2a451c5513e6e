"""The sans-IO client and server connection objects, driven by hand (no sockets)."""

from __future__ import annotations

import pytest

from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.codec import RequestHeader, encode_request, encode_response
from client.protocol.connection import (
    Answerable,
    ClientConnection,
    ReceivedRequest,
    ServerConnection,
)
from client.protocol.errors import (
    CorruptMessageError,
    ErrorCode,
    FrameTooLargeError,
    FramingError,
    InvalidResponseError,
    TributaryError,
)
from client.protocol.framing import encode_frame


def metadata(*topics: str) -> m.MetadataRequest:
    return m.MetadataRequest(topics=list(topics))


def metadata_response(*topics: str) -> m.MetadataResponse:
    return m.MetadataResponse(
        brokers=[m.MetadataResponseBroker(node_id=1, host="localhost", port=9092, rack=None)],
        cluster_id="cluster",
        controller_id=1,
        topics=[
            m.MetadataResponseTopic(error_code=0, name=name, is_internal=False, partitions=[])
            for name in topics
        ],
    )


def serve(server: ServerConnection) -> bytes:
    """Answer every complete request: Metadata echoes its topics, errors are answered."""
    out = b""
    while (event := server.next_request()) is not None:
        if isinstance(event, Answerable):
            out += event.response_frame()
        else:
            header, request = event
            out += server.send_response(header.correlation_id, metadata_response(*request.topics))
    return out


def test_client_and_server_talk_through_bytes():
    client, server = ClientConnection("app"), ServerConnection()
    sent = [client.send_request(metadata(f"t{i}")) for i in range(5)]
    assert [cid for cid, _ in sent] == [0, 1, 2, 3, 4]
    assert client.in_flight == 5
    server.receive_data(b"".join(frame for _, frame in sent))
    client.receive_data(serve(server))
    responses = []
    while (item := client.next_response()) is not None:
        responses.append(item)
    assert responses == [(i, metadata_response(f"t{i}")) for i in range(5)]
    assert client.in_flight == 0


def test_server_sees_header_and_request():
    client, server = ClientConnection("app"), ServerConnection()
    _, frame = client.send_request(metadata("orders"))
    server.receive_data(frame)
    event = server.next_request()
    assert event == ReceivedRequest(RequestHeader(ApiKey.METADATA, 0, 0, "app"), metadata("orders"))
    assert server.next_request() is None


def test_server_does_not_decode_a_frame_before_it_is_complete():
    _, frame = ClientConnection().send_request(metadata("a", "b"))
    server = ServerConnection()
    for byte in frame[:-1]:
        server.receive_data(bytes([byte]))
        assert server.next_request() is None
    server.receive_data(frame[-1:])
    assert server.next_request().request == metadata("a", "b")


def test_many_requests_in_one_receive_all_come_out_in_order():
    client, server = ClientConnection(), ServerConnection()
    frames = b"".join(client.send_request(metadata(f"t{i}"))[1] for i in range(2000))
    server.receive_data(frames)
    ids = []
    while (event := server.next_request()) is not None:
        ids.append(event.header.correlation_id)
        assert event.request == metadata(f"t{event.header.correlation_id}")
    assert ids == list(range(2000))


def test_bad_body_is_answerable_and_the_connection_carries_on():
    server = ServerConnection()
    bad = encode_frame(b"\x95\x03\x00\x09\xc0\x81\xa6topics\xa3str")  # topics: "str"
    good = encode_request(RequestHeader(ApiKey.METADATA, 0, 10, None), metadata("x"))
    server.receive_data(bad + good)
    event = server.next_request()
    assert isinstance(event, Answerable)
    assert (event.correlation_id, event.error_code) == (9, ErrorCode.INVALID_REQUEST)
    assert server.next_request().request == metadata("x")

    client = ClientConnection(first_correlation_id=9)
    client.send_request(metadata("x"))
    client.receive_data(event.response_frame())
    correlation_id, error = client.next_response()
    assert correlation_id == 9
    assert isinstance(error, TributaryError)
    assert error.code is ErrorCode.INVALID_REQUEST
    assert "topics: expected list[str], got str" in error.message


def test_unknown_api_is_answered_with_unsupported_version():
    server = ServerConnection()
    server.receive_data(encode_frame(b"\x95\xcd\x03\xe7\x00\x05\xc0\x80"))  # api key 999
    event = server.next_request()
    assert isinstance(event, Answerable)
    assert (event.correlation_id, event.error_code) == (5, ErrorCode.UNSUPPORTED_VERSION)


def test_broken_framing_raises_and_stays_broken():
    server = ServerConnection(max_frame_bytes=100)
    server.receive_data((101).to_bytes(4, "big"))
    with pytest.raises(FrameTooLargeError):
        server.next_request()
    server.receive_data(encode_request(RequestHeader(3, 0, 1, None), metadata()))
    with pytest.raises(FrameTooLargeError):
        server.next_request()


def test_unreadable_envelope_closes_the_server_connection():
    server = ServerConnection()
    server.receive_data(encode_frame(b"\xc1"))
    with pytest.raises(CorruptMessageError):
        server.next_request()


def test_peer_closing_mid_frame_is_a_framing_error():
    _, frame = ClientConnection().send_request(metadata("a"))
    server = ServerConnection()
    server.receive_data(frame[:5])
    server.receive_data(b"")
    assert server.peer_closed
    with pytest.raises(FramingError, match="partial frame"):
        server.next_request()

    clean = ServerConnection()
    clean.receive_data(b"")
    assert clean.next_request() is None


def test_acks_0_produce_is_not_tracked():
    client = ClientConnection()
    correlation_id, _ = client.send_request(m.ProduceRequest(acks=0, timeout_ms=1, topics=[]))
    assert client.in_flight == 0
    next_id, _ = client.send_request(metadata())
    assert next_id == correlation_id + 1
    client.receive_data(encode_response(next_id, metadata_response()))
    assert client.next_response() == (next_id, metadata_response())


def test_response_out_of_order_is_a_framing_error():
    client = ClientConnection()
    client.send_request(metadata("a"))
    client.send_request(metadata("b"))
    client.receive_data(encode_response(1, metadata_response("b")))
    with pytest.raises(FramingError, match="expected the response for correlation id 0"):
        client.next_response()
    with pytest.raises(FramingError):  # and stays broken
        client.send_request(metadata())


def test_response_without_request_is_a_framing_error():
    client = ClientConnection()
    client.receive_data(encode_response(0, metadata_response()))
    with pytest.raises(FramingError, match="no request in flight"):
        client.next_response()


def test_response_body_of_the_wrong_shape_is_invalid_response():
    client = ClientConnection()
    client.send_request(metadata("a"))
    client.receive_data(encode_response(0, m.HeartbeatResponse(throttle_time_ms=0, error_code=0)))
    with pytest.raises(InvalidResponseError, match="MetadataResponse"):
        client.next_response()


def test_correlation_ids_wrap_at_int32():
    client = ClientConnection(first_correlation_id=(1 << 31) - 1)
    assert client.send_request(metadata())[0] == (1 << 31) - 1
    assert client.send_request(metadata())[0] == 0


def test_failed_encode_leaves_the_client_usable():
    client = ClientConnection()
    with pytest.raises(TypeError):
        client.send_request(m.MetadataRequest(topics=[object()]))  # type: ignore[list-item]
    assert client.in_flight == 0
    assert client.send_request(metadata())[0] == 0
