"""`tributary cluster watch [--interval 1.0] [--once]`: a live view of a cluster.

How it works: every `--interval` seconds the `SnapshotReader` reads ZooKeeper with
`tools.cluster.inspect.read_cluster` (in a worker thread), then sends DescribeLogDirs
to every registered broker concurrently (each with `--timeout`; a broker that does not
answer shows as "not answering"). Connections are kept in a pool between frames. A
broker is reached at the first of its registered endpoints that accepts a connection
(the inter-broker listener first, then the others), so the same command works on the
host against the local cluster and against docker-compose (where only the EXTERNAL
listener is reachable from the host). The pure half (tools/cluster/watch_view.py)
builds the snapshot, diffs it against the previous one and renders the frame, which
rich's `Live` redraws in place. Ctrl-C ends it with exit code 0.

`--once` prints one frame (no events) and exits: 0, or 1 if ZooKeeper cannot be read.
"""

from __future__ import annotations

import logging
import math
import signal
import time
from collections.abc import Iterable
from contextlib import contextmanager

import trio
from rich.console import Console
from rich.live import Live

from client.connection import (
    BrokerConnectionError,
    BrokerUnavailableError,
    ConnectionPool,
    open_connection_pool,
)
from client.protocol import messages as m
from client.protocol.errors import TributaryError
from tools.cluster import watch_view as view
from tools.cluster.state import ClusterState, cluster_dir, default_zookeeper
from tools.errors import CliError

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 1.0
MIN_INTERVAL_S = 0.1  # faster than this only loads ZooKeeper and the brokers
DEFAULT_BROKER_TIMEOUT_S = 1.5  # a broker silent this long is shown as not answering
ZOOKEEPER_TIMEOUT_S = 5.0  # connecting to ZooKeeper and each read

Address = tuple[str, int]


def register_watch(subparsers) -> None:
    watch = subparsers.add_parser(
        "watch",
        help="live view: leaders, ISR, HW/LEO per replica, events (Ctrl-C to quit)",
    )
    watch.add_argument(
        "--interval", type=float, default=DEFAULT_INTERVAL_S, help="seconds between frames"
    )
    watch.add_argument("--once", action="store_true", help="print one frame and exit")
    watch.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[/chroot]",
        default=None,
        help="the cluster's ZooKeeper (default: the local cluster's)",
    )
    watch.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_BROKER_TIMEOUT_S,
        help="seconds to wait for each broker's answer",
    )
    watch.add_argument(
        "--internal", action="store_true", help="also show internal topics (__consumer_offsets)"
    )
    watch.add_argument(
        "--width", type=int, default=None, help="columns to draw in (default: the terminal's)"
    )
    watch.set_defaults(handler=_watch)


class SnapshotReader:
    """Takes `ClusterSnapshot`s of one cluster: ZooKeeper plus every registered broker."""

    def __init__(
        self,
        zookeeper: str,
        pool: ConnectionPool,
        *,
        broker_timeout_s: float = DEFAULT_BROKER_TIMEOUT_S,
        zookeeper_timeout_s: float = ZOOKEEPER_TIMEOUT_S,
        known_brokers: Iterable[int] = (),
    ):
        self.zookeeper = zookeeper
        self.pool = pool
        self.broker_timeout_s = broker_timeout_s
        self.zookeeper_timeout_s = zookeeper_timeout_s
        self.known_brokers = tuple(known_brokers)
        self._reachable: dict[int, Address] = {}  # the endpoint that worked last time

    async def take(self, taken_at_ms: int) -> view.ClusterSnapshot:
        from tools.cluster.inspect import read_cluster

        try:
            cluster = await trio.to_thread.run_sync(
                read_cluster, self.zookeeper, self.zookeeper_timeout_s, abandon_on_cancel=True
            )
        except Exception as exc:  # kazoo timeouts, connection loss, bad chroot...
            reason = str(exc) or type(exc).__name__
            return view.unavailable_snapshot(
                reason, taken_at_ms=taken_at_ms, zookeeper=self.zookeeper
            )
        answers: dict[int, dict | None] = {}

        async def ask(broker_id: int, endpoints: list[Address]) -> None:
            answers[broker_id] = await self._describe_log_dirs(broker_id, endpoints)

        async with trio.open_nursery() as nursery:
            for broker_id, registration in cluster.brokers.items():
                nursery.start_soon(ask, broker_id, _endpoints(registration))
        return view.build_snapshot(
            cluster,
            answers,
            taken_at_ms=taken_at_ms,
            zookeeper=self.zookeeper,
            known_brokers=self.known_brokers,
        )

    async def _describe_log_dirs(
        self, broker_id: int, endpoints: list[Address]
    ) -> dict[tuple[str, int], view.ReplicaOffsets] | None:
        """Offsets of every replica the broker hosts; None if it cannot be reached."""
        remembered = self._reachable.get(broker_id)
        candidates = [remembered] if remembered in endpoints else []
        candidates += [e for e in endpoints if e != remembered]
        for host, port in candidates:
            try:
                response = await self.pool.request(
                    host,
                    port,
                    m.DescribeLogDirsRequest(topics=None),
                    timeout_s=self.broker_timeout_s,
                )
            except BrokerUnavailableError:
                continue  # this endpoint is not reachable from here: try the next one
            except (BrokerConnectionError, TributaryError) as exc:
                log.debug("broker %s at %s:%s: %s", broker_id, host, port, exc)
                return None  # reachable but not answering (paused, overloaded)
            self._reachable[broker_id] = (host, port)
            return view.offsets_from_log_dirs(response)
        self._reachable.pop(broker_id, None)
        return None


