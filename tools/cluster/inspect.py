"""Read a cluster's state straight from ZooKeeper (for `cluster status`, `watch`, tests).

How it works: `read_cluster_view(zk)` reads brokers, controller and every partition
state znode through the ZooKeeper seam with pipelined batch reads (a few round trips
for the whole cluster); `read_cluster(connect)` does it through a short-lived session
of its own, for synchronous callers. Pure reading: nothing is written.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import trio

from client.metadata import connection_failure_reason
from server_common import zkdata
from server_common.zk import ZooKeeper
from server_common.zk_kazoo import KazooZooKeeper

T = TypeVar("T")


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


async def read_cluster_view(zk: ZooKeeper) -> ClusterView:
    """The cluster as ZooKeeper holds it now, read through a started session."""
    view = ClusterView()
    ids = sorted(int(c) for c in await zk.get_children_or_empty(zkdata.BROKERS_IDS) if c.isdigit())
    for broker_id, result in zip(
        ids, await zk.get_many([zkdata.broker_path(i) for i in ids]), strict=True
    ):
        if result is None:
            continue
        try:
            view.brokers[broker_id] = zkdata.BrokerRegistration.decode(
                broker_id, result[0], result[1].czxid
            )
        except zkdata.ZkDataError:
            continue
    controller, epoch = await zk.get_many([zkdata.CONTROLLER, zkdata.CONTROLLER_EPOCH])
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
    view.topics_being_deleted = sorted(await zk.get_children_or_empty(zkdata.ADMIN_DELETE_TOPICS))
    topics = sorted(await zk.get_children_or_empty(zkdata.BROKERS_TOPICS))
    assignments = await zk.get_many([zkdata.topic_path(t) for t in topics])
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
    states = await zk.get_many([zkdata.partition_state_path(t, p) for t, p, _ in wanted])
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


def read_cluster(connect: str, timeout_s: float = 10.0) -> ClusterView:
    """`read_cluster_view` through a session of its own, for synchronous callers."""

    async def read() -> ClusterView:
        async with zookeeper_session(connect, timeout_s) as zk:
            return await read_cluster_view(zk)

    return run_blocking(read)


def run_blocking(async_fn: Callable[[], Awaitable[T]]) -> T:
    """Run `async_fn` to completion and return its result, from synchronous code: in a
    Trio run of its own, on a worker thread if this thread is already running Trio (the
    caller then blocks its loop for that long, as any synchronous call does)."""
    if not trio.lowlevel.in_trio_run():
        return trio.run(async_fn)
    with ThreadPoolExecutor(max_workers=1) as worker:
        return worker.submit(trio.run, async_fn).result()


class ZooKeeperUnreachableError(ConnectionError):
    """No ZooKeeper server of a connect string accepts TCP connections."""


async def check_reachable(connect: str, timeout_s: float) -> None:
    """Raise `ZooKeeperUnreachableError` ("Connection refused") at once when no server of
    `connect` ("host:port,host:port/chroot") accepts a TCP connection: kazoo would retry
    a refused connection until its whole connection timeout, then call it a time-out."""
    hosts = connect.split("/", 1)[0]
    reasons: list[str] = []
    for item in hosts.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit():
            return  # let kazoo judge what it makes of this address
        try:
            with trio.fail_after(min(timeout_s, 2.0)):
                stream = await trio.open_tcp_stream(host.strip("[]"), int(port))
        except trio.TooSlowError:
            return  # slow, not refused: kazoo's own timeout decides
        except OSError as exc:
            reasons.append(_os_reason(exc))
            continue
        await stream.aclose()
        return
    raise ZooKeeperUnreachableError(", ".join(dict.fromkeys(reasons)))


def _os_reason(exc: BaseException) -> str:
    """The OS's words ("Connection refused") from an error or its causes."""
    return connection_failure_reason(exc).rpartition(": ")[2]


@asynccontextmanager
async def zookeeper_session(connect: str, timeout_s: float) -> AsyncIterator[ZooKeeper]:
    """A short-lived ZooKeeper session for the tools (closed when the block ends)."""
    await check_reachable(connect, timeout_s)
    timeout_ms = int(timeout_s * 1000)
    zk = KazooZooKeeper(connect, session_timeout_ms=timeout_ms, connection_timeout_ms=timeout_ms)
    await zk.start()
    try:
        yield zk
    finally:
        await zk.stop()
