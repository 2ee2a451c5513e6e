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
rich's `Live` redraws in place. Ctrl-C ends it with exit code 130.

Consumer groups (unless `--no-groups`): in the same round as DescribeLogDirs, an admin
client (client/admin/, on the same connection pool, bootstrapped from the endpoints
that answered) lists the groups of every broker, describes them in one DescribeGroups per
coordinator and fetches each group's committed offsets (concurrently); the lag is then
computed from the leaders' high watermarks the frame already has. The whole group round
is bounded (`GROUP_ROUND_TIMEOUTS` x `--timeout`) and fails soft: if the groups cannot be
listed the section shows "?" with the reason, if one group cannot be described or its
offsets cannot be read only its cells show "?"; the partition view is never held up
longer than that bound, nor broken.

The command line is tools/commands/watch_args.py, so that this module (rich, the
snapshot reader, the admin client) loads only when the command runs.

`--once` prints one frame and exits: 0, or 1 if ZooKeeper cannot be read. Off a
terminal the frame is drawn as wide as it needs (no wrapping at 80 columns), followed,
for the local cluster, by the last events from the controllers' event logs
(`controller-events.jsonl`).

Off a terminal (piped to a file or another program), the live mode prints no frames:
one line describing the cluster at the start, then one line per event as it is seen
(`HH:MM:SS  broker 2 down`), flushed at once, until Ctrl-C.
"""

from __future__ import annotations

import json
import logging
import math
import signal
import sys
import time
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path

import trio
from rich.console import Console
from rich.live import Live

from client.admin import Admin
from client.connection import (
    BrokerConnectionError,
    BrokerUnavailableError,
    ConnectionPool,
    Connector,
    open_connection_pool,
)
from client.protocol import messages as m
from client.protocol.errors import TributaryError
from client.security.secure_connector import with_security
from tools.cluster import watch_view as view
from tools.cluster.secure import default_command_config
from tools.cluster.state import ClusterState, cluster_dir, default_zookeeper
from tools.commands.common import security_options
from tools.errors import CliError

log = logging.getLogger(__name__)

MIN_INTERVAL_S = 0.1  # faster than this only loads ZooKeeper and the brokers
ZOOKEEPER_TIMEOUT_S = 5.0  # connecting to ZooKeeper and each read

GROUP_ROUND_TIMEOUTS = 3  # the group round may take this many broker timeouts

Address = tuple[str, int]


class SnapshotReader:
    """Takes `ClusterSnapshot`s of one cluster: ZooKeeper plus every registered broker."""

    def __init__(
        self,
        zookeeper: str,
        pool: ConnectionPool,
        *,
        broker_timeout_s: float,
        zookeeper_timeout_s: float = ZOOKEEPER_TIMEOUT_S,
        known_brokers: Iterable[int] = (),
        read_groups: bool = True,
    ):
        self.zookeeper = zookeeper
        self.pool = pool
        self.broker_timeout_s = broker_timeout_s
        self.zookeeper_timeout_s = zookeeper_timeout_s
        self.known_brokers = tuple(known_brokers)
        self.read_groups = read_groups
        self._reachable: dict[int, Address] = {}  # the endpoint that worked last time
        self._admin: Admin | None = None  # for the groups; rebuilt after a failure

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
        groups: list[view.GroupSnapshot] | None = None
        groups_error: str | None = None

        async def ask(broker_id: int, endpoints: list[Address]) -> None:
            answers[broker_id] = await self._describe_log_dirs(broker_id, endpoints)

        async def ask_groups() -> None:
            nonlocal groups, groups_error
            groups, groups_error = await self._read_groups(cluster)

        async with trio.open_nursery() as nursery:
            for broker_id, registration in cluster.brokers.items():
                nursery.start_soon(ask, broker_id, _endpoints(registration))
            if self.read_groups and cluster.brokers:
                nursery.start_soon(ask_groups)
        if self.read_groups and not cluster.brokers:
            groups_error = "no broker registered"
        return view.build_snapshot(
            cluster,
            answers,
            taken_at_ms=taken_at_ms,
            zookeeper=self.zookeeper,
            known_brokers=self.known_brokers,
            groups=groups,
            groups_error=groups_error,
        )

    async def _read_groups(self, cluster) -> tuple[list[view.GroupSnapshot] | None, str | None]:
        """Every group with its description and committed offsets, or (None, why not)."""
        with trio.move_on_after(self.broker_timeout_s * GROUP_ROUND_TIMEOUTS):
            try:
                return await self._ask_groups(cluster), None
            except Exception as exc:  # any failure: "?" in the view, never a crash
                self._admin = None
                log.debug("reading the consumer groups failed", exc_info=True)
                return None, _reason(exc)
        self._admin = None
        return None, "no answer in time"

    async def _ask_groups(self, cluster) -> list[view.GroupSnapshot]:
        if self._admin is None:
            admin = Admin(
                self.pool,
                self._bootstrap(cluster),
                request_timeout_ms=self.broker_timeout_s * 1000,
            )
            await admin.start()
            self._admin = admin
        admin = self._admin
        listings = sorted(await admin.list_groups(), key=lambda g: g.group_id)
        ids = [g.group_id for g in listings]
        descriptions: dict[str, object] = {}
        committed: dict[str, dict] = {}

        async def describe() -> None:
            try:
                for d in await admin.describe_groups(ids):
                    descriptions[d.group_id] = d
            except Exception as exc:  # only these cells show "?"
                log.debug("describing the groups failed: %s", exc)

        async def offsets(group_id: str) -> None:
            try:
                committed[group_id] = dict(await admin.list_group_offsets(group_id))
            except Exception as exc:
                log.debug("offsets of group %s: %s", group_id, exc)

        if ids:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(describe)
                for group_id in ids:
                    nursery.start_soon(offsets, group_id)
        return [
            view.group_snapshot(g, descriptions.get(g.group_id), committed.get(g.group_id))
            for g in listings
        ]

    def _bootstrap(self, cluster) -> list[str]:
        """Endpoints that answered before first, then every registered one."""
        found: list[Address] = [a for a in self._reachable.values()]
        for registration in cluster.brokers.values():
            found += [e for e in _endpoints(registration) if e not in found]
        return [f"{host}:{port}" for host, port in found]

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


def _reason(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


# -- the command ------------------------------------------------------------------------------
def watch_command(args) -> int:
    """`tributary cluster watch` (its options: tools/commands/watch_args.py)."""
    if not (args.interval >= MIN_INTERVAL_S and math.isfinite(args.interval)):
        raise CliError(f"--interval must be at least {MIN_INTERVAL_S} seconds", 2)
    if not (args.timeout > 0 and math.isfinite(args.timeout)):
        raise CliError("--timeout must be a positive number of seconds", 2)
    zookeeper, known_brokers = _target(args)
    terminal = sys.stdout.isatty()
    if args.width:
        console = Console(width=args.width)
    elif terminal:
        console = Console()
    else:  # a file or a pipe: as wide as the frame needs, no terminal codes
        console = Console(width=UNWRAPPED_WIDTH, color_system=None, force_terminal=False)
    options = dict(show_internal=args.internal)
    groups = not args.no_groups
    # A secure cluster's brokers are asked with its admin.properties (or --command-config).
    connector = with_security(None, security_options(_command_config(args)))
    with _quiet_connection_warnings():
        if args.once:
            snapshot = trio.run(
                _take_once, zookeeper, args.timeout, known_brokers, groups, connector
            )
            if snapshot.error is not None:
                raise CliError(f"cannot read ZooKeeper at {zookeeper}: {snapshot.error}")
            events = _logged_events(args) if not terminal or args.width else []
            frame = view.render(snapshot, events, show_events=bool(events), **options)
            if terminal:
                console.print(frame)
            else:
                _print_unwrapped(console, frame)
            return 0
        try:
            trio.run(
                _live if terminal else _event_stream,
                console,
                zookeeper,
                args.interval,
                args.timeout,
                known_brokers,
                options,
                groups,
                connector,
            )
        except KeyboardInterrupt:  # Ctrl-C before our handler was installed
            pass
    # The loop ends only on Ctrl-C: exit as a process ended by SIGINT does (128 + 2).
    return 130


# Columns given to a frame printed off a terminal: wider than any frame, so nothing wraps
# (trailing blanks are trimmed).
UNWRAPPED_WIDTH = 1000
LOGGED_EVENTS = 8  # events from the controllers' logs shown by --once


def _print_unwrapped(console: Console, frame) -> None:
    with console.capture() as capture:
        console.print(frame)
    lines = [line.rstrip() for line in capture.get().splitlines()]
    sys.stdout.write("\n".join(lines) + "\n")


def _logged_events(args) -> list[view.WatchEvent]:
    """The last events of the local cluster's controllers (none for another cluster)."""
    state = ClusterState.load(cluster_dir(args.dir))
    if state is None or (args.zookeeper and args.zookeeper != state.zookeeper_connect):
        return []
    records: list[dict] = []
    for controller in state.controllers():
        path = Path(controller.data_dir) / "controller-events.jsonl"
        try:
            lines = path.read_text(errors="replace").splitlines()[-LOGGED_EVENTS * 4 :]
        except OSError:
            continue
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("ts"), int):
                records.append(record)
    records.sort(key=lambda r: r["ts"])
    return [
        view.WatchEvent(r["ts"], str(r.get("event")), _describe_logged(r))
        for r in records[-LOGGED_EVENTS:]
    ]


