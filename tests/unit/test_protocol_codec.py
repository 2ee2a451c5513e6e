"""Bad requests and responses fail with the right error class and a useful message."""

from __future__ import annotations

import hypothesis.strategies as st
import msgpack
import pytest
from hypothesis import given, settings

from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.codec import (
    GATHER_MIN_BYTES,
    RequestHeader,
    decode_request,
    decode_response,
    encode_fetch_response,
    encode_produce_request,
    encode_request,
    encode_response,
    expects_response,
)
from client.protocol.errors import (
    AnswerableError,
    CorruptMessageError,
    ErrorCode,
    FramingError,
    InvalidRequestError,
    InvalidResponseError,
    TributaryError,
    UnsupportedApiError,
)
from client.protocol.framing import PREFIX_BYTES, FrameParts
from client.protocol.schema import to_plain


def fetch_request() -> m.FetchRequest:
    return m.FetchRequest(
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=1 << 20,
        topics=[
            m.FetchTopic(
                topic="orders",
                partitions=[
                    m.FetchPartition(partition=p, fetch_offset=10 * p, partition_max_bytes=4096)
                    for p in range(3)
                ],
            )
        ],
    )


def request_body(header: list, body: object) -> bytes:
    """A frame body with a hand-made envelope: [api_key, version, correlation, client, body]."""
    return msgpack.packb([*header, body])


def fetch_body_with(mutate) -> bytes:
    plain = to_plain(fetch_request())
    mutate(plain)
    return request_body([ApiKey.FETCH, 0, 7, "client"], plain)


# --- schema violations: answerable with INVALID_REQUEST, the message names the field -------


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda p: p["topics"][0]["partitions"][2].update(fetch_offset="10"),
            "topics[0].partitions[2].fetch_offset: expected int, got str",
        ),
        (
            lambda p: p["topics"][0]["partitions"][1].update(partition=True),
            "topics[0].partitions[1].partition: expected int, got bool",
        ),
        (
            lambda p: p.update(max_wait_ms=1 << 63),
            "max_wait_ms: expected int64, got 9223372036854775808 (out of range)",
        ),
        (
            lambda p: p["topics"][0].pop("topic"),
            "topics[0].topic: missing required field",
        ),
        (lambda p: p.update(topics=None), "topics: expected list[FetchTopic], got nil"),
        (
            lambda p: p["topics"].append("orders"),
            "topics[1]: expected map (FetchTopic), got str",
        ),
        (lambda p: p.update(min_bytes=1.5), "min_bytes: expected int, got float"),
    ],
)
def test_schema_violation_is_invalid_request_naming_the_field(mutate, message):
    with pytest.raises(InvalidRequestError) as caught:
        decode_request(fetch_body_with(mutate))
    error = caught.value
    assert message in str(error)
    assert (error.api_key, error.api_version, error.correlation_id) == (ApiKey.FETCH, 0, 7)
    assert error.error_code is ErrorCode.INVALID_REQUEST


def test_body_that_is_not_a_map_is_invalid_request():
    with pytest.raises(InvalidRequestError, match="expected map"):
        decode_request(request_body([ApiKey.METADATA, 0, 1, None], [1, 2]))


def test_unknown_fields_are_ignored_and_missing_defaults_are_filled():
    plain = to_plain(fetch_request())
    plain["future_field"] = {"anything": [1, 2]}
    for partition in plain["topics"][0]["partitions"]:
        del partition["current_leader_epoch"]  # has a default (-1)
    del plain["isolation_level"]  # has a default (0)
    header, request = decode_request(request_body([ApiKey.FETCH, 0, 3, "c"], plain))
    assert request == fetch_request()
    assert header == RequestHeader(ApiKey.FETCH, 0, 3, "c")


def test_nullable_fields_accept_nil_and_required_ones_do_not():
    body = request_body([ApiKey.METADATA, 0, 1, None], {"topics": None})
    _, request = decode_request(body)
    assert request == m.MetadataRequest(topics=None)
    with pytest.raises(InvalidRequestError, match="topics: missing required field"):
        decode_request(request_body([ApiKey.METADATA, 0, 1, None], {}))


