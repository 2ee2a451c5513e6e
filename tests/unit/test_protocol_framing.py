"""Frames come out whole, in order, however the bytes are cut; oversized ones are refused."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from client.protocol.errors import FrameTooLargeError, FramingError
from client.protocol.framing import LARGE_FRAME_BYTES, FrameDecoder, encode_frame


def drain(decoder: FrameDecoder) -> list[bytes]:
    frames = []
    while (frame := decoder.next_frame()) is not None:
        frames.append(frame)
    return frames


def test_frame_split_at_every_byte_boundary_decodes_the_same():
    payload = bytes(range(256)) * 3
    frame = encode_frame(payload)
    for cut in range(len(frame) + 1):
        decoder = FrameDecoder()
        decoder.feed(frame[:cut])
        assert drain(decoder) == ([payload] if cut == len(frame) else [])
        decoder.feed(frame[cut:])
        assert drain(decoder) == ([] if cut == len(frame) else [payload])
        assert decoder.buffered_bytes == 0


@settings(max_examples=50, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=300), max_size=20),
    chunk_sizes=st.lists(st.integers(1, 97), min_size=1, max_size=10),
)
def test_any_chunking_of_a_stream_yields_the_same_frames(payloads, chunk_sizes):
    stream = b"".join(encode_frame(p) for p in payloads)
    decoder = FrameDecoder()
    out: list[bytes] = []
    position, turn = 0, 0
    while position < len(stream):
        size = chunk_sizes[turn % len(chunk_sizes)]
        decoder.feed(stream[position : position + size])
        out += drain(decoder)
        position += size
        turn += 1
    assert out == payloads


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(
        st.sampled_from([0, 5, LARGE_FRAME_BYTES - 1, LARGE_FRAME_BYTES, LARGE_FRAME_BYTES + 3]),
        max_size=6,
    ),
    chunk_sizes=st.lists(st.integers(1, 3 * LARGE_FRAME_BYTES), min_size=1, max_size=6),
)
def test_large_frames_assembled_in_place_come_out_the_same(sizes, chunk_sizes):
    payloads = [bytes([i]) * size for i, size in enumerate(sizes)]
    stream = b"".join(encode_frame(p) for p in payloads)
    decoder = FrameDecoder(assemble_large=True)
    out: list[bytes] = []
    position, turn = 0, 0
    while position < len(stream):
        size = chunk_sizes[turn % len(chunk_sizes)]
        decoder.feed(stream[position : position + size])
        incomplete = decoder.incomplete_frame()
        if incomplete is not None:  # what a server reserves: the next frame's true size
            assert incomplete[0] == 4 + len(payloads[len(out)])
        out += drain(decoder)
        position += size
        turn += 1
    assert out == payloads
    assert decoder.buffered_bytes == 0


def test_many_small_frames_in_one_feed_all_come_out_in_order():
    payloads = [i.to_bytes(4, "big") * (i % 7) for i in range(20_000)]
    decoder = FrameDecoder()
    decoder.feed(b"".join(encode_frame(p) for p in payloads))
    assert drain(decoder) == payloads
    assert decoder.buffered_bytes == 0


def test_one_big_frame_in_small_pieces():
    payload = b"r" * (3 * 1024 * 1024 + 7)
    frame = encode_frame(payload)
    decoder = FrameDecoder()
    for start in range(0, len(frame), 8192):
        decoder.feed(frame[start : start + 8192])
        result = decoder.next_frame()
    assert result == payload


def test_frame_over_the_limit_is_refused_before_its_body_arrives():
    decoder = FrameDecoder(max_frame_bytes=1000)
    decoder.feed(encode_frame(b"x" * 1000)[:10])
    assert decoder.next_frame() is None  # exactly at the limit is fine, just incomplete
    decoder = FrameDecoder(max_frame_bytes=1000)
    decoder.feed((1001).to_bytes(4, "big"))
    with pytest.raises(FrameTooLargeError) as caught:
        decoder.next_frame()
    assert (caught.value.length, caught.value.limit) == (1001, 1000)
    assert isinstance(caught.value, FramingError)
    with pytest.raises(FrameTooLargeError):  # and it stays refused
        decoder.next_frame()


def test_garbage_length_prefix_does_not_allocate():
    decoder = FrameDecoder()
    decoder.feed(b"\xff\xff\xff\xff")
    with pytest.raises(FrameTooLargeError):
        decoder.next_frame()


def test_empty_frame():
    decoder = FrameDecoder()
    decoder.feed(encode_frame(b"") * 3)
    assert drain(decoder) == [b"", b"", b""]
