"""An in-process Tributary cluster for client and shell tests: the real brokers and the
real controller in one Trio run, with faults injected around the real request handlers.

How it works: `TestCluster` runs one `ControllerServer` and N `BrokerServer`s, the very
classes the `broker` and `controller` processes run, on an in-memory ZooKeeper
(`memory_zk.py`) and either an in-memory network (`memory_network.py`: no sockets, so
tests on trio's `MockClock(autojump_threshold=0)` are deterministic) or real loopback TCP
(for the CLI and other code that runs its own Trio loop, through `ClusterThread`).
Everything a client sees is therefore the real thing: metadata, leader epochs, purgatory
long polls, replication, elections, error codes.

What the tests steer, they steer the way an operator would, and wait until the cluster
shows it (every broker's metadata then agrees with the controller's):
- `create_topic` writes the topic through a broker's ZooKeeper gateway (as CreateTopics
  does) and waits until every live broker knows its leaders;
- `stop_broker` kills a broker (its session ends, the controller elects new leaders);
  `start_broker` starts it again on the same log directory and address and waits until
  it is back in the ISR of every partition it replicates;
- `reassign` moves a partition to other replicas and waits until the controller has
  finished (every reassignment step bumps the leader epoch, even where the leader stays);
  `wait_for_reassignments` waits for those started by others (an admin client);
- `move_leader` reorders the replicas with a reassignment (adding the target if it is
  not a replica yet), waits until every in-sync replica has all the leader has, and runs
  a preferred election, so a move loses no record acknowledged before it;
- `append` appends to the current leader's log as an acks=all produce would (it returns
  once the records are committed); `records`, `values` and `batches` read the leader's
  log; `delete_records` moves its log start offset (Kafka's DeleteRecords);
- `until` waits for any condition of the tests' own.

Faults sit in a thin wrapper around each broker's real request handler (`faults.py`,
installed through the broker's `interceptor` seam, around `principals.py`'s, which runs
a request whose client id is `principal=User:bob;...` as that principal): `fail()`
answers the next N matching requests with an error code (per partition for Produce,
Fetch and ListOffsets), `drop()` closes the connection instead of answering, `delay()`
answers late, and every request is recorded per broker (`requests_of`).

Use: `async with open_test_cluster(3, topics={"t": 2}) as cluster:` in a Trio test (clients
take `connector=cluster.connector()`); from synchronous code `with runner as cluster:` for
`runner = ClusterThread(...)` (TCP; `runner.call(knob, *args)` runs a knob, sync or async,
on the cluster's thread); or `python -m tests.support.cluster` for a separate process
(prints its bootstrap address, serves until stdin closes).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import inspect
import json
import logging
import shutil
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from broker.config import BrokerConfig
from broker.server import BrokerServer
from client.protocol import records as rec
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition
from controller.config import ControllerConfig
from controller.server import ControllerServer
from server_common import zkdata
from server_common.jsonl import wall_clock_ms
from server_common.network import TCP
from tests.support.faults import FaultInjector, FaultPlan
from tests.support.memory_network import MemoryNetwork
from tests.support.memory_zk import MemoryZooKeeperServer
from tests.support.principals import as_client_principal

CONTROLLER_ID = 1000
MEMORY_BROKER_PORT = 9092
# Small timeouts, as the local cluster uses (Kafka's defaults would make tests crawl).
BROKER_SETTINGS = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "4000",
    "replica.fetch.backoff.ms": "200",
    "isr.change.propagation.blackout.ms": "100",
    "isr.change.propagation.interval.ms": "1000",
    "metrics.snapshot.interval.ms": "0",
    "controlled.shutdown.enable": "false",
}
CONTROLLER_SETTINGS = {
    "zookeeper.session.timeout.ms": "6000",
    "auto.leader.rebalance.enable": "false",
}
# How long a knob waits for the cluster to show what it asked for.
SETTLE_TIMEOUT_S = 60.0
POLL_S = 0.01


def trio_wall_clock() -> Callable[[], int]:
    """Milliseconds that advance with trio's clock (so a MockClock drives the brokers'
    timers) from the wall clock's value now (so timestamps look like timestamps)."""
    base_ms, base_s = wall_clock_ms(), trio.current_time()
    return lambda: base_ms + int((trio.current_time() - base_s) * 1000)


