"""Purgatory benchmark: 100,000 pending delayed produces over 1,000 partitions.

Prints the rate of try-complete-else-watch, of completion through check_and_complete
(half of them, as their partitions' HW moves) and of expiry (the other half), then the
memory held while they are pending and after everything completed (it must return to
near the baseline: no operation may linger in a watch list or in the timer heap).
Rates are timed without tracemalloc; memory is measured in a second, traced run.
"""

from __future__ import annotations

import gc
import time
import tracemalloc

from broker.core.delayed_produce import DelayedProduce, ProducePartitionStatus, ProduceResult
from broker.core.purgatory import Purgatory
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition

OPERATIONS = 100_000
PARTITIONS = 1_000
NEVER = 10**12


class FakePartition:
    """Just what DelayedProduce asks: is the HW past the required offset?"""

    def __init__(self) -> None:
        self.high_watermark = 0

    def check_enough_replicas_reach_offset(self, required_offset: int):
        if self.high_watermark >= required_offset:
            return True, ErrorCode.NONE
        return False, ErrorCode.NONE


def run(traced: bool) -> dict:
    partitions = {TopicPartition("bench", p): FakePartition() for p in range(PARTITIONS)}
    purgatory = Purgatory("Produce")
    answered = [0]

    def respond(_results) -> None:
        answered[0] += 1

    gc.collect()
    if traced:
        tracemalloc.start()
    baseline = tracemalloc.get_traced_memory()[0] if traced else 0
    started = time.perf_counter()
    for i in range(OPERATIONS):
        tp = TopicPartition("bench", i % PARTITIONS)
        # Odd operations complete when their partition's HW reaches 1; even ones wait
        # for an offset that never comes and expire at 1 s.
        required = 1 if i % 2 else NEVER
        statuses = {tp: ProducePartitionStatus(required, ProduceResult(ErrorCode.NONE))}
        op = DelayedProduce(1_000 if i % 2 == 0 else 30_000, statuses, partitions.get, respond)
        purgatory.try_complete_else_watch(op, [tp], now_ms=0)
    watch_s = time.perf_counter() - started
    pending_bytes = tracemalloc.get_traced_memory()[0] - baseline if traced else 0

    for partition in partitions.values():
        partition.high_watermark = 1
    started = time.perf_counter()
    for tp in partitions:
        purgatory.check_and_complete(tp, now_ms=500)
    complete_s = time.perf_counter() - started
    completed = answered[0]

    started = time.perf_counter()
    expired = purgatory.expire_due(now_ms=1_000)
    expire_s = time.perf_counter() - started
    gc.collect()
    after_bytes = tracemalloc.get_traced_memory()[0] - baseline if traced else 0
    if traced:
        tracemalloc.stop()
    assert purgatory.pending == 0 and answered[0] == OPERATIONS
    return {
        "watch_per_s": OPERATIONS / watch_s,
        "complete_per_s": completed / complete_s,
        "expire_per_s": expired / expire_s,
        "pending_mib": pending_bytes / 2**20,
        "after_mib": after_bytes / 2**20,
        "heap_left": len(purgatory._heap),
        "watch_lists_left": purgatory.watched_keys(),
    }


def main() -> None:
    timed = run(traced=False)
    memory = run(traced=True)
    print(f"pending delayed produces:          {OPERATIONS:,} over {PARTITIONS:,} partitions")
    print(f"try_complete_else_watch:           {timed['watch_per_s']:,.0f} ops/s")
    print(f"completed by check_and_complete:   {timed['complete_per_s']:,.0f} ops/s")
    print(f"expired by expire_due:             {timed['expire_per_s']:,.0f} ops/s")
    print(f"memory while pending:              {memory['pending_mib']:.1f} MiB")
    print(
        f"memory after all completed:        {memory['after_mib']:.2f} MiB "
        f"({memory['after_mib'] / max(memory['pending_mib'], 1e-9):.1%} of pending; "
        f"heap entries left {memory['heap_left']}, watch lists left "
        f"{memory['watch_lists_left']})"
    )


if __name__ == "__main__":
    main()
