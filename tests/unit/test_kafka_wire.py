"""The Kafka wire codec (broker/kafka/wire.py): framing, request and response headers,
unsupported versions, and hostile bytes.

Requests are encoded here with kio, the way a Kafka client lays them out: int32 size,
request header v1 (or v2 with tagged fields for flexible versions), body. The fuzz tests
feed random bytes, random valid requests of every advertised (api, version) and mutations
of valid frames to `KafkaServerConnection`: the only exception allowed out is
`KafkaProtocolError`.
"""

from __future__ import annotations

import datetime
import io
import struct

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsRequestV3
from kio.schema.metadata.v1.request import MetadataRequest as MetadataRequestV1
from kio.schema.metadata.v1.request import MetadataRequestTopic as MetadataRequestTopicV1
from kio.schema.metadata.v12.request import MetadataRequest as MetadataRequestV12
from kio.schema.metadata.v12.request import MetadataRequestTopic as MetadataRequestTopicV12
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import Records

from broker.kafka import versions
from broker.kafka.dispatcher import KafkaDispatcher
from broker.kafka.translation import (
    KafkaHeader,
    default_response,
    request_class,
    response_class,
)
from broker.kafka.wire import (
    KafkaAnswerable,
    KafkaProtocolError,
    KafkaRequest,
    KafkaServerConnection,
)
from client.protocol.errors import ErrorCode

st.register_type_strategy(Records, st.binary(max_size=64).map(Records))

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def encode_request(
    request, correlation_id: int = 7, client_id: str | None = "test", api_version=None
) -> bytes:
    """A Kafka request frame for the kio `request` (its own version unless told)."""
    cls = type(request)
    header_cls = cls.__header_schema__
    out = io.BytesIO()
    entity_writer(header_cls)(
        out,
        header_cls(
            request_api_key=cls.__api_key__,
            request_api_version=cls.__version__ if api_version is None else api_version,
            correlation_id=correlation_id,
            client_id=client_id,
        ),
    )
    entity_writer(cls)(out, request)
    body = out.getvalue()
    return struct.pack(">i", len(body)) + body


def decode_response(frame: bytes, api_key: int, version: int):
    """(correlation id, header size, kio response) of a response frame."""
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    cls = response_class(api_key, version)
    header, used = entity_reader(cls.__header_schema__)(frame, 4)
    response, body_size = entity_reader(cls)(frame, 4 + used)
    assert 4 + used + body_size == len(frame)
    return header.correlation_id, used, response


def connection(**kwargs) -> KafkaServerConnection:
    return KafkaServerConnection(supported=versions.supported, **kwargs)


def metadata_v1(*names: str):
    return MetadataRequestV1(topics=tuple(MetadataRequestTopicV1(name=n) for n in names))


