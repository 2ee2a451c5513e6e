"""Read a cluster's state straight from ZooKeeper (for `cluster status`, `watch`, tests).

How it works: one short-lived kazoo session; brokers, controller and every partition
state znode are read with kazoo's async calls issued together (a few round trips for
the whole cluster). Pure reading: nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from server_common import zkdata


@dataclass(frozen=True)
class PartitionView:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int


@dataclass
class ClusterView:
    brokers: dict[int, zkdata.BrokerRegistration] = field(default_factory=dict)
    controller_id: int | None = None
    controller_epoch: int | None = None
    partitions: list[PartitionView] = field(default_factory=list)
    topics_being_deleted: list[str] = field(default_factory=list)

    def partition(self, topic: str, partition: int) -> PartitionView | None:
        for p in self.partitions:
            if p.topic == topic and p.partition == partition:
                return p
        return None


def read_cluster(connect: str, timeout_s: float = 10.0) -> ClusterView:
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoNodeError

    client = KazooClient(hosts=connect, timeout=timeout_s)
    client.start(timeout=timeout_s)
    try:
        return _read(client, NoNodeError, timeout_s)
    finally:
        client.stop()
        client.close()


def _get_all(client, paths, no_node, timeout_s):
    pending = [client.get_async(p) for p in paths]
    out = []
    for item in pending:
        try:
            out.append(item.get(timeout=timeout_s))
        except no_node:
            out.append(None)
    return out


def _children(client, path, no_node) -> list[str]:
    try:
        return client.get_children(path)
    except no_node:
        return []


def _read(client, no_node, timeout_s) -> ClusterView:
    view = ClusterView()
    ids = sorted(int(c) for c in _children(client, zkdata.BROKERS_IDS, no_node) if c.isdigit())
    for broker_id, result in zip(
        ids, _get_all(client, [zkdata.broker_path(i) for i in ids], no_node, timeout_s), strict=True
    ):
        if result is None:
            continue
        try:
            view.brokers[broker_id] = zkdata.BrokerRegistration.decode(
                broker_id, result[0], result[1].czxid
            )
        except zkdata.ZkDataError:
            continue
    controller, epoch = _get_all(
        client, [zkdata.CONTROLLER, zkdata.CONTROLLER_EPOCH], no_node, timeout_s
    )
    if controller is not None:
        try:
            view.controller_id = zkdata.ControllerRegistration.decode(controller[0]).controller_id
        except zkdata.ZkDataError:
            pass
    if epoch is not None:
        try:
            view.controller_epoch = int(epoch[0])
        except ValueError:
            pass
    view.topics_being_deleted = sorted(_children(client, zkdata.ADMIN_DELETE_TOPICS, no_node))
    topics = sorted(_children(client, zkdata.BROKERS_TOPICS, no_node))
    assignments = _get_all(client, [zkdata.topic_path(t) for t in topics], no_node, timeout_s)
    wanted = []
    for topic, result in zip(topics, assignments, strict=True):
        if result is None:
            continue
        try:
            assignment = zkdata.TopicAssignment.decode(topic, result[0])
        except zkdata.ZkDataError:
            continue
        for partition, replicas in sorted(assignment.partitions.items()):
            wanted.append((topic, partition, replicas))
    states = _get_all(
        client, [zkdata.partition_state_path(t, p) for t, p, _ in wanted], no_node, timeout_s
    )
    for (topic, partition, replicas), result in zip(wanted, states, strict=True):
        if result is None:
            view.partitions.append(PartitionView(topic, partition, replicas, -1, -1, (), -1))
            continue
        try:
            state = zkdata.LeaderAndIsr.decode(result[0], result[1].version)
        except zkdata.ZkDataError:
            continue
        view.partitions.append(
            PartitionView(
                topic,
                partition,
                replicas,
                state.leader,
                state.leader_epoch,
                state.isr,
                state.zk_version,
            )
        )
    return view
