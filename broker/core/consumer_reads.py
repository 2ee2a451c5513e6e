"""KIP-392 in the replica manager: consumers fetching from the closest replica.

How it works (Kafka 2.8's `ReplicaManager.readFromLocalLog` and `fetchMessages`): the
replica manager asks `ConsumerReads` about each partition of a consumer fetch. On the
leader, a fetch carrying a rack (`FetchParams.client_rack`) goes to the configured
selector (`replica_selector.py`, with `live_rack` from the shell's metadata); when it
names another replica, `redirect` answers the partition with `preferred_read_replica`
and no records (the leader's HW and offsets, as Kafka's answer carries), after checking
the fetch's leader epoch. Every consumer read is `count`ed as served by the leader or by
a follower (the broker's metrics). A follower serving consumers reads up to its own HW,
which moves as its replication brings the leader's: the follower side reports each
move, and the fetch purgatory re-checks the consumers' fetches waiting for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.core.replica_selector import preferred_read_replica
from broker.core.replication import FetchedPartition
from client.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.core.delayed_fetch import FetchParams, FetchPartitionRequest
    from broker.core.follower_fetch import FollowerFetch
    from broker.core.partition import Partition
    from broker.core.purgatory import Purgatory
    from broker.core.replication import ReplicationConfig


class ConsumerReads:
    def __init__(
        self,
        config: ReplicationConfig,
        followers: FollowerFetch,
        fetch_purgatory: Purgatory,
    ) -> None:
        self.selector = config.replica_selector
        # Partitions of consumer fetches read without error, and their record bytes,
        # served as the leader / as a follower; answers naming another replica instead.
        self.reads_as_leader = 0
        self.reads_as_follower = 0
        self.bytes_as_leader = 0
        self.bytes_as_follower = 0
        self.preferred_replica_answers = 0
        # (alive, rack) of a broker as this broker's metadata has it; set by the shell.
        self.live_rack: Callable[[int], tuple[bool, str | None]] = lambda broker: (False, None)
        followers.high_watermark_moved = fetch_purgatory.check_and_complete

    def redirect(
        self,
        partition: Partition,
        request: FetchPartitionRequest,
        params: FetchParams,
        now_ms: int,
    ) -> FetchedPartition | None:
        """The answer sending a consumer to another replica (no records), or None to
        read here. Raises `PartitionError` for a fenced leader epoch."""
        if not params.client_rack or params.from_follower:
            return None
        preferred = preferred_read_replica(
            self.selector,
            partition,
            params.client_rack,
            request.fetch_offset,
            now_ms,
            self.live_rack,
        )
        if preferred is None:
            return None
        partition.check_leader(request.current_leader_epoch)
        self.preferred_replica_answers += 1
        return FetchedPartition(
            ErrorCode.NONE,
            partition.high_watermark,
            partition.log_start_offset,
            partition.log_end_offset,
            b"",
            preferred,
        )

    def count(self, params: FetchParams, partition: Partition, size: int) -> None:
        """A partition read for a fetch: counted if a consumer's, by our role."""
        if params.from_follower:
            return
        if partition.is_leader:
            self.reads_as_leader += 1
            self.bytes_as_leader += size
        else:
            self.reads_as_follower += 1
            self.bytes_as_follower += size
