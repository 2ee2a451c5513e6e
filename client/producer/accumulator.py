"""The record accumulator (sans-IO): per-partition batch queues, readiness, draining and
expiry, with buffer-memory accounting. Kafka's RecordAccumulator.

How it works: plain data, times passed in as `now_ms`; batches only carry a Trio event
for their waiters. The producer finds a partition's open batch (`open_batch`: the last
in its queue, if it can take the record) or opens one (`new_batch`) and adds records to
it (`append`, `extend`), counting their estimated size in `used_bytes` (what
`buffer_memory` bounds). A partition's first batch is *ready* when it is full, has
lingered `linger_ms`, or a flush, a close or a wait for buffer memory is under way, and
it is not backing off after a failed attempt (`retry_backoff_ms`): `ready` says which
leader brokers have one, and when the next not-ready batch may become ready. `drain`
takes ready batches for one leader, one per partition, up to `max_request_size` (but at
least one), taking turns between partitions, and *mutes* their partitions: at most one
batch per partition is in flight, so a retried batch, put back at the front of its queue
by `reenqueue`, can never be overtaken (Kafka's "guarantee message order" muting, kept
on whatever max_in_flight is). `release` frees a finished batch's memory and unmutes its
partition; `expired` hands out the batches (queued or in flight) older than
`delivery_timeout_ms`.

KIP-794: `queue_sizes` gives the partitioner each available partition's queue length;
with `availability_timeout_ms` > 0 the sender reports each leader's readiness
(`update_node_latency`), a leader with sendable batches but none drained for longer is
*unavailable*, and `ready` then moves the never-sent batches of sticky keyless records
queued for it to available partitions (nothing sent, so nothing is written twice).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from client.metadata import ClusterView
from client.producer.batch import BatchState, DeliveryHandle, ProducerBatch
from client.producer.builtin_partitioner import BuiltInPartitioner
from client.producer.record_columns import Headers, RecordColumns
from client.protocol.records import BATCH_OVERHEAD, Codec
from client.protocol.types import TopicPartition


class ReadyCheck(NamedTuple):
    nodes: set[int]  # leaders with at least one sendable batch
    next_check_ms: float  # when a batch that is not ready yet may become ready
    unknown_leaders: set[str]  # topics with batches but a partition without a leader
    blocked: frozenset[int] = frozenset()  # leaders with a sendable batch of a muted partition


@dataclass
class AccumulatorConfig:
    batch_size: int = 16_384
    linger_ms: float = 0
    retry_backoff_ms: float = 100
    delivery_timeout_ms: float = 120_000
    buffer_memory: int = 32 * 1024 * 1024
    codec: Codec = Codec.NONE
    availability_timeout_ms: float = 0  # partitioner.availability.timeout.ms (0: off)


class RecordAccumulator:
    """Per-partition batch queues, readiness, draining, expiry: no I/O and no clock (the
    caller passes `now_ms`); batches only carry a Trio event for their waiters."""

    def __init__(
        self, config: AccumulatorConfig, partitioner: BuiltInPartitioner | None = None
    ) -> None:
        self.config = config
        self.partitioner = partitioner  # given load statistics by `ready` (KIP-794)
        # Per leader: when it last had a sendable batch, and when one was last drained.
        self.node_ready_ms: dict[int, float] = {}
        self.node_drain_ms: dict[int, float] = {}
        self._tps: dict[str, list[TopicPartition]] = {}
        self.queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self.muted: set[TopicPartition] = set()
        self.in_flight: set[ProducerBatch] = set()
        self.incomplete: set[ProducerBatch] = set()
        self.used_bytes = 0
        self.flushes_in_progress = 0
        self.closing = False
        self.memory_waiters = 0
        self._drain_start: dict[int, int] = {}

    # --- appending -------------------------------------------------------------------

    def open_batch(self, tp: TopicPartition, size: int) -> ProducerBatch | None:
        """The partition's open batch if it can take `size` more bytes, else None (the
        caller then opens a new batch with `new_batch`, or first moves a sticky
        partition). An empty open batch takes any record."""
        queue = self.queues.get(tp)
        if not queue:
            return None
        last = queue[-1]
        if last.closed or (last.values and last.size + size > self.config.batch_size):
            return None
        return last

    def new_batch(self, tp: TopicPartition, now_ms: float) -> ProducerBatch:
        """Open an empty batch at the end of the partition's queue."""
        queue = self.queues.get(tp)
        if queue is None:
            queue = self.queues[tp] = deque()
        batch = ProducerBatch(tp, now_ms)
        queue.append(batch)
        self.incomplete.add(batch)
        return batch

    def append(
        self,
        batch: ProducerBatch,
        key: bytes | None,
        value: bytes | None,
        timestamp_ms: int,
        headers: Headers,
        size: int,
    ) -> DeliveryHandle:
        """Add one record to `batch` (from `open_batch` or `new_batch`)."""
        self.used_bytes += size
        return DeliveryHandle(batch, batch.append(key, value, timestamp_ms, headers, size))

    def extend(self, batch: ProducerBatch, columns: RecordColumns, start: int, stop: int) -> int:
        """Add records `[start, stop)` of `columns` to `batch` (from `open_batch` or
        `new_batch`); the index of the first in it."""
        size = columns.size(start, stop)
        self.used_bytes += size
        return batch.extend(columns, start, stop, size)

    def has_undrained(self) -> bool:
        return any(self.queues.values())

    # --- readiness and draining ------------------------------------------------------

    def _backing_off(self, batch: ProducerBatch, now_ms: float) -> bool:
        return batch.attempts > 0 and now_ms < batch.last_attempt_ms + self.config.retry_backoff_ms

    def ready(self, cluster: ClusterView, now_ms: float) -> ReadyCheck:
        nodes: set[int] = set()
        unknown: set[str] = set()
        next_check = math.inf
        urgent = self.closing or self.flushes_in_progress > 0 or self.memory_waiters > 0
        config = self.config
        blocked: set[int] = set()
        for tp, queue in self.queues.items():
            if not queue:
                continue
            if tp in self.muted:
                if queue[0].is_full(config.batch_size) or len(queue) > 1 or urgent:
                    if (leader := cluster.leader_for(tp)) is not None:
                        blocked.add(leader.leader)
                continue
            leader = cluster.leader_for(tp)
            if leader is None:
                unknown.add(tp.topic)
                continue
            if leader.leader in nodes:
                continue
            batch = queue[0]
            # Absolute times, compared the same way everywhere (no float drift).
            if batch.attempts > 0:
                ready_at = batch.last_attempt_ms + config.retry_backoff_ms
                backing_off = now_ms < ready_at
            else:
                ready_at = batch.created_ms + config.linger_ms
                backing_off = False
            full = len(queue) > 1 or batch.is_full(config.batch_size)
            sendable = full or now_ms >= ready_at or urgent
            if sendable and not backing_off:
                nodes.add(leader.leader)
            else:
                next_check = min(next_check, ready_at)
        partitioner = self.partitioner
        if partitioner is not None and partitioner.config.adaptive_partitioning_enable:
            if any(self.node_unavailable(node) for node in self.node_ready_ms):
                self._steer_away(partitioner, cluster)
        return ReadyCheck(nodes, next_check, unknown, frozenset(blocked - nodes))

    # --- KIP-794: leaders' queues and availability -------------------------------------

    def update_node_latency(self, node: int, now_ms: float, can_drain: bool) -> None:
        """Kafka's `updateNodeLatencyStats`: `node` had a sendable batch at `now_ms`, and
        it could (`can_drain`) or could not be drained."""
        if self.config.availability_timeout_ms <= 0:
            return
        if node not in self.node_ready_ms:
            self.node_drain_ms[node] = now_ms
        if can_drain:
            self.node_drain_ms[node] = now_ms
        self.node_ready_ms[node] = now_ms

    def node_unavailable(self, node: int) -> bool:
        """The node has had sendable batches but none drained for longer than
        `availability_timeout_ms`."""
        timeout = self.config.availability_timeout_ms
        if timeout <= 0 or node not in self.node_ready_ms:
            return False
        return self.node_ready_ms[node] - self.node_drain_ms[node] > timeout

    def queue_sizes(
        self, cluster: ClusterView, topic: str
    ) -> tuple[list[tuple[int, int]], list[TopicPartition]]:
        """`(partition, queue length)` of each partition of `topic` whose leader is
        available (a partition without a queue counts as an empty queue, where Kafka
        waits until every partition has had one), and the partitions left out (no
        leader, or one not drained for `availability_timeout_ms`)."""
        parts = cluster.partitions_for(topic) or []
        tps = self._tps.get(topic)
        if tps is None or len(tps) != len(parts):
            tps = self._tps[topic] = [TopicPartition(topic, p) for p in parts]
        sizes: list[tuple[int, int]] = []
        left_out: list[TopicPartition] = []
        check = self.config.availability_timeout_ms > 0
        for tp in tps:
            leader = cluster.leader_for(tp)
            if leader is None or (check and self.node_unavailable(leader.leader)):
                left_out.append(tp)
                continue
            queue = self.queues.get(tp)
            sizes.append((tp.partition, len(queue) if queue else 0))
        return sizes, left_out

    def _steer_away(self, partitioner: BuiltInPartitioner, cluster: ClusterView) -> None:
        """Some leader is unavailable: refresh the statistics of each topic with queues,
        and move the never-sent batches of sticky keyless records queued for it."""
        for topic in {tp.topic for tp in self.queues}:
            sizes, left_out = self.queue_sizes(cluster, topic)
            partitioner.update_load_stats(topic, sizes, complete=not left_out)
            if sizes:
                for tp in left_out:
                    self._steer(partitioner, cluster, tp, len(sizes) + len(left_out))

    def _steer(
        self,
        partitioner: BuiltInPartitioner,
        cluster: ClusterView,
        tp: TopicPartition,
        num_partitions: int,
    ) -> None:
        """Move `tp`'s never-sent batches of sticky keyless records to available
        partitions (they were never sent, so nothing can be written twice)."""
        queue = self.queues.get(tp)
        available = cluster.available_partitions(tp.topic)
        target = partitioner.leave(tp.topic, tp.partition, num_partitions, available)
        if not queue or target is None:
            return
        keep: deque[ProducerBatch] = deque()
        for batch in queue:
            if not batch.movable or batch.attempts > 0 or batch.closed:
                keep.append(batch)
                continue
            destination = TopicPartition(tp.topic, target)
            batch.tp = destination
            self.queues.setdefault(destination, deque()).append(batch)
        self.queues[tp] = keep

    def drain(
        self,
        cluster: ClusterView,
        node: int,
        max_request_size: int,
        now_ms: float,
        allowed: Callable[[TopicPartition], bool] | None = None,
    ) -> list[ProducerBatch]:
        """Take one ready batch per partition led by `node`, up to `max_request_size`
        bytes (but at least one batch); mute those partitions. With `allowed`, only
        from partitions it allows (a transaction's, once added to it)."""
        tps = [tp for tp, queue in self.queues.items() if queue and tp not in self.muted]
        if allowed is not None:
            tps = [tp for tp in tps if allowed(tp)]
        led = [tp for tp in tps if (info := cluster.leader_for(tp)) and info.leader == node]
        if not led:
            return []
        start = self._drain_start.get(node, 0) % len(led)  # fairness between partitions
        self._drain_start[node] = start + 1
        drained: list[ProducerBatch] = []
        total = 0
        for tp in led[start:] + led[:start]:
            queue = self.queues[tp]
            batch = queue[0]
            if self._backing_off(batch, now_ms):
                continue
            if drained and total + batch.size > max_request_size:
                break
            queue.popleft()
            batch.closed = True
            batch.state = BatchState.IN_FLIGHT
            self.in_flight.add(batch)
            self.muted.add(tp)
            total += batch.size
            drained.append(batch)
        return drained

    # --- after a response ------------------------------------------------------------

    def reenqueue(self, batch: ProducerBatch, now_ms: float) -> None:
        """Put a batch back at the front of its queue for a retry (after the backoff)."""
        self.in_flight.discard(batch)
        self.muted.discard(batch.tp)
        batch.attempts += 1
        batch.last_attempt_ms = now_ms
        batch.state = BatchState.OPEN
        self.queues.setdefault(batch.tp, deque()).appendleft(batch)

    def release(self, batch: ProducerBatch) -> None:
        """The batch is finished (acked, failed or expired): free its memory and unmute."""
        if batch in self.in_flight:
            self.in_flight.discard(batch)
            self.muted.discard(batch.tp)
        if batch in self.incomplete:
            self.incomplete.discard(batch)
            self.used_bytes -= batch.size - BATCH_OVERHEAD

    def unmute(self, tp: TopicPartition) -> None:
        self.muted.discard(tp)

    # --- expiry ----------------------------------------------------------------------

    def expired(self, now_ms: float) -> list[ProducerBatch]:
        """Batches (queued or in flight) older than `delivery_timeout_ms`; queued ones are
        removed from their queues. In-flight ones stay muted until their response."""
        limit = self.config.delivery_timeout_ms
        out: list[ProducerBatch] = []
        for queue in self.queues.values():
            while queue and now_ms - queue[0].created_ms >= limit:
                out.append(queue.popleft())
        for batch in self.in_flight:
            if batch.state is not BatchState.DONE and now_ms - batch.created_ms >= limit:
                out.append(batch)
        return out

    def next_expiry_ms(self) -> float:
        oldest = math.inf
        for queue in self.queues.values():
            if queue:
                oldest = min(oldest, queue[0].created_ms)
        for batch in self.in_flight:
            if batch.state is not BatchState.DONE:
                oldest = min(oldest, batch.created_ms)
        return oldest + self.config.delivery_timeout_ms

    def queued_partitions(self) -> set[TopicPartition]:
        """The partitions with batches waiting to be drained."""
        return {tp for tp, queue in self.queues.items() if queue}

    def abandon_undrained(self) -> list[ProducerBatch]:
        """Every batch waiting in a queue, removed (a transaction being aborted: Kafka's
        abortUndrainedBatches); batches in flight are left to their answers."""
        out = [b for queue in self.queues.values() for b in queue if b.state is not BatchState.DONE]
        for queue in self.queues.values():
            queue.clear()
        return out

    def abandon_all(self) -> list[ProducerBatch]:
        """Every unfinished batch, removed from the queues (a forced close)."""
        out = [b for b in self.incomplete if b.state is not BatchState.DONE]
        for queue in self.queues.values():
            queue.clear()
        return out
