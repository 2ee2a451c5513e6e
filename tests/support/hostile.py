"""Hostile and normal clients for the resource-bound tests and benchmark
(tests/integration/test_resource_bounds.py, tests/bench/bench_bounds.py): raw sockets
that hold connections or announce huge frames, a normal client's timed requests, and
a process's RSS and address-space cap from /proc and prlimit."""

from __future__ import annotations

import resource
import socket
import struct
import time

import trio

from client.connection import open_connection
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.records import Record, build_batch, iter_batches

MiB = 1024 * 1024
ANSWER_BOUND_S = 30.0  # "answered at all", not a speed requirement
AS_HEADROOM = 2 * 1024 * MiB  # address space a server may add to what it has when capped


def proc_status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} for pid {pid}")


def rss_mib(pid: int) -> float:
    return proc_status_kib(pid, "VmRSS") / 1024


def cap_address_space(pid: int, headroom: int = AS_HEADROOM) -> int:
    """Cap `pid`'s address space at its current size plus `headroom` (prlimit --as):
    a server fed hostile sizes dies of MemoryError rather than take the machine down."""
    cap = proc_status_kib(pid, "VmSize") * 1024 + headroom
    resource.prlimit(pid, resource.RLIMIT_AS, (cap, cap))
    return cap


def raise_own_open_files(wanted: int) -> bool:
    """Raise this process's open files limit to `wanted` if the hard limit allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        if hard < wanted:
            return False
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return True


def connect_raw(port: int, source: str | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if source is not None:
        sock.bind((source, 0))
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    return sock


def closed_by_peer(sock: socket.socket, wait_s: float) -> bool:
    """True if the peer closes `sock` within `wait_s` (EOF or reset), False if it stays
    open and silent that long."""
    sock.settimeout(wait_s)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def still_open(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


# -- normal client traffic -------------------------------------------------------------
async def normal_requests(port: int, topic: str, label: str) -> dict[str, float]:
    """Metadata, an acks=all produce and a fetch of what it wrote, each timed, over a
    new connection to `port`."""
    timings: dict[str, float] = {}
    value = f"{label}-{time.time()}".encode()
    with trio.fail_after(ANSWER_BOUND_S * 3):
        started = time.perf_counter()
        async with open_connection("127.0.0.1", port) as conn:
            timings["connect"] = time.perf_counter() - started
            started = time.perf_counter()
            metadata = await conn.request(m.MetadataRequest(topics=[topic]))
            timings["metadata"] = time.perf_counter() - started
            assert metadata.topics[0].error_code == ErrorCode.NONE
            started = time.perf_counter()
            batch = build_batch([Record(None, value, int(time.time() * 1000))])
            produced = await conn.request(
                m.ProduceRequest(
                    acks=-1,
                    timeout_ms=20_000,
                    topics=[
                        m.ProduceTopic(
                            name=topic,
                            partitions=[m.ProducePartition(partition=0, records=batch)],
                        )
                    ],
                ),
                timeout_s=ANSWER_BOUND_S,
            )
            timings["produce"] = time.perf_counter() - started
            part = produced.topics[0].partitions[0]
            assert part.error_code == ErrorCode.NONE, ErrorCode.from_code(part.error_code)
            started = time.perf_counter()
            fetched = await conn.request(
                m.FetchRequest(
                    replica_id=-1,
                    max_wait_ms=0,
                    min_bytes=0,
                    max_bytes=1 << 20,
                    topics=[
                        m.FetchTopic(
                            topic=topic,
                            partitions=[
                                m.FetchPartition(
                                    partition=0,
                                    fetch_offset=part.base_offset,
                                    partition_max_bytes=1 << 20,
                                )
                            ],
                        )
                    ],
                ),
                timeout_s=ANSWER_BOUND_S,
            )
            timings["fetch"] = time.perf_counter() - started
            fpart = fetched.topics[0].partitions[0]
            assert fpart.error_code == ErrorCode.NONE
            assert list(iter_batches(fpart.records)), "the record just produced was not fetched"
    return timings


def fmt_ms(timings: dict[str, float]) -> str:
    return ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in timings.items())


async def flood_huge_frames(
    ports: list[int],
    pid: int,
    *,
    connections: int = 50,
    frame_bytes: int = 100 * MiB,
    piece_bytes: int = 256 * 1024,
    interval_s: float = 0.02,
    duration_s: float = 12.0,
    during=None,
) -> dict:
    """`connections` connections (spread over `ports`) each announce a `frame_bytes`
    frame and send its body `piece_bytes` every `interval_s` for `duration_s`, while
    `pid`'s RSS is sampled; `during()` (an async function) runs 2 s into the flood.
    Returns peak RSS (MiB), bytes sent and what `during` returned."""
    piece = bytes(piece_bytes)
    samples: list[float] = []
    sent: list[int] = []
    result: dict = {}

    async def attacker(port: int) -> None:
        total = 0
        try:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
        except OSError:
            sent.append(0)
            return
        try:
            await stream.send_all(struct.pack(">I", frame_bytes))
            while total < frame_bytes:
                await stream.send_all(piece)
                total += len(piece)
                await trio.sleep(interval_s)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # a completed garbage frame closes the connection
        finally:
            sent.append(total)
            await stream.aclose()

    async def sample_rss() -> None:
        while True:
            samples.append(rss_mib(pid))
            await trio.sleep(0.2)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sample_rss)
        with trio.move_on_after(duration_s):
            async with trio.open_nursery() as attackers:
                for i in range(connections):
                    attackers.start_soon(attacker, ports[i % len(ports)])
                await trio.sleep(2.0)  # the flood is on
                if during is not None:
                    result["during"] = await during()
                await trio.sleep_forever()
        nursery.cancel_scope.cancel()
    result["peak_rss_mib"] = max(samples)
    result["sent_bytes"] = sum(sent)
    return result
