"""The controller process: ZooKeeper watches in, one serial event loop, requests out.

How it works: `ControllerServer.run()` connects to ZooKeeper, makes sure the persistent
paths exist, binds the ControlledShutdown listener, registers the watches (each a tiny
task turning notifications into events) and then processes events one at a time:

- standby: only `Elect` (at start, when /controller disappears, after a new ZooKeeper
  session) and ControlledShutdown (answered NOT_CONTROLLER) matter; `Elect` runs the
  election multi (`leadership.py`);
- on winning: a term nursery is opened (channel senders, the auto-rebalance timer) and
  `handlers.failover.on_become_active` loads the cluster and sends everything;
- active: every event goes to its handler (`handlers.HANDLERS`).

Resigning cancels the term nursery and drops the context. It happens when /controller
belongs to someone else or disappears, when the ZooKeeper session is lost, and when a
fenced write finds a newer controller epoch (`ControllerMovedError`). Any other failure
inside a handler (ZooKeeper unreachable, a bug) also resigns, deletes our /controller and
competes again after a short back-off: a fresh context read from ZooKeeper is the only
state known to be right.
"""

from __future__ import annotations

import functools
import logging

import trio

from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.security.secure_connector import secure_connector
from controller import events as ev
from controller import leadership
from controller.active import ActiveController
from controller.config import ControllerConfig
from controller.core.context import ControllerContext, ControllerStats
from controller.event_log import EventLog
from controller.handlers import HANDLERS
from controller.handlers.failover import on_become_active
from controller.handlers.shutdown import on_controlled_shutdown
from controller.listener import serve_controller_listener
from controller.metrics import ControllerMetrics
from controller.zk_store import ControllerMovedError
from server_common import zkdata
from server_common.jsonl import Rotation, wall_clock_ms
from server_common.metrics_http import serve_metrics
from server_common.network import TCP, Transport
from server_common.security.user_credentials import UserCredentials
from server_common.server_main import call_on_termination
from server_common.zk import ZooKeeper
from server_common.zk_kazoo import KazooZooKeeper

log = logging.getLogger(__name__)

# Wait before competing again after a failed term (ZooKeeper trouble, a bug): long enough
# not to spin, short enough that the cluster is not without a controller for long.
REELECT_BACKOFF_S = 1.0
# Kafka runs the first leader imbalance check this long after becoming controller.
FIRST_REBALANCE_CHECK_S = 5.0


