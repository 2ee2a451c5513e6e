"""Broker configs in Kafka's four layers, and what DescribeConfigs says of them.

How it works (Kafka 2.8's DynamicBrokerConfig and ConfigHelper, as pure values): a
broker's effective config is, by precedence, its dynamic per-broker configs
(ZooKeeper's /config/brokers/<id>), the dynamic cluster defaults (/config/brokers/
<default>), its static configs (server.properties and overrides: `BrokerConfig.originals`)
and Kafka's defaults. `BrokerConfigLayers` holds the four and builds the effective
`BrokerConfig` (`current`); setting a key in a higher layer first removes its synonyms
from the lower ones (`log.retention.ms` over `log.retention.hours`), as Kafka's
overrideProps does.

Only the configs in `DYNAMIC_CONFIGS` may be changed at run time: the log.* defaults of
topic configs (Kafka's DynamicLogConfig, all but `log.message.format.version`), the
cleaner's rate, buffer and backoff, the connection limits, and Kafka's dynamic-only
replication throttle rates (accepted, no effect: Tributary has no quotas). Every other
Tributary config is read-only (`validate` refuses it with a `DynamicConfigError`, which
the handlers answer INVALID_REQUEST, Kafka's answer); names Tributary does not know are
accepted and kept, as Kafka keeps custom configs. `sanitize` drops from what ZooKeeper
holds what could not be applied (read-only names, bad values), as Kafka's
fromPersistentProps does.

`describe_broker` and `describe_topic` build DescribeConfigs entries with Kafka's
sources, types, documentation (when asked for: the broker config's line, a topic config
taking its broker synonym's) and synonym lists: for a topic config, the topic override
(if any), then its broker synonym in each layer that sets it; for a broker config, its
synonyms (`log.retention.ms`, `.minutes`, `.hours`) in each layer, from the name itself
on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from broker.config import BROKER_CONFIG, BrokerConfig
from broker.core.log.config import LogConfig
from broker.core.log.config_defs import CONFIG_TYPE_IDS, TOPIC_CONFIG_DEFS, to_string
from client.protocol import messages as m
from server_common.properties import REQUIRED, ConfigError

DEFAULT_ENTITY = "<default>"  # Kafka's ConfigEntityName.Default

# Kafka's DynamicLogConfig.ReconfigurableConfigs: the broker synonyms of topic configs,
# except the message format version (Kafka checks it against the whole cluster first).
DYNAMIC_LOG_CONFIGS = frozenset(
    spec.synonym for spec in TOPIC_CONFIG_DEFS.values() if spec.synonym
) - {"log.message.format.version"}
# Kafka's DynamicConfig.Broker: dynamic-only configs (replication quotas), with their
# validation (long, at least 0). Tributary has no quotas: accepted, no effect.
DYNAMIC_ONLY_CONFIGS = frozenset(
    {
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    }
)
# Of Kafka's LogCleaner.ReconfigurableConfigs and SocketServer.ReconfigurableConfigs, the
# ones Tributary has; applied live to the cleaner task and the connection limits.
DYNAMIC_CONFIGS = (
    DYNAMIC_LOG_CONFIGS
    | DYNAMIC_ONLY_CONFIGS
    | {
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.backoff.ms",
        "max.connections",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "max.connection.creation.rate",
    }
)

# Kafka's type of the broker configs whose Tributary type ("int") does not say it.
_LONG_CONFIGS = frozenset(
    {
        "queued.max.request.bytes",
        "connections.max.idle.ms",
        "log.retention.check.interval.ms",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.backoff.ms",
        "log.flush.scheduler.interval.ms",
        "replica.lag.time.max.ms",
        "replica.high.watermark.checkpoint.interval.ms",
        "controlled.shutdown.retry.backoff.ms",
        "offsets.retention.check.interval.ms",
        *DYNAMIC_ONLY_CONFIGS,
    }
    | {spec.synonym for spec in TOPIC_CONFIG_DEFS.values() if spec.synonym and spec.kind == "long"}
)
_KIND_OF_TYPE = {"bool": "boolean", "float": "double", "str": "string", "list": "list"}
# Kafka's PASSWORD configs: described as sensitive, their value never sent.
PASSWORD_CONFIGS = frozenset({"sasl.jaas.config", "ssl.key.password"})


def _shown(name: str) -> bool:
    """Whether DescribeConfigs may send this config's value (not a password, known)."""
    return broker_config_type(name) not in (None, "password")


class DynamicConfigError(ValueError):
    """A dynamic broker config change Kafka would refuse (INVALID_REQUEST)."""