def _endpoints(registration) -> list[Address]:
    """Where a broker may be reached: its inter-broker address, then its other listeners."""
    found: list[Address] = [(registration.host, registration.port)]
    for _name, host, port in registration.all_endpoints():
        host = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
        if (host, port) not in found:
            found.append((host, port))
    return found


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


# -- the command ------------------------------------------------------------------------------
def _watch(args) -> int:
    if not (args.interval >= MIN_INTERVAL_S and math.isfinite(args.interval)):
        raise CliError(f"--interval must be at least {MIN_INTERVAL_S} seconds", 2)
    if not (args.timeout > 0 and math.isfinite(args.timeout)):
        raise CliError("--timeout must be a positive number of seconds", 2)
    zookeeper, known_brokers = _target(args)
    console = Console(width=args.width) if args.width else Console()
    options = dict(show_internal=args.internal)
    with _quiet_connection_warnings():
        if args.once:
            snapshot = trio.run(_take_once, zookeeper, args.timeout, known_brokers)
            if snapshot.error is not None:
                raise CliError(f"cannot read ZooKeeper at {zookeeper}: {snapshot.error}")
            console.print(view.render(snapshot, show_events=False, **options))
            return 0
        try:
            trio.run(_live, console, zookeeper, args.interval, args.timeout, known_brokers, options)
        except KeyboardInterrupt:  # Ctrl-C before our handler was installed
            pass
    return 0


@contextmanager
def _quiet_connection_warnings():
    """A silent broker is shown in the view; its timeout warning would garble the screen."""
    logger = logging.getLogger("client.connection")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _target(args) -> tuple[str, tuple[int, ...]]:
    """The ZooKeeper to read and the broker ids expected there."""
    directory = cluster_dir(args.dir)
    state = ClusterState.load(directory)
    zookeeper = default_zookeeper(args.zookeeper, args.dir)
    if zookeeper is None:
        raise CliError(
            f"no local cluster at {directory}: start one with `tributary cluster up`, "
            "or pass --zookeeper HOST:PORT"
        )
    known: tuple[int, ...] = ()
    if state is not None and state.zookeeper_connect == zookeeper:
        known = tuple(b.id for b in state.brokers())
    return zookeeper, known


async def _take_once(
    zookeeper: str, timeout_s: float, known_brokers: tuple[int, ...]
) -> view.ClusterSnapshot:
    async with open_connection_pool(connect_timeout_s=timeout_s) as pool:
        reader = SnapshotReader(
            zookeeper, pool, broker_timeout_s=timeout_s, known_brokers=known_brokers
        )
        return await reader.take(_wall_clock_ms())


async def _live(
    console: Console,
    zookeeper: str,
    interval_s: float,
    timeout_s: float,
    known_brokers: tuple[int, ...],
    options: dict,
) -> None:
    history = view.WatchHistory()
    async with trio.open_nursery() as nursery:

        async def quit_on_ctrl_c() -> None:
            with trio.open_signal_receiver(signal.SIGINT) as signals:
                async for _ in signals:
                    nursery.cancel_scope.cancel()
                    return

        nursery.start_soon(quit_on_ctrl_c)
        async with open_connection_pool(connect_timeout_s=timeout_s) as pool:
            reader = SnapshotReader(
                zookeeper, pool, broker_timeout_s=timeout_s, known_brokers=known_brokers
            )
            with Live(console=console, auto_refresh=False, vertical_overflow="visible") as live:
                while True:
                    started = trio.current_time()
                    snapshot = await reader.take(_wall_clock_ms())
                    history.observe(snapshot)
                    live.update(view.render(snapshot, history.recent, **options), refresh=True)
                    await trio.sleep_until(started + interval_s)
