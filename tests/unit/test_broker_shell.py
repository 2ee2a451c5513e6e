"""The broker shell end to end, in process (a real broker and controller): long polls,
ordering, and bad input.

Long-poll timing runs on trio's MockClock over the in-memory network; bad input goes
over real loopback TCP, as a hostile client would send it.
"""

from __future__ import annotations

import logging
import struct

import msgpack
import trio
import trio.lowlevel
import trio.testing

from client.connection import open_connection
from client.protocol import messages as m
from client.protocol.codec import RequestHeader, encode_request
from client.protocol.errors import ErrorCode
from client.protocol.framing import encode_frame
from client.protocol.records import Record, build_batch, decode_batches
from tests.unit.broker_harness import TOPIC, connect, running_broker


def produce_request(values, acks=1, partition=0, records: bytes | None = None):
    if records is None:
        records = build_batch([Record(key=None, value=v, timestamp_ms=0) for v in values])
    return m.ProduceRequest(
        acks=acks,
        timeout_ms=5_000,
        topics=[
            m.ProduceTopic(
                name=TOPIC, partitions=[m.ProducePartition(partition=partition, records=records)]
            )
        ],
    )


def fetch_request(offset=0, max_wait_ms=2_000, topic=TOPIC):
    return m.FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        topics=[
            m.FetchTopic(
                topic=topic,
                partitions=[
                    m.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
                ],
            )
        ],
    )


async def test_long_poll_returns_as_soon_as_a_record_arrives(autojump_clock):
    async with running_broker() as (broker, nursery):
        consumer = await connect(broker, nursery)
        producer = await connect(broker, nursery)
        answered_at = []

        async def poll():
            start = trio.current_time()
            response = await consumer.request(fetch_request(max_wait_ms=2_000))
            answered_at.append(trio.current_time() - start)
            return response

        async with trio.open_nursery() as inner:
            inner.start_soon(poll)
            await trio.sleep(0.5)
            await producer.request(produce_request([b"hello"]))
        assert answered_at and abs(answered_at[0] - 0.5) < 0.01  # not 2.0: woken by the append


async def test_long_poll_without_data_waits_for_max_wait(autojump_clock):
    async with running_broker() as (broker, nursery):
        consumer = await connect(broker, nursery)
        start = trio.current_time()
        response = await consumer.request(fetch_request(max_wait_ms=2_000))
        assert abs((trio.current_time() - start) - 2.0) < 0.01
        assert response.topics[0].partitions[0].records == b""


async def test_pipelined_responses_come_back_in_request_order(autojump_clock):
    async with running_broker() as (broker, nursery):
        client = await connect(broker, nursery)
        results = {}

        async def one(i):
            # A long poll first: the later produces must not overtake its response...
            if i == 0:
                results[i] = await client.request(fetch_request(max_wait_ms=1_000))
            else:
                results[i] = await client.request(produce_request([f"v{i}".encode()]))

        async with trio.open_nursery() as inner:
            for i in range(20):
                inner.start_soon(one, i)
                await trio.lowlevel.checkpoint()
        offsets = [results[i].topics[0].partitions[0].base_offset for i in range(1, 20)]
        assert sorted(offsets) == list(range(19))
        # ...and the fetch was answered with the first record it was waiting for.
        records = decode_batches(results[0].topics[0].partitions[0].records)
        assert records and records[0].offset == 0


async def _raw_exchange(port, payload: bytes, *, expect_close: bool):
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(payload)
        data = b""
        with trio.fail_after(5):
            while True:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    break
                data += chunk
                if (
                    not expect_close
                    and len(data) >= 4
                    and len(data) >= 4 + struct.unpack(">I", data[:4])[0]
                ):
                    break
    return data


def _decode_answer(data: bytes):
    (length,) = struct.unpack(">I", data[:4])
    return msgpack.unpackb(data[4 : 4 + length], raw=False)


async def _assert_still_serving(port):
    async with open_connection("127.0.0.1", port) as conn:
        response = await conn.request(m.MetadataRequest(topics=None))
        assert [t.name for t in response.topics] == [TOPIC]


async def test_garbage_and_broken_frames_close_only_that_connection(caplog):
    caplog.set_level(logging.INFO, logger="server_common.network")
    settings = {"socket.request.max.bytes": "65536"}
    async with running_broker(transport="tcp", settings=settings) as (broker, _):
        port = broker.port
        async with open_connection("127.0.0.1", port) as bystander:
            cases = {
                "garbage": b"\xde\xad\xbe\xef" * 8 + b"\x00" * 100,
                "over the limit": struct.pack(">I", 10_000_000) + b"x" * 100,
                "invalid msgpack": encode_frame(b"\xc1\xc1\xc1"),
                "not an envelope": encode_frame(msgpack.packb({"hello": "world"})),
            }
            for name, payload in cases.items():
                caplog.clear()
                await _raw_exchange(port, payload, expect_close=True)
                closing = [r for r in caplog.records if "closing connection" in r.getMessage()]
                assert len(closing) == 1, (name, [r.getMessage() for r in caplog.records])
            # The other client never noticed.
            response = await bystander.request(m.ApiVersionsRequest())
            assert response.error_code == 0
        await _assert_still_serving(port)


async def test_answerable_bad_requests_get_error_codes():
    async with running_broker(transport="tcp") as (broker, _):
        port = broker.port
        # Unknown api key: header readable, so an error answer, and the connection lives.
        unknown = encode_frame(msgpack.packb([999, 0, 7, "test", {}]))
        answer = _decode_answer(await _raw_exchange(port, unknown, expect_close=False))
        assert answer[0] == 7 and answer[1] == ErrorCode.UNSUPPORTED_VERSION
        # Wrong field types: INVALID_REQUEST naming the field.
        wrong = encode_frame(
            msgpack.packb(
                [
                    1,
                    0,
                    8,
                    "test",
                    {
                        "replica_id": "me",
                        "max_wait_ms": 0,
                        "min_bytes": 1,
                        "max_bytes": 10,
                        "topics": [],
                    },
                ]
            )
        )
        answer = _decode_answer(await _raw_exchange(port, wrong, expect_close=False))
        assert answer[0] == 8 and answer[1] == ErrorCode.INVALID_REQUEST
        assert "replica_id" in answer[2]
        await _assert_still_serving(port)


async def test_unknown_topic_and_corrupt_batch_are_partition_errors():
    async with running_broker(transport="tcp") as (broker, _):
        port = broker.port
        async with open_connection("127.0.0.1", port) as conn:
            response = await conn.request(fetch_request(topic="nope", max_wait_ms=0))
            assert (
                response.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            corrupt = bytearray(build_batch([Record(key=b"k", value=b"value", timestamp_ms=0)]))
            corrupt[-2] ^= 0x55
            response = await conn.request(produce_request([], records=bytes(corrupt)))
            assert response.topics[0].partitions[0].error_code == ErrorCode.CORRUPT_MESSAGE
            response = await conn.request(produce_request([b"fine"]))
            assert response.topics[0].partitions[0].error_code == ErrorCode.NONE
            assert response.topics[0].partitions[0].base_offset == 0


async def test_raw_request_roundtrip_helper_matches_codec():
    # Sanity for the raw helpers above: a well-formed request gets a normal answer.
    async with running_broker(transport="tcp") as (broker, _):
        port = broker.port
        frame = encode_request(RequestHeader(18, 0, 3, "raw"), m.ApiVersionsRequest())
        answer = _decode_answer(await _raw_exchange(port, frame, expect_close=False))
        assert answer[0] == 3 and answer[1] == 0
