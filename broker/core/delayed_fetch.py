"""DelayedFetch: a fetch waiting for enough bytes, a leadership change or its deadline.

How it works (SPEC.md "Fetch"; Kafka's `DelayedFetch.scala`): a fetch that found fewer
than `min_bytes` waits in the fetch purgatory, watched under each of its partitions.
Appends (for followers) and HW moves (for consumers) re-check it; so do transaction
markers (they move the LSO read_committed consumers wait for). `try_complete`
completes it when any of these holds:

- Case A: this broker is no longer the leader of one of the partitions (for a consumer
  fetch a follower may serve, KIP-392: no longer a replica of it);
- Case B: this broker no longer hosts one of the partitions (StopReplica/deleted);
- Case C: a partition's leader epoch no longer matches the fetch's (fenced);
- Case D: a partition's readable end (LEO for followers, HW for consumers, LSO for
  read_committed consumers) is now *below* the fetch offset (the log was truncated):
  answer now so the fetcher resyncs. A follower serving a consumer (KIP-392) learns the
  HW one fetch after the leader, so there only an offset past its LEO counts; below it,
  the fetch waits for the HW (which its own replication moves, and re-checks this);
- Case E: the bytes readable across all partitions reached `min_bytes`.

A re-check after one partition changed (the purgatory's `try_complete_key`) looks at
that partition alone, over the bytes the others had at their last check.

On expiry it completes as well. Either way `on_complete` calls
`complete(completed_ms, unchanged)` once: the replica manager re-reads every partition
(the data may have moved) and responds; unless it expired with no change (no re-check:
not `touched`) after a read at arrival that found nothing: that read's answer is sent
(only a log start offset moved by retention, which re-checks nothing, may then be one
wait older). (The callback gets the time and that flag rather than the operation, so no
reference cycle keeps a completed fetch alive until the garbage collector finds it.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from broker.core.errors import PartitionError
from broker.core.purgatory import DelayedOperation
from client.protocol.types import TopicPartition


@dataclass(frozen=True, slots=True)
class FetchPartitionRequest:
    fetch_offset: int
    current_leader_epoch: int
    partition_max_bytes: int
    log_start_offset: int = -1
    # The topic id the fetcher named the topic by (16 bytes; b"": by name). A fetch
    # session keeps it with the partition, so every answer names the topic as asked.
    topic_id: bytes = b""


@dataclass(frozen=True, slots=True)
class FetchParams:
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    # KIP-392: the consumer's `client.rack` ("" when it sent none). A consumer fetch with
    # one may be served by a follower, and a leader may point it at another replica.
    client_rack: str = ""
    isolation_level: int = 0  # 1: read_committed (read below the LSO)
    # Kafka's `clientMetadata` without a rack (a Kafka Fetch v11+ with rack_id ""): a
    # follower may serve it too; the leader serves it itself (no preferred replica).
    client_metadata: bool = False

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == 1 and self.replica_id < 0

    @property
    def from_follower(self) -> bool:
        return self.replica_id >= 0

    @property
    def fetch_only_from_leader(self) -> bool:
        """Kafka's rule: replication fetches, and consumer fetches without client
        metadata (no rack, and not a Kafka Fetch v11+), are served by the leader only."""
        return self.replica_id >= 0 or not (self.client_rack or self.client_metadata)


class FetchTarget(Protocol):
    """What a DelayedFetch asks of a partition (`Partition` is one)."""

    def check_replica(self, current_leader_epoch: int, require_leader: bool) -> None: ...

    def fetch_upper_bound(self, from_follower: bool, read_committed: bool = ...) -> int: ...

    def bytes_available(
        self, fetch_offset: int, upper: int, max_bytes: int, wanted: int
    ) -> int: ...


class DelayedFetch(DelayedOperation):
    __slots__ = (
        "params",
        "partitions",
        "_get_partition",
        "_complete",
        "_available",
        "_total",
        "touched",
    )

    def __init__(
        self,
        deadline_ms: int,
        params: FetchParams,
        partitions: dict[TopicPartition, FetchPartitionRequest],
        get_partition: Callable[[TopicPartition], FetchTarget | None],
        complete: Callable[[int, bool], None],
    ):
        super().__init__(deadline_ms)
        self.params = params
        self.partitions = partitions
        self._get_partition = get_partition
        self._complete = complete
        # Bytes readable per partition at the last check (only those with some), and
        # their sum: what a re-check of one changed partition starts from.
        self._available: dict[TopicPartition, int] = {}
        self._total = 0
        # Whether any of its partitions changed (was re-checked) while it waited.
        self.touched = False

    def try_complete(self, now_ms: int) -> bool:
        needed = max(self.params.min_bytes, 1)
        available: dict[TopicPartition, int] = {}
        total = 0
        for tp, request in self.partitions.items():
            found = self._check(tp, request, needed - total)
            if found is None:  # Cases A-D
                return True
            if found:
                available[tp] = found
                total += found
                if total >= needed:  # Case E; the partitions left cannot undo it
                    return True
        self._available = available
        self._total = total
        return False

    def try_complete_key(self, key: object, now_ms: int) -> bool:
        """Only partition `key` changed: re-check it alone, over what the others had at
        their last check (each of their changes re-checks them in turn). A fetch waiting
        on thousands of partitions (a follower's) is not re-read whole at every append,
        HW move or ISR change of one of them: that was quadratic, and stalled a leader
        for seconds when a restarted follower's thousands of ISR expansions completed."""
        self.touched = True
        request = self.partitions.get(key)  # type: ignore[call-overload]
        if request is None or not isinstance(key, TopicPartition):
            return self.try_complete(now_ms)
        needed = max(self.params.min_bytes, 1)
        others = self._total - self._available.pop(key, 0)
        found = self._check(key, request, needed - others)
        if found is None:  # Cases A-D
            return True
        if found:
            self._available[key] = found
        self._total = others + found
        return self._total >= needed  # Case E

    def _check(self, tp: TopicPartition, request: FetchPartitionRequest, wanted: int) -> int | None:
        """None if the fetch must answer now (Cases A-D), else the bytes readable from
        `tp` (enough to tell whether `wanted` are there)."""
        partition = self._get_partition(tp)
        if partition is None:  # Case B
            return None
        try:
            partition.check_replica(
                request.current_leader_epoch, self.params.fetch_only_from_leader
            )
        except PartitionError:  # Case A or C
            return None
        end = partition.fetch_upper_bound(self.params.from_follower, self.params.read_committed)
        if end < request.fetch_offset:
            if self.params.fetch_only_from_leader:  # Case D
                return None
            if partition.fetch_upper_bound(True) < request.fetch_offset:  # Case D
                return None
            return 0  # a follower's HW behind the consumer's offset: it will come
        if end > request.fetch_offset:
            return partition.bytes_available(
                request.fetch_offset, end, request.partition_max_bytes, wanted
            )
        return 0

    def on_complete(self) -> None:
        self._complete(self.completed_ms, self.expired and not self.touched)
