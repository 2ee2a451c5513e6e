"""A decided change of one partition's state znode, before ZooKeeper has accepted it.

How it works: every decision of the core (an election, an ISR removal, a new partition's
first state) is a `StateChange`: the partition, the state it was decided from (`old`,
None when the znode is to be created), the new state and why. The shell writes `new` to
/brokers/topics/<t>/partitions/<p>/state as a conditional set on `old.zk_version` (or a
create), fenced by the controller epoch; once ZooKeeper accepts, the context records it
with the new znode version (`ControllerContext.apply`). A version conflict means a
broker (an ISR change) or another controller moved first: the shell re-reads the znode
and asks the core to decide again.

Every change bumps the leader epoch: brokers ignore a LeaderAndIsr whose leader epoch is
not newer than theirs, as Kafka's ZooKeeper-era controller relies on.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from client.protocol.types import TopicPartition
from server_common.zkdata import NO_LEADER, LeaderAndIsr


class Reason(StrEnum):
    """Why a partition's state changed (also the `reason` field of the event log)."""

    NEW_PARTITION = "new_partition"
    OFFLINE_ELECTION = "offline_election"
    UNCLEAN_ELECTION = "unclean_election"
    PARTITION_OFFLINE = "partition_offline"
    ISR_REMOVAL = "isr_removal"
    PREFERRED_ELECTION = "preferred_election"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"
    REASSIGNMENT = "reassignment"
    LEADER_STEP_DOWN = "leader_step_down"


@dataclass(frozen=True)
class StateChange:
    tp: TopicPartition
    old: LeaderAndIsr | None
    new: LeaderAndIsr
    reason: Reason
    unclean: bool = False

    @property
    def creates(self) -> bool:
        """The state znode does not exist yet."""
        return self.old is None

    @property
    def leader_changed(self) -> bool:
        return self.old is None or self.old.leader != self.new.leader

    @property
    def goes_offline(self) -> bool:
        return self.new.leader == NO_LEADER and (self.old is None or self.old.leader != NO_LEADER)


def next_state(
    old: LeaderAndIsr, *, leader: int, isr: tuple[int, ...], controller_epoch: int
) -> LeaderAndIsr:
    """`old` with a new leader and ISR and the leader epoch bumped; `zk_version` stays the
    version the conditional set expects."""
    return LeaderAndIsr(
        leader=leader,
        leader_epoch=old.leader_epoch + 1,
        isr=tuple(isr),
        controller_epoch=controller_epoch,
        zk_version=old.zk_version,
    )