@dataclass(frozen=True)
class PartitionView:
    """A partition as the controller decided it, with its current leader's offsets."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    log_start_offset: int = -1
    log_end_offset: int = -1
    high_watermark: int = -1


# -- the cluster ------------------------------------------------------------------------------
class ClusterBroker:
    """One broker of the cluster: its config, address and (while it runs) its server."""

    def __init__(self, cluster: TestCluster, broker_id: int) -> None:
        self.cluster = cluster
        self.id = broker_id
        self.log_dir = cluster.root / f"broker-{broker_id}"
        if cluster.transport == "memory":
            self.host, self.port = f"broker{broker_id}.memory", MEMORY_BROKER_PORT
        else:
            self.host, self.port = "127.0.0.1", 0
        self.server: BrokerServer | None = None
        self._scope: trio.CancelScope | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def alive(self) -> bool:
        return self.server is not None

    def config(self) -> BrokerConfig:
        cluster = self.cluster
        return BrokerConfig(
            {
                **BROKER_SETTINGS,
                "broker.id": str(self.id),
                "listeners": f"PLAINTEXT://{self.host}:{self.port}",
                "log.dirs": str(self.log_dir),
                "message.max.bytes": str(cluster.message_max_bytes),
                **({"broker.rack": cluster.racks[self.id - 1]} if cluster.racks else {}),
                **cluster.broker_settings,
            }
        )

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        cluster = self.cluster
        server = BrokerServer(
            self.config(),
            zk=cluster.zookeeper.client(session_timeout_ms=6000),
            transport=cluster.network,
            clock=cluster.clock,
            interceptor=lambda handler: FaultInjector(
                cluster, self.id, as_client_principal(handler)
            ),
        )
        with trio.CancelScope() as self._scope:
            async with trio.open_nursery() as nursery:
                self.port = await nursery.start(server.run)
                self.server = server
                task_status.started()
        self.server = None

    def kill(self) -> None:
        if self._scope is not None:
            self._scope.cancel()


class TestCluster(FaultPlan):
    """Brokers, a controller, ZooKeeper and faults (the knobs of `FaultPlan`: `fail`,
    `drop`, `delay`, `requests_of`). Build it with `open_test_cluster` or `ClusterThread`."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        num_brokers: int = 1,
        *,
        transport: str = "memory",
        root: Path | None = None,
        message_max_bytes: int = 1_048_588,
        record_requests: bool = True,
        cluster_id: str = "test-cluster",
        broker_settings: dict[str, str] | None = None,
        racks: list[str] | None = None,
    ) -> None:
        if transport not in ("tcp", "memory"):
            raise ValueError(f"unknown transport {transport!r}")
        super().__init__(record_requests=record_requests)
        self.transport = transport
        self._own_root = root is None
        self.root = Path(root or tempfile.mkdtemp(prefix="tributary-test-cluster-"))
        self.message_max_bytes = message_max_bytes
        self.cluster_id = cluster_id
        self.broker_settings = dict(broker_settings or {})
        self.racks = list(racks or [])  # broker i's broker.rack: racks[i - 1]
        self.controller_id = CONTROLLER_ID
        self.brokers = {i: ClusterBroker(self, i) for i in range(1, num_brokers + 1)}
        self.network = MemoryNetwork() if transport == "memory" else TCP
        self.zookeeper = MemoryZooKeeperServer()
        self.controller: ControllerServer | None = None
        self.clock: Callable[[], int] = wall_clock_ms
        # What the leaders' logs held when the cluster stopped: (log start, batches).
        self._final_logs: dict[TopicPartition, tuple[int, list[bytes]]] | None = None
        self._nursery: trio.Nursery | None = None

    # -- running ------------------------------------------------------------------------------
    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        self.clock = trio_wall_clock()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            zk = self.zookeeper.client(session_timeout_ms=6000)
            await zk.start()
            cluster_id = json.dumps({"version": "1", "id": self.cluster_id}).encode()
            await zk.create(zkdata.CLUSTER_ID, cluster_id, makepath=True)
            await zk.stop()
            self.controller = ControllerServer(
                self._controller_config(),
                zk=self.zookeeper.client(session_timeout_ms=6000),
                transport=self.network,
            )
            await nursery.start(self.controller.run)
            for broker in self.brokers.values():
                await nursery.start(broker.run)
            await self.until(self._settled, "the controller knows every broker")
            task_status.started(self)
            await trio.sleep_forever()

    def _controller_config(self) -> ControllerConfig:
        host = "controller.memory" if self.transport == "memory" else "127.0.0.1"
        return ControllerConfig(
            {
                **CONTROLLER_SETTINGS,
                "controller.id": str(self.controller_id),
                "listeners": f"PLAINTEXT://{host}:{9090 if self.transport == 'memory' else 0}",
                "log.dir": str(self.root / "controller"),
            }
        )

    def keep_records(self) -> None:
        """Keep what the logs hold now, for checks after the cluster stopped."""
        self._final_logs = {tp: self._leader_log(tp) for tp in self._all_partitions()}

    def remove_files(self) -> None:
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    async def until(self, predicate: Callable[[], bool], what: str = "the condition") -> None:
        """Wait until `predicate()` holds (checked every POLL_S of Trio time)."""
        with trio.move_on_after(SETTLE_TIMEOUT_S):
            while not predicate():
                await trio.sleep(POLL_S)
            return
        raise TimeoutError(f"the test cluster waited {SETTLE_TIMEOUT_S} s for: {what}")

    def _settled(self) -> bool:
        """The controller is active, knows exactly the live brokers, and every live broker
        has heard from it: its metadata shows each partition as the controller decided."""
        ctx = self.controller.context if self.controller is not None else None
        if ctx is None or not self.controller.is_active:
            return False
        live = {b.id for b in self.brokers.values() if b.alive}
        if set(ctx.live_brokers) != live:
            return False
        for broker in self.live():
            cache = broker.server.metadata_cache
            if set(cache.brokers) != live:
                return False
            for tp in ctx.all_partitions():
                if ctx.is_deleting(tp.topic):  # brokers drop it at once, the controller later
                    continue
                state = ctx.states.get(tp)
                known = cache.partition(tp)
                if (
                    state is None
                    or known is None
                    or (known.leader, known.leader_epoch) != (state.leader, state.leader_epoch)
                    or tuple(known.replicas) != tuple(ctx.replicas.get(tp, ()))
                ):
                    return False
        return True

    # -- views --------------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers.values())

    def connector(self):
        """What clients connect with: the memory network's, or None for TCP."""
        return self.network.connect if self.transport == "memory" else None

    def live(self) -> list[ClusterBroker]:
        return [b for b in self.brokers.values() if b.alive]

    def _context(self):
        ctx = self.controller.context if self.controller is not None else None
        if ctx is None:
            raise RuntimeError("no active controller")
        return ctx

    def _all_partitions(self) -> list[TopicPartition]:
        ctx = self.controller.context if self.controller is not None else None
        return ctx.all_partitions() if ctx is not None else []

    def partition(self, tp: TopicPartition | tuple[str, int]) -> PartitionView:
        tp = TopicPartition(*tp)
        ctx = self._context()
        state = ctx.states[tp]
        view = PartitionView(
            tp.topic, tp.partition, state.leader, state.leader_epoch, ctx.replicas[tp], state.isr
        )
        leader = self._leader_partition(tp)
        if leader is None:
            return view
        return dataclasses.replace(
            view,
            log_start_offset=leader.log_start_offset,
            log_end_offset=leader.log_end_offset,
            high_watermark=leader.high_watermark,
        )

    def _leader_partition(self, tp: TopicPartition):
        state = self._context().states.get(tp)
        broker = self.brokers.get(state.leader) if state is not None else None
        if broker is None or not broker.alive:
            return None
        return broker.server.replica_manager.get_partition(tp)

    def _leader_log(self, tp: TopicPartition) -> tuple[int, list[bytes]]:
        """(log start offset, every batch from the one holding it) of the leader's log."""
        if self._final_logs is not None:
            return self._final_logs.get(tp, (0, []))
        partition = self._leader_partition(tp)
        if partition is None:
            return 0, []
        log = partition.log
        batches: list[bytes] = []
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            data = log.read(offset, 1 << 20, log.log_end_offset, True).records
            if not data:
                break
            for position, header in rec.iter_batches(data):
                batches.append(bytes(data[position : position + header.size]))
                offset = header.next_offset
        return log.log_start_offset, batches

    def batches(self, tp: TopicPartition | tuple[str, int]) -> list[bytes]:
        """The record batches of the leader's log as stored, from the one holding its log
        start offset."""
        return list(self._leader_log(TopicPartition(*tp))[1])

    def records(self, tp: TopicPartition | tuple[str, int]) -> list[rec.DecodedRecord]:
        """Every record of the leader's log (from its log start offset)."""
        start, batches = self._leader_log(TopicPartition(*tp))
        return [r for batch in batches for r in rec.decode_batches(batch) if r.offset >= start]

    def values(self, tp: TopicPartition | tuple[str, int]) -> list[bytes | None]:
        return [r.value for r in self.records(tp)]

    async def topic_config(self, name: str) -> dict[str, str]:
        """The topic's config overrides, as ZooKeeper holds them."""
        return (await self.live()[0].server.gateway.topic_configs([name]))[name]

    # -- steering -------------------------------------------------------------------------------
    async def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        *,
        assignment: dict[int, list[int]] | None = None,
        configs: dict[str, str] | None = None,
    ) -> None:
        """Create a topic (replicas of partition p on brokers p+1, p+2... unless an
        assignment is given) and wait until every live broker knows its leaders."""
        if assignment is None:
            ids = sorted(self.brokers)
            assignment = {
                p: [ids[(p + r) % len(ids)] for r in range(replication_factor)]
                for p in range(partitions)
            }
        gateway = self.live()[0].server.gateway
        if not await gateway.create_topic(name, assignment, dict(configs or {})):
            raise ValueError(f"topic {name!r} exists")
        expected = {TopicPartition(name, p) for p in assignment}

        def created() -> bool:
            ctx = self.controller.context
            return ctx is not None and expected <= set(ctx.states) and self._settled()

        await self.until(created, f"topic {name} has leaders everywhere")

    async def append(
        self, tp: TopicPartition | tuple[str, int], *values: bytes | None, key: bytes | None = None
    ) -> int:
        """Append one batch of records to the leader's log as an acks=all produce would,
        and return its base offset once the records are committed (the HW passed them)."""
        tp = TopicPartition(*tp)
        leader = self.brokers[self._context().states[tp].leader]
        if leader.server is None:
            raise RuntimeError(f"{tp} has no live leader")
        batch = rec.build_batch([rec.Record(key, v, 1_000 + i) for i, v in enumerate(values)])
        answered = trio.Event()
        results = []

        def respond(result) -> None:
            results.append(result)
            answered.set()

        leader.server.replica_manager.append_records(
            self.clock(),
            acks=-1,
            timeout_ms=int(SETTLE_TIMEOUT_S * 1000),
            entries={tp: batch},
            respond=respond,
        )
        await answered.wait()
        (result,) = results[0].values()
        if result.error_code != ErrorCode.NONE:
            raise RuntimeError(f"append to {tp} failed: {ErrorCode.from_code(result.error_code)}")
        return result.base_offset

    def delete_records(self, tp: TopicPartition | tuple[str, int], before: int) -> None:
        """Move the leader's log start offset to `before` (Kafka's DeleteRecords)."""
        partition = self._leader_partition(TopicPartition(*tp))
        partition.log.maybe_increment_log_start_offset(min(before, partition.high_watermark))

    async def stop_broker(self, broker_id: int) -> None:
        """Kill a broker; returns once the controller has moved on without it."""
        self.brokers[broker_id].kill()
        await self.until(
            lambda: not self.brokers[broker_id].alive and self._settled(),
            f"broker {broker_id} is gone",
        )

    async def start_broker(self, broker_id: int) -> None:
        """Start a stopped broker; returns once it is back in the ISR of every partition it
        replicates and every broker knows."""
        await self._nursery.start(self.brokers[broker_id].run)
        ctx = self._context()

        def in_sync() -> bool:
            return self._settled() and all(
                broker_id in ctx.states[tp].isr
                for tp, replicas in ctx.replicas.items()
                if broker_id in replicas and tp in ctx.states
            )

        await self.until(in_sync, f"broker {broker_id} is back in sync")

    async def reassign(self, tp: TopicPartition | tuple[str, int], replicas: Iterable[int]) -> None:
        """Move `tp` to `replicas` (a reassignment: new replicas catch up first) and wait
        until it is done and every broker knows."""
        tp, target = TopicPartition(*tp), tuple(replicas)
        gateway = self.live()[0].server.gateway
        if not await gateway.start_reassignment({(tp.topic, tp.partition): target}):
            raise RuntimeError("a reassignment is in progress")
        ctx = self._context()
        await self.until(
            lambda: ctx.replicas.get(tp) == target and self._reassignments_done(),
            f"{tp} reassigned to {target}",
        )

    async def wait_for_reassignments(self) -> None:
        """Wait until the controller has finished every reassignment and every broker
        knows (a reassignment finishes by itself once its new replicas are in sync)."""
        await self.until(self._reassignments_done, "the reassignments are done")

    def _reassignments_done(self) -> bool:
        return not self._context().reassignments and self._settled()

    async def move_leader(self, tp: TopicPartition | tuple[str, int], new_leader: int) -> None:
        """Make `new_leader` lead `tp`: put it first in the replica list (a reassignment,
        which adds it first if it is not a replica), wait until every in-sync replica has
        all the leader has (so that no record acknowledged with acks=1 so far is lost) and
        elect the preferred replica."""
        tp = TopicPartition(*tp)
        ctx = self._context()
        replicas = ctx.replicas[tp]
        target = (new_leader, *(r for r in replicas if r != new_leader))
        if target != replicas:
            await self.reassign(tp, target)
        if ctx.states[tp].leader != new_leader:

            def caught_up() -> bool:
                view = self.partition(tp)
                return new_leader in view.isr and view.high_watermark == view.log_end_offset

            await self.until(caught_up, f"{new_leader} has all of {tp}")
            await self.live()[0].server.gateway.request_preferred_election([tp])
        await self.until(
            lambda: ctx.states[tp].leader == new_leader and self._settled(),
            f"{new_leader} leads {tp}",
        )


