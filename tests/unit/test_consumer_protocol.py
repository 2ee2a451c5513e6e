"""Kafka's ConsumerProtocol bytes (client/protocol/consumer_protocol.py): round trips,
Kafka's layout byte for byte, older and newer versions, and strict size checks on
malformed blobs (a clear `ConsumerProtocolError`, never another exception, never an
allocation from an unchecked length)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client.protocol.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    StickyUserData,
    Subscription,
    decode_assignment,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_sticky_user_data,
    encode_subscription,
)
from client.protocol.errors import ProtocolError
from client.protocol.types import TopicPartition

topics = st.text(min_size=0, max_size=12)
partitions = st.lists(
    st.builds(TopicPartition, topics, st.integers(0, 2**31 - 1)), max_size=10, unique=True
)
user_data = st.none() | st.binary(max_size=20)


def _grouped(tps):
    """As the encoder writes them: by topic, both sorted."""
    return tuple(sorted(tps))


@given(st.lists(topics, max_size=6), user_data, partitions)
def test_subscription_round_trip(names, data, owned):
    subscription = Subscription(names, data, owned)
    decoded = decode_subscription(encode_subscription(subscription), "instance-1")
    assert decoded.topics == tuple(names)
    assert decoded.user_data == data
    assert decoded.owned_partitions == _grouped(owned)
    assert decoded.group_instance_id == "instance-1"


@given(partitions, user_data)
def test_assignment_round_trip(assigned, data):
    decoded = decode_assignment(encode_assignment(Assignment(assigned, data)))
    assert decoded == Assignment(_grouped(assigned), data)


@given(partitions, st.integers(-1, 2**31 - 1))
def test_sticky_user_data_round_trip(previous, generation):
    decoded = decode_sticky_user_data(encode_sticky_user_data(StickyUserData(previous, generation)))
    assert decoded == StickyUserData(_grouped(previous), generation)


def test_kafka_layout_byte_for_byte():
    subscription = Subscription(["ab"], b"\x07", [("ab", 1), ("ab", 0)])
    assert (
        encode_subscription(subscription)
        == (
            b"\x00\x01"  # version 1
            b"\x00\x00\x00\x01" + b"\x00\x02ab"  # topics
            b"\x00\x00\x00\x01\x07"  # user data
            b"\x00\x00\x00\x01" + b"\x00\x02ab" + b"\x00\x00\x00\x02"  # owned: one topic, 2 parts
            b"\x00\x00\x00\x00\x00\x00\x00\x01"
        )
    )
    assert encode_assignment(Assignment([("t", 3)])) == (
        b"\x00\x01" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x01\x00\x00\x00\x03"
        b"\xff\xff\xff\xff"  # null user data
    )


def test_version_0_subscription_has_no_owned_partitions():
    v0 = b"\x00\x00" + b"\x00\x00\x00\x01\x00\x01t" + b"\xff\xff\xff\xff"
    assert decode_subscription(v0) == Subscription(["t"], None, [])


def test_newer_versions_keep_the_known_fields_and_ignore_the_rest():
    v1 = encode_subscription(Subscription(["t"], None, [("t", 0)]))
    newer = b"\x00\x03" + v1[2:] + b"\x00\x00\x00\x05 more fields"
    assert decode_subscription(newer) == Subscription(["t"], None, [("t", 0)])
    a1 = encode_assignment(Assignment([("t", 0)]))
    assert decode_assignment(b"\x00\x02" + a1[2:] + b"xyz") == Assignment([("t", 0)])


def test_trailing_bytes_after_a_known_version_are_an_error():
    data = encode_subscription(Subscription(["t"])) + b"\x00"
    with pytest.raises(ConsumerProtocolError, match="1 unexpected bytes after a version 1"):
        decode_subscription(data)


def test_sticky_user_data_version_0_has_no_generation():
    v1 = encode_sticky_user_data(StickyUserData([("t", 2)], 9))
    assert decode_sticky_user_data(v1[:-4]) == StickyUserData([("t", 2)], -1)


def test_empty_assignment_bytes_are_an_empty_assignment():
    assert decode_assignment(b"") == Assignment()
    with pytest.raises(ConsumerProtocolError, match="version"):
        decode_subscription(b"")


@pytest.mark.parametrize(
    ("blob", "decode"),
    [
        (
            encode_subscription(Subscription(["topic"], b"data", [("topic", 1), ("x", 2)])),
            decode_subscription,
        ),
        (encode_assignment(Assignment([("topic", 1), ("x", 2)], b"ud")), decode_assignment),
        (encode_sticky_user_data(StickyUserData([("topic", 1)], 3)), decode_sticky_user_data),
    ],
)
def test_every_truncation_is_a_clear_error(blob, decode):
    for end in range(1, len(blob)):
        if decode is decode_sticky_user_data and end == len(blob) - 4:
            continue  # a version 0 sticky user data: valid
        with pytest.raises(ConsumerProtocolError, match="malformed"):
            decode(blob[:end])


def test_absurd_counts_fail_before_allocating():
    huge = struct.pack(">hi", 1, 2**31 - 1)
    with pytest.raises(ConsumerProtocolError, match="claims 2147483647 items"):
        decode_subscription(huge + b"\x00" * 16)
    with pytest.raises(ConsumerProtocolError, match="claims 2147483647 items"):
        decode_assignment(huge)
    inner = struct.pack(">hi", 1, 1) + b"\x00\x01t" + struct.pack(">i", 10**9)
    with pytest.raises(ConsumerProtocolError, match="partitions of 't' claims"):
        decode_assignment(inner)


@pytest.mark.parametrize(
    ("blob", "problem"),
    [
        (b"\xff\xff", "unsupported version -1"),
        (struct.pack(">hi", 1, -1), "negative count"),
        (struct.pack(">hih", 1, 1, -1), "null"),
        (struct.pack(">hih", 1, 1, 2) + b"\xff\xfe", "not UTF-8"),
        (struct.pack(">hii", 1, 0, -5), "negative length"),
        (struct.pack(">hii", 1, 0, 100) + b"abc", "needs 100 bytes but only 3 are left"),
    ],
)
def test_malformed_subscriptions_say_what_is_wrong(blob, problem):
    with pytest.raises(ConsumerProtocolError, match=problem):
        decode_subscription(blob)


@given(st.binary(max_size=64))
def test_random_bytes_decode_or_raise_a_protocol_error(blob):
    for decode in (decode_subscription, decode_assignment, decode_sticky_user_data):
        try:
            decode(blob)
        except ConsumerProtocolError as exc:
            assert isinstance(exc, ProtocolError)
            assert "malformed" in str(exc)


@given(st.lists(topics, max_size=4), partitions, st.data())
def test_corrupted_valid_blobs_decode_or_raise_a_protocol_error(names, owned, data):
    blob = bytearray(encode_subscription(Subscription(names, b"u", owned)))
    for _ in range(data.draw(st.integers(1, 4))):
        blob[data.draw(st.integers(0, len(blob) - 1))] = data.draw(st.integers(0, 255))
    try:
        decode_subscription(bytes(blob))
    except ConsumerProtocolError:
        pass
