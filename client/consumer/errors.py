"""What the consumer raises.

How it works: `ConsumerStateError` is a call that does not fit the consumer's state
(nothing assigned, closed, assign() while subscribed...), `NoOffsetForPartitionError`
one that needs a position a partition does not have (auto_offset_reset "none"). A
partition's fetch errors are kept on its state and raised by the next `poll()`:
`OffsetOutOfRangeError` (auto_offset_reset "none"), `CorruptBatchError` (a batch failed
its CRC check; raised at that position until the application seeks past it). The group
errors `CommitFailedError` and `RebalanceInProgressError` come from
client/consumer/group/membership.py.
"""

from __future__ import annotations

from collections.abc import Iterable

from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.records import CorruptRecordError
from client.protocol.types import TopicPartition


class ConsumerStateError(RuntimeError):
    """The call does not fit the consumer's state (nothing assigned, closed...)."""


class NoOffsetForPartitionError(ConsumerStateError):
    """A partition has no position and `auto_offset_reset` is "none": seek first."""

    def __init__(self, partitions: Iterable[TopicPartition]) -> None:
        self.partitions = sorted(partitions)
        names = ", ".join(str(tp) for tp in self.partitions)
        super().__init__(
            f"no position for partition(s) {names} and auto_offset_reset is 'none': "
            "seek to an offset first"
        )


class OffsetOutOfRangeError(TributaryError):
    """The position is outside the log and `auto_offset_reset` is "none".

    `offsets` maps each partition to the position the broker rejected.
    """

    def __init__(self, offsets: dict[TopicPartition, int], detail: str = "") -> None:
        self.offsets = dict(offsets)
        text = ", ".join(f"{tp} at offset {o}" for tp, o in sorted(offsets.items()))
        super().__init__(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"fetch position out of range for {text} and auto_offset_reset is 'none'"
            + (f" ({detail})" if detail else ""),
        )

    @property
    def retriable(self) -> bool:
        return False


class CorruptBatchError(CorruptRecordError):
    """A fetched batch failed its CRC check: the bytes the broker sent are damaged.

    `first_offset`/`last_offset` are the batch's offsets (as its header says: the header
    itself may be damaged), `broker` the broker that sent it.
    """

    def __init__(
        self, tp: TopicPartition, first_offset: int, last_offset: int, broker: int, detail: str
    ) -> None:
        self.topic, self.partition = tp
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.broker = broker
        super().__init__(
            f"corrupt record batch in {tp.topic}-{tp.partition} at offsets "
            f"{first_offset}..{last_offset} from broker {broker}: {detail}"
        )
