"""The broker process: the Trio shell around the replica manager.

How it works: `BrokerServer.run()` connects to ZooKeeper, opens the log directory,
binds its listener, registers the ephemeral /brokers/ids/<id> znode and starts the
background tasks, each small and boring:

- the TCP listener, one `serve_connection` per client (network.py, handlers.py);
- the fetcher manager (fetcher.py);
- the ISR writer: carries out the core's `IsrUpdate` effects as conditional sets on the
  partition state znodes and reports ZooKeeper's answer back to the core;
- periodic tasks: ISR shrink (every replica.lag.time.max.ms / 2), ISR change
  propagation, the purgatory reaper (sleeps until the next deadline), HW checkpoints,
  retention, flushes, metrics snapshots;
- the session watcher: after a ZooKeeper session expires, it re-registers the broker
  (a new broker epoch) so the controller sees it come back.

SIGTERM (or `shutdown()`) runs a controlled shutdown: the broker asks the active
controller to move its leaderships away, then stops serving, answers everything still
waiting, writes its checkpoints and closes its logs.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

import trio

from broker.admin import AdminHandlers
from broker.config import BrokerConfig
from broker.core.log.config import LogConfig
from broker.core.log.errors import ConfigError
from broker.core.log.manager import LogManager
from broker.core.metadata_cache import BrokerEndpoint, MetadataCache
from broker.core.partition import (
    IsrUpdate,
    IsrUpdateConflict,
    IsrUpdateFailed,
    IsrUpdateSucceeded,
)
from broker.core.replica_manager import ReplicaManager
from broker.fetcher import FetcherManager
from broker.handlers import RequestHandlers
from client.connection import BrokerConnectionError, open_connection
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, ProtocolError, TributaryError
from server_common import zkdata
from server_common.metrics import MetricsRegistry
from server_common.metrics_http import serve_metrics
from server_common.network import serve_connection
from server_common.server_main import call_on_termination
from server_common.zk import (
    BadVersionError,
    KazooZooKeeper,
    NodeExistsError,
    NoNodeError,
    ZkError,
    is_connected,
    is_lost,
)

log = logging.getLogger(__name__)


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class EventLog:
    """Appends one JSON line per replication event to <log.dir>/events.jsonl."""

    def __init__(self, path: Path, broker_id: int, clock: Callable[[], int]):
        self.path = path
        self.broker_id = broker_id
        self.clock = clock
        self._file = open(path, "a", buffering=1)  # noqa: SIM115 - lives with the broker

    def record(self, kind: str, data: dict) -> None:
        entry = {"ts": self.clock(), "broker": self.broker_id, "event": kind, **data}
        try:
            self._file.write(json.dumps(entry, separators=(",", ":")) + "\n")
        except (OSError, ValueError):
            log.warning("could not write event %s", kind)

    def close(self) -> None:
        self._file.close()


class BrokerServer:
    def __init__(self, config: BrokerConfig, *, clock: Callable[[], int] | None = None):
        self.config = config
        self.broker_id = config.broker_id
        self.now_ms = clock or wall_clock_ms
        self.cluster_id: str | None = None
        self.broker_epoch = -1
        self.port: int | None = None  # the inter-broker listener's bound port
        self.bound_ports: dict[str, int] = {}
        self.metrics_port: int | None = None
        self.metadata_cache = MetadataCache()
        self.endpoints: dict[int, BrokerEndpoint] = {}
        self.topic_configs: dict[str, LogConfig] = {}
        self.default_log_config = LogConfig.from_properties(config.default_topic_properties())
        self.zk = KazooZooKeeper(
            config["zookeeper.connect"],
            session_timeout_ms=config["zookeeper.session.timeout.ms"],
            connection_timeout_ms=config["zookeeper.connection.timeout.ms"],
        )
        self.metrics = MetricsRegistry()
        self._metadata_event = trio.Event()
        self._reaper_wakeup = trio.Event()
        self._shutdown_requested = trio.Event()
        self._isr_send, self._isr_receive = trio.open_memory_channel(math.inf)
        self.log_manager: LogManager | None = None
        self.replica_manager: ReplicaManager | None = None
        self.events: EventLog | None = None
        self.stopped = trio.Event()

    # -- wiring --------------------------------------------------------------------
    def _open_storage(self) -> None:
        log_dir = self.config.log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        self.events = EventLog(log_dir / "events.jsonl", self.broker_id, self.now_ms)
        self.log_manager = LogManager.open(
            log_dir,
            self.default_log_config,
            now_ms=self.now_ms(),
            topic_configs=self.log_config_for,
        )
        self.replica_manager = ReplicaManager(
            self.broker_id,
            self.log_manager,
            self.config.replication(),
            log_config_for=self.log_config_for,
            now_ms=self.now_ms(),
            events=self.events.record,
            effects=self._isr_send.send_nowait,
        )
        self.admin = AdminHandlers(self)
        self.handlers = RequestHandlers(self)
        self.fetchers = FetcherManager(self)
        from broker.broker_metrics import register_broker_metrics

        self.request_observer = register_broker_metrics(self)

    def log_config_for(self, topic: str) -> LogConfig:
        return self.topic_configs.get(topic, self.default_log_config)

    async def load_topic_configs(self, topics: set[str]) -> None:
        """Read /config/topics/<t> for topics we have not seen (before creating logs)."""
        missing = sorted(t for t in topics if t not in self.topic_configs)
        if not missing:
            return
        try:
            results = await self.zk.get_many([zkdata.topic_config_path(t) for t in missing])
        except Exception as exc:  # ZooKeeper unreachable: defaults now, retried next time
            log.warning(
                "cannot read topic configs of %s (%s); using broker defaults until the next "
                "LeaderAndIsr for them",
                ", ".join(missing),
                exc,
            )
            return
        for topic, result in zip(missing, results, strict=True):
            overrides = {}
            if result is not None:
                try:
                    overrides = zkdata.decode_topic_config(topic, result[0])
                except zkdata.ZkDataError as exc:
                    log.warning("ignoring a bad topic config: %s", exc)
            try:
                config = LogConfig.from_properties(overrides, self.default_log_config)
            except ConfigError as exc:
                log.warning("topic %s: bad config in ZooKeeper (%s); using defaults", topic, exc)
                config = self.default_log_config
            self.topic_configs[topic] = config
            self.log_manager.update_topic_config(topic, config)

    def endpoint(self, broker_id: int) -> BrokerEndpoint | None:
        return self.metadata_cache.endpoint(broker_id) or self.endpoints.get(broker_id)

    def remember_endpoint(self, endpoint: BrokerEndpoint) -> None:
        self.endpoints[endpoint.broker_id] = endpoint

    def metadata_changed(self) -> None:
        self._metadata_event.set()
        self._metadata_event = trio.Event()

    async def wait_for_metadata(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        with trio.move_on_after(max(timeout_s, 0)):
            while not predicate():
                await self._metadata_event.wait()
        return predicate()

    def wake_reaper(self) -> None:
        self._reaper_wakeup.set()

    def shutdown(self) -> None:
        """Ask for a controlled shutdown (what SIGTERM does)."""
        self._shutdown_requested.set()

    # -- main ----------------------------------------------------------------------
    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        await self.zk.start()
        try:
            self._open_storage()
            await self.zk.ensure_paths(zkdata.PERSISTENT_PATHS)
            await self._ensure_cluster_id()
            self._write_meta_properties()
            listeners = {}
            for name, (host, port) in self.config.listeners.items():
                listeners[name] = await trio.open_tcp_listeners(port, host=host)
                self.bound_ports[name] = listeners[name][0].socket.getsockname()[1]
            self.port = self.bound_ports[self.config.inter_broker_listener]
            async with trio.open_nursery() as nursery:
                if self.config["metrics.port"] >= 0:
                    self.metrics_port = await nursery.start(
                        serve_metrics,
                        self.metrics,
                        self.config.bind_host,
                        self.config["metrics.port"],
                    )
                await self._register()
                serving = trio.CancelScope()
                nursery.start_soon(self._serve, listeners, serving)
                await nursery.start(self.fetchers.run)
                for task in (
                    self._isr_writer,
                    self._isr_shrinker,
                    self._isr_propagator,
                    self._reaper,
                    self._checkpointer,
                    self._retention,
                    self._flusher,
                    self._session_watcher,
                    self._metrics_snapshots,
                ):
                    nursery.start_soon(task)
                log.info(
                    "broker %d serving %s, log dir %s",
                    self.broker_id,
                    ", ".join(
                        f"{name} on {self.config.listeners[name][0]}:{port} (advertised "
                        f"{self.advertised_endpoint(name)[0]}:{self.advertised_endpoint(name)[1]})"
                        for name, port in self.bound_ports.items()
                    ),
                    self.config.log_dir,
                )
                task_status.started(self.port)
                await self._shutdown_requested.wait()
                await self._controlled_shutdown()
                serving.cancel()
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                self._close_storage()
                await self.zk.stop()
                self.stopped.set()
                log.info("broker %d stopped", self.broker_id)

    def advertised_endpoint(self, listener: str) -> tuple[str, int]:
        """(host, port) advertised for `listener`; port 0 means the one we bound."""
        host, port = self.config.advertised[listener]
        return host, port or self.bound_ports.get(listener, 0)

    @property
    def advertised_port(self) -> int:
        return self.advertised_endpoint(self.config.inter_broker_listener)[1]

    def _close_storage(self) -> None:
        if self.replica_manager is not None:
            try:
                self.replica_manager.shutdown(self.now_ms())
            except Exception:
                log.exception("failed to checkpoint on shutdown")
        if self.log_manager is not None:
            try:
                self.log_manager.close()
            except Exception:
                log.exception("failed to close the logs")
        if self.events is not None:
            self.events.close()

    async def _serve(self, listeners: dict, scope: trio.CancelScope) -> None:
        limit = trio.CapacityLimiter(self.config["max.connections"])

        def connection_handler(listener: str):
            async def handle_request(header, request):
                return await self.handlers.handle(header, request, listener)

            async def handle(stream: trio.SocketStream) -> None:
                try:
                    stream.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                except OSError:
                    pass
                async with limit:
                    await serve_connection(
                        stream,
                        handle_request,
                        max_frame_bytes=self.config["socket.request.max.bytes"],
                        max_queued=self.config["queued.max.requests.per.connection"],
                        observe=self.request_observer,
                    )

            return handle

        with scope:
            async with trio.open_nursery() as nursery:
                for name, sockets in listeners.items():
                    nursery.start_soon(trio.serve_listeners, connection_handler(name), sockets)

    async def _ensure_cluster_id(self) -> None:
        existing = await self.zk.get_or_none(zkdata.CLUSTER_ID)
        if existing is None:
            import uuid

            try:
                value = json.dumps({"version": "1", "id": uuid.uuid4().hex[:22]}).encode()
                await self.zk.create(zkdata.CLUSTER_ID, value, makepath=True)
            except NodeExistsError:
                pass
            existing = await self.zk.get_or_none(zkdata.CLUSTER_ID)
        try:
            self.cluster_id = json.loads(existing[0])["id"] if existing else None
        except (ValueError, KeyError, TypeError):
            self.cluster_id = None

    def _write_meta_properties(self) -> None:
        """Kafka's meta.properties: which broker and cluster this log dir belongs to
        (offline readers such as the Spark job use it to name the replica)."""
        path = self.config.log_dir / "meta.properties"
        lines = ["version=0", f"broker.id={self.broker_id}"]
        if self.cluster_id:
            lines.append(f"cluster.id={self.cluster_id}")
        tmp = path.with_suffix(".tmp")
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, path)

    # -- registration --------------------------------------------------------------
    async def _register(self) -> None:
        registration = zkdata.BrokerRegistration(
            broker_id=self.broker_id,
            host=self.config.advertised_host,
            port=self.advertised_port,
            rack=self.config["broker.rack"] or None,
            timestamp_ms=wall_clock_ms(),
            metrics_port=self.metrics_port,
            endpoints=tuple(
                (name, *self.advertised_endpoint(name)) for name in self.config.listeners
            ),
        )
        path = zkdata.broker_path(self.broker_id)
        deadline = trio.current_time() + self.config["zookeeper.session.timeout.ms"] / 1000 + 5
        while True:
            try:
                _, stat = await self.zk.create_with_stat(
                    path, registration.encode(), ephemeral=True, makepath=True
                )
                self.broker_epoch = stat.czxid
                log.info("registered as broker %d (broker epoch %d)", self.broker_id, stat.czxid)
                return
            except NodeExistsError:
                existing = await self.zk.exists(path)
                if existing is not None and existing.ephemeral_owner == self.zk.session_id:
                    self.broker_epoch = existing.czxid
                    return
                if trio.current_time() > deadline:
                    raise RuntimeError(
                        f"broker id {self.broker_id} is registered by another live broker"
                    ) from None
                # A previous incarnation's session has not expired yet: wait for it.
                await trio.sleep(0.5)

    async def _session_watcher(self) -> None:
        lost = False
        async for event in self.zk.session_events:
            if is_lost(event):
                lost = True
                log.warning("ZooKeeper session lost: the controller will treat us as dead")
                self.events.record("session_lost", {})
            elif is_connected(event) and lost:
                lost = False
                log.info("ZooKeeper session re-established; registering again")
                try:
                    await self._register()
                    self.events.record("session_reestablished", {"broker_epoch": self.broker_epoch})
                except Exception:
                    log.exception("re-registration failed")
                    lost = True

    # -- ISR writes ------------------------------------------------------------------
    async def _isr_writer(self) -> None:
        async for update in self._isr_receive:
            outcome = await self._write_isr(update)
            self.replica_manager.complete_isr_update(update.topic_partition, outcome, self.now_ms())

    async def _write_isr(self, update: IsrUpdate):
        tp, state = update.topic_partition, update.new_state
        path = zkdata.partition_state_path(tp.topic, tp.partition)
        try:
            stat = await self.zk.set(path, state.encode(), version=state.zk_version)
            return IsrUpdateSucceeded(stat.version)
        except BadVersionError:
            current = await self._read_state(path)
            if current is not None and current.same_state(state):
                return IsrUpdateSucceeded(current.zk_version)
            return IsrUpdateConflict(current)
        except NoNodeError:
            return IsrUpdateConflict(None)
        except (ZkError, OSError) as exc:
            return IsrUpdateFailed(f"{type(exc).__name__}: {exc}")

    async def _read_state(self, path: str):
        try:
            result = await self.zk.get_or_none(path)
        except Exception:
            return None
        if result is None:
            return None
        data, stat = result
        try:
            return zkdata.LeaderAndIsr.decode(data, stat.version, path)
        except zkdata.ZkDataError:
            return None

    async def _isr_shrinker(self) -> None:
        period = self.config["replica.lag.time.max.ms"] / 2000
        while True:
            await trio.sleep(period)
            self.replica_manager.maybe_shrink_isrs(self.now_ms())

    async def _isr_propagator(self) -> None:
        period = min(self.config["isr.change.propagation.blackout.ms"] / 2000, 2.5)
        while True:
            await trio.sleep(max(period, 0.05))
            now = self.now_ms()
            batch = self.replica_manager.maybe_propagate_isr_changes(now)
            if not batch:
                continue
            data = zkdata.encode_isr_change([(tp.topic, tp.partition) for tp in batch])
            try:
                await self.zk.create(
                    f"{zkdata.ISR_CHANGE_NOTIFICATION}/{zkdata.ISR_CHANGE_PREFIX}",
                    data,
                    sequence=True,
                    makepath=True,
                )
            except Exception as exc:
                log.warning("could not publish ISR changes: %s", exc)
                self.replica_manager.isr_changes.requeue(batch, now)

    # -- timers ----------------------------------------------------------------------
    async def _reaper(self) -> None:
        rm = self.replica_manager
        while True:
            rm.expire_delayed(self.now_ms())
            deadline = rm.next_deadline_ms()
            self._reaper_wakeup = trio.Event()
            delay = 3600.0 if deadline is None else max(0.0, (deadline - self.now_ms()) / 1000)
            with trio.move_on_after(delay):
                await self._reaper_wakeup.wait()

    async def _checkpointer(self) -> None:
        period = self.config["replica.high.watermark.checkpoint.interval.ms"] / 1000
        recovery_every = self.config["log.flush.offset.checkpoint.interval.ms"] / 1000
        last_recovery = trio.current_time()
        while True:
            await trio.sleep(period)
            try:
                self.replica_manager.checkpoint_high_watermarks()
                if trio.current_time() - last_recovery >= recovery_every:
                    self.log_manager.checkpoint_recovery_points()
                    self.log_manager.checkpoint_log_start_offsets()
                    last_recovery = trio.current_time()
            except OSError as exc:
                log.error("checkpoint failed: %s", exc)

    async def _retention(self) -> None:
        period = self.config["log.retention.check.interval.ms"] / 1000
        while True:
            await trio.sleep(period)
            try:
                deleted = self.log_manager.run_retention(
                    self.now_ms(), high_watermarks=self.replica_manager.high_watermarks()
                )
                if deleted:
                    log.info("retention deleted %d segment(s)", deleted)
            except Exception:
                log.exception("retention failed")

    async def _flusher(self) -> None:
        period = self.config["log.flush.scheduler.interval.ms"] / 1000
        while True:
            await trio.sleep(period)
            try:
                # In the Trio thread: the logs are not thread-safe (flush.ms is off by default).
                self.log_manager.flush_dirty(self.now_ms())
            except Exception:
                log.exception("flush failed")

    async def _metrics_snapshots(self) -> None:
        period = self.config["metrics.snapshot.interval.ms"] / 1000
        if period <= 0:
            return
        path = self.config.log_dir / "metrics.jsonl"
        with open(path, "a", buffering=1) as out:
            while True:
                await trio.sleep(period)
                snapshot = {
                    "ts": self.now_ms(),
                    "broker": self.broker_id,
                    **self.metrics.snapshot(),
                }
                out.write(json.dumps(snapshot, separators=(",", ":")) + "\n")

    # -- controlled shutdown -----------------------------------------------------------
    async def _controlled_shutdown(self) -> None:
        if not self.config["controlled.shutdown.enable"]:
            return
        retries = self.config["controlled.shutdown.max.retries"]
        backoff = self.config["controlled.shutdown.retry.backoff.ms"] / 1000
        # Each attempt is bounded: a controller or ZooKeeper that is gone must not keep
        # the broker from exiting.
        attempt_timeout = self.config["request.timeout.ms"] / 1000 + 5
        for attempt in range(1, retries + 1):
            try:
                remaining = None
                with trio.move_on_after(attempt_timeout) as scope:
                    remaining = await self._ask_controller_to_shut_down()
                if scope.cancelled_caught:
                    raise BrokerConnectionError(f"no answer within {attempt_timeout:.0f}s")
            except (BrokerConnectionError, TributaryError, ProtocolError, OSError) as exc:
                log.warning("controlled shutdown attempt %d failed: %s", attempt, exc)
                remaining = None
            if remaining == []:
                log.info("controlled shutdown succeeded")
                return
            if remaining:
                log.info(
                    "controlled shutdown attempt %d: %d partition(s) still led here",
                    attempt,
                    len(remaining),
                )
            await trio.sleep(backoff)
        log.warning("controlled shutdown did not complete; shutting down anyway")

    async def _ask_controller_to_shut_down(self) -> list | None:
        result = await self.zk.get_or_none(zkdata.CONTROLLER)
        if result is None:
            log.warning("no active controller to hand leaderships to; shutting down anyway")
            return []
        controller = zkdata.ControllerRegistration.decode(result[0])
        if controller.host is None or controller.port is None:
            raise BrokerConnectionError("the controller has no address")
        timeout = self.config["request.timeout.ms"] / 1000
        async with open_connection(
            controller.host, controller.port, client_id=f"broker-{self.broker_id}"
        ) as connection:
            response = await connection.request(
                m.ControlledShutdownRequest(
                    broker_id=self.broker_id, broker_epoch=self.broker_epoch
                ),
                timeout_s=timeout,
            )
        if response.error_code != ErrorCode.NONE:
            raise TributaryError(response.error_code, "controlled shutdown refused")
        return list(response.remaining_partitions)


async def run_broker(config: BrokerConfig) -> None:
    """Run until SIGTERM/SIGINT (controlled shutdown) or a fatal error."""
    server = BrokerServer(config)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(call_on_termination, server.shutdown, "controlled shutdown")
        await server.run()
        nursery.cancel_scope.cancel()
