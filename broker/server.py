"""The broker process: wires the sans-IO core to its Trio shell and runs it.

How it works: `BrokerServer` builds the parts, each with only the collaborators it uses:

- storage and core: the `LogManager` over `log.dirs` and the `ReplicaManager`, whose
  callbacks go to the background tasks (`emit_isr_update`, `wake_at`) and the fetchers
  (`followers_changed`), and whose events go to `events.jsonl`;
- `BrokerZkGateway` (zookeeper/gateway.py): every ZooKeeper read and write of this
  broker; `Registration` (zookeeper/registration.py) keeps /brokers/ids/<id> alive across
  sessions; `TopicConfigs` (zookeeper/topic_configs.py) caches topic configs read from
  ZooKeeper; `BrokerConfigs` (zookeeper/broker_configs.py) holds the dynamic broker
  configs, read before the logs open and applied live (`_broker_config_changed`);
  `UserCredentials` (server_common/security/user_credentials.py) the users' SCRAM credentials, read
  before the listeners serve and reloaded on every change;
- `RequestHandlers` (handlers/: one module per family of requests) behind each listener,
  served by `server_common.network.serve_connection`, one task per connection. A
  listener mapped to `kafka` in `listener.wire.protocol.map` speaks Kafka's wire
  protocol (`broker.kafka.wire.KafkaServerConnection`) and its requests go through the
  translation layer (`broker.kafka.dispatcher.KafkaDispatcher`) to the same handlers.
  Client listeners (every one but the inter-broker listener, so clients can never lock
  out replication or the controller) are bounded by `max.connections`,
  `max.connections.per.ip` and `max.connection.creation.rate` and share one memory pool
  for their request bytes (`queued.max.request.bytes`); the inter-broker listener has a
  pool of the same size to itself: `ConnectionBounds` (client_bounds.py). Every
  listener closes connections idle for `connections.max.idle.ms`;
- `FetcherManager` (tasks/fetcher.py): one fetcher task per leader this broker follows;
- `BackgroundTasks` (tasks/background.py): ISR writes, ISR shrink and propagation,
  delayed operation expiry, checkpoints, retention, flushes, metrics snapshots, the log
  cleaner (tasks/log_cleaner.py) that compacts `compact` topics, and the scrubber
  (tasks/log_scrubber.py) that checks closed segments' CRCs and repairs damaged batches;
- `GroupService` (tasks/group_service.py) and `GroupHandlers` (handlers/groups.py): the
  consumer group coordinator for the `__consumer_offsets` partitions this broker leads;
- the transaction coordinator (txn_wiring.py: tasks/txn_service.py and
  handlers/transactions.py) for the `__transaction_state` partitions it leads.

`run()` connects to ZooKeeper, opens the log directory, binds every listener (through a
`Transport`: TCP, or an in-process test cluster's memory network), registers, starts the
tasks, moves the heap built so far out of the cycle collector's reach (`gc.freeze()`:
its full passes otherwise stop the event loop for tens of ms) and serves until
`shutdown()` (what SIGTERM does): a controlled shutdown (zookeeper/controlled_shutdown.py)
asks the active controller to move our leaderships away, then serving stops, everything
waiting is answered, checkpoints are written and the logs closed.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import os
import resource
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from broker.broker_metrics import register_broker_metrics, register_quota_metrics
from broker.client_bounds import ConnectionBounds
from broker.config import KAFKA_WIRE, BrokerConfig
from broker.core.client_quotas import ClientQuotas, QuotaSettings
from broker.core.fetch_sessions import FetchManager, FetchSessionCache
from broker.core.log.config import LogConfig
from broker.core.log.manager import LogManager
from broker.core.metadata_cache import MetadataCache
from broker.core.replica_manager import ReplicaManager
from broker.handlers import RequestHandlers
from broker.handlers.authorization import Authorization
from broker.handlers.authorization_check import Denials
from broker.handlers.groups import GroupHandlers
from broker.handlers.metadata_changes import MetadataChanges
from broker.handlers.topics import TopicDefaults
from broker.kafka import versions as kafka_versions
from broker.kafka.dispatcher import KafkaDispatcher
from broker.kafka.wire import KafkaServerConnection
from broker.listener_sasl import inter_broker_authenticates, inter_broker_security, sasl_factory
from broker.quota_gate import QuotaGate
from broker.tasks.background import BackgroundTasks, Intervals
from broker.tasks.fetcher import FetcherContext, FetcherManager
from broker.tasks.group_service import GroupService, group_config
from broker.tasks.log_cleaner import CleanerSettings, LogCleanerTask
from broker.tasks.log_scrubber import LogScrubber
from broker.txn_wiring import wire_transactions
from broker.zookeeper.acls import AclStore
from broker.zookeeper.broker_configs import BrokerConfigs
from broker.zookeeper.controlled_shutdown import ShutdownSettings, controlled_shutdown
from broker.zookeeper.gateway import BrokerZkGateway
from broker.zookeeper.quota_configs import QuotaConfigStore
from broker.zookeeper.registration import BrokerIdentity, Registration
from broker.zookeeper.topic_configs import TopicConfigs
from client.security.secure_connector import secure_connector
from server_common import zkdata
from server_common.connection_limits import NO_LIMIT
from server_common.jsonl import JsonLinesFile, Rotation, wall_clock_ms
from server_common.metrics import MetricsRegistry
from server_common.metrics_http import serve_metrics
from server_common.network import TCP, Bound, Transport, native_wire, serve_connection
from server_common.network import Handler as RequestHandler
from server_common.security.acls import AclAuthorizer, parse_super_users
from server_common.security.authenticator import Authenticator
from server_common.security.sasl import SaslServerFactory, ScramCredentialSource
from server_common.security.sasl_gate import SaslGate
from server_common.security.tls import server_context
from server_common.security.user_credentials import UserCredentials
from server_common.server_main import call_on_termination
from server_common.zk import ZooKeeper
from server_common.zk_kazoo import KazooZooKeeper

log = logging.getLogger(__name__)


class BrokerServer:
    def __init__(
        self,
        config: BrokerConfig,
        *,
        zk: ZooKeeper | None = None,
        transport: Transport = TCP,
        clock: Callable[[], int] | None = None,
        interceptor: Callable[[RequestHandler], RequestHandler] | None = None,
    ):
        """`zk`, `transport` and `clock` default to the real ones; `interceptor` wraps the
        request handler every connection calls (in-process test clusters inject faults
        with it)."""
        self.config = config
        self._intercept = interceptor or (lambda handler: handler)
        self.broker_id = config.broker_id
        self.now_ms = clock or wall_clock_ms
        self.transport = transport
        self.identity = BrokerIdentity(config.broker_id)
        self.gateway = BrokerZkGateway(
            zk
            or KazooZooKeeper(
                config["zookeeper.connect"],
                session_timeout_ms=config["zookeeper.session.timeout.ms"],
                connection_timeout_ms=config["zookeeper.connection.timeout.ms"],
            )
        )
        self.metadata_cache = MetadataCache()
        self.metadata_changes = MetadataChanges()
        self.metrics = MetricsRegistry()
        self.topic_configs = TopicConfigs(
            self.gateway, config.default_log_config(), on_loaded=self._apply_topic_config
        )
        # Dynamic broker configs (/config/brokers/...), read before the logs open and
        # applied live on every change the config watcher announces.
        self.broker_configs = BrokerConfigs(
            self.gateway, config, on_change=self._broker_config_changed
        )
        self.topic_configs.on_broker_change = self.broker_configs.reload
        # Users' SCRAM credentials (/config/users): what SCRAM logins are checked against
        # (`self.user_credentials.cache`), reloaded on every users/ change notification.
        self.user_credentials = UserCredentials(self.gateway.zk)
        self.topic_configs.on_user_change = self.user_credentials.reload
        # Client quotas (/config/users, /config/clients), applied to every request by
        # the quota gate and reloaded on every users/ or clients/ change notification.
        self.quotas = ClientQuotas(
            QuotaSettings(config["quota.window.num"], config["quota.window.size.seconds"] * 1000)
        )
        self.quota_configs = QuotaConfigStore(self.gateway, self.quotas.configs)
        self.topic_configs.on_quota_change = self.quota_configs.reload
        self.quota_gate = QuotaGate(self.quotas, self.now_ms)
        self.background = BackgroundTasks(
            self.broker_id,
            self.gateway,
            self.metrics,
            _intervals(config),
            self.now_ms,
            config.log_dir / "metrics.jsonl",
            rotation=Rotation.from_config(config),
        )
        self.registration = Registration(
            self.gateway, self.identity, self._registration, self.record_event
        )
        # Bounds of the client listeners' connections, and the listeners' memory pools.
        self.bounds = ConnectionBounds(config)
        # The ACL authorizer (authorizer.class.name): its ACLs are kept from ZooKeeper.
        self.acls: AclStore | None = None
        if config.authorizer_enabled:
            self.acls = AclStore(
                self.gateway.zk,
                AclAuthorizer(
                    parse_super_users(config["super.users"]),
                    allow_everyone_if_no_acl_found=config["allow.everyone.if.no.acl.found"],
                ),
            )
        self.tls_contexts, self.sasl_factories = _listener_security(
            config, self.user_credentials.cache
        )
        # How this broker connects to the others and to the controller (TLS and SASL as
        # the inter-broker listener asks; the controller's listener uses that protocol).
        self.inter_broker_connect = secure_connector(
            inter_broker_security(config), self.transport.connect
        )
        self.failed_authentications = self.metrics.counter(
            "failed_authentications_total",
            "SASL logins refused (and connections closed in the SASL exchange), per listener "
            "and mechanism",
        )
        self.bounds.register_metrics(self.metrics)
        self.port: int | None = None  # the inter-broker listener's bound port
        self.bound_ports: dict[str, int] = {}
        self.metrics_port: int | None = None
        self.log_manager: LogManager | None = None
        self.replica_manager: ReplicaManager | None = None
        self._events: JsonLinesFile | None = None
        self._shutdown_requested = trio.Event()
        self.stopped = trio.Event()

    # -- wiring --------------------------------------------------------------------
    def open_storage(self) -> None:
        """Open the log directory and build the core and the request handlers on it."""
        log_dir = self.config.log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        self._events = Rotation.from_config(self.config).open(log_dir / "events.jsonl")
        self.log_manager = LogManager.open(
            log_dir,
            self.topic_configs.default,
            now_ms=self.now_ms(),
            topic_configs=self.topic_configs.log_config_for,
        )
        self.log_manager.producer_expiration_ms = self.config["transactional.id.expiration.ms"]
        self.replica_manager = ReplicaManager(
            self.broker_id,
            self.log_manager,
            self.config.replication(),
            log_config_for=self.topic_configs.log_config_for,
            now_ms=self.now_ms(),
            events=self.record_event,
            effects=self.background.emit_isr_update,
            wake_at=self.background.wake_at,
            followers_changed=self._replicas_changed,
        )
        self.replica_manager.consumer_reads.live_rack = self.metadata_cache.live_rack
        self.background.attach(self.replica_manager, self.log_manager)
        self.background.log_cleaner = LogCleanerTask.for_broker(
            self.broker_configs.current,
            self.log_manager,
            self.replica_manager.high_watermarks,
            self.now_ms,
            self.metrics,
        )
        self.scrubber = LogScrubber.for_broker(
            self.config,
            self.log_manager,
            self.replica_manager,
            clock=self.now_ms,
            events=self.record_event,
            endpoint=self.metadata_cache.endpoint,
            connector=self.inter_broker_connect,
            request_step_down=self.gateway.request_leader_step_down,
            metrics=self.metrics,
        )
        if self.scrubber.settings.enable:
            self.background.log_scrubber = self.scrubber
        self.groups = GroupService(
            group_config(self.config),
            self.replica_manager,
            self.gateway,
            clock=self.now_ms,
            events=self.record_event,
            offsets_replication_factor=self.config["offsets.topic.replication.factor"],
            offsets_segment_bytes=self.config["offsets.topic.segment.bytes"],
            retention_check_s=self.config["offsets.retention.check.interval.ms"] / 1000,
        )
        self.handlers = RequestHandlers(
            self.replica_manager,
            self.metadata_cache,
            self.gateway,
            identity=self.identity,
            topic_configs=self.topic_configs,
            metadata_changes=self.metadata_changes,
            topic_defaults=TopicDefaults.from_config(self.config),
            default_log_config=self.topic_configs.default,
            clock=self.now_ms,
            log_dir=str(log_dir),
            scrubber=self.scrubber,
            groups=GroupHandlers(
                self.groups, self.metadata_cache, broker_id=self.broker_id, clock=self.now_ms
            ),
            broker_configs=self.broker_configs,
            fetch_sessions=FetchManager(FetchSessionCache(self.config.fetch_sessions())),
            authorization=self._authorization(),
            acls=self.acls,
        )
        self.fetchers = FetcherManager(
            FetcherContext(
                broker_id=self.broker_id,
                replica_manager=self.replica_manager,
                endpoint=self.metadata_cache.endpoint,
                clock=self.now_ms,
                connector=self.inter_broker_connect,
                socket_timeout_s=self.config["replica.socket.timeout.ms"] / 1000,
            )
        )
        self.transactions, self.txn_verifier = wire_transactions(self)
        self.request_observer = register_broker_metrics(
            self.metrics,
            self.replica_manager,
            self.metadata_cache,
            self.groups.coordinator,
            self.handlers.fetch_sessions,
        )
        register_quota_metrics(self.metrics, self.quotas, self.now_ms)
        self.quota_gate.forget_fetch_session = self.handlers.fetch_sessions.cache.remove

    def _authorization(self) -> Authorization | None:
        if self.acls is None:
            return None
        trusted = self.config["authorizer.inter.broker.listener.super.user"]
        anonymous = self.acls.authorizer.is_super_user("User:ANONYMOUS")
        if not (trusted or anonymous or inter_broker_authenticates(self.config)):
            log.warning(
                "the authorizer is on but brokers and the controller do not authenticate "
                "on the inter-broker listener: their requests will be refused unless ACLs "
                "allow User:ANONYMOUS ClusterAction on the cluster (or set "
                "authorizer.inter.broker.listener.super.user=true)"
            )
        denials = Denials(
            trio.current_time, lambda data: self.record_event("authorization_denied", data)
        )
        self.metrics.counter_of(
            "authorization_denied_total",
            "operations the authorizer refused (a request may count several)",
            lambda: denials.count,
        )
        return Authorization(
            self.acls.authorizer,
            self.metadata_cache,
            trusted_listener=self.config.inter_broker_listener if trusted else None,
            auto_create_topics=self.config["auto.create.topics.enable"],
            denials=denials,
        )

    def _replicas_changed(self) -> None:
        """After LeaderAndIsr/StopReplica: fetchers follow the new leaders, and the group
        coordinator loads or unloads the offsets partitions it gained or lost."""
        self.fetchers.reconcile()
        self.groups.leadership_changed()
        self.transactions.leadership_changed()

    def close_storage(self) -> None:
        if getattr(self, "groups", None) is not None:
            self.groups.shutdown()
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
        if self._events is not None:
            self._events.close()

    def record_event(self, kind: str, data: dict) -> None:
        """One line of `events.jsonl` (the core's replication events, session changes)."""
        if self._events is not None:
            self._events.append(
                {"ts": self.now_ms(), "broker": self.broker_id, "event": kind, **data}
            )

    def _apply_topic_config(self, topic: str, config: LogConfig) -> None:
        if self.log_manager is not None:
            self.log_manager.update_topic_config(topic, config)

    def _broker_config_changed(self, old: BrokerConfig, new: BrokerConfig) -> None:
        """Apply a new effective broker config to what changes live (DYNAMIC_CONFIGS of
        broker/dynamic_config.py): the topic defaults (every log without an override
        takes the new value), the connection limits and the log cleaner's settings."""
        self.topic_configs.set_default(new.default_log_config())
        self.bounds.reconfigure(old, new)
        cleaner = self.background.log_cleaner
        if cleaner is not None:
            cleaner.settings = dataclasses.replace(
                CleanerSettings.from_config(new), enable=cleaner.settings.enable
            )
        changed = sorted(k for k in new.values if new.values[k] != old.values.get(k))
        log.info("broker config changed live: %s", ", ".join(changed) or "nothing")

    def shutdown(self) -> None:
        """Ask for a controlled shutdown (what SIGTERM does)."""
        self._shutdown_requested.set()

    # -- main ----------------------------------------------------------------------
    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        await self.gateway.start()
        try:
            await self.broker_configs.load()
            self.open_storage()
            self.identity.cluster_id = await self.gateway.cluster_id()
            self._write_meta_properties()
            listeners: dict[str, Bound] = {}
            for name, (host, port) in self.config.listeners.items():
                listeners[name] = await self.transport.bind(host, port)
                self.bound_ports[name] = listeners[name].port
            self.port = self.bound_ports[self.config.inter_broker_listener]
            async with trio.open_nursery() as nursery:
                if self.acls is not None:  # every ACL loaded before the first request
                    await nursery.start(self.acls.watch)
                if self.config["metrics.port"] >= 0:
                    self.metrics_port = await nursery.start(
                        serve_metrics,
                        self.metrics,
                        self.config.bind_host,
                        self.config["metrics.port"],
                    )
                await self.registration.register()
                await self.user_credentials.load()  # before a listener serves a login
                await self.quota_configs.load()
                serving = trio.CancelScope()
                nursery.start_soon(self._serve, listeners, serving)
                await nursery.start(self.fetchers.run)
                await nursery.start(self.groups.run)
                await nursery.start(self.transactions.run)
                await nursery.start(self.txn_verifier.run)
                self.background.start_all(nursery)
                await nursery.start(self.topic_configs.watch_changes)  # dynamic topic configs
                # Again, now that the watcher runs: a change between the two loads is seen.
                await self.user_credentials.load()
                await self.quota_configs.load()
                nursery.start_soon(self.registration.keep_registered)
                log.info(
                    "broker %d serving %s, log dir %s",
                    self.broker_id,
                    self._listening(),
                    self.config.log_dir,
                )
                # Everything built so far (modules, kazoo, the core) lives as long as the
                # process: frozen, the cycle collector's full passes skip it. Unfrozen,
                # each full pass walked it all, stopping every request for 20-40 ms.
                gc.freeze()
                task_status.started(self.port)
                await self._shutdown_requested.wait()
                await controlled_shutdown(
                    self.gateway,
                    self.identity,
                    _shutdown_settings(self.config),
                    self.inter_broker_connect,  # the controller's listener: the same security
                )
                serving.cancel()
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                self.close_storage()
                await self.gateway.stop()
                self.stopped.set()
                log.info("broker %d stopped", self.broker_id)

    def advertised_endpoint(self, listener: str) -> tuple[str, int]:
        """(host, port) advertised for `listener`; port 0 means the one we bound."""
        host, port = self.config.advertised[listener]
        return host, port or self.bound_ports.get(listener, 0)

    def _listening(self) -> str:
        return ", ".join(
            f"{name} ({self.config.wire_protocols[name]}) on {self.config.listeners[name][0]}:"
            f"{port} (advertised {':'.join(map(str, self.advertised_endpoint(name)))})"
            for name, port in self.bound_ports.items()
        )

    def _registration(self) -> zkdata.BrokerRegistration:
        host, port = self.advertised_endpoint(self.config.inter_broker_listener)
        return zkdata.BrokerRegistration(
            broker_id=self.broker_id,
            host=host,
            port=port,
            rack=self.config["broker.rack"] or None,
            timestamp_ms=wall_clock_ms(),
            metrics_port=self.metrics_port,
            endpoints=tuple(
                (name, *self.advertised_endpoint(name)) for name in self.config.listeners
            ),
            security_protocols=tuple(
                (name, security.protocol) for name, security in self.config.security.items()
            ),
        )

    async def _serve(self, listeners: dict[str, Bound], scope: trio.CancelScope) -> None:
        """Serve every listener. Client listeners (all but the inter-broker one) are
        bounded (`self.bounds`: connection counts and creation rate, one memory pool for
        their requests); the inter-broker listener has a pool of its own; every listener
        closes idle connections."""
        config = self.config
        bounds = self.bounds
        idle_ms = config["connections.max.idle.ms"]
        idle_timeout_s = None if idle_ms < 0 else idle_ms / 1000

        def connection_handler(listener: str) -> Callable[[trio.abc.Stream], Awaitable[None]]:
            async def handle_request(header, request):
                return await self.handlers.handle(header, request, listener)

            async def serve_request(header, request):
                return await self.quota_gate.serve(header, request, handle_request)

            # handler(header, request): the header is what this listener's wire decodes,
            # the native RequestHeader or the KafkaHeader the Kafka dispatcher translates.
            native_handler = self._intercept(serve_request)
            kafka = config.wire_protocols[listener] == KAFKA_WIRE
            wire = _kafka_wire if kafka else native_wire
            sasl = self.sasl_factories.get(listener)
            bounded = listener != config.inter_broker_listener
            max_frame_bytes = config["socket.request.max.bytes"]
            listener_pool = bounds.pool if bounded else bounds.inter_broker_pool
            if listener_pool.bounded:
                max_frame_bytes = min(max_frame_bytes, listener_pool.capacity)

            security = config.security[listener]
            tls = self.tls_contexts.get(listener)

            def failed(peer: str, mechanism: str | None, reason: str) -> None:
                self.failed_authentications.inc(
                    labels={"listener": listener, "mechanism": mechanism or "none"}
                )
                self.record_event(
                    "authentication_failed",
                    {
                        "listener": listener,
                        "address": peer,
                        "mechanism": mechanism,
                        "reason": reason,
                    },
                )

            async def serve(stream: trio.abc.Stream) -> None:
                # Each connection's own SASL gate in front of the handlers (both wires).
                authenticator = None
                if sasl is not None:
                    authenticator = Authenticator(sasl, security.failed_authentication_delay_ms)
                gate = SaslGate(native_handler, authenticator, on_failure=failed)
                handle_request: Callable[[Any, Any], Awaitable[Any]] = (
                    KafkaDispatcher(gate) if kafka else gate
                )
                await serve_connection(
                    # Any stream is served (in-memory ones in tests); serve_connection is
                    # annotated with trio.SocketStream only (server_common/network.py).
                    stream,  # type: ignore[arg-type]
                    handle_request,
                    max_frame_bytes=max_frame_bytes,
                    max_queued=config["queued.max.requests.per.connection"],
                    observe=self.request_observer,
                    wire=wire,
                    pool=listener_pool,
                    idle_timeout_s=idle_timeout_s,
                    tls=tls,
                    tls_handshake_timeout_s=security.handshake_timeout_ms / 1000,
                    authenticated=None if authenticator is None else authenticator.is_complete,
                    max_frame_bytes_before_auth=config["sasl.server.max.receive.size"],
                )

            async def handle(stream: trio.abc.Stream) -> None:
                if not bounded:
                    await serve(stream)
                    return
                async with bounds.admitted(listener, stream) as admitted:
                    if admitted:
                        await serve(stream)

            return handle

        with scope:
            async with trio.open_nursery() as nursery:
                for name, bound in listeners.items():
                    nursery.start_soon(
                        trio.serve_listeners, connection_handler(name), list(bound.listeners)
                    )

    def _write_meta_properties(self) -> None:
        """Kafka's meta.properties: which broker and cluster this log dir belongs to
        (offline readers such as the Spark job use it to name the replica)."""
        path = self.config.log_dir / "meta.properties"
        lines = ["version=0", f"broker.id={self.broker_id}"]
        if self.identity.cluster_id:
            lines.append(f"cluster.id={self.identity.cluster_id}")
        tmp = path.with_suffix(".tmp")
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, path)


