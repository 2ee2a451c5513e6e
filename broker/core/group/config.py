"""The group coordinator's settings and counters.

How it works: `GroupConfig` holds the broker settings the coordinator uses (Kafka's names
in `broker/tasks/group_service.py`'s `group_config`, which builds it from the broker's config);
`CoordinatorStats` holds the running totals the broker's metrics read. Both are shared by
`coordinator.py`, `membership.py` and `metadata_manager.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CoordinatorStats", "GroupConfig"]


@dataclass(frozen=True)
class GroupConfig:
    offsets_partitions: int = 50
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    commit_timeout_ms: int = 5000
    metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000


@dataclass
class CoordinatorStats:
    rebalances: int = 0  # generations completed
    commits: int = 0  # offsets committed (partitions)
    expired_members: int = 0