@asynccontextmanager
async def open_test_cluster(
    num_brokers: int = 1,
    *,
    topics: dict[str, int] | None = None,
    **kwargs: Any,
) -> AsyncIterator[TestCluster]:
    """A running in-process cluster for a Trio test; `topics` maps names to partition
    counts (RF 1, created before the block starts)."""
    cluster = TestCluster(num_brokers, **kwargs)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(cluster.run)
            for name, partitions in (topics or {}).items():
                await cluster.create_topic(name, partitions)
            try:
                yield cluster
            finally:
                cluster.keep_records()
                nursery.cancel_scope.cancel()
    finally:
        cluster.remove_files()


class ClusterThread:
    """A TCP test cluster running Trio in a background thread, for synchronous tests.

    `call(fn, *args)` runs a knob (sync or async) on the cluster's Trio thread.
    """

    def __init__(self, num_brokers: int = 1, topics: dict[str, int] | None = None, **kwargs):
        self._arguments = {"num_brokers": num_brokers, "topics": topics, **kwargs}
        self.cluster: TestCluster | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._ready = threading.Event()
        self._stop: trio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="test-cluster", daemon=True)

    def _main(self) -> None:
        async def run() -> None:
            self._token = trio.lowlevel.current_trio_token()
            self._stop = trio.Event()
            async with open_test_cluster(transport="tcp", **self._arguments) as cluster:
                self.cluster = cluster
                self._ready.set()
                await self._stop.wait()

        try:
            trio.run(run)
        except BaseException as exc:  # reported by __enter__
            self._error = exc
        finally:
            self._ready.set()

    def __enter__(self) -> TestCluster:
        self._thread.start()
        self._ready.wait(SETTLE_TIMEOUT_S)
        if self.cluster is None:
            raise RuntimeError("the test cluster did not start") from self._error
        return self.cluster

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run `fn(*args, **kwargs)` (a knob, sync or async) on the cluster's thread."""
        bound = functools.partial(fn, *args, **kwargs)
        if inspect.iscoroutinefunction(fn):
            return trio.from_thread.run(bound, trio_token=self._token)
        return trio.from_thread.run_sync(bound, trio_token=self._token)

    def __exit__(self, *exc_info: object) -> None:
        if self._stop is not None and self._token is not None:
            try:
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join(SETTLE_TIMEOUT_S)


def main(argv: Iterable[str] | None = None) -> int:
    """Run a TCP test cluster as a process; print its bootstrap, serve until stdin closes."""
    parser = argparse.ArgumentParser(prog="python -m tests.support.cluster")
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument(
        "--topic", action="append", default=[], metavar="NAME:PARTITIONS", help="create a topic"
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    # Only errors: the servers' shutdown warnings would read like trouble at every exit.
    logging.basicConfig(level=logging.ERROR, format="test cluster: %(name)s: %(message)s")
    topics = {}
    for spec in args.topic:
        name, _, partitions = spec.partition(":")
        topics[name] = int(partitions or 1)

    async def run() -> None:
        async with open_test_cluster(
            args.brokers, topics=topics, transport="tcp", record_requests=False
        ) as cluster:
            print(cluster.bootstrap, flush=True)
            stdin = trio.lowlevel.FdStream(sys.stdin.fileno())
            while await stdin.receive_some(4096):
                pass

    trio.run(run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