def _kafka_wire(max_frame_bytes: int) -> KafkaServerConnection:
    return KafkaServerConnection(
        max_frame_bytes=max_frame_bytes, supported=kafka_versions.supported
    )


def _listener_security(
    config: BrokerConfig, credentials: ScramCredentialSource
) -> tuple[dict[str, ssl.SSLContext], dict[str, SaslServerFactory]]:
    """Each TLS listener's context (loaded now, so a bad PEM file stops the broker at
    start) and each SASL listener's mechanisms (PLAIN users from its JAAS config, SCRAM
    users from /config/users through the credential cache)."""
    tls_contexts = {
        name: server_context(security.tls)
        for name, security in config.security.items()
        if security.tls is not None
    }
    sasl_factories = {
        name: sasl_factory(security, credentials)
        for name, security in config.security.items()
        if security.uses_sasl
    }
    return tls_contexts, sasl_factories


def raise_open_files_limit() -> tuple[int, int]:
    """Raise this process's soft limit of open files to its hard limit (what Go does for
    every program): each connection is a file descriptor. Returns (soft, hard)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open files limit from %d to %d: %s", soft, hard, exc)
    return soft, hard


def _intervals(config: BrokerConfig) -> Intervals:
    return Intervals(
        isr_shrink_s=config["replica.lag.time.max.ms"] / 2000,
        isr_propagation_s=config["isr.change.propagation.blackout.ms"] / 2000,
        hw_checkpoint_s=config["replica.high.watermark.checkpoint.interval.ms"] / 1000,
        recovery_checkpoint_s=config["log.flush.offset.checkpoint.interval.ms"] / 1000,
        retention_check_s=config["log.retention.check.interval.ms"] / 1000,
        flush_check_s=config["log.flush.scheduler.interval.ms"] / 1000,
        metrics_snapshot_s=config["metrics.snapshot.interval.ms"] / 1000,
    )


def _shutdown_settings(config: BrokerConfig) -> ShutdownSettings:
    return ShutdownSettings(
        enable=config["controlled.shutdown.enable"],
        max_retries=config["controlled.shutdown.max.retries"],
        retry_backoff_s=config["controlled.shutdown.retry.backoff.ms"] / 1000,
        request_timeout_s=config["request.timeout.ms"] / 1000,
    )


async def run_broker(config: BrokerConfig) -> None:
    """Run until SIGTERM/SIGINT (controlled shutdown) or a fatal error."""
    open_files, _ = raise_open_files_limit()
    if NO_LIMIT > config["max.connections"] > open_files:
        log.info(
            "max.connections is %d but this process may open %d files: the open files "
            "limit (ulimit -n) bounds client connections first",
            config["max.connections"],
            open_files,
        )
    server = BrokerServer(config)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(call_on_termination, server.shutdown, "controlled shutdown")
        await server.run()
        nursery.cancel_scope.cancel()