def _describe_logged(record: dict) -> str:
    kind = record.get("event")
    where = f"{record.get('topic')}-{record.get('partition')}"
    if kind == "leader_change":
        return (
            f"{where}: leader {record.get('old_leader')} -> {record.get('new_leader')} "
            f"(epoch {record.get('leader_epoch')})"
        )
    if kind == "isr_change":
        isr = ",".join(str(b) for b in record.get("isr") or [])
        return f"{where}: ISR {isr}"
    if kind in ("broker_up", "broker_down", "broker_bounced"):
        return f"broker {record.get('broker')} {kind.split('_', 1)[1]}"
    if kind in ("topic_created", "topic_deleted"):
        return f"topic {record.get('topic')} {kind.split('_', 1)[1]}"
    if kind == "partitions_added":
        return (
            f"topic {record.get('topic')}: {record.get('added')} partition(s) added "
            f"({record.get('partitions')} now)"
        )
    detail = {k: v for k, v in record.items() if k not in ("ts", "controller", "epoch", "event")}
    return f"controller {record.get('controller')}: {kind}" + (f" {detail}" if detail else "")


@contextmanager
def _quiet_connection_warnings():
    """A silent broker is shown in the view; its timeout warning (from the connections, or
    from the admin client's group round) would garble the screen."""
    loggers = [logging.getLogger(name) for name in ("client.connection", "client.admin")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _command_config(args) -> str | None:
    """--command-config, else the watched local cluster's admin.properties, if secure."""
    return getattr(args, "command_config", None) or default_command_config(args.dir)


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
    zookeeper: str,
    timeout_s: float,
    known_brokers: tuple[int, ...],
    groups: bool = True,
    connector: Connector | None = None,
) -> view.ClusterSnapshot:
    async with open_connection_pool(connect_timeout_s=timeout_s, connector=connector) as pool:
        reader = SnapshotReader(
            zookeeper,
            pool,
            broker_timeout_s=timeout_s,
            known_brokers=known_brokers,
            read_groups=groups,
        )
        return await reader.take(_wall_clock_ms())


