"""What tests/bench/bench_scale.py measures a cluster with: a scenario's overall time
budget (`Budget`: every wait takes what is left of it, so a scenario stops by itself),
a process's RSS and CPU from /proc, timed Metadata requests (with the partitions'
leaders and ISRs they carry), a modest produce load spread over many partitions, and
the wait for a topic's partitions to be led with full ISRs."""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path

import trio

from client.connection import open_connection
from client.producer import open_producer
from client.protocol import messages as m

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class OutOfTime(Exception):
    """The scenario's budget ran out before what it waited for happened."""


class Budget:
    """A scenario's hard overall time limit."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def bound(self, seconds: float) -> float:
        """`seconds`, or less if the budget has less left (OutOfTime if none)."""
        left = self.left()
        if left <= 0:
            raise OutOfTime(f"the scenario's {self.seconds:.0f} s budget is spent")
        return min(seconds, left)

    def wait(self, what: str, predicate: Callable[[], object], seconds: float, step=0.5):
        """Poll `predicate` until it is true; OutOfTime after `seconds` (bounded)."""
        deadline = time.monotonic() + self.bound(seconds)
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise OutOfTime(f"{what}: not within {seconds:.0f} s")
            time.sleep(step)


# -- a process, from /proc -------------------------------------------------------------
def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time `pid` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def idle_cpu(pids: dict[str, int], seconds: float) -> dict[str, float]:
    """Each process's CPU use over `seconds`, as a percentage of one core."""
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    time.sleep(seconds)
    return {name: (cpu_seconds(pid) - before[name]) / seconds * 100 for name, pid in pids.items()}


class PeakRss:
    """Samples the processes' RSS in a thread while the block runs: `peak` (MB)."""

    def __init__(self, pids: list[int], interval_s: float = 0.2) -> None:
        self.pids = pids
        self.interval_s = interval_s
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid in self.pids:
                try:
                    self.peak = max(self.peak, rss_mb(pid))
                except OSError:
                    pass  # a process killed meanwhile
            self._stop.wait(self.interval_s)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


# -- the cluster, through Metadata -------------------------------------------------------
async def _metadata(port: int, topics: list[str] | None, timeout_s: float) -> m.MetadataResponse:
    async with open_connection("127.0.0.1", port) as conn:
        return await conn.request(m.MetadataRequest(topics=topics), timeout_s=timeout_s)


def metadata(port: int, timeout_s: float = 60.0) -> m.MetadataResponse:
    """All topics, from the broker at `port`."""
    return trio.run(_metadata, port, None, timeout_s)


def live_brokers(port: int) -> set[int]:
    """The brokers the broker at `port` knows to be alive (no topics asked for)."""
    return {b.node_id for b in trio.run(_metadata, port, [], 30.0).brokers}


def partitions_where(
    response: m.MetadataResponse, prefix: str, ok: Callable[[m.MetadataResponsePartition], bool]
) -> tuple[int, int]:
    """(partitions of the topics named `prefix`*, how many of them satisfy `ok`)."""
    total = good = 0
    for topic in response.topics:
        if topic.name.startswith(prefix):
            for part in topic.partitions:
                total += 1
                good += bool(ok(part))
    return total, good


def fully_replicated(response: m.MetadataResponse, prefix: str, expected: int, rf: int) -> bool:
    total, good = partitions_where(
        response, prefix, lambda p: p.leader >= 0 and len(p.isr) == rf and p.error_code == 0
    )
    return total == expected and good == expected


async def _timed_metadata(port: int, count: int, budget_s: float) -> list[float]:
    took: list[float] = []
    async with open_connection("127.0.0.1", port) as conn:
        with trio.move_on_after(budget_s):
            for _ in range(count):
                started = time.perf_counter()
                await conn.request(m.MetadataRequest(topics=None), timeout_s=60)
                took.append(time.perf_counter() - started)
    return took


def metadata_latency(port: int, count: int, budget_s: float) -> list[float]:
    """Seconds each of `count` all-topics Metadata requests took, one after another on
    one connection (fewer if `budget_s` runs out)."""
    return trio.run(_timed_metadata, port, count, budget_s)


# -- a modest load over many partitions ------------------------------------------------
async def _spread_load(
    bootstrap: str, targets: list[tuple[str, int]], rate: int, seconds: float
) -> int:
    value = b"s" * 100
    sent = 0
    async with open_producer(
        bootstrap, acks=1, linger_ms=20, request_timeout_ms=30_000
    ) as producer:
        started = trio.current_time()
        tick = 0.05
        per_tick = max(1, int(rate * tick))
        while trio.current_time() - started < seconds:
            for _ in range(per_tick):
                topic, partition = targets[sent % len(targets)]
                await producer.send(topic, value, partition=partition)
                sent += 1
            await trio.sleep_until(started + (sent / per_tick) * tick)
        with trio.fail_after(60):
            await producer.flush()
    return sent


def spread_load(bootstrap: str, targets: list[tuple[str, int]], rate: int, seconds: float) -> int:
    """About `rate` 100-byte records a second, acks=1, round-robin over `targets`
    (topic, partition) for `seconds`; the records sent."""
    return trio.run(_spread_load, bootstrap, targets, rate, seconds)


def summary(values: list[float]) -> str:
    if not values:
        return "none"
    return (
        f"p50 {percentile(values, 0.5) * 1000:.1f} ms, p99 {percentile(values, 0.99) * 1000:.1f} "
        f"ms, mean {statistics.mean(values) * 1000:.1f} ms over {len(values)}"
    )
