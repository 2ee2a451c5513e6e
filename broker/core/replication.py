"""The values replication passes around: its settings, its counters, and one partition
of a fetch response.

How it works: `ReplicationConfig` is what the broker's config (`broker/config.py`) gives
the replica manager; `ReplicaManagerStats` are the running totals the broker's metrics
read, counted by the replica manager and the follower side (`follower_fetch.py`);
`FetchedPartition` is one partition of a fetch answer, produced by the leader's
`ReplicaManager.fetch_messages` and consumed by a follower's `FollowerFetch`. They live
apart from `replica_manager.py` so that `follower_fetch.py` needs nothing from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from client.protocol.errors import ErrorCode

__all__ = ["FetchedPartition", "ReplicaManagerStats", "ReplicationConfig"]


@dataclass(frozen=True)
class ReplicationConfig:
    """The replication settings the core needs (Kafka names in comments; Kafka defaults)."""

    replica_lag_time_max_ms: int = 30_000  # replica.lag.time.max.ms
    replica_fetch_max_bytes: int = 1_048_576  # replica.fetch.max.bytes
    replica_fetch_response_max_bytes: int = 10_485_760  # replica.fetch.response.max.bytes
    replica_fetch_wait_max_ms: int = 500  # replica.fetch.wait.max.ms
    replica_fetch_min_bytes: int = 1  # replica.fetch.min.bytes
    replica_fetch_backoff_ms: int = 1_000  # replica.fetch.backoff.ms
    isr_change_propagation_blackout_ms: int = 5_000  # isr.change.propagation.blackout.ms
    isr_change_propagation_interval_ms: int = 60_000  # isr.change.propagation.interval.ms
    # replica.selector.class as replica_selector.parse_selector reads it (None: leader only).
    replica_selector: str | None = None


@dataclass
class ReplicaManagerStats:
    isr_shrinks: int = 0
    isr_expands: int = 0
    failed_isr_updates: int = 0
    truncations: int = 0
    corrupt_fetches: int = 0  # follower fetch responses refused for a bad batch CRC
    bytes_in: int = 0
    bytes_out: int = 0
    messages_in: int = 0
    duplicate_batches: int = 0  # idempotent producers' retries answered with the first write


class FetchedPartition(NamedTuple):
    """One partition of a fetch response, as the core produces or consumes it (a
    NamedTuple rather than a frozen dataclass: one is made per partition of every fetch,
    and a NamedTuple is built in a third of the time)."""

    error_code: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    records: bytes = b""
    preferred_read_replica: int = -1  # KIP-392: read from this broker instead (-1: none)
    last_stable_offset: int = -1  # -1: the HW (no transaction holds it back)
    # read_committed: (producer id, first offset) of the aborted transactions read.
    aborted_transactions: tuple[tuple[int, int], ...] = ()