async def _live(
    console: Console,
    zookeeper: str,
    interval_s: float,
    timeout_s: float,
    known_brokers: tuple[int, ...],
    options: dict,
    groups: bool = True,
    connector: Connector | None = None,
) -> None:
    """On a terminal: the frame, redrawn in place."""
    with Live(console=console, auto_refresh=False, vertical_overflow="visible") as live:

        def show(snapshot, events, history) -> None:
            live.update(view.render(snapshot, history.recent, **options), refresh=True)

        await _watch_loop(zookeeper, interval_s, timeout_s, known_brokers, groups, show, connector)


async def _event_stream(
    console: Console,
    zookeeper: str,
    interval_s: float,
    timeout_s: float,
    known_brokers: tuple[int, ...],
    options: dict,
    groups: bool = True,
    connector: Connector | None = None,
) -> None:
    """Off a terminal: a first line with the cluster's state, then one line per event."""
    out = sys.stdout
    first = True

    def show(snapshot, events, history) -> None:
        nonlocal first
        if first:
            first = False
            out.write(f"{view.snapshot_summary(snapshot)}\n")
        for event in events:
            out.write(f"{view.event_line(event)}\n")
        out.flush()

    await _watch_loop(zookeeper, interval_s, timeout_s, known_brokers, groups, show, connector)


async def _watch_loop(
    zookeeper: str,
    interval_s: float,
    timeout_s: float,
    known_brokers: tuple[int, ...],
    groups: bool,
    show,
    connector: Connector | None = None,
) -> None:
    """Take a snapshot every `interval_s` and `show(snapshot, new events, history)`,
    until Ctrl-C."""
    history = view.WatchHistory()
    async with trio.open_nursery() as nursery:

        async def quit_on_ctrl_c() -> None:
            with trio.open_signal_receiver(signal.SIGINT) as signals:
                async for _ in signals:
                    nursery.cancel_scope.cancel()
                    return

        nursery.start_soon(quit_on_ctrl_c)
        async with open_connection_pool(connect_timeout_s=timeout_s, connector=connector) as pool:
            reader = SnapshotReader(
                zookeeper,
                pool,
                broker_timeout_s=timeout_s,
                known_brokers=known_brokers,
                read_groups=groups,
            )
            while True:
                started = trio.current_time()
                snapshot = await reader.take(_wall_clock_ms())
                events = history.observe(snapshot)
                show(snapshot, events, history)
                await trio.sleep_until(started + interval_s)
