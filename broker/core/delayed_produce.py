"""DelayedProduce: an acks=all produce waiting until every ISR member has the data.

How it works (SPEC.md "Produce" step 5; Kafka's `DelayedProduce.scala`): after the
leader appended, each partition of the request waits for HW >= its required offset
(last appended offset + 1). The operation is watched under each of its partitions in
the produce purgatory and re-checked whenever that partition's HW moves, its ISR
changes or its leadership changes. For each partition still pending, `try_complete`
decides:

- Case A: this broker no longer hosts the partition -> UNKNOWN_TOPIC_OR_PARTITION.
- Case B: this broker is no longer the leader -> NOT_LEADER_OR_FOLLOWER.
- Case C: HW reached the required offset:
  - C.1: the maximal ISR is still >= min.insync.replicas -> success;
  - C.2: it is smaller -> NOT_ENOUGH_REPLICAS_AFTER_APPEND (the data is written but
    not as replicated as asked; the producer may retry).
- otherwise it keeps waiting; on expiry every still-pending partition answers
  REQUEST_TIMED_OUT.
The operation completes when no partition is pending; `on_complete` delivers all
partition results to the `respond` callback exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from broker.core.purgatory import DelayedPartitionsOperation, PartitionStatus
from client.protocol.errors import ErrorCode


@dataclass(slots=True)
class ProduceResult:
    error_code: ErrorCode
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


@dataclass(slots=True)
class ProducePartitionStatus:
    required_offset: int
    result: ProduceResult
    pending: bool = True


class ProduceTarget(Protocol):
    """What a DelayedProduce asks of a partition (`Partition` is one)."""

    def check_enough_replicas_reach_offset(
        self, required_offset: int
    ) -> tuple[bool, ErrorCode]: ...


class DelayedProduce(DelayedPartitionsOperation[ProduceTarget, ProduceResult]):
    __slots__ = ()

    def check_partition(
        self, partition: ProduceTarget | None, status: PartitionStatus[ProduceResult]
    ) -> None:
        if partition is None:  # Case A
            self.fail(status, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            return
        done, error = partition.check_enough_replicas_reach_offset(status.required_offset)
        if done:  # Case B (error NOT_LEADER), C.1 (NONE) or C.2 (NOT_ENOUGH_..._AFTER_APPEND)
            status.pending = False
            if error is not ErrorCode.NONE:
                self.fail(status, error)

    def clear_result(self, result: ProduceResult) -> None:
        result.base_offset = -1
