"""A hostile count in a Kafka request body gets the protocol error, never an aborted process.

kio's native reader preallocates an array from its count before reading the elements; a
failed allocation aborts the interpreter. `broker/kafka/bounds.py` checks every count and
length first. The frames with huge counts are decoded in a child process under a memory
cap (RLIMIT_AS), where such an allocation always fails: if the check missed one, the
child dies and the test says which frame killed it.
"""

from __future__ import annotations

import dataclasses
import datetime
import multiprocessing
import resource
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.serial import entity_reader
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
)
from kio.static.primitive import Records

from broker.kafka.bounds import BoundsError, check_bounds, plan_for
from broker.kafka.translation import request_class
from broker.kafka.wire import KafkaProtocolError, KafkaRequest
from tests.unit.test_kafka_wire import (
    ADVERTISED,
    FUZZ,
    connection,
    encode_request,
    valid_requests,
)

MEMORY_CAP = 1_500_000_000
# The frame found on main: ElectLeaders v0, one topic whose partitions array claims
# 1.8 billion int32s (kio asked for 14 GB and aborted).
REPRO_FRAME = bytes.fromhex(
    "00000020002b0000000000070004746573740000000100045dc282766a0000000000ea60"
)
HUGE_INT32 = struct.pack(">i", 2**31 - 1)
HUGE_UVARINT = b"\xff\xff\xff\xff\x0f"  # 2**32 - 1: a compact count of 4 billion
_HEADER_START = 4 + 8  # size, api key, api version, correlation id


# -- a request of every advertised version with every array, string and tag present ----


def _sample(kafka_type: str) -> Any:
    values = {
        "string": "ab",
        "bytes": b"xy",
        "records": Records(b"xy"),
        "bool": True,
        "uuid": uuid.UUID(int=5),
        "timedelta_i32": datetime.timedelta(milliseconds=5),
        "timedelta_i64": datetime.timedelta(milliseconds=5),
    }
    return values.get(kafka_type, 3)


def full_instance(cls: type) -> Any:
    """An instance of kio class `cls` whose arrays have two elements, nullable fields a
    value and tagged fields a value other than their default (so each is written)."""
    assert all(get_field_tag(f) is None or f.default != 3 for f in dataclasses.fields(cls))
    values = {}
    for field in dataclasses.fields(cls):
        field_class = classify_field(field)
        if isinstance(field_class, EntityField | EntityTupleField):
            value = full_instance(field_class.type_)
        else:
            value = _sample(get_schema_field_type(field))
        if isinstance(field_class, EntityTupleField | PrimitiveTupleField):
            value = (value, value)
        values[field.name] = value
    return cls(**values)


def full_frames() -> Iterator[tuple[tuple[int, int], bytes]]:
    for api_key, version in ADVERTISED:
        yield (api_key, version), encode_request(full_instance(request_class(api_key, version)))


def huge_count_mutations(frame: bytes) -> Iterator[bytes]:
    """`frame` with a huge int32 written over each body position, and a huge unsigned
    varint in place of each body byte (size prefix fixed): every array count, legacy or
    compact, becomes huge in one of them."""
    for position in range(_HEADER_START, len(frame)):
        legacy = bytearray(frame)
        legacy[position : position + 4] = HUGE_INT32
        legacy[:4] = struct.pack(">i", len(legacy) - 4)
        yield bytes(legacy)
        compact = bytearray(frame)
        compact[position : position + 1] = HUGE_UVARINT
        compact[:4] = struct.pack(">i", len(compact) - 4)
        yield bytes(compact)


# -- the capped child --------------------------------------------------------------------


def _decode_outcome(frame: bytes) -> str:
    conn = connection()
    conn.receive_data(frame)
    try:
        event = conn.next_request()
    except KafkaProtocolError:
        return "protocol error"
    return "request" if isinstance(event, KafkaRequest) else type(event).__name__


def _capped_decoder(pipe: Any) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    while (frames := pipe.recv()) is not None:
        pipe.send([_decode_outcome(frame) for frame in frames])


