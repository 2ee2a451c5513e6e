"""Protocol throughput: codec rates, and request round trips over a loopback socket.

Figures printed:
- Produce request with one 1 MiB records blob: encode + decode, in MB/s of records;
- small Metadata request: encode + decode, requests/s;
- Metadata round trips over loopback TCP against a trivial echo broker (a
  `ServerConnection` loop), one caller at a time (serial) vs many callers sharing one
  `BrokerConnection` (pipelined).
"""

from __future__ import annotations

import time
from functools import partial

import trio

from client.connection import BrokerConnection
from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.codec import RequestHeader, decode_request, encode_request
from client.protocol.connection import Answerable, ServerConnection
from client.protocol.framing import PREFIX_BYTES

MIB = 1024 * 1024


def _rate(label: str, count: int, seconds: float, unit: str, scale: float = 1.0) -> None:
    print(f"  {label:<48} {count * scale / seconds:>12,.0f} {unit}", flush=True)


def bench_produce_codec(seconds: float = 1.5) -> None:
    records = bytes(range(256)) * (MIB // 256)
    request = m.ProduceRequest(
        acks=-1,
        timeout_ms=30_000,
        topics=[
            m.ProduceTopic(
                name="bench", partitions=[m.ProducePartition(partition=0, records=records)]
            )
        ],
    )
    header = RequestHeader(ApiKey.PRODUCE, 0, 1, "bench")
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        frame = encode_request(header, request)
        _, decoded = decode_request(frame[PREFIX_BYTES:])
        count += 1
    elapsed = time.perf_counter() - start
    assert decoded.topics[0].partitions[0].records == records
    _rate("Produce 1 MiB records: encode+decode", count, elapsed, "MB/s", len(records) / 1e6)


def bench_metadata_codec(seconds: float = 1.5) -> None:
    request = m.MetadataRequest(topics=["orders", "payments"])
    header = RequestHeader(ApiKey.METADATA, 0, 1, "bench")
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(100):
            frame = encode_request(header, request)
            decode_request(frame[PREFIX_BYTES:])
        count += 100
    _rate("small Metadata request: encode+decode", count, time.perf_counter() - start, "req/s")


async def _echo_broker(stream: trio.SocketStream) -> None:
    """Answer each Metadata request with its topic names; Answerables with their error."""
    conn = ServerConnection()
    async with stream:
        try:
            while data := await stream.receive_some():
                conn.receive_data(data)
                out = bytearray()
                while (event := conn.next_request()) is not None:
                    if isinstance(event, Answerable):
                        out += event.response_frame()
                        continue
                    header, request = event
                    response = m.MetadataResponse(
                        brokers=[],
                        cluster_id=None,
                        controller_id=0,
                        topics=[
                            m.MetadataResponseTopic(
                                error_code=0, name=name, is_internal=False, partitions=[]
                            )
                            for name in request.topics or []
                        ],
                    )
                    out += conn.send_response(header.correlation_id, response)
                if out:
                    await stream.send_all(out)
        except trio.BrokenResourceError:
            pass


async def _round_trips(seconds: float, callers: int) -> tuple[int, float]:
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, _echo_broker, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        connection = await BrokerConnection.connect("127.0.0.1", port, nursery=nursery)
        count = 0
        deadline = trio.current_time() + seconds
        request = m.MetadataRequest(topics=["bench"])

        async def caller() -> None:
            nonlocal count
            while trio.current_time() < deadline:
                await connection.request(request)
                count += 1

        start = time.perf_counter()
        async with trio.open_nursery() as callers_nursery:
            for _ in range(callers):
                callers_nursery.start_soon(caller)
        elapsed = time.perf_counter() - start
        await connection.aclose()
        nursery.cancel_scope.cancel()
    return count, elapsed


def bench_loopback(seconds: float = 2.0) -> None:
    for callers, label in [(1, "serial (1 caller)"), (64, "pipelined (64 callers, 1 connection)")]:
        count, elapsed = trio.run(_round_trips, seconds, callers)
        _rate(f"loopback Metadata round trips, {label}", count, elapsed, "req/s")


def main() -> None:
    bench_produce_codec()
    bench_metadata_codec()
    bench_loopback()


if __name__ == "__main__":
    main()