def broker_synonyms(name: str) -> list[str]:
    """Kafka's brokerConfigSynonyms: the names of one setting, highest precedence first."""
    for group in (
        ["log.roll.ms", "log.roll.hours"],
        ["log.roll.jitter.ms", "log.roll.jitter.hours"],
        ["log.retention.ms", "log.retention.minutes", "log.retention.hours"],
    ):
        if name in group:
            return group
    return [name]


def broker_config_type(name: str) -> str | None:
    """Kafka's ConfigDef.Type name of a broker config, None for an unknown one."""
    if name == "log.cleanup.policy":
        return "list"
    if name in PASSWORD_CONFIGS:
        return "password"
    if name in _LONG_CONFIGS:
        return "long"
    key = BROKER_CONFIG.keys.get(name)
    if key is None:
        return None
    return _KIND_OF_TYPE.get(key.type, "int")


def _render(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)


# Kafka's defaults layer: every config with a default (KafkaConfig.defaultValues).
_DEFAULTS = {
    name: rendered
    for name, key in BROKER_CONFIG.keys.items()
    if key.default is not REQUIRED and (rendered := _render(key.default)) is not None
}


class BrokerConfigLayers:
    """One broker's config layers (see the module docstring)."""

    def __init__(self, static: BrokerConfig) -> None:
        self.static = static
        self.broker_id = static.broker_id
        self.dynamic_default: dict[str, str] = {}
        self.dynamic_broker: dict[str, str] = {}
        self.current = static

    # -- the effective config -------------------------------------------------------------
    def _effective(self, default: Mapping[str, str], broker: Mapping[str, str]) -> dict[str, str]:
        props = dict(self.static.originals)
        for layer in (default, broker):
            for name, value in layer.items():
                for synonym in broker_synonyms(name):
                    props.pop(synonym, None)
                props[name] = value
        return props

    def _build(self, default: Mapping[str, str], broker: Mapping[str, str]) -> BrokerConfig:
        """The BrokerConfig of these dynamic layers; ConfigError if it is not valid."""
        props = self._effective(default, broker)
        known = {k: v for k, v in props.items() if k in BROKER_CONFIG.keys}
        return BrokerConfig(known)

    def update(
        self, *, default: Mapping[str, str] | None = None, broker: Mapping[str, str] | None = None
    ) -> BrokerConfig:
        """Replace a dynamic layer (already sanitized) and return the new effective config.
        If it cannot be built, the layers stay as they were and ConfigError is raised."""
        new_default = dict(self.dynamic_default if default is None else default)
        new_broker = dict(self.dynamic_broker if broker is None else broker)
        config = self._build(new_default, new_broker)
        self.dynamic_default, self.dynamic_broker, self.current = new_default, new_broker, config
        return config

    # -- validation -------------------------------------------------------------------------
    def validate(self, props: Mapping[str, str], *, per_broker: bool) -> BrokerConfig:
        """Check a new dynamic layer (the whole of /config/brokers/<id> or <default>) as
        Kafka's DynamicBrokerConfig.validate does; returns the config it would give.
        DynamicConfigError says why not."""
        read_only = sorted(n for n in props if n in BROKER_CONFIG.keys and n not in DYNAMIC_CONFIGS)
        if read_only:
            raise DynamicConfigError(
                f"Cannot update these configs dynamically: {', '.join(read_only)}"
            )
        for name, value in props.items():
            problem = _value_problem(name, value)
            if problem is not None:
                raise DynamicConfigError(f"Invalid value {value!r} for {name}: {problem}")
        default = self.dynamic_default if per_broker else props
        broker = props if per_broker else self.dynamic_broker
        try:
            return self._build(default, broker)
        except ConfigError as exc:
            raise DynamicConfigError(f"Invalid dynamic configuration: {exc}") from None

    @staticmethod
    def sanitize(props: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
        """What of a stored dynamic layer can apply, and the names dropped (read-only
        names and bad values, which Kafka ignores with an error in its log)."""
        kept, dropped = {}, []
        for name, value in props.items():
            if (name in BROKER_CONFIG.keys and name not in DYNAMIC_CONFIGS) or _value_problem(
                name, value
            ) is not None:
                dropped.append(name)
            else:
                kept[name] = value
        return kept, dropped

    # -- DescribeConfigs ----------------------------------------------------------------------
    def _synonyms(self, name: str, names: list[str]) -> list[m.DescribeConfigsSynonym]:
        """Kafka's configSynonyms: each layer in precedence order, each name in order,
        from the first entry for `name` itself on."""
        found = []
        for layer, source in (
            (self.dynamic_broker, m.SOURCE_DYNAMIC_BROKER_CONFIG),
            (self.dynamic_default, m.SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.static.originals, m.SOURCE_STATIC_BROKER_CONFIG),
            (_DEFAULTS, m.SOURCE_DEFAULT_CONFIG),
        ):
            for synonym in names:
                if synonym in layer:
                    value = layer[synonym] if _shown(synonym) else None
                    found.append(m.DescribeConfigsSynonym(name=synonym, value=value, source=source))
        while found and found[0].name != name:
            found.pop(0)
        return found

    def describe_broker(
        self,
        keys: Iterable[str] | None,
        *,
        per_broker: bool,
        include_synonyms: bool,
        include_documentation: bool = False,
    ) -> list[m.DescribeConfigsResult]:
        """A BROKER resource's entries: this broker's every config (per_broker) or the
        cluster defaults set dynamically (resource name "")."""
        effective = self._effective(self.dynamic_default, self.dynamic_broker)
        if per_broker:
            names = dict.fromkeys([*BROKER_CONFIG.keys, *effective])
        else:
            names = dict.fromkeys(self.dynamic_default)
        wanted = set(keys) if keys else None
        entries = []
        for name in names:
            if wanted is not None and name not in wanted:
                continue
            kind = broker_config_type(name)
            synonyms = self._synonyms(name, broker_synonyms(name))
            if not per_broker:
                synonyms = [
                    s for s in synonyms if s.source == m.SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG
                ]
            if not per_broker:
                value: str | None = self.dynamic_default[name]
            elif name in BROKER_CONFIG.keys:
                value = _render(self.current.values[name])
            else:  # a dynamic-only config, or one Tributary does not know (then sensitive)
                value = effective.get(name)
            source = synonyms[0].source if synonyms else m.SOURCE_DEFAULT_CONFIG
            entries.append(
                m.DescribeConfigsResult(
                    name=name,
                    value=value if _shown(name) else None,
                    read_only=name not in DYNAMIC_CONFIGS,
                    is_default=source == m.SOURCE_DEFAULT_CONFIG,
                    is_sensitive=not _shown(name),
                    config_source=source,
                    synonyms=synonyms if include_synonyms else [],
                    config_type=CONFIG_TYPE_IDS[kind or "unknown"],
                    documentation=_documentation(name) if include_documentation else None,
                )
            )
        return entries

    def describe_topic(
        self,
        overrides: Mapping[str, str],
        config: LogConfig,
        keys: Iterable[str] | None,
        *,
        include_synonyms: bool,
        include_documentation: bool = False,
    ) -> list[m.DescribeConfigsResult]:
        """A TOPIC resource's entries: every topic config's effective value (`config`:
        the overrides over this broker's defaults), its source and synonyms."""
        wanted = set(keys) if keys else None
        entries = []
        for name, spec in TOPIC_CONFIG_DEFS.items():
            if wanted is not None and name not in wanted:
                continue
            synonyms: list[m.DescribeConfigsSynonym] = []
            value = to_string(spec, getattr(config, spec.field))
            if name in overrides:
                synonyms.append(
                    m.DescribeConfigsSynonym(
                        name=name, value=value, source=m.SOURCE_DYNAMIC_TOPIC_CONFIG
                    )
                )
            if spec.synonym:
                synonyms += self._synonyms(spec.synonym, broker_synonyms(spec.synonym))
            source = synonyms[0].source if synonyms else m.SOURCE_DEFAULT_CONFIG
            entries.append(
                m.DescribeConfigsResult(
                    name=name,
                    value=value,
                    read_only=False,
                    is_default=source == m.SOURCE_DEFAULT_CONFIG,
                    config_source=source,
                    synonyms=synonyms if include_synonyms else [],
                    config_type=CONFIG_TYPE_IDS[spec.kind],
                    documentation=(
                        _documentation(spec.synonym, topic=True) if include_documentation else None
                    ),
                )
            )
        return entries


def _documentation(name: str, *, topic: bool = False) -> str | None:
    """A config's one line of documentation (a topic config's is its broker synonym's)."""
    if topic and not name:
        return "replicas whose replication is throttled (no effect: Tributary has no quotas)"
    if name in DYNAMIC_ONLY_CONFIGS:
        return "replication quota in bytes/s (accepted, no effect: Tributary has no quotas)"
    key = BROKER_CONFIG.keys.get(name)
    return None if key is None else key.doc


def _value_problem(name: str, value: str) -> str | None:
    """Why `value` is not valid for broker config `name` (None: valid, or unknown name)."""
    if name in DYNAMIC_ONLY_CONFIGS:
        text = value.strip()
        if not text.lstrip("+-").isdigit() or int(text) < 0:
            return "must be a long >= 0"
        return None
    key = BROKER_CONFIG.keys.get(name)
    if key is None:
        return None
    try:
        key.parse(value)
    except ConfigError as exc:
        return str(exc)
    return None