class ControllerServer:
    def __init__(
        self,
        config: ControllerConfig,
        *,
        zk: ZooKeeper | None = None,
        transport: Transport = TCP,
    ):
        self.config = config
        self.controller_id = config.controller_id
        self.transport = transport
        # Connections to brokers, with TLS/SASL as their inter-broker listener asks.
        self._broker_connect = secure_connector(config.broker_security(), transport.connect)
        # Its own listener: the same protocol, checked now (a bad file stops it at start).
        self._listener_security = config.listener_security()
        self.zk = zk or KazooZooKeeper(
            config["zookeeper.connect"],
            session_timeout_ms=config["zookeeper.session.timeout.ms"],
            connection_timeout_ms=config["zookeeper.connection.timeout.ms"],
        )
        # Brokers whose inter-broker mechanism is SCRAM log in with /config/users creds.
        self.user_credentials = UserCredentials(self.zk)
        self._sasl = config.sasl_factory(self.user_credentials.cache)
        self.queue = ev.EventQueue()
        self.stats = ControllerStats()
        self.events = EventLog(
            config.log_dir, self.controller_id, rotation=Rotation.from_config(config)
        )
        self.metrics = ControllerMetrics(self)
        self.active: ActiveController | None = None
        self.port: int | None = None
        self.metrics_port: int | None = None
        self.terms = 0  # how many times this process became the active controller
        self._term_scope: trio.CancelScope | None = None
        self._nursery: trio.Nursery | None = None

    # -- introspection (tests, metrics) -------------------------------------------------
    @property
    def is_active(self) -> bool:
        """Elected and done loading the cluster (events are being handled)."""
        return self.active is not None and self.active.loaded

    @property
    def context(self) -> ControllerContext | None:
        return self.active.ctx if self.active is not None else None

    # -- lifecycle ----------------------------------------------------------------------
    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; `task_status.started(port)` once listening and watching."""
        await self.zk.start()
        try:
            await self.zk.ensure_paths(zkdata.PERSISTENT_PATHS)
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                if self._sasl is not None:
                    # Every user loaded before the listener serves, then kept in step.
                    await nursery.start(self.user_credentials.follow)
                port = await nursery.start(
                    functools.partial(
                        serve_controller_listener,
                        security=self._listener_security,
                        sasl=self._sasl,
                    ),
                    self.queue,
                    self.config.bind_host,
                    self.config.bind_port,
                    self.transport,
                )
                self.port = self.config.advertised_port or port
                if self.config["metrics.port"] >= 0:
                    self.metrics_port = await nursery.start(
                        serve_metrics,
                        self.metrics.registry,
                        self.config.bind_host,
                        self.config["metrics.port"],
                    )
                await self._start_watches(nursery)
                nursery.start_soon(self._forward_session_events)
                self.queue.put(ev.Elect())
                log.info(
                    "controller %d listening on %s:%d",
                    self.controller_id,
                    self.config.advertised_host,
                    self.port,
                )
                task_status.started(port)
                await self._process_events()
        finally:
            with trio.CancelScope(shield=True):
                if self.active is not None:
                    self._end_term("shutting down")
                await self.zk.stop()  # closing the session removes /controller at once
                self.events.close()

    async def _start_watches(self, nursery: trio.Nursery) -> None:
        children = [
            (zkdata.BROKERS_IDS, ev.BrokerChange()),
            (zkdata.BROKERS_TOPICS, ev.TopicChange()),
            (zkdata.ISR_CHANGE_NOTIFICATION, ev.IsrChangeNotification()),
            (zkdata.ADMIN_DELETE_TOPICS, ev.TopicDeletion()),
            (zkdata.ADMIN_LEADER_STEP_DOWN, ev.LeaderStepDown()),
        ]
        for path, event in children:
            nursery.start_soon(self._forward, await self.zk.watch_children(path), event)
        data = [
            (zkdata.ADMIN_PREFERRED_REPLICA_ELECTION, ev.PreferredReplicaElection()),
            (zkdata.ADMIN_REASSIGN_PARTITIONS, ev.PartitionReassignment()),
        ]
        for path, event in data:
            nursery.start_soon(self._forward, await self.zk.watch_data(path), event)
        nursery.start_soon(self._forward_controller, await self.zk.watch_data(zkdata.CONTROLLER))

    async def _forward(self, channel: trio.MemoryReceiveChannel, event: object) -> None:
        async for _ in channel:
            self.queue.put(event)

    async def _forward_controller(self, channel: trio.MemoryReceiveChannel) -> None:
        async for data, stat in channel:
            owner = stat.ephemeral_owner if stat is not None else None
            self.queue.put(ev.ControllerZnodeChanged(owner, data))

    async def _forward_session_events(self) -> None:
        async for event in self.zk.session_events:
            if event.lost:
                self.queue.put(ev.SessionLost())
            elif event.connected:
                self.queue.put(ev.SessionConnected())

    # -- the event loop -------------------------------------------------------------------
    async def _process_events(self) -> None:
        while True:
            queued = await self.queue.get()
            event = queued.event
            started = trio.current_time()
            waited = None if queued.enqueued_at is None else started - queued.enqueued_at
            try:
                await self._dispatch(event)
            except ControllerMovedError as exc:
                log.warning("a newer controller was elected (%s): resigning", exc)
                await self._resign("controller moved")
            except Exception as exc:
                log.exception(
                    "handling %s failed: resigning, competing again", type(event).__name__
                )
                if self.active is not None:
                    await self._resign(f"{type(event).__name__} failed: {exc!r}")
                self._elect_later(REELECT_BACKOFF_S)
            finally:
                if isinstance(event, ev.ControlledShutdown) and not event.reply.done:
                    event.reply.set(
                        m.ControlledShutdownResponse(
                            error_code=ErrorCode.NOT_CONTROLLER
                            if self.active is None
                            else ErrorCode.UNKNOWN_SERVER_ERROR,
                            remaining_partitions=[],
                        )
                    )
                self.metrics.observe_event(
                    type(event).__name__, waited, trio.current_time() - started
                )

    async def _dispatch(self, event: object) -> None:
        if isinstance(event, ev.Elect):
            await self._elect()
        elif isinstance(event, ev.ControllerZnodeChanged):
            await self._on_controller_znode(event)
        elif isinstance(event, ev.SessionLost):
            if self.active is not None:
                self._end_term("ZooKeeper session lost")
        elif isinstance(event, ev.SessionConnected):
            await self._elect()
        elif isinstance(event, ev.ControlledShutdown):
            await on_controlled_shutdown(self.active, event)
        elif self.active is not None:
            epoch = getattr(event, "controller_epoch", self.active.ctx.epoch)
            handler = HANDLERS.get(type(event))
            if handler is not None and epoch == self.active.ctx.epoch:
                await handler(self.active, event)

    # -- election and resignation -------------------------------------------------------------
    async def _elect(self) -> None:
        if self.active is not None or not self.zk.connected:
            return
        term = await leadership.try_to_become_controller(
            self.zk,
            self.controller_id,
            self.config.advertised_host,
            self.port or 0,
            wall_clock_ms(),
        )
        if term is None:
            holder = await leadership.active_controller_id(self.zk)
            log.info("controller %s is active; standing by", holder)
            return
        await self._begin_term(term)

    async def _begin_term(self, term: leadership.Term) -> None:
        assert self._nursery is not None
        scope, nursery = await self._nursery.start(_term_nursery)
        self._term_scope = scope
        ctx = ControllerContext(
            self.controller_id,
            term.epoch,
            term.epoch_zk_version,
            default_unclean=self.config["unclean.leader.election.enable"],
            stats=self.stats,
        )
        self.stats.controller_elections += 1
        self.terms += 1
        self.events.epoch = term.epoch
        self.events.record("controller_elected")
        log.info("controller %d elected with epoch %d", self.controller_id, term.epoch)
        self.active = ActiveController(
            ctx=ctx,
            zk=self.zk,
            config=self.config,
            queue=self.queue,
            events=self.events,
            nursery=nursery,
            connector=self._broker_connect,
        )
        nursery.start_soon(self._auto_rebalance_timer, term.epoch)
        await on_become_active(self.active)
        self.active.loaded = True

    async def _on_controller_znode(self, event: ev.ControllerZnodeChanged) -> None:
        """/controller changed: look again (queued notifications may be stale: the watch
        reports the znode absent when registered, before our own election created it)."""
        stat = await self.zk.exists(zkdata.CONTROLLER)
        if stat is None:
            if self.active is not None:
                self._end_term("/controller disappeared")
            await self._elect()
        elif self.active is not None and stat.ephemeral_owner != self.zk.session_id:
            self._end_term("another controller holds /controller")

    def _end_term(self, reason: str) -> None:
        """Stop acting as controller (no ZooKeeper access needed)."""
        active, self.active = self.active, None
        if active is None:
            return
        active.close()
        if self._term_scope is not None:
            self._term_scope.cancel()
            self._term_scope = None
        log.warning("controller %d resigned: %s", self.controller_id, reason)
        self.events.record("controller_resigned", reason=reason)

    async def _resign(self, reason: str) -> None:
        """End the term and delete /controller if it is still ours."""
        self._end_term(reason)
        try:
            await leadership.resign(self.zk)
        except Exception as exc:  # ZooKeeper trouble: the session expiry will remove it
            log.warning("could not delete /controller: %r", exc)

    def _elect_later(self, delay_s: float) -> None:
        async def later() -> None:
            await trio.sleep(delay_s)
            self.queue.put(ev.Elect())

        if self._nursery is not None:
            self._nursery.start_soon(later)

    async def _auto_rebalance_timer(self, epoch: int) -> None:
        if not self.config["auto.leader.rebalance.enable"]:
            return
        interval = self.config["leader.imbalance.check.interval.seconds"]
        await trio.sleep(min(FIRST_REBALANCE_CHECK_S, interval))
        while True:
            self.queue.put(ev.AutoRebalance(epoch))
            await trio.sleep(interval)


async def _term_nursery(task_status=trio.TASK_STATUS_IGNORED) -> None:
    """A nursery that lives for one term; cancelling its scope ends the term's tasks."""
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            task_status.started((scope, nursery))
            await trio.sleep_forever()


async def run_controller(config: ControllerConfig) -> None:
    """Run until SIGTERM/SIGINT."""
    server = ControllerServer(config)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(call_on_termination, nursery.cancel_scope.cancel, "stopping")
        await server.run()
