"""DelayedDeleteRecords: a DeleteRecords request waiting until every in-sync replica has
moved its log start offset past the deleted records.

How it works (Kafka's `DelayedDeleteRecords.scala`): the leader moved its own log start
offset at once (`Partition.delete_records_on_leader`); followers learn it from their
next fetch response and report their own log start offset in the fetch after that. The
partition's *low watermark* is the smallest log start offset among the leader and its
in-sync followers (`Partition.low_watermark_if_leader`; Kafka takes every live replica,
Tributary the ISR, the replicas the HW already waits for). The operation is watched
under each pending partition in the delete-records purgatory and re-checked after
follower fetches, ISR changes and leadership changes. For each pending partition,
`try_complete` decides:

- Case A: this broker no longer hosts the partition -> UNKNOWN_TOPIC_OR_PARTITION;
- Case B: this broker is no longer its leader -> NOT_LEADER_OR_FOLLOWER;
- Case C: the low watermark reached the requested offset -> success, with it;
- otherwise it keeps waiting; on expiry every pending partition answers
  REQUEST_TIMED_OUT (the leader's log start offset has moved all the same).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from broker.core.purgatory import DelayedPartitionsOperation, PartitionStatus
from client.protocol.errors import ErrorCode


@dataclass(slots=True)
class DeleteRecordsResult:
    error_code: ErrorCode
    low_watermark: int = -1
    error_message: str | None = None


@dataclass(slots=True)
class DeleteRecordsStatus:
    required_offset: int
    result: DeleteRecordsResult
    pending: bool = True


class DeleteRecordsTarget(Protocol):
    """What a DelayedDeleteRecords asks of a partition (`Partition` is one)."""

    @property
    def is_leader(self) -> bool: ...

    def low_watermark_if_leader(self) -> int: ...


class DelayedDeleteRecords(DelayedPartitionsOperation[DeleteRecordsTarget, DeleteRecordsResult]):
    __slots__ = ()

    def check_partition(
        self, partition: DeleteRecordsTarget | None, status: PartitionStatus[DeleteRecordsResult]
    ) -> None:
        if partition is None:  # Case A
            self.fail(status, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        elif not partition.is_leader:  # Case B
            self.fail(status, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        else:
            low = partition.low_watermark_if_leader()
            if low >= status.required_offset:  # Case C
                status.pending = False
                status.result.low_watermark = low

    def clear_result(self, result: DeleteRecordsResult) -> None:
        result.low_watermark = -1