def metadata_v12(*names: str):
    return MetadataRequestV12(
        topics=tuple(MetadataRequestTopicV12(topic_id=None, name=n) for n in names),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


# -- framing and headers ---------------------------------------------------------------


def test_a_request_is_decoded_once_all_its_bytes_are_in():
    frame = encode_request(metadata_v1("a", "b"), correlation_id=42, client_id="me")
    conn = connection()
    for byte in frame[:-1]:
        conn.receive_data(bytes([byte]))
        assert conn.next_request() is None
    conn.receive_data(frame[-1:])
    event = conn.next_request()
    assert isinstance(event, KafkaRequest)
    header, request = event
    assert header == KafkaHeader(3, 1, 42, "me")
    assert request == metadata_v1("a", "b")
    assert conn.next_request() is None


def test_pipelined_requests_come_out_in_order_with_header_v1_and_v2():
    conn = connection()
    conn.receive_data(
        encode_request(metadata_v1("x"), correlation_id=1)
        + encode_request(metadata_v12("y"), correlation_id=2, client_id=None)
        + encode_request(
            ApiVersionsRequestV3(client_software_name="c", client_software_version="1"),
            correlation_id=3,
        )
    )
    first, second, third = conn.next_request(), conn.next_request(), conn.next_request()
    assert conn.next_request() is None
    assert (first.header.api_version, first.request) == (1, metadata_v1("x"))
    assert second.header == KafkaHeader(3, 12, 2, None)  # flexible: header v2
    assert second.request == metadata_v12("y")
    assert third.header.api_key == 18 and third.request.client_software_name == "c"


def test_header_v2_with_tagged_fields_is_read():
    """A flexible request header may carry tagged fields (we skip them)."""
    plain = encode_request(metadata_v12("t"), client_id="cid")
    header_end = 4 + 2 + 2 + 4 + 2 + 3  # size, key, version, correlation id, client id
    assert plain[header_end] == 0  # no tagged fields
    tagged = plain[:header_end] + bytes([1, 5, 2, 0xAB, 0xCD]) + plain[header_end + 1 :]
    tagged = struct.pack(">i", len(tagged) - 4) + tagged[4:]
    conn = connection()
    conn.receive_data(tagged)
    event = conn.next_request()
    assert event.header.client_id == "cid" and event.request == metadata_v12("t")


def test_responses_use_header_v0_or_v1_and_api_versions_always_v0():
    conn = connection()
    for api_key, version, header_size in [(3, 1, 4), (3, 12, 5), (18, 0, 4), (18, 3, 4)]:
        response = default_response(response_class(api_key, version), 0)
        frame = conn.encode_response(KafkaHeader(api_key, version, 99, None), response)
        correlation_id, used, decoded = decode_response(frame, api_key, version)
        assert (correlation_id, used, decoded) == (99, header_size, response)


def test_encode_error_fills_the_top_level_error_code():
    conn = connection()
    frame = conn.encode_error(KafkaHeader(1, 12, 5, None), 42, "bad")
    _, _, response = decode_response(frame, 1, 12)
    assert response.error_code == 42 and response.responses == ()


# -- unsupported versions --------------------------------------------------------------


def test_api_versions_of_an_unknown_version_gets_the_list_in_a_v0_body():
    body = struct.pack(">hhi", 18, 77, 5) + b"\x00\x01c" + b"whatever comes next"
    conn = connection()
    conn.receive_data(struct.pack(">i", len(body)) + body)
    event = conn.next_request()
    assert isinstance(event, KafkaAnswerable)
    assert event.correlation_id == 5 and event.error_code == 35
    frame = event.response_frame()
    header, used = entity_reader(ApiVersionsResponseV0.__header_schema__)(frame, 4)
    response, _ = entity_reader(ApiVersionsResponseV0)(frame, 4 + used)
    assert header.correlation_id == 5
    assert response.error_code == 35
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert advertised == versions.supported()
    assert conn.next_request() is None  # the connection goes on


@pytest.mark.parametrize("api_key,version", [(1, 18), (3, 13)], ids=["fetch", "metadata"])
def test_an_unsupported_version_with_a_top_level_error_code_is_answered(api_key, version):
    """Fetch v18 (KRaft followers) and Metadata v13 are not advertised; their responses
    have a top-level error code, so the client hears why."""
    assert versions.supported()[api_key][1] < version
    body = struct.pack(">hhi", api_key, version, 8) + b"\x00\x00" + b"\x00" + b"rest"
    conn = connection()
    conn.receive_data(struct.pack(">i", len(body)) + body)
    event = conn.next_request()
    assert isinstance(event, KafkaAnswerable)
    _, _, response = decode_response(event.response_frame(), api_key, version)
    assert response.error_code == 35


@pytest.mark.parametrize(
    "api_key,version",
    [(0, 10), (0, 2), (9999, 0), (-1, 0), (2, 9), (2, 0)],
    ids=["produce v10", "produce v2", "unknown key", "negative key", "list offsets v9", "v0"],
)
def test_other_unsupported_requests_close_the_connection(api_key, version):
    body = struct.pack(">hhi", api_key, version, 1) + b"\x00\x00"
    conn = connection()
    conn.receive_data(struct.pack(">i", len(body)) + body)
    with pytest.raises(KafkaProtocolError, match="not supported"):
        conn.next_request()


# -- broken streams --------------------------------------------------------------------


def test_an_oversized_frame_is_refused_before_its_body_arrives():
    conn = connection(max_frame_bytes=1024)
    conn.receive_data(struct.pack(">i", 1025))
    with pytest.raises(KafkaProtocolError, match="over the limit"):
        conn.next_request()
    conn.receive_data(encode_request(metadata_v1("a")))
    with pytest.raises(KafkaProtocolError):  # broken for good
        conn.next_request()


def test_a_negative_size_is_refused():
    conn = connection()
    conn.receive_data(struct.pack(">i", -5) + b"xxxx")
    with pytest.raises(KafkaProtocolError):
        conn.next_request()


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"\x00\x03",
        struct.pack(">hhi", 3, 1, 1) + b"\x00\x05ab",  # client id runs past the frame
        struct.pack(">hhi", 3, 1, 1) + b"\x00\x01a" + b"\x7f\xff\xff\xff",  # huge array
        struct.pack(">hhi", 3, 12, 1) + b"\x00\x01a\x00" + b"\xff\xff\xff\xff\xff\xff",
    ],
    ids=["empty", "short header", "client id", "array length", "varint"],
)
def test_unreadable_requests_raise_the_protocol_error(body):
    conn = connection()
    conn.receive_data(struct.pack(">i", len(body)) + body)
    with pytest.raises(KafkaProtocolError):
        conn.next_request()


