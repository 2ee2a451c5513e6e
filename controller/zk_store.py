"""ZooKeeper reads and fenced writes of the active controller.

How it works:
- Reads are batched with `ZooKeeper.get_many` (pipelined: thousands of znodes cost about
  one round trip), so a new controller loads 2,000 partitions in a fraction of a second.
  Malformed znodes are logged and skipped, never fatal.
- Every write is a ZooKeeper multi whose first op checks the version of
  /controller_epoch that this controller set when it was elected (Kafka 2.x does the
  same). If another controller has been elected since, the check fails, nothing is
  written and `ControllerMovedError` tells the caller to resign. Writes of many znodes
  are one multi per znode, pipelined, so one partition's version conflict does not
  undo the others.
- Topic ids (KIP-516): a topic loaded without one gets one (`set_topic_ids`), written
  back with a conditional set of its znode at the version it was read at.
- Partition state writes are conditional on the version the decision was made from
  (`StateChange.old.zk_version`) or are creates; a conflict (BadVersion, NodeExists,
  NoNode) is reported back per partition for the caller to re-read and decide again.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from client.protocol.topic_ids import new_topic_id
from client.protocol.types import TopicPartition
from controller.core.context import BrokerInfo
from controller.core.state_change import StateChange
from server_common import zkdata
from server_common.zk import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    ZkOp,
    ZooKeeper,
)
from server_common.zkdata import LeaderAndIsr, TopicAssignment, ZkDataError

log = logging.getLogger(__name__)

# Rounds of "set the topic id, re-read a znode that changed meanwhile" per topic.
MAX_TOPIC_ID_ROUNDS = 5


class ControllerMovedError(Exception):
    """/controller_epoch moved on: another controller was elected after this one."""


@dataclass
class ClusterSnapshot:
    """Everything a new controller reads on election."""

    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicAssignment] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    states: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    topics_to_delete: list[str] = field(default_factory=list)


@dataclass
class StateWriteResult:
    written: list[tuple[StateChange, int]] = field(default_factory=list)  # (change, version)
    conflicts: list[TopicPartition] = field(default_factory=list)


class ZkStore:
    def __init__(self, zk: ZooKeeper, epoch_zk_version: int):
        self.zk = zk
        self.epoch_zk_version = epoch_zk_version

    # -- reads ------------------------------------------------------------------------
    async def read_brokers(self) -> dict[int, BrokerInfo]:
        ids = sorted(
            int(c) for c in await self.zk.get_children_or_empty(zkdata.BROKERS_IDS) if c.isdigit()
        )
        results = await self.zk.get_many([zkdata.broker_path(b) for b in ids])
        brokers = {}
        for broker_id, result in zip(ids, results, strict=True):
            if result is None:
                continue  # gone between the listing and the read
            data, stat = result
            try:
                registration = zkdata.BrokerRegistration.decode(broker_id, data, stat.czxid)
            except ZkDataError as exc:
                log.warning("ignoring broker %d: %s", broker_id, exc)
                continue
            brokers[broker_id] = BrokerInfo.from_registration(registration)
        return brokers

    async def read_topic_names(self) -> list[str]:
        return sorted(await self.zk.get_children_or_empty(zkdata.BROKERS_TOPICS))

    async def read_assignments(self, names: Sequence[str]) -> dict[str, TopicAssignment]:
        """The topic znodes of `names`, with the versions they were read at (topics whose
        znode is gone or unreadable are left out)."""
        names = list(names)
        results = await self.zk.get_many([zkdata.topic_path(t) for t in names])
        topics: dict[str, TopicAssignment] = {}
        for name, result in zip(names, results, strict=True):
            if result is None:
                continue
            try:
                topics[name] = TopicAssignment.decode(name, result[0], result[1].version)
            except ZkDataError as exc:
                log.warning("ignoring topic %s: %s", name, exc)
        return topics

    async def read_topics(
        self, names: Sequence[str]
    ) -> tuple[dict[str, TopicAssignment], dict[str, dict[str, str]]]:
        """Assignments and configs of `names` (topics whose znode is gone are left out)."""
        topics = await self.read_assignments(names)
        return topics, await self.read_configs(list(topics))

    async def read_configs(self, names: Sequence[str]) -> dict[str, dict[str, str]]:
        names = list(names)
        results = await self.zk.get_many([zkdata.topic_config_path(t) for t in names])
        configs: dict[str, dict[str, str]] = {}
        for name, result in zip(names, results, strict=True):
            configs[name] = {}
            if result is not None:
                try:
                    configs[name] = zkdata.decode_topic_config(name, result[0])
                except ZkDataError as exc:
                    log.warning("topic %s: bad config znode: %s", name, exc)
        return configs

    async def read_broker_default_config(self) -> dict[str, str]:
        """The cluster-wide dynamic broker configs (/config/brokers/<default>; {} if none)."""
        path = zkdata.broker_config_path(zkdata.BROKER_DEFAULT_ENTITY)
        (result,) = await self.zk.get_many([path])
        if result is None:
            return {}
        try:
            return zkdata.decode_entity_config(path, result[0])
        except ZkDataError as exc:
            log.warning("bad cluster-wide broker config znode: %s", exc)
            return {}

    async def read_states(
        self, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderAndIsr | None]:
        tps = list(tps)
        paths = [zkdata.partition_state_path(tp.topic, tp.partition) for tp in tps]
        results = await self.zk.get_many(paths)
        states: dict[TopicPartition, LeaderAndIsr | None] = {}
        for tp, path, result in zip(tps, paths, results, strict=True):
            states[tp] = None
            if result is not None:
                try:
                    states[tp] = LeaderAndIsr.decode(result[0], result[1].version, path)
                except ZkDataError as exc:
                    log.warning("ignoring partition state %s: %s", tp, exc)
        return states

    async def read_cluster(self) -> ClusterSnapshot:
        snapshot = ClusterSnapshot()
        snapshot.brokers = await self.read_brokers()
        snapshot.topics, snapshot.configs = await self.read_topics(await self.read_topic_names())
        tps = [
            TopicPartition(topic, partition)
            for topic, assignment in snapshot.topics.items()
            for partition in assignment.partitions
        ]
        snapshot.states = {
            tp: state for tp, state in (await self.read_states(tps)).items() if state is not None
        }
        snapshot.topics_to_delete = sorted(
            await self.zk.get_children_or_empty(zkdata.ADMIN_DELETE_TOPICS)
        )
        return snapshot

    async def read_partition_list(self, path: str) -> list[tuple[str, int]] | None:
        """/admin/preferred_replica_election: None if absent, [] if unreadable."""
        result = await self.zk.get_or_none(path)
        if result is None:
            return None
        try:
            return zkdata.decode_partition_list(result[0], path)
        except ZkDataError as exc:
            log.warning("ignoring unreadable %s: %s", path, exc)
            return []

    async def read_reassignment_plan(self) -> dict[tuple[str, int], tuple[int, ...]] | None:
        """/admin/reassign_partitions: None if absent, {} if unreadable."""
        result = await self.zk.get_or_none(zkdata.ADMIN_REASSIGN_PARTITIONS)
        if result is None:
            return None
        try:
            return zkdata.decode_reassignment(result[0])
        except ZkDataError as exc:
            log.warning("ignoring unreadable reassignment plan: %s", exc)
            return {}

    async def read_isr_notifications(self) -> tuple[list[str], set[TopicPartition]]:
        """The notification znodes' paths and the partitions they name."""
        children = sorted(await self.zk.get_children_or_empty(zkdata.ISR_CHANGE_NOTIFICATION))
        paths = [f"{zkdata.ISR_CHANGE_NOTIFICATION}/{c}" for c in children]
        partitions: set[TopicPartition] = set()
        for path, result in zip(paths, await self.zk.get_many(paths), strict=True):
            if result is None:
                continue
            try:
                partitions.update(
                    TopicPartition(t, p) for t, p in zkdata.decode_isr_change(result[0], path)
                )
            except ZkDataError as exc:
                log.warning("ignoring unreadable %s: %s", path, exc)
        return paths, partitions

    # -- fenced writes ------------------------------------------------------------------
    async def _commit(self, transactions: Sequence[Sequence[ZkOp]]) -> list[list]:
        """Commit each op list as its own multi behind the controller epoch check; the
        per-op results without the check's."""
        if not transactions:
            return []
        fence = ZkOp.check(zkdata.CONTROLLER_EPOCH, self.epoch_zk_version)
        results = await self.zk.commit_many([[fence, *ops] for ops in transactions])
        out = []
        for result in results:
            if isinstance(result, Exception):
                raise result
            if isinstance(result[0], Exception) and not isinstance(result[0], RolledBackError):
                raise ControllerMovedError(
                    f"/controller_epoch is no longer at version {self.epoch_zk_version}"
                )
            out.append(result[1:])
        return out

    async def write_states(self, changes: Sequence[StateChange]) -> StateWriteResult:
        """Write decided partition states: conditional sets, or creates for new partitions."""
        creates = [c for c in changes if c.creates]
        if creates:
            await self._ensure_partition_paths({c.tp for c in creates})
        transactions = []
        for change in changes:
            path = zkdata.partition_state_path(change.tp.topic, change.tp.partition)
            data = change.new.encode()
            if change.creates:
                transactions.append([ZkOp.create(path, data)])
            elif change.old is not None:
                transactions.append([ZkOp.set(path, data, change.old.zk_version)])
        outcome = StateWriteResult()
        for change, (result,) in zip(changes, await self._commit(transactions), strict=True):
            if isinstance(result, (BadVersionError, NodeExistsError, NoNodeError)):
                log.info("%s: state znode changed under us (%s)", change.tp, type(result).__name__)
                outcome.conflicts.append(change.tp)
            elif isinstance(result, Exception):
                raise result
            else:
                version = result.version if not change.creates else 0
                outcome.written.append((change, version))
        return outcome

    async def _ensure_partition_paths(self, tps: set[TopicPartition]) -> None:
        topics = sorted({tp.topic for tp in tps})
        paths = [zkdata.partitions_path(t) for t in topics]
        paths += [zkdata.partition_path(tp.topic, tp.partition) for tp in sorted(tps)]
        for path, (result,) in zip(
            paths, await self._commit([[ZkOp.create(p)] for p in paths]), strict=True
        ):
            if isinstance(result, Exception) and not isinstance(result, NodeExistsError):
                log.warning("could not create %s: %r", path, result)

    async def _commit_one(self, op: ZkOp) -> object:
        """One fenced op; its result (a value or the exception instance)."""
        ((result,),) = await self._commit([[op]])
        return result

    async def write_topic_assignment(self, assignment: TopicAssignment) -> None:
        path = zkdata.topic_path(assignment.topic)
        result = await self._commit_one(ZkOp.set(path, assignment.encode()))
        if isinstance(result, Exception):
            raise result

    async def set_topic_ids(
        self,
        assignments: Iterable[TopicAssignment],
        new_id: Callable[[], uuid.UUID] = new_topic_id,
    ) -> dict[str, TopicAssignment]:
        """Give every topic loaded without an id a new one (Kafka 2.8's controller does
        this when it loads topics: `setTopicIds`). Each write is a fenced conditional set
        of the topic znode at the version it was read at; a znode changed since (a
        partition addition, say) is read again and tried again, a few rounds at most, and
        one that is gone is left out. Returns the topics that have an id now, as written
        (or as found, if an id got there first)."""
        done: dict[str, TopicAssignment] = {}
        pending = [a for a in assignments if a.topic_id is None]
        for _ in range(MAX_TOPIC_ID_ROUNDS):
            if not pending:
                break
            with_ids = [replace(a, topic_id=new_id()) for a in pending]
            results = await self._commit(
                [[ZkOp.set(zkdata.topic_path(a.topic), a.encode(), a.zk_version)] for a in with_ids]
            )
            conflicts = []
            for assignment, (result,) in zip(with_ids, results, strict=True):
                if isinstance(result, BadVersionError):
                    conflicts.append(assignment.topic)
                elif isinstance(result, NoNodeError):
                    continue  # deleted meanwhile: the topic watch forgets it
                elif isinstance(result, Exception):
                    raise result
                else:
                    done[assignment.topic] = replace(assignment, zk_version=result.version)
                    log.info("topic %s: assigned topic id %s", assignment.topic, assignment.id_text)
            fresh = await self.read_assignments(conflicts) if conflicts else {}
            done.update({t: a for t, a in fresh.items() if a.topic_id is not None})
            pending = [a for a in fresh.values() if a.topic_id is None]
        if pending:
            log.error(
                "gave up giving a topic id to %s after %d rounds of conflicting writes",
                ", ".join(a.topic for a in pending),
                MAX_TOPIC_ID_ROUNDS,
            )
        return done

    async def set_or_delete(self, path: str, data: bytes | None) -> None:
        """Overwrite `path` with `data`, or delete it when `data` is None (absent: fine)."""
        op = ZkOp.delete(path) if data is None else ZkOp.set(path, data)
        result = await self._commit_one(op)
        if isinstance(result, Exception) and not isinstance(result, NoNodeError):
            raise result

    async def delete_paths(self, paths: Sequence[str]) -> None:
        """Delete znodes in the order given (children first); absent ones are fine, a
        znode that unexpectedly has children is deleted recursively (unfenced)."""
        results = await self._commit([[ZkOp.delete(p)] for p in paths])
        for path, (result,) in zip(paths, results, strict=True):
            if isinstance(result, NotEmptyError):
                log.warning("%s has unexpected children: deleting recursively", path)
                await self.zk.delete(path, recursive=True)
            elif isinstance(result, Exception) and not isinstance(result, NoNodeError):
                raise result

    async def delete_topic(self, topic: str) -> None:
        """/brokers/topics/<t> (with its partitions), /config/topics/<t>, then the admin
        deletion marker, last, so the topic name cannot be reused before it is gone."""
        partitions = await self.zk.get_children_or_empty(zkdata.partitions_path(topic))
        paths = []
        for p in sorted(partitions, key=lambda c: (len(c), c)):
            base = f"{zkdata.partitions_path(topic)}/{p}"
            paths += [f"{base}/state", base]
        paths += [zkdata.partitions_path(topic), zkdata.topic_path(topic)]
        paths += [zkdata.topic_config_path(topic), zkdata.delete_topic_path(topic)]
        await self.delete_paths(paths)
