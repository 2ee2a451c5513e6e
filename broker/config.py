"""Broker configuration: Kafka's names and defaults, plus a few of Tributary's own.

`BrokerConfig.load(path, overrides)` reads a properties file and `key=value` overrides;
every value is typed and validated (`server_common.properties`). Kafka's defaults are meant for
production (18 s ZooKeeper sessions, 30 s replica lag); the local cluster and the tests
pass small values instead of changing the defaults.

Listeners are Kafka's `listeners` / `advertised.listeners` / `inter.broker.listener.name`;
`listener.wire.protocol.map` (`NAME:kafka,...`) says which of them speak Kafka's wire
protocol instead of the native one (`config.wire_protocols` has every listener's);
`listener.security.protocol.map` and the ssl.*/sasl.* keys, also per listener with
Kafka's `listener.name.<listener>.` prefix, give `config.security` (each listener's
`ListenerSecurity`, server_common/security/listener_config.py). Authorization is
Kafka's `authorizer.class.name`, `super.users` and `allow.everyone.if.no.acl.found`
(broker/handlers/authorization.py enforces them).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from broker.core.fetch_sessions import FetchSessionConfig
from broker.core.log.config import LogConfig
from broker.core.log.config_defs import COMPRESSION_TYPES, LATEST_MESSAGE_FORMAT_VERSION
from broker.core.log.errors import ConfigError as LogConfigError
from broker.core.replica_manager import ReplicationConfig
from broker.core.replica_selector import SELECTOR_CHOICES, parse_selector
from broker.core.txn.config import TXN_CONFIG_KEYS
from server_common.connection_limits import NO_LIMIT, parse_overrides
from server_common.jsonl import ROTATION_CONFIG_KEYS
from server_common.properties import (
    REQUIRED,
    ConfigDef,
    ConfigError,
    ConfigKey,
    PropertiesConfig,
    at_least,
    one_of,
    parse_listeners,
)
from server_common.security.listener_config import (
    SECURITY_CONFIG_KEYS,
    ListenerSecurity,
    listener_security,
    split_listener_prefixed,
)

DAY_MS = 24 * 3600 * 1000
# `authorizer.class.name` values that turn the ACL authorizer on.
AUTHORIZER_NAMES = ("kafka.security.authorizer.AclAuthorizer", "AclAuthorizer")
LONG_MAX = 2**63 - 1
# Tributary bounds request memory by default (Kafka does not: -1): 256 MiB holds two
# requests of the largest size (socket.request.max.bytes, 100 MiB) plus room for
# everyone else's, and keeps a broker under a few hundred MiB whatever clients send.
DEFAULT_QUEUED_MAX_REQUEST_BYTES = 256 * 1024 * 1024


def _at_least_or_unset(minimum: int):
    return lambda v: None if v is None or v >= minimum else f"must be >= {minimum}, got {v}"


BROKER_CONFIG = ConfigDef(
    [
        ConfigKey("broker.id", "int", REQUIRED, "this broker's id", at_least(0)),
        ConfigKey("listeners", "str", "PLAINTEXT://127.0.0.1:9092", "NAME://host:port,... to bind"),
        ConfigKey(
            "advertised.listeners",
            "str",
            "",
            "NAME://host:port,... clients should use (default: listeners)",
        ),
        ConfigKey(
            "inter.broker.listener.name",
            "str",
            "",
            "listener brokers use among themselves (default: the first)",
        ),
        ConfigKey(
            "listener.wire.protocol.map",
            "str",
            "",
            "NAME:protocol,... the wire protocol each listener speaks: tributary (the native "
            "msgpack protocol, the default for unmapped names) or kafka (Kafka's binary "
            "protocol, for Kafka clients); the inter-broker listener must be tributary",
        ),
        ConfigKey("broker.rack", "str", "", "rack id (rack-aware replica assignment)"),
        ConfigKey(
            "replica.selector.class",
            "str",
            "",
            "KIP-392: which replica serves a consumer that sends its client.rack: "
            "org.apache.kafka.common.replica.RackAwareReplicaSelector (or rack-aware): "
            "one in the consumer's rack; empty (the default) or LeaderSelector: the leader",
            one_of("", *SELECTOR_CHOICES),
        ),
        ConfigKey("log.dirs", "str", "/tmp/tributary-logs", "the log directory"),
        ConfigKey("zookeeper.connect", "str", "127.0.0.1:2181", "ZooKeeper connect string"),
        ConfigKey("zookeeper.session.timeout.ms", "int", 18_000, "ZooKeeper session timeout"),
        ConfigKey("zookeeper.connection.timeout.ms", "int", 18_000, "wait this long for ZooKeeper"),
        ConfigKey("num.partitions", "int", 1, "default partitions for new topics", at_least(1)),
        ConfigKey("default.replication.factor", "int", 1, "default RF for new topics", at_least(1)),
        ConfigKey("min.insync.replicas", "int", 1, "default min ISR for acks=all", at_least(1)),
        ConfigKey(
            "unclean.leader.election.enable", "bool", False, "default for topics (controller)"
        ),
        ConfigKey(
            "auto.create.topics.enable",
            "bool",
            True,
            "create a topic a client asks metadata for (and allows)",
        ),
        ConfigKey("delete.topic.enable", "bool", True, "allow DeleteTopics"),
        # Authorization (Kafka's AclAuthorizer; ACLs in ZooKeeper, broker/zookeeper/acls.py).
        ConfigKey(
            "authorizer.class.name",
            "str",
            "",
            "empty: no authorization; kafka.security.authorizer.AclAuthorizer (or AclAuthorizer)"
            ": every request is checked against the ACLs",
            one_of("", *AUTHORIZER_NAMES),
        ),
        ConfigKey("super.users", "str", "", "principals allowed everything: User:a;User:b"),
        ConfigKey(
            "allow.everyone.if.no.acl.found",
            "bool",
            False,
            "a resource without any ACL is open to everyone",
        ),
        ConfigKey(
            "authorizer.inter.broker.listener.super.user",
            "bool",
            False,
            "Tributary's own: with the authorizer on, requests on the inter-broker listener "
            "are made as a super user (brokers and the controller do not authenticate yet; "
            "turn it on only where that listener is reachable by brokers alone)",
        ),
        # Partition limits (KIP-578's names, plus the per-request one), checked by
        # CreateTopics and CreatePartitions before anything is allocated.
        ConfigKey(
            "max.partitions.per.request",
            "int",
            10_000,
            "most partitions one CreateTopics/CreatePartitions request may add",
            at_least(1),
        ),
        ConfigKey(
            "max.broker.partitions",
            "int",
            4_000,
            "most partition replicas a broker may hold (new topics and partitions only)",
            at_least(1),
        ),
        ConfigKey(
            "max.partitions",
            "int",
            200_000,
            "most partitions in the cluster (new topics and partitions only)",
            at_least(1),
        ),
        ConfigKey("message.max.bytes", "int", 1_048_588, "largest record batch", at_least(0)),
        ConfigKey(
            "socket.request.max.bytes", "int", 104_857_600, "largest request frame", at_least(1024)
        ),
        ConfigKey("log.segment.bytes", "int", 1 << 30, "segment size before a roll", at_least(14)),
        # Kafka's time synonyms: the .ms key wins over .minutes over .hours (None: unset).
        ConfigKey("log.roll.ms", "int", None, "segment age before a roll", _at_least_or_unset(1)),
        ConfigKey("log.roll.hours", "int", 168, "segment age before a roll, in hours", at_least(1)),
        ConfigKey(
            "log.roll.jitter.ms",
            "int",
            None,
            "most random jitter subtracted from a segment's roll time",
            _at_least_or_unset(0),
        ),
        ConfigKey("log.roll.jitter.hours", "int", 0, "log.roll.jitter.ms in hours", at_least(0)),
        ConfigKey("log.retention.ms", "int", None, "delete segments older than this (-1 never)"),
        ConfigKey("log.retention.minutes", "int", None, "log.retention.ms in minutes"),
        ConfigKey("log.retention.hours", "int", 168, "log.retention.ms in hours"),
        ConfigKey("log.retention.bytes", "int", -1, "delete old segments above this size"),
        ConfigKey(
            "log.segment.delete.delay.ms",
            "int",
            60_000,
            "keep deleted segments' files (renamed .deleted) this long",
            at_least(0),
        ),
        ConfigKey("log.index.interval.bytes", "int", 4096, "bytes between index entries"),
        ConfigKey("log.index.size.max.bytes", "int", 10 * 1024 * 1024, "index size before a roll"),
        ConfigKey("log.flush.interval.messages", "int", LONG_MAX, "fsync after this many messages"),
        ConfigKey("log.flush.interval.ms", "int", LONG_MAX, "fsync after this long"),
        ConfigKey(
            "compression.type",
            "str",
            "producer",
            "default compression.type of topics (producer keeps the producer's codec)",
            one_of(*COMPRESSION_TYPES),
        ),
        ConfigKey("log.preallocate", "bool", False, "default preallocate of topics (no effect)"),
        ConfigKey(
            "log.message.format.version",
            "str",
            LATEST_MESSAGE_FORMAT_VERSION,
            "default message.format.version of topics (v2 batches are always written)",
        ),
        ConfigKey(
            "log.message.timestamp.difference.max.ms",
            "int",
            LONG_MAX,
            "default message.timestamp.difference.max.ms of topics",
            at_least(0),
        ),
        ConfigKey(
            "log.message.downconversion.enable",
            "bool",
            True,
            "default message.downconversion.enable of topics (no effect)",
        ),
        ConfigKey("log.flush.scheduler.interval.ms", "int", 1000, "how often to check flushes"),
        ConfigKey(
            "log.flush.offset.checkpoint.interval.ms",
            "int",
            60_000,
            "how often to checkpoint recovery points",
        ),
        ConfigKey("log.retention.check.interval.ms", "int", 300_000, "how often retention runs"),
        # Idempotent producers (Kafka 2.8 expires producer state by this transactional
        # setting; the check runs with retention).
        ConfigKey(
            "transactional.id.expiration.ms",
            "int",
            604_800_000,
            "forget an idempotent producer's state after this long without writes",
            at_least(1),
        ),
        ConfigKey(
            "log.message.timestamp.type",
            "str",
            "CreateTime",
            "CreateTime or LogAppendTime",
            one_of("CreateTime", "LogAppendTime"),
        ),
        ConfigKey("replica.lag.time.max.ms", "int", 30_000, "ISR lag limit", at_least(1)),
        ConfigKey("replica.fetch.max.bytes", "int", 1_048_576, "per-partition fetch size"),
        ConfigKey(
            "replica.fetch.response.max.bytes", "int", 10_485_760, "follower fetch response size"
        ),
        ConfigKey("replica.fetch.wait.max.ms", "int", 500, "follower long-poll time"),
        ConfigKey("replica.fetch.min.bytes", "int", 1, "follower fetch min bytes"),
        ConfigKey("replica.fetch.backoff.ms", "int", 1000, "follower back-off after an error"),
        # Fetch sessions (KIP-227): Kafka's two keys, and a bound of Tributary's own.
        ConfigKey(
            "max.incremental.fetch.session.cache.slots",
            "int",
            1_000,
            "most fetch sessions kept at once (0: no sessions, every fetch is full)",
            at_least(0),
        ),
        ConfigKey(
            "min.incremental.fetch.session.eviction.ms",
            "int",
            120_000,
            "a fetch session unused this long may be evicted for a new one",
            at_least(0),
        ),
        ConfigKey(
            "max.incremental.fetch.session.cache.partitions",
            "int",
            100_000,
            "most partitions cached over all fetch sessions (Tributary's: bounds memory)",
            at_least(0),
        ),
        ConfigKey("replica.socket.timeout.ms", "int", 30_000, "follower request timeout"),
        ConfigKey(
            "replica.high.watermark.checkpoint.interval.ms",
            "int",
            5000,
            "how often HWs are checkpointed",
        ),
        ConfigKey(
            "isr.change.propagation.blackout.ms",
            "int",
            5000,
            "publish ISR changes after this long without one",
        ),
        ConfigKey(
            "isr.change.propagation.interval.ms",
            "int",
            60_000,
            "publish ISR changes at least this often",
        ),
        ConfigKey("controlled.shutdown.enable", "bool", True, "ask the controller before exiting"),
        ConfigKey("controlled.shutdown.max.retries", "int", 3, "controlled shutdown attempts"),
        ConfigKey(
            "controlled.shutdown.retry.backoff.ms", "int", 5000, "wait between those attempts"
        ),
        ConfigKey("request.timeout.ms", "int", 30_000, "timeout of requests this broker sends"),
        ConfigKey("metrics.port", "int", -1, "Prometheus metrics HTTP port (-1 off, 0 any)"),
        ConfigKey(
            "metrics.snapshot.interval.ms", "int", 10_000, "JSON-lines metrics snapshot period"
        ),
        *ROTATION_CONFIG_KEYS,
        *SECURITY_CONFIG_KEYS,
        *TXN_CONFIG_KEYS,
        # -- log cleaner (compaction) ---------------------------------------------------
        ConfigKey("log.cleaner.enable", "bool", True, "run the log cleaner for compact topics"),
        ConfigKey(
            "log.cleaner.io.max.bytes.per.second",
            "int",
            LONG_MAX,
            "cleaner read+write rate limit",
            at_least(1),
        ),
        ConfigKey(
            "log.cleaner.dedupe.buffer.size",
            "int",
            128 * 1024 * 1024,
            "memory for the cleaner's key->offset map",
            at_least(1024),
        ),
        ConfigKey("log.cleaner.backoff.ms", "int", 15_000, "sleep when nothing is cleanable"),
        ConfigKey(
            "log.cleaner.min.cleanable.ratio", "float", 0.5, "default min.cleanable.dirty.ratio"
        ),
        ConfigKey("log.cleaner.delete.retention.ms", "int", DAY_MS, "default delete.retention.ms"),
        ConfigKey("log.cleaner.min.compaction.lag.ms", "int", 0, "default min.compaction.lag.ms"),
        ConfigKey(
            "log.cleaner.max.compaction.lag.ms",
            "int",
            LONG_MAX,
            "default max.compaction.lag.ms",
            at_least(1),
        ),
        ConfigKey(
            "log.cleanup.policy",
            "str",
            "delete",
            "default cleanup.policy (delete, compact or compact,delete)",
        ),
        # -- scrubber (Tributary's own: background CRC checks and repair) --------------
        ConfigKey(
            "log.scrub.enable", "bool", True, "check closed segments' CRCs in the background"
        ),
        ConfigKey(
            "log.scrub.bytes.per.second",
            "int",
            1024 * 1024,
            "scrubber read rate limit (HDFS's block scanner default, 1 MiB/s)",
            at_least(1),
        ),
        ConfigKey(
            "log.scrub.interval.ms",
            "int",
            7 * DAY_MS,
            "start a new full pass this long after the previous one started",
            at_least(1),
        ),
        ConfigKey(
            "log.scrub.repair.backoff.ms",
            "int",
            5000,
            "retry an unfinished repair (or leader step-down request) this often",
            at_least(1),
        ),
        # -- group coordinator and __consumer_offsets ---------------------------------
        ConfigKey(
            "offsets.topic.num.partitions",
            "int",
            50,
            "partitions of __consumer_offsets",
            at_least(1),
        ),
        ConfigKey(
            "offsets.topic.replication.factor",
            "int",
            3,
            "RF of __consumer_offsets (capped at the live brokers)",
            at_least(1),
        ),
        ConfigKey(
            "offsets.topic.segment.bytes",
            "int",
            100 * 1024 * 1024,
            "its segment size",
            at_least(14),
        ),
        ConfigKey("offsets.commit.timeout.ms", "int", 5000, "wait this long for a commit's acks"),
        ConfigKey(
            "offsets.retention.minutes",
            "int",
            7 * 24 * 60,
            "keep an empty group's offsets this long",
        ),
        ConfigKey(
            "offsets.retention.check.interval.ms", "int", 600_000, "how often to expire offsets"
        ),
        ConfigKey("offset.metadata.max.bytes", "int", 4096, "largest commit metadata string"),
        ConfigKey("group.min.session.timeout.ms", "int", 6000, "smallest session timeout allowed"),
        ConfigKey(
            "group.max.session.timeout.ms", "int", 1_800_000, "largest session timeout allowed"
        ),
        ConfigKey(
            "group.initial.rebalance.delay.ms",
            "int",
            3000,
            "wait this long for more members when an empty group starts rebalancing",
        ),
        ConfigKey("group.max.size", "int", 2**31 - 1, "most members in one group", at_least(1)),
        # -- connection and memory bounds (client listeners: every listener but the
        # inter-broker one) -----------------------------------------------------------
        ConfigKey(
            "max.connections",
            "int",
            NO_LIMIT,
            "client connections open at once; more are closed as soon as accepted "
            "(Kafka's default: no limit; the file descriptor limit bounds it anyway)",
            at_least(0),
        ),
        ConfigKey(
            "max.connections.per.ip",
            "int",
            NO_LIMIT,
            "client connections from one address; more are closed as soon as accepted",
            at_least(0),
        ),
        ConfigKey(
            "max.connection.creation.rate",
            "int",
            NO_LIMIT,
            "new client connections a second at most (KIP-612); more wait before their TLS "
            "handshake and first read (Kafka's default: no limit)",
            at_least(1),
        ),
        ConfigKey(
            "max.connections.per.ip.overrides",
            "str",
            "",
            "host:count,... per-address limits replacing max.connections.per.ip",
        ),
        ConfigKey(
            "quota.window.num",
            "int",
            11,
            "client quotas: the number of windows a client's rate is measured over",
            at_least(2),
        ),
        ConfigKey(
            "quota.window.size.seconds",
            "int",
            1,
            "client quotas: the length of one of those windows",
            at_least(1),
        ),
        ConfigKey(
            "connections.max.idle.ms",
            "int",
            600_000,
            "close a connection that has sent nothing and waited for nothing this long "
            "(every listener, as in Kafka; -1 never)",
            at_least(-1),
        ),
        ConfigKey(
            "queued.max.request.bytes",
            "int",
            DEFAULT_QUEUED_MAX_REQUEST_BYTES,
            "memory pool for request bytes read and not yet handled, over all client "
            "connections (the inter-broker listener has a pool of this size to itself); a "
            "connection waits (reads nothing) until its request fits, and a request bigger "
            "than the pool is refused (-1: no limit, Kafka's default)",
            at_least(-1),
        ),
        ConfigKey(
            "queued.max.requests.per.connection",
            "int",
            64,
            "pipelined requests read ahead per connection",
            at_least(1),
        ),
    ]
)


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)


TRIBUTARY_WIRE = "tributary"
KAFKA_WIRE = "kafka"
WIRE_PROTOCOLS = (TRIBUTARY_WIRE, KAFKA_WIRE)


def _wire_protocols(text: str) -> dict[str, str]:
    """`NAME:proto,...` -> {NAME: proto} (`listener.wire.protocol.map`, Kafka's map syntax)."""
    protocols: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().lower()
        if not sep or not name or protocol not in WIRE_PROTOCOLS:
            raise ConfigError(
                f"listener.wire.protocol.map: {item!r} is not NAME:protocol with a protocol "
                f"in {', '.join(WIRE_PROTOCOLS)}"
            )
        if name in protocols:
            raise ConfigError(f"listener.wire.protocol.map: {name} is mapped twice")
        protocols[name] = protocol
    return protocols


class BrokerConfig(PropertiesConfig):
    def __init__(self, values: Mapping[str, Any]):
        rest, prefixed = split_listener_prefixed(values)
        self.values = BROKER_CONFIG.parse(rest)
        # The properties as given (server.properties and overrides): Kafka's
        # originals, which DescribeConfigs reports as STATIC_BROKER_CONFIG.
        self.originals = {str(k): _render(v) for k, v in values.items()}
        self.default_log_config()  # the log.* topic defaults must be valid topic values
        # name -> (host, port) to bind, and name -> (host, port) to advertise.
        self.listeners = {n: (h, p) for n, h, p in parse_listeners(self.values["listeners"])}
        if not self.listeners:
            raise ConfigError("listeners: at least one listener is required")
        advertised = parse_listeners(self.values["advertised.listeners"])
        self.advertised = dict(self.listeners)
        for name, host, port in advertised:
            if name not in self.listeners:
                raise ConfigError(f"advertised.listeners: {name} is not in listeners")
            self.advertised[name] = (host, port)
        for name, (host, port) in self.advertised.items():
            if host in ("0.0.0.0", "", "::"):
                self.advertised[name] = ("127.0.0.1", port)
        self.security: dict[str, ListenerSecurity] = listener_security(
            self.values, prefixed, list(self.listeners)
        )
        self.inter_broker_listener = self.values["inter.broker.listener.name"].upper() or (
            self._inter_broker_listener_by_protocol()
        )
        if self.inter_broker_listener not in self.listeners:
            raise ConfigError(
                f"inter.broker.listener.name: {self.inter_broker_listener} is not in listeners"
            )
        self.wire_protocols = _wire_protocols(self.values["listener.wire.protocol.map"])
        for name in self.wire_protocols:
            if name not in self.listeners:
                raise ConfigError(f"listener.wire.protocol.map: {name} is not in listeners")
        for name in self.listeners:
            self.wire_protocols.setdefault(name, TRIBUTARY_WIRE)
        if self.wire_protocols[self.inter_broker_listener] != TRIBUTARY_WIRE:
            raise ConfigError(
                f"listener.wire.protocol.map: the inter-broker listener "
                f"{self.inter_broker_listener} must speak {TRIBUTARY_WIRE}"
            )
        self.max_connections_per_ip_overrides = parse_overrides(
            self.values["max.connections.per.ip.overrides"]
        )
        self.bind_host, self.bind_port = self.listeners[self.inter_broker_listener]
        self.advertised_host, self.advertised_port = self.advertised[self.inter_broker_listener]

    def _inter_broker_listener_by_protocol(self) -> str:
        """Kafka's `security.inter.broker.protocol`: the listener named like it (or the
        first with that protocol); unset, the first listener."""
        protocol = self.values["security.inter.broker.protocol"]
        if not protocol:
            return next(iter(self.listeners))
        if protocol in self.listeners:
            return protocol
        for name, security in self.security.items():
            if security.protocol == protocol:
                return name
        raise ConfigError(f"security.inter.broker.protocol: no listener uses {protocol}")

    @property
    def authorizer_enabled(self) -> bool:
        return bool(self.values["authorizer.class.name"])

    @property
    def broker_id(self) -> int:
        return self.values["broker.id"]

    @property
    def log_dir(self) -> Path:
        return Path(self.values["log.dirs"].split(",")[0])

    def replication(self) -> ReplicationConfig:
        v = self.values
        return ReplicationConfig(
            replica_lag_time_max_ms=v["replica.lag.time.max.ms"],
            replica_fetch_max_bytes=v["replica.fetch.max.bytes"],
            replica_fetch_response_max_bytes=v["replica.fetch.response.max.bytes"],
            replica_fetch_wait_max_ms=v["replica.fetch.wait.max.ms"],
            replica_fetch_min_bytes=v["replica.fetch.min.bytes"],
            replica_fetch_backoff_ms=v["replica.fetch.backoff.ms"],
            isr_change_propagation_blackout_ms=v["isr.change.propagation.blackout.ms"],
            isr_change_propagation_interval_ms=v["isr.change.propagation.interval.ms"],
            replica_selector=parse_selector(v["replica.selector.class"]),
        )

    def fetch_sessions(self) -> FetchSessionConfig:
        v = self.values
        return FetchSessionConfig(
            max_slots=v["max.incremental.fetch.session.cache.slots"],
            eviction_ms=v["min.incremental.fetch.session.eviction.ms"],
            max_partitions=v["max.incremental.fetch.session.cache.partitions"],
        )

    def _millis(self, ms: str, minutes: str | None, hours: str) -> int:
        """Kafka's time synonyms: `ms` if set, else `minutes`, else `hours`."""
        v = self.values
        if v[ms] is not None:
            value = v[ms]
        elif minutes is not None and v[minutes] is not None:
            value = v[minutes] * 60_000
        else:
            value = v[hours] * 3_600_000
        return value

    def default_topic_properties(self) -> dict[str, str]:
        """Broker-level defaults for topic configs (Kafka's log.* -> topic name mapping,
        `LogConfig.extractLogConfigMap`)."""
        v = self.values
        retention_ms = self._millis(
            "log.retention.ms", "log.retention.minutes", "log.retention.hours"
        )
        return {
            "segment.bytes": str(v["log.segment.bytes"]),
            "segment.ms": str(self._millis("log.roll.ms", None, "log.roll.hours")),
            "segment.jitter.ms": str(
                self._millis("log.roll.jitter.ms", None, "log.roll.jitter.hours")
            ),
            "retention.ms": str(-1 if retention_ms < 0 else retention_ms),
            "retention.bytes": str(v["log.retention.bytes"]),
            "index.interval.bytes": str(v["log.index.interval.bytes"]),
            "segment.index.bytes": str(v["log.index.size.max.bytes"]),
            "max.message.bytes": str(v["message.max.bytes"]),
            "flush.messages": str(v["log.flush.interval.messages"]),
            "flush.ms": str(v["log.flush.interval.ms"]),
            "message.timestamp.type": v["log.message.timestamp.type"],
            "min.insync.replicas": str(v["min.insync.replicas"]),
            "unclean.leader.election.enable": str(v["unclean.leader.election.enable"]).lower(),
            "cleanup.policy": v["log.cleanup.policy"],
            "delete.retention.ms": str(v["log.cleaner.delete.retention.ms"]),
            "min.cleanable.dirty.ratio": str(v["log.cleaner.min.cleanable.ratio"]),
            "min.compaction.lag.ms": str(v["log.cleaner.min.compaction.lag.ms"]),
            "max.compaction.lag.ms": str(v["log.cleaner.max.compaction.lag.ms"]),
            "file.delete.delay.ms": str(v["log.segment.delete.delay.ms"]),
            "compression.type": v["compression.type"],
            "preallocate": str(v["log.preallocate"]).lower(),
            "message.format.version": v["log.message.format.version"],
            "message.timestamp.difference.max.ms": str(
                v["log.message.timestamp.difference.max.ms"]
            ),
            "message.downconversion.enable": str(v["log.message.downconversion.enable"]).lower(),
        }

    def default_log_config(self) -> LogConfig:
        """The topic defaults as a `LogConfig`; ConfigError naming the broker key when one
        of the log.* values is not a valid topic value."""
        try:
            return LogConfig.from_properties(self.default_topic_properties())
        except LogConfigError as exc:
            raise ConfigError(f"broker topic defaults: {exc}") from None
