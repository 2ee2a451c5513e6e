"""Client throughput against a real broker running in another process.

Producer: 100-byte values, acks=1, linger 5 ms, batch 64 KiB, no compression, one
`send()` per record and once with `send_many()` (10,000 records a call), and once with
lz4; then acks=all with idempotence off and on (issue 13: the cost of producer ids,
sequences and the broker's duplicate check). Consumer: read the first two runs back
from the beginning. Figures are records/s and MB/s of
values, and the client process's CPU time per record (steadier than wall time on a busy
machine); nothing is asserted. The broker is the real one, alone in a test cluster
process (`python -m tests.support.cluster`: an in-memory ZooKeeper, its log in a
temporary directory), so the wall-time figures include its work too; the CPU figures
are the client's (and the wire protocol's) alone.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import trio

from client.consumer import open_consumer
from client.producer import open_producer
from client.protocol.types import TopicPartition

VALUE_BYTES = 100
RECORDS = int(os.environ.get("BENCH_CLIENT_RECORDS", "200000"))
PARTITIONS = 4
SEND_MANY_CHUNK = 10_000
ROOT = Path(__file__).resolve().parents[2]


def _start_broker() -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.cluster", "--topic", f"bench:{PARTITIONS}"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    bootstrap = process.stdout.readline().strip()
    if not bootstrap:
        process.kill()
        raise RuntimeError("the test cluster did not start")
    return process, bootstrap


async def _produce(
    bootstrap: str,
    topic: str,
    count: int,
    compression: str,
    acks: int | str = 1,
    idempotence: bool = False,
    many: bool = False,
) -> float:
    value = b"x" * VALUE_BYTES
    async with open_producer(
        bootstrap,
        acks=acks,
        enable_idempotence=idempotence,
        linger_ms=5,
        batch_size=64 * 1024,
        compression_type=compression,
    ) as producer:
        await producer.send(topic, value)  # metadata fetched before the clock starts
        await producer.flush()
        started = time.perf_counter()
        last = None
        if many:  # a batch-sized run of records at a time
            for start in range(0, count, SEND_MANY_CHUNK):
                values = [value] * min(SEND_MANY_CHUNK, count - start)
                last = (await producer.send_many(topic, values))[-1]
        else:
            for i in range(count):
                last = await producer.send(topic, value)
                if i % 1000 == 0:
                    await trio.lowlevel.checkpoint()  # let the sender run, as real code would
        await producer.flush()
        assert last is not None
        await last
        return time.perf_counter() - started


async def _consume(bootstrap: str, topic: str, count: int) -> float:
    async with open_consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        started = time.perf_counter()
        seen = 0
        while seen < count:
            seen += len(await consumer.poll(1000))
        return time.perf_counter() - started


def _line(what: str, count: int, seconds: float, cpu_seconds: float) -> str:
    rate = count / seconds
    return (
        f"{what:<38} {count:>7} records in {seconds:5.2f} s: {rate:>9,.0f} records/s, "
        f"{rate * VALUE_BYTES / 1e6:5.1f} MB/s of values; client CPU "
        f"{cpu_seconds / count * 1e6:4.1f} us/record"
    )


def _timed(fn, *args) -> tuple[float, float]:
    """(wall seconds measured inside `fn`, this process's CPU seconds for the run)."""
    cpu_started = time.process_time()
    seconds = trio.run(fn, *args)
    return seconds, time.process_time() - cpu_started


def main() -> None:
    process, bootstrap = _start_broker()
    try:
        seconds, cpu = _timed(_produce, bootstrap, "bench", RECORDS, "none")
        print(_line("produce (acks=1, linger 5 ms, 64 KiB)", RECORDS, seconds, cpu), flush=True)
        seconds, cpu = _timed(_produce, bootstrap, "bench", RECORDS, "none", 1, False, True)
        print(_line("produce, send_many", RECORDS, seconds, cpu), flush=True)
        seconds, cpu = _timed(_consume, bootstrap, "bench", 2 * RECORDS + 2)
        print(_line("consume (from the beginning)", 2 * RECORDS + 2, seconds, cpu), flush=True)
        seconds, cpu = _timed(_produce, bootstrap, "bench", RECORDS, "lz4")
        print(_line("produce, lz4", RECORDS, seconds, cpu), flush=True)
        for idempotence in (False, True):
            seconds, cpu = _timed(_produce, bootstrap, "bench", RECORDS, "none", "all", idempotence)
            what = f"produce acks=all, idempotence {'on' if idempotence else 'off'}"
            print(_line(what, RECORDS, seconds, cpu), flush=True)
    finally:
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


if __name__ == "__main__":
    main()