class CappedDecoder:
    """A child process that decodes frames with the Kafka listener's decoder under a
    memory cap; `decode` fails the test if a batch kills it."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self._pipe, child_end = context.Pipe()
        self._process = context.Process(target=_capped_decoder, args=(child_end,), daemon=True)
        self._process.start()
        child_end.close()

    def decode(self, frames: list[bytes], what: str) -> list[str]:
        assert self._process.is_alive(), "the capped decoder died earlier"
        self._pipe.send(frames)
        try:
            return list(self._pipe.recv())
        except EOFError:
            self._process.join(60)
            pytest.fail(
                f"decoding {what} killed the capped child (exit code {self._process.exitcode})"
            )

    def close(self) -> None:
        if self._process.is_alive():
            self._pipe.send(None)
        self._process.join(60)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(10)


@pytest.fixture(scope="module")
def capped() -> Iterator[CappedDecoder]:
    decoder = CappedDecoder()
    yield decoder
    decoder.close()


# -- tests -------------------------------------------------------------------------------


def test_the_repro_frame_gets_the_protocol_error_and_the_capped_process_lives(capped):
    assert capped.decode([REPRO_FRAME], "the repro frame") == ["protocol error"]
    conn = connection()
    conn.receive_data(REPRO_FRAME)
    with pytest.raises(KafkaProtocolError, match="array of 1778384896 elements"):
        conn.next_request()


def test_every_advertised_request_class_has_a_plan():
    for api_key, version in ADVERTISED:
        plan_for(request_class(api_key, version))


@pytest.mark.parametrize(("api_version", "frame"), list(full_frames()), ids=str)
def test_a_full_request_of_every_version_walks_where_kio_reads(api_version, frame):
    cls = request_class(*api_version)
    conn = connection()
    conn.receive_data(frame)
    event = conn.next_request()
    assert isinstance(event, KafkaRequest)
    assert event.request == full_instance(cls)
    start = _body_start(frame)
    _, size = entity_reader(cls)(frame, start)
    assert check_bounds(cls, frame, start) == start + size == len(frame)


def test_huge_counts_at_every_position_of_every_version_never_kill_the_decoder(capped):
    refused = 0
    for api_version, frame in full_frames():
        mutated = list(huge_count_mutations(frame))
        outcomes = capped.decode(mutated, f"a mutation of api {api_version}")
        assert set(outcomes) <= {"protocol error", "request"}
        refused += outcomes.count("protocol error")
    assert refused > len(ADVERTISED)


@FUZZ
@given(request=valid_requests())
def test_valid_requests_walk_exactly_what_kio_reads(request):
    cls = type(request)
    frame = encode_request(request)
    start = _body_start(frame)
    _, size = entity_reader(cls)(frame, start)
    assert check_bounds(cls, frame, start) == start + size


@FUZZ
@given(
    request=valid_requests(),
    position=st.integers(0, 10_000),
    huge=st.sampled_from([HUGE_INT32, HUGE_UVARINT, b"\x80\x80\x80\x80\x7f", b"\x7f\xff"]),
    overwrite=st.booleans(),
)
def test_generated_requests_with_a_huge_count_never_kill_the_decoder(
    capped, request, position, huge, overwrite
):
    frame = bytearray(encode_request(request))
    position = _HEADER_START + position % max(1, len(frame) - _HEADER_START)
    frame[position : position + (len(huge) if overwrite else 1)] = huge
    frame[:4] = struct.pack(">i", len(frame) - 4)
    outcome = capped.decode([bytes(frame)], f"frame {bytes(frame).hex()}")
    assert outcome[0] in {"protocol error", "request"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"\x00\x00\x00", "length runs past"),  # the int32 count is cut short
        (b"\xff\xff\xff\xfe", "negative length -2"),
        # 7 names need at least 7 * 2 bytes (int16 lengths), 12 are left
        (b"\x00\x00\x00\x07" + b"\x00\x01a" * 4, "array of 7 elements"),
        # 5 names could fit in 12 bytes, but the fifth's length is not there
        (b"\x00\x00\x00\x05" + b"\x00\x01a" * 4, "string length runs past"),
    ],
    ids=["cut count", "negative count", "too many elements", "one element short"],
)
def test_counts_that_do_not_fit_raise_bounds_error(body, message):
    cls = request_class(3, 1)  # Metadata v1: an array of topic names
    with pytest.raises(BoundsError, match=message):
        check_bounds(cls, body, 0)


def test_a_tagged_field_is_walked_within_its_own_size():
    cls = request_class(1, 12)  # Fetch v12: cluster_id is tagged field 0 (a string)
    frame = encode_request(full_instance(cls))
    start = _body_start(frame)
    assert check_bounds(cls, frame, start) == len(frame)
    # The request ends with its tags: count 1, tag 0, size 3, compact string "ab" (3 2 a b)
    assert frame.endswith(b"\x01\x00\x03\x03ab")
    short = frame[:-6] + b"\x01\x00\x02\x03ab"
    with pytest.raises(BoundsError, match="length 2 at byte [0-9]+, 1 bytes left"):
        check_bounds(cls, short, start)
    unknown = frame[:-6] + b"\x01\x07\x03\x03ab"
    with pytest.raises(BoundsError, match="unknown tagged field 7"):
        check_bounds(cls, unknown, start)


def _body_start(frame: bytes) -> int:
    """Where the body starts: after size, api key, version, correlation id, the client
    id ("test") and, for a flexible request, the header's empty tag section."""
    (api_key, version) = struct.unpack_from(">hh", frame, 4)
    flexible = request_class(api_key, version).__flexible__
    return _HEADER_START + 2 + len("test") + (1 if flexible else 0)
