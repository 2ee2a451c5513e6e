"""Partition reassignment, Kafka's ZooKeeper-era steps, as pure functions.

How it works: a reassignment moves a partition from its original replicas (ORS) to a
target set (TRS). While it runs, the partition's assigned replica set is RS = TRS followed
by the original replicas that are not in the target, with `adding` = TRS - ORS and
`removing` = ORS - TRS written next to it in /brokers/topics/<t> (Kafka 2.4+ layout).

- Phase A (`Reassignment.start`): the assignment becomes RS; the shell writes it, bumps the
  leader epoch (`decisions.epoch_bumps`) and sends LeaderAndIsr with RS, so the new
  replicas start following.
- Phase B, once every target replica is in the ISR (`is_complete`):
  `decisions.reassignment_completion` elects a new leader with the reassignment strategy
  if the current one is not in the target (or not alive), drops the removed replicas from
  the ISR and bumps the epoch; the shell then writes the final assignment (TRS), stops
  and deletes the removed replicas and takes the partition out of
  /admin/reassign_partitions.
"""

from __future__ import annotations

from dataclasses import dataclass

from server_common.zkdata import LeaderAndIsr


@dataclass(frozen=True)
class Reassignment:
    """One partition's move from `original` to `target` replicas."""

    target: tuple[int, ...]
    original: tuple[int, ...]

    @property
    def adding(self) -> tuple[int, ...]:
        return tuple(r for r in self.target if r not in self.original)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(r for r in self.original if r not in self.target)

    @property
    def full_replicas(self) -> tuple[int, ...]:
        """RS: the target first (so the preferred replica is the target's), then the rest."""
        return self.target + self.removing

    @classmethod
    def start(cls, current: tuple[int, ...], target: tuple[int, ...]) -> Reassignment | None:
        """The reassignment from `current` to `target`; None when there is nothing to move
        (same replicas in the same order) or the target is empty or has duplicates."""
        if not target or len(set(target)) != len(target) or tuple(current) == tuple(target):
            return None
        return cls(target=tuple(target), original=tuple(current))

    @classmethod
    def from_znode(
        cls,
        replicas: tuple[int, ...],
        adding: tuple[int, ...],
        removing: tuple[int, ...],
    ) -> Reassignment | None:
        """Rebuild a reassignment in flight from a topic znode's RS/adding/removing."""
        if not adding and not removing:
            return None
        target = tuple(r for r in replicas if r not in removing)
        original = tuple(r for r in replicas if r not in adding)
        return cls(target=target, original=original)


def is_complete(reassignment: Reassignment, state: LeaderAndIsr | None) -> bool:
    """Phase B may start: every target replica is in the ISR."""
    return state is not None and all(r in state.isr for r in reassignment.target)
