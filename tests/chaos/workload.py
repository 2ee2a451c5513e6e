"""An acks=all producer that runs while a fault is injected, and the audit afterwards.

`run_under_fault(cluster, topic, fault)` keeps producing numbered records (acks=all)
before, during and after `fault()` (a blocking callable run in a worker thread), then
reads every partition from the beginning and returns what was acknowledged and what the
log holds, so tests assert: every acknowledged record is at its acknowledged offset,
and records produced after the fault were consumed (consumption resumed). Against a
secure cluster both clients log in as its `admin` user.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from client.consumer import open_consumer
from client.producer import open_producer
from client.protocol.types import TopicPartition
from tests.integration.helpers import admin_security


@dataclass
class Outcome:
    acked: dict[int, tuple[int, int]] = field(default_factory=dict)  # seq -> (partition, offset)
    failed: dict[int, str] = field(default_factory=dict)  # seq -> error
    log: dict[tuple[int, int], int] = field(default_factory=dict)  # (partition, offset) -> seq
    acked_after_fault: int = 0
    sent: int = 0

    def lost(self) -> list[int]:
        """Acknowledged sequence numbers not found at their acknowledged offset."""
        return [seq for seq, where in self.acked.items() if self.log.get(where) != seq]


async def _produce(producer, topic, outcome, stop: trio.Event, fault_done: trio.Event, rate_hz):
    async with trio.open_nursery() as nursery:
        seq = 0
        while not stop.is_set():
            handle = await producer.send(topic, str(seq).encode(), key=f"k{seq % 16}".encode())
            nursery.start_soon(_await_ack, handle, seq, outcome, fault_done)
            seq += 1
            outcome.sent = seq
            await trio.sleep(1 / rate_hz)


async def _await_ack(handle, seq, outcome: Outcome, fault_done: trio.Event):
    try:
        metadata = await handle
    except Exception as exc:  # noqa: BLE001 - a failed delivery is data for the test
        outcome.failed[seq] = f"{type(exc).__name__}: {exc}"
        return
    outcome.acked[seq] = (metadata.partition, metadata.offset)
    if fault_done.is_set():
        outcome.acked_after_fault += 1


async def _read_everything(
    bootstrap: str, topic: str, partitions: int, outcome: Outcome, security: dict
):
    async with open_consumer(bootstrap, auto_offset_reset="earliest", **security) as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(tps)
        ends = await consumer.end_offsets(tps)
        with trio.fail_after(60):
            while any([await consumer.position(tp) < ends[tp] for tp in tps]):
                for record in await consumer.poll(1_000):
                    outcome.log[(record.partition, record.offset)] = int(record.value)


def run_under_fault(
    cluster,
    topic: str,
    partitions: int,
    fault: Callable[[], None],
    *,
    before_s: float = 2.0,
    after_s: float = 6.0,
    rate_hz: float = 200.0,
) -> Outcome:
    outcome = Outcome()
    bootstrap = cluster.state.bootstrap_servers
    security = admin_security(cluster)

    async def main():
        stop, fault_done = trio.Event(), trio.Event()
        async with open_producer(
            bootstrap,
            acks="all",
            linger_ms=5,
            request_timeout_ms=5_000,
            delivery_timeout_ms=60_000,
            retry_backoff_ms=100,
            **security,
        ) as producer:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_produce, producer, topic, outcome, stop, fault_done, rate_hz)
                await trio.sleep(before_s)
                await trio.to_thread.run_sync(fault)
                fault_done.set()
                await trio.sleep(after_s)
                stop.set()
        await _read_everything(bootstrap, topic, partitions, outcome, security)

    trio.run(main)
    return outcome
