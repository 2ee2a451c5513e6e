"""The controller's LeaderAndIsr and StopReplica, applied to this broker's replicas
(Kafka's `ReplicaManager.becomeLeaderOrFollower`, `makeLeaders`, `makeFollowers` and
`stopReplicas`), for `replica_manager.py`.

How it works:
- LeaderAndIsr (`become_leader_or_follower`): a request from an older controller epoch
  is refused whole (STALE_CONTROLLER_EPOCH). Per partition: one that does not list this
  broker is unknown here; an older leader epoch (or the same one, once the partition has
  a role) is ignored; otherwise the log is created if needed (its high watermark from
  `replication-offset-checkpoint`) and the partition becomes leader (its follower fetch
  stops; the HW may move at once) or follower (fetching from the new leader starts, in
  the TRUNCATING phase, `follower_fetch.py`).
- StopReplica (`stop_replicas`): following stops; a partition at a newer leader epoch
  than the request's is left alone (FENCED_LEADER_EPOCH); otherwise it goes offline and,
  if asked, its log is deleted.
- After either, every delayed operation on a changed partition is checked again (a
  produce or fetch waiting on a partition that is no longer led here is answered), and
  the shell is told the followed partitions changed (`followers_changed`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from broker.core.follower_fetch import FollowerFetch
from broker.core.log.config import LogConfig
from broker.core.log.manager import LogManager
from broker.core.partition import Partition, PartitionStateUpdate, Role
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition

__all__ = ["BecomeResult", "RoleChanges"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BecomeResult:
    error_code: ErrorCode
    partition_errors: dict[TopicPartition, ErrorCode] = field(default_factory=dict)


class RoleChanges:
    """Makes `partitions` (the replica manager's, shared) leaders, followers or offline
    as the controller says; `recheck(tp, now_ms)` checks the delayed operations of a
    changed partition."""

    def __init__(
        self,
        broker_id: int,
        partitions: dict[TopicPartition, Partition],
        followers: FollowerFetch,
        log_manager: LogManager,
        log_config_for: Callable[[str], LogConfig],
        *,
        events: Callable[[str, dict], None],
        recheck: Callable[[TopicPartition, int], None],
        followers_changed: Callable[[], None],
    ) -> None:
        self.broker_id = broker_id
        self.controller_epoch = -1
        self._partitions = partitions
        self._followers = followers
        self._log_manager = log_manager
        self._log_config_for = log_config_for
        self._events = events
        self._recheck = recheck
        self._followers_changed = followers_changed
        # HWs from replication-offset-checkpoint, for partitions not created yet.
        self.checkpointed_hw: dict[TopicPartition, int] = log_manager.read_high_watermarks()

    def become_leader_or_follower(
        self,
        now_ms: int,
        controller_epoch: int,
        states: list[PartitionStateUpdate],
    ) -> BecomeResult:
        if controller_epoch < self.controller_epoch:
            log.warning(
                "ignoring LeaderAndIsr from controller epoch %d (current %d)",
                controller_epoch,
                self.controller_epoch,
            )
            return BecomeResult(ErrorCode.STALE_CONTROLLER_EPOCH)
        self.controller_epoch = controller_epoch
        errors: dict[TopicPartition, ErrorCode] = {}
        changed: list[TopicPartition] = []
        created: list[TopicPartition] = []
        for state in states:
            tp = state.topic_partition
            if self.broker_id not in state.replicas:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            partition = self._partitions.get(tp)
            if partition is not None and state.leader_epoch <= partition.leader_epoch:
                if state.leader_epoch < partition.leader_epoch or partition.role is not Role.NONE:
                    log.info(
                        "%s: ignoring LeaderAndIsr at leader epoch %d (current %d)",
                        tp,
                        state.leader_epoch,
                        partition.leader_epoch,
                    )
                    errors[tp] = ErrorCode.STALE_CONTROLLER_EPOCH
                    continue
            try:
                if partition is None:
                    partition = self._create_partition(tp, now_ms)
                    created.append(tp)
                if state.leader == self.broker_id:
                    self._make_leader(partition, state, now_ms)
                else:
                    self._make_follower(partition, state, now_ms)
            except Exception as exc:
                log.exception("%s: failed to apply LeaderAndIsr", tp)
                errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                self._events("error", {"partition": str(tp), "error": str(exc)})
                continue
            errors[tp] = ErrorCode.NONE
            changed.append(tp)
        if created:
            self._sync_created(created, errors)
        for tp in changed:
            self._recheck(tp, now_ms)
        self._followers_changed()
        return BecomeResult(ErrorCode.NONE, errors)

    def _sync_created(self, created: list[TopicPartition], errors: dict) -> None:
        """One directory fsync for every log this request created (before its answer)."""
        try:
            self._log_manager.sync_log_dir()
        except OSError as exc:
            log.exception("syncing the log directory after creating %d logs", len(created))
            self._events("error", {"partition": str(created[0]), "error": str(exc)})
            for tp in created:
                errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR

    def _create_partition(self, tp: TopicPartition, now_ms: int) -> Partition:
        config = self._log_config_for(tp.topic)
        log_ = self._log_manager.get_or_create_log(tp, config, now_ms=now_ms, sync_dir=False)
        hw = self.checkpointed_hw.get(tp, 0)
        partition = Partition(tp, self.broker_id, log_, high_watermark=hw)
        self._partitions[tp] = partition
        return partition

    def _make_leader(self, partition: Partition, state: PartitionStateUpdate, now_ms: int) -> None:
        tp = partition.topic_partition
        self._followers.stop(tp)
        was_leader = partition.is_leader
        if partition.make_leader(state, now_ms):
            self._events(
                "became_leader",
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "leader_epoch": state.leader_epoch,
                    "isr": list(state.isr),
                    "replicas": list(state.replicas),
                    "was_leader": was_leader,
                    "log_end_offset": partition.log_end_offset,
                    "high_watermark": partition.high_watermark,
                },
            )
        partition.maybe_increment_hw(now_ms)

    def _make_follower(
        self, partition: Partition, state: PartitionStateUpdate, now_ms: int
    ) -> None:
        tp = partition.topic_partition
        if partition.make_follower(state, now_ms) or not self._followers.is_following(tp):
            self._events(
                "became_follower",
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "leader": state.leader,
                    "leader_epoch": state.leader_epoch,
                    "replicas": list(state.replicas),
                    "log_end_offset": partition.log_end_offset,
                    "high_watermark": partition.high_watermark,
                },
            )
            if state.leader >= 0:
                self._followers.start(tp, state.leader, state.leader_epoch)
            else:
                self._followers.stop(tp)

    def stop_replicas(
        self,
        now_ms: int,
        controller_epoch: int,
        partitions: list[tuple[TopicPartition, bool, int]],
    ) -> BecomeResult:
        """StopReplica: (partition, delete?, leader epoch) triples."""
        if controller_epoch < self.controller_epoch:
            return BecomeResult(ErrorCode.STALE_CONTROLLER_EPOCH)
        self.controller_epoch = controller_epoch
        errors: dict[TopicPartition, ErrorCode] = {}
        for tp, delete, leader_epoch in partitions:
            partition = self._partitions.get(tp)
            self._followers.stop(tp)
            if (
                partition is not None
                and leader_epoch >= 0
                and leader_epoch < partition.leader_epoch
            ):
                errors[tp] = ErrorCode.FENCED_LEADER_EPOCH
                continue
            if partition is not None:
                partition.make_offline()
            if delete:
                self._partitions.pop(tp, None)
                self.checkpointed_hw.pop(tp, None)
                try:
                    self._log_manager.delete_log(tp)
                except Exception:
                    log.exception("%s: failed to delete the log", tp)
                    errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                    continue
                self._events("deleted", {"topic": tp.topic, "partition": tp.partition})
            errors[tp] = ErrorCode.NONE
            self._recheck(tp, now_ms)
        self._followers_changed()
        return BecomeResult(ErrorCode.NONE, errors)
