"""Throttled publication of ISR changes to /isr_change_notification.

How it works (SPEC.md; Kafka's `ReplicaManager.maybePropagateIsrChanges`): every
partition whose ISR change ZooKeeper accepted is recorded here. The shell asks
`maybe_propagate(now_ms)` periodically; it hands out the whole set (to be written as
one sequential znode) only when the set is non-empty and either no change happened for
`blackout_ms` (the burst is over) or the last publication is older than `interval_ms`
(a steady stream of changes still gets out). This keeps a flapping cluster from
flooding the controller with notifications.
"""

from __future__ import annotations

from client.protocol.types import TopicPartition


class IsrChangePropagation:
    def __init__(self, blackout_ms: int, interval_ms: int):
        self.blackout_ms = blackout_ms
        self.interval_ms = interval_ms
        self._pending: set[TopicPartition] = set()
        self._last_change_ms = 0
        self._last_propagation_ms = 0

    def record(self, tp: TopicPartition, now_ms: int) -> None:
        self._pending.add(tp)
        self._last_change_ms = now_ms

    @property
    def pending(self) -> frozenset[TopicPartition]:
        return frozenset(self._pending)

    def maybe_propagate(self, now_ms: int) -> list[TopicPartition] | None:
        if not self._pending:
            return None
        quiet = self._last_change_ms + self.blackout_ms < now_ms
        overdue = self._last_propagation_ms + self.interval_ms < now_ms
        if not (quiet or overdue):
            return None
        batch = sorted(self._pending)
        self._pending.clear()
        self._last_propagation_ms = now_ms
        return batch

    def requeue(self, partitions: list[TopicPartition], now_ms: int) -> None:
        """The write failed: keep them for the next attempt."""
        self._pending.update(partitions)