def test_records_bytes_come_through_and_str_is_not_bytes():
    records = bytes(range(256)) * 10
    request = m.ProduceRequest(
        acks=-1,
        timeout_ms=1000,
        topics=[
            m.ProduceTopic(name="t", partitions=[m.ProducePartition(partition=0, records=records)])
        ],
    )
    frame = encode_request(RequestHeader(ApiKey.PRODUCE, 0, 1, None), request)
    _, decoded = decode_request(frame[PREFIX_BYTES:])
    assert decoded.topics[0].partitions[0].records == records

    plain = to_plain(request)
    plain["topics"][0]["partitions"][0]["records"] = "text"
    with pytest.raises(InvalidRequestError, match=r"records: expected bytes, got str"):
        decode_request(request_body([ApiKey.PRODUCE, 0, 1, None], plain))


# --- unknown APIs: answerable with UNSUPPORTED_VERSION ----------------------------------


@pytest.mark.parametrize(("api_key", "version"), [(998, 0), (999, 0), (ApiKey.FETCH, 1), (3, -1)])
def test_unknown_api_key_or_version_is_unsupported(api_key, version):
    with pytest.raises(UnsupportedApiError) as caught:
        decode_request(request_body([api_key, version, 42, "c"], {}))
    assert caught.value.correlation_id == 42
    assert caught.value.error_code is ErrorCode.UNSUPPORTED_VERSION
    assert isinstance(caught.value, AnswerableError)


# --- unreadable envelopes: the connection must be closed ---------------------------------


@pytest.mark.parametrize(
    "frame_body",
    [
        b"",
        b"\xc1",  # never-used msgpack byte
        b"\x95\x03\x00\x01",  # array of 5, truncated
        msgpack.packb([3, 0, 1, None, {}]) + b"\x00",  # trailing bytes
        msgpack.packb({"api_key": 3}),  # not an array
        msgpack.packb([3, 0, 1, None]),  # 4 items, not 5
        msgpack.packb([3, 0, "1", None, {}]),  # correlation id not an int
        msgpack.packb([3, 0, 1 << 31, None, {}]),  # correlation id not int32
        msgpack.packb([True, 0, 1, None, {}]),  # api key a bool
        msgpack.packb([3, 0, 1, b"client", {}]),  # client id bytes
        msgpack.packb([3, 0, 1, None, msgpack.ExtType(1, b"x")]),  # ext types are refused
        b"\x95" + b"\x91" * 100_000,  # nesting deeper than msgpack's stack
        b"\x95\xa2\xff\xfe\x00\x00\xc0\x80",  # invalid UTF-8 in a str
        b"\x95\x81\x01\x02\x00\x00\xc0\x80",  # int map key
    ],
)
def test_unreadable_envelope_is_corrupt_message(frame_body):
    with pytest.raises(CorruptMessageError):
        decode_request(frame_body)
    assert issubclass(CorruptMessageError, FramingError)


def test_container_size_is_limited():
    body = b"\x95\x03\x00\x01\xc0\xdd" + (2_000_000).to_bytes(4, "big") + b"\xc0" * 2_000_000
    with pytest.raises(CorruptMessageError):
        decode_request(body)


# --- responses -------------------------------------------------------------------------


def test_request_level_error_code_raises_tributary_error():
    frame = encode_response(5, error_code=ErrorCode.INVALID_REQUEST, error_message="bad field")
    with pytest.raises(TributaryError) as caught:
        decode_response(frame[PREFIX_BYTES:], ApiKey.METADATA, 0)
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert caught.value.message == "bad field"
    assert not caught.value.retriable


def test_unknown_error_code_from_broker_maps_to_unknown_server_error():
    frame = encode_response(5, error_code=4242)
    with pytest.raises(TributaryError) as caught:
        decode_response(frame[PREFIX_BYTES:], ApiKey.METADATA, 0)
    assert caught.value.code is ErrorCode.UNKNOWN_SERVER_ERROR


