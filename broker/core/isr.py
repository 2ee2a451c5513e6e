"""The ISR as a leader holds it: committed, or with one change waiting for ZooKeeper.

How it works: an ISR change is written to ZooKeeper with a conditional set and only
takes effect when ZooKeeper accepts it (SPEC.md). Until then the partition is in a
*pending* state, which is explicit here rather than a flag:

- `CommittedIsr`: no change in flight.
- `PendingExpandIsr`: a follower is being added. Its *maximal* ISR already includes the
  new member, so the HW waits for it too (safe: HW only moves when every member that
  might be in the ISR has the data).
- `PendingShrinkIsr`: followers are being removed. The maximal ISR is still the old,
  larger set, so acks=all writes keep waiting for them until ZooKeeper confirms.

`isr` is what ZooKeeper holds (used for min.insync.replicas); `maximal_isr` is what the
HW and DelayedProduce must respect. No new change starts while one is in flight.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CommittedIsr:
    isr: frozenset[int]

    @property
    def maximal_isr(self) -> frozenset[int]:
        return self.isr

    @property
    def is_inflight(self) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class PendingExpandIsr:
    isr: frozenset[int]
    new_in_sync_replica: int

    @property
    def maximal_isr(self) -> frozenset[int]:
        return self.isr | {self.new_in_sync_replica}

    @property
    def is_inflight(self) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class PendingShrinkIsr:
    isr: frozenset[int]
    out_of_sync_replicas: frozenset[int]

    @property
    def maximal_isr(self) -> frozenset[int]:
        return self.isr

    @property
    def is_inflight(self) -> bool:
        return True


IsrState = CommittedIsr | PendingExpandIsr | PendingShrinkIsr


def ordered(members: frozenset[int] | set[int], assignment: tuple[int, ...]) -> tuple[int, ...]:
    """ISR members in assignment order (then any stragglers sorted): stable for display."""
    in_order = [r for r in assignment if r in members]
    rest = sorted(m for m in members if m not in assignment)
    return tuple(in_order + rest)