def test_a_partial_frame_when_the_peer_closes_is_an_error():
    conn = connection()
    conn.receive_data(encode_request(metadata_v1("a"))[:-2])
    assert conn.next_request() is None
    conn.receive_data(b"")
    assert conn.peer_closed
    with pytest.raises(KafkaProtocolError, match="partial frame"):
        conn.next_request()


# -- fuzz ------------------------------------------------------------------------------


def _advertised() -> list[tuple[int, int]]:
    return [
        (key, version)
        for key, (low, high) in sorted(versions.supported().items())
        for version in range(low, high + 1)
    ]


ADVERTISED = _advertised()


@st.composite
def valid_requests(draw):
    api_key, version = draw(st.sampled_from(ADVERTISED))
    return draw(st.from_type(request_class(api_key, version)))


def drain(conn: KafkaServerConnection) -> list:
    """Every event; KafkaProtocolError is the only exception allowed out."""
    events = []
    try:
        while (event := conn.next_request()) is not None:
            assert isinstance(event, KafkaRequest | KafkaAnswerable)
            if isinstance(event, KafkaAnswerable):
                event.response_frame()
            events.append(event)
    except KafkaProtocolError:
        pass
    return events


def test_every_advertised_version_has_kio_classes_and_a_last_resort_error_answer():
    versions.check_against_kio()
    conn = connection()
    for api_key, version in ADVERTISED:
        frame = conn.encode_error(KafkaHeader(api_key, version, 3, None), 35, "")
        assert decode_response(frame, api_key, version)[0] == 3


@FUZZ
@given(request=valid_requests(), correlation_id=st.integers(0, 2**31 - 1))
def test_valid_requests_of_every_advertised_version_round_trip(request, correlation_id):
    conn = connection()
    conn.receive_data(encode_request(request, correlation_id=correlation_id))
    event = conn.next_request()
    assert isinstance(event, KafkaRequest)
    assert event.header.correlation_id == correlation_id
    assert event.request == request