def test_response_body_not_matching_schema_is_invalid_response():
    body = msgpack.packb([5, 0, None, {"brokers": "nope"}])
    with pytest.raises(InvalidResponseError, match="brokers: expected list"):
        decode_response(body, ApiKey.METADATA, 0)
    with pytest.raises(InvalidResponseError):
        decode_response(msgpack.packb([5, 0, None, None]), ApiKey.METADATA, 0)


@pytest.mark.parametrize(
    "frame_body",
    [b"\x94", msgpack.packb([1, 0, None]), msgpack.packb([1, "0", None, {}]), b"\xff\x00"],
)
def test_unreadable_response_envelope_is_corrupt_message(frame_body):
    with pytest.raises(CorruptMessageError):
        decode_response(frame_body, ApiKey.METADATA, 0)


# --- encoding mistakes are the caller's -------------------------------------------------


def test_encoding_a_request_under_the_wrong_api_is_refused():
    with pytest.raises(ValueError, match="cannot be sent"):
        encode_request(RequestHeader(ApiKey.PRODUCE, 0, 1, None), m.MetadataRequest(topics=[]))


def test_response_without_body_needs_an_error_code():
    with pytest.raises(ValueError):
        encode_response(1)


def test_only_acks_0_produce_goes_unanswered():
    produce = m.ProduceRequest(acks=0, timeout_ms=1, topics=[])
    assert not expects_response(produce)
    assert expects_response(m.ProduceRequest(acks=1, timeout_ms=1, topics=[]))
    assert expects_response(m.MetadataRequest(topics=None))


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(
        st.lists(
            st.sampled_from([0, 7, GATHER_MIN_BYTES - 1, GATHER_MIN_BYTES, 300_000]), max_size=4
        ),
        max_size=3,
    )
)
def test_a_gathered_fetch_response_is_the_same_frame(sizes):
    """Big record batches sent as parts of their own: the joined parts are exactly the
    frame `encode_response` builds, whatever the mix of partition sizes (and with a
    read_committed answer's aborted transactions beside them)."""
    response = m.FetchResponse(
        throttle_time_ms=3,
        error_code=0,
        topics=[
            m.FetchResponseTopic(
                topic=f"topic-{t}",
                partitions=[
                    m.FetchResponsePartition(
                        partition=p,
                        error_code=0,
                        high_watermark=10 * p,
                        last_stable_offset=10 * p,
                        log_start_offset=p,
                        records=bytes([p % 256]) * size,
                        # read_committed: structs inside the partition, next to big records
                        aborted_transactions=[
                            m.AbortedTransaction(producer_id=1000 + p, first_offset=5 * p)
                        ]
                        * (p % 3),
                    )
                    for p, size in enumerate(topic_sizes)
                ],
            )
            for t, topic_sizes in enumerate(sizes)
        ],
    )
    frame = encode_fetch_response(41, response)
    joined = b"".join(frame) if isinstance(frame, FrameParts) else frame
    assert joined == encode_response(41, response)
    total = sum(size for topic_sizes in sizes for size in topic_sizes)
    assert isinstance(frame, FrameParts) == (total >= GATHER_MIN_BYTES)


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(
        st.lists(
            st.sampled_from([0, 9, GATHER_MIN_BYTES - 1, GATHER_MIN_BYTES, 200_000]), max_size=3
        ),
        max_size=3,
    ),
    acks=st.sampled_from([-1, 0, 1]),
)
def test_a_gathered_produce_request_is_the_same_frame(sizes, acks):
    request = m.ProduceRequest(
        acks=acks,
        timeout_ms=1500,
        topics=[
            m.ProduceTopic(
                name=f"t{t}",
                partitions=[
                    m.ProducePartition(partition=p, records=bytes([p + 1]) * size)
                    for p, size in enumerate(topic_sizes)
                ],
            )
            for t, topic_sizes in enumerate(sizes)
        ],
    )
    header = RequestHeader(ApiKey.PRODUCE, 0, 12, "client-x")
    frame = encode_produce_request(header, request)
    joined = b"".join(frame) if isinstance(frame, FrameParts) else frame
    assert joined == encode_request(header, request)
    assert decode_request(joined[PREFIX_BYTES:])[1] == request
