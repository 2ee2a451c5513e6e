"""Controller failover time with 2,000 partitions (`make bench BENCH_ARGS=controller`).

Starts a real ZooKeeper, writes 20 topics x 100 partitions (RF 3 over 3 brokers) with
their state znodes directly, registers 3 fake brokers, starts controller A, waits until
it has told the brokers everything, starts standby B, then stops A (its ZooKeeper
session closes, /controller goes away) and measures until B:
- is elected and has loaded the cluster (its context is ready);
- has had every broker receive a LeaderAndIsr covering all the broker's partitions and an
  UpdateMetadata with all 2,000 partitions, at B's epoch.
Also times a bare batched read of all 2,000 state znodes. Prints figures; asserts nothing.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from pathlib import Path

import trio

from client.protocol import messages as m
from client.protocol.topic_ids import new_topic_id
from client.protocol.types import TopicPartition
from controller.config import ControllerConfig
from controller.server import ControllerServer
from controller.zk_store import ZkStore
from server_common import zkdata
from server_common.zk_kazoo import KazooZooKeeper
from tests.bench.table import Row, report
from tests.support.recording_broker import RecordingBroker
from tools.cluster.zookeeper import ZooKeeperServer

TOPICS = 20
PARTITIONS_PER_TOPIC = 100
BROKERS = (1, 2, 3)


async def _populate(zk: KazooZooKeeper) -> list[TopicPartition]:
    await zk.ensure_paths(zkdata.PERSISTENT_PATHS)
    creates: list[tuple[str, bytes]] = []
    tps = []
    for t in range(TOPICS):
        topic = f"topic-{t:02d}"
        assignment = {
            p: tuple(BROKERS[(p + i) % len(BROKERS)] for i in range(len(BROKERS)))
            for p in range(PARTITIONS_PER_TOPIC)
        }
        creates.append((zkdata.topic_config_path(topic), zkdata.encode_topic_config({})))
        # With a topic id, as CreateTopics writes it (else the failover measured would
        # also give every topic one).
        znode = zkdata.TopicAssignment(topic, assignment, topic_id=new_topic_id())
        creates.append((zkdata.topic_path(topic), znode.encode()))
        creates.append((zkdata.partitions_path(topic), b""))
        for p, replicas in assignment.items():
            state = zkdata.LeaderAndIsr(replicas[0], 0, replicas, controller_epoch=0)
            creates.append((zkdata.partition_path(topic, p), b""))
            creates.append((zkdata.partition_state_path(topic, p), state.encode()))
            tps.append(TopicPartition(topic, p))
    results = await zk.create_many(creates)
    failed = [r for r in results if isinstance(r, Exception)]
    if failed:
        raise RuntimeError(f"populating ZooKeeper failed: {failed[0]!r}")
    return tps


def _told_everything(broker: RecordingBroker, epoch: int, total: int, hosted: int) -> bool:
    metadata = any(
        r.controller_epoch == epoch and len(r.partition_states) == total
        for r in broker.requests(m.UpdateMetadataRequest)
    )
    leaders = sum(
        len(r.partition_states)
        for r in broker.requests(m.LeaderAndIsrRequest)
        if r.controller_epoch == epoch
    )
    return metadata and leaders >= hosted


async def _run(connect: str, log_dir: Path) -> None:
    zk = KazooZooKeeper(connect, connection_timeout_ms=10_000)
    await zk.start()
    try:
        tps = await _populate(zk)
        started = time.perf_counter()
        await ZkStore(zk, 0).read_states(tps)
        read_s = time.perf_counter() - started

        async with trio.open_nursery() as nursery:
            brokers = [RecordingBroker(b, zk) for b in BROKERS]
            for broker in brokers:
                await nursery.start(broker.run)
                await broker.register()

            def config(controller_id: int) -> ControllerConfig:
                return ControllerConfig(
                    {
                        "controller.id": str(controller_id),
                        "zookeeper.connect": connect,
                        "zookeeper.session.timeout.ms": "6000",
                        "log.dir": str(log_dir / f"controller-{controller_id}"),
                        "auto.leader.rebalance.enable": "false",
                    }
                )

            first, first_scope = ControllerServer(config(1)), trio.CancelScope()
            second = ControllerServer(config(2))

            async def run_first(task_status=trio.TASK_STATUS_IGNORED):
                with first_scope:
                    await first.run(task_status=task_status)

            started = time.perf_counter()
            await nursery.start(run_first)
            total, hosted = len(tps), len(tps)  # RF = broker count: every broker hosts all
            while not all(_told_everything(b, 1, total, hosted) for b in brokers):
                await trio.sleep(0.01)
            cold_s = time.perf_counter() - started
            await nursery.start(second.run)

            started = time.perf_counter()
            first_scope.cancel()
            while not second.is_active:
                await trio.sleep(0.005)
            elected_s = time.perf_counter() - started
            while not all(_told_everything(b, 2, total, hosted) for b in brokers):
                await trio.sleep(0.005)
            told_s = time.perf_counter() - started
            nursery.cancel_scope.cancel()
    finally:
        await zk.stop()

    print(f"partitions: {len(tps)} ({TOPICS} topics x {PARTITIONS_PER_TOPIC}, RF 3, 3 brokers)")
    print(f"batched read of all state znodes:        {read_s * 1000:8.1f} ms")
    print(f"first controller start -> brokers told:  {cold_s * 1000:8.1f} ms")
    print(f"failover: A stopped -> B elected+loaded: {elected_s * 1000:8.1f} ms")
    print(f"failover: A stopped -> all brokers told: {told_s * 1000:8.1f} ms")
    report(
        Row(f"controller failover, {len(tps):,} partitions (all brokers told)", told_s * 1000, "ms")
    )


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tributary-bench-controller-") as tmp:
        tmp_path = Path(tmp)
        server = ZooKeeperServer(tmp_path / "zookeeper")
        server.start()
        try:
            chroot = f"/bench-{uuid.uuid4().hex[:8]}"
            connect = server.connect_string + chroot
            trio.run(_prepare_chroot, server.connect_string, chroot)
            trio.run(_run, connect, tmp_path)
        finally:
            server.stop()


async def _prepare_chroot(connect: str, chroot: str) -> None:
    zk = KazooZooKeeper(connect, connection_timeout_ms=10_000)
    await zk.start()
    try:
        await zk.ensure_path(chroot)
    finally:
        await zk.stop()


if __name__ == "__main__":
    main()