@FUZZ
@given(data=st.binary(max_size=300), chunks=st.integers(1, 5))
def test_random_bytes_raise_nothing_but_the_protocol_error(data, chunks):
    conn = connection()
    step = max(1, len(data) // chunks)
    for start in range(0, len(data), step):
        conn.receive_data(data[start : start + step])
        drain(conn)
    conn.receive_data(b"")
    drain(conn)


@FUZZ
@given(data=st.binary(max_size=300))
def test_random_bodies_behind_a_valid_header_raise_nothing_but_the_protocol_error(data):
    for api_key, version in ADVERTISED[:: max(1, len(ADVERTISED) // 12)]:
        body = struct.pack(">hhi", api_key, version, 1) + data
        conn = connection()
        conn.receive_data(struct.pack(">i", len(body)) + body)
        drain(conn)


@FUZZ
@given(
    request=valid_requests(),
    mutations=st.lists(
        st.tuples(
            st.sampled_from(["flip", "truncate", "insert", "delete", "resize"]),
            st.integers(0, 10_000),
            st.binary(min_size=1, max_size=8),
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_mutated_valid_frames_raise_nothing_but_the_protocol_error(request, mutations):
    frame = bytearray(encode_request(request))
    for kind, position, data in mutations:
        if not frame:
            break
        position %= len(frame)
        if kind == "flip":
            frame[position] ^= data[0] or 0xFF
        elif kind == "truncate":
            del frame[position:]
        elif kind == "insert":
            frame[position:position] = data
        elif kind == "delete":
            del frame[position : position + len(data)]
        else:  # make the size prefix match the mutated body, so the body gets decoded
            if len(frame) >= 4:
                frame[:4] = struct.pack(">i", len(frame) - 4)
    conn = connection()
    conn.receive_data(bytes(frame))
    drain(conn)
    conn.receive_data(b"")
    drain(conn)


# -- the dispatcher (dispatcher.py) with a stand-in for the native handlers -------------


def _fetch_v12(session_epoch: int = -1, session_id: int = 0, forgotten: tuple = ()):
    from kio.schema.fetch.v12 import request as fetch

    return fetch.FetchRequest(
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=(
            fetch.FetchTopic(
                topic="t",
                partitions=(
                    fetch.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=9),
                ),
            ),
        ),
        forgotten_topics_data=tuple(
            fetch.ForgottenTopic(topic=topic, partitions=partitions)
            for topic, partitions in forgotten
        ),
    )


def _produce_v3(acks: int):
    from kio.schema.produce.v3 import request as produce

    return produce.ProduceRequest(
        acks=acks,
        timeout=datetime.timedelta(seconds=1),
        topic_data=(
            produce.TopicProduceData(
                name="t", partition_data=(produce.PartitionProduceData(index=2, records=b"x"),)
            ),
        ),
    )


async def test_the_dispatcher_translates_replies_errors_and_failures():
    from client.protocol import messages as m
    from server_common.network import NO_RESPONSE, Reply, error_answer

    answers: list = []
    seen: list = []

    async def native(header, request):
        seen.append((header, request))
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    dispatch = KafkaDispatcher(native)
    header = KafkaHeader(1, 12, 9, "c")

    reply = Reply()
    answers.append(reply)
    outcome = await dispatch(header, _fetch_v12())
    native_header, native_request = seen[-1]
    assert (native_header.api_key, native_header.correlation_id) == (1, 9)
    assert native_request.replica_id == -1 and native_request.topics[0].topic == "t"
    assert isinstance(outcome, Reply) and not outcome.done
    reply.set(
        m.FetchResponse(
            throttle_time_ms=0,
            error_code=0,
            topics=[
                m.FetchResponseTopic(
                    topic="t",
                    partitions=[
                        m.FetchResponsePartition(
                            partition=0,
                            error_code=0,
                            high_watermark=4,
                            last_stable_offset=4,
                            log_start_offset=0,
                            records=b"",
                        )
                    ],
                )
            ],
        )
    )
    translated = await outcome.wait()
    assert translated.session_id == 0
    assert translated.responses[0].partitions[0].high_watermark == 4

    answers.append(error_answer(ErrorCode.NOT_CONTROLLER, "x"))
    assert (await dispatch(header, _fetch_v12())).error_code == ErrorCode.NOT_CONTROLLER

    answers.append(RuntimeError("a bug"))
    assert (await dispatch(header, _fetch_v12())).error_code == ErrorCode.UNKNOWN_SERVER_ERROR

    # Fetch sessions pass through: id, epoch and forgotten partitions in, the session id
    # or a session error (top level, no partitions) out.
    answers.append(m.FetchResponse(throttle_time_ms=0, error_code=70, topics=[], session_id=0))
    incremental = await dispatch(
        header, _fetch_v12(session_epoch=4, session_id=77, forgotten=(("u", (1, 2)),))
    )
    native_request = seen[-1][1]
    assert (native_request.session_id, native_request.session_epoch) == (77, 4)
    assert native_request.forgotten_topics_data == [
        m.FetchForgottenTopic(topic="u", partitions=[1, 2])
    ]
    assert incremental.error_code == 70 and incremental.responses == ()
    answers.append(m.FetchResponse(throttle_time_ms=0, error_code=0, topics=[], session_id=77))
    assert (await dispatch(header, _fetch_v12(session_epoch=5, session_id=77))).session_id == 77

    produce_header = KafkaHeader(0, 3, 10, None)
    answers.append(NO_RESPONSE)
    assert await dispatch(produce_header, _produce_v3(acks=0)) is NO_RESPONSE
    answers.append(error_answer(ErrorCode.INVALID_REQUEST, "x"))
    failed = await dispatch(produce_header, _produce_v3(acks=1))
    partition = failed.responses[0].partition_responses[0]
    assert (partition.index, partition.error_code, partition.base_offset) == (2, 42, -1)
