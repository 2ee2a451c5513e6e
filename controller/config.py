"""Controller configuration: Kafka's names and defaults where they exist.

`ControllerConfig.load(path, overrides)` reads a properties file and `key=value`
overrides into typed, validated values (`server_common.properties`). The listener only serves
ControlledShutdown; its bound port (port 0 picks a free one) goes into /controller so
brokers can find it. `log.dir` is where `controller-events.jsonl` is appended. The
controller connects to brokers' inter-broker listener as `security.inter.broker.protocol`
says, with Kafka's client settings (`broker_security()`), and its own listener uses the
same protocol (`listener_security()`, `sasl_factory()`: PLAIN users from its JAAS config,
SCRAM users from the /config/users cache the server keeps).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from client.security.jaas import parse_jaas_config, plain_users
from client.security.secure_connector import SecurityConfig
from server_common.jsonl import ROTATION_CONFIG_KEYS
from server_common.properties import (
    REQUIRED,
    ConfigDef,
    ConfigError,
    ConfigKey,
    PropertiesConfig,
    at_least,
    one_of,
    parse_listener,
)
from server_common.security.listener_config import (
    LISTENER_KEYS,
    SECURITY_CONFIG_KEYS,
    ListenerSecurity,
    listener_security,
)
from server_common.security.sasl import SaslServerFactory, ScramCredentialSource

CONTROLLER_CONFIG = ConfigDef(
    [
        ConfigKey("controller.id", "int", REQUIRED, "this controller's id", at_least(0)),
        ConfigKey("listeners", "str", "PLAINTEXT://127.0.0.1:0", "address for ControlledShutdown"),
        ConfigKey(
            "advertised.listeners", "str", "", "address brokers should use (default: listeners)"
        ),
        ConfigKey("zookeeper.connect", "str", "127.0.0.1:2181", "ZooKeeper connect string"),
        ConfigKey(
            "zookeeper.session.timeout.ms", "int", 18_000, "ZooKeeper session timeout", at_least(1)
        ),
        ConfigKey("zookeeper.connection.timeout.ms", "int", 18_000, "wait this long for ZooKeeper"),
        ConfigKey("auto.leader.rebalance.enable", "bool", True, "move leaders back to preferred"),
        ConfigKey(
            "leader.imbalance.check.interval.seconds",
            "int",
            300,
            "how often the leader imbalance is checked",
            at_least(1),
        ),
        ConfigKey(
            "leader.imbalance.per.broker.percentage",
            "int",
            10,
            "rebalance a broker above this share of non-preferred leaders",
            at_least(0),
        ),
        ConfigKey(
            "unclean.leader.election.enable",
            "bool",
            False,
            "elect out-of-sync replicas when no ISR member is alive (topic config overrides)",
        ),
        ConfigKey("controller.socket.timeout.ms", "int", 30_000, "timeout of requests to brokers"),
        ConfigKey(
            "log.dir", "str", "/tmp/tributary-controller", "where controller-events.jsonl goes"
        ),
        ConfigKey("metrics.port", "int", -1, "Prometheus metrics HTTP port (-1 off, 0 any)"),
        *ROTATION_CONFIG_KEYS,
        # -- how the controller connects to brokers' inter-broker listener -------------
        ConfigKey(
            "security.inter.broker.protocol",
            "str",
            "PLAINTEXT",
            "security protocol of the brokers' inter-broker listener",
            one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
        ),
        ConfigKey(
            "sasl.mechanism.inter.broker.protocol",
            "str",
            "PLAIN",
            "SASL mechanism the controller logs in to brokers with",
            one_of("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
        ),
        # The controller's listener uses that protocol too (brokers connect to it as to
        # each other), with the same server-side settings as a broker's listener.
        *(key for key in LISTENER_KEYS),
        *(
            key
            for key in SECURITY_CONFIG_KEYS
            if key.name
            in (
                "ssl.handshake.timeout.ms",
                "connection.failed.authentication.delay.ms",
                "sasl.server.max.receive.size",
            )
        ),
    ]
)


class ControllerConfig(PropertiesConfig):
    def __init__(self, values: Mapping[str, Any]):
        self.values = CONTROLLER_CONFIG.parse(values)
        self.bind_host, self.bind_port = parse_listener(self.values["listeners"])
        advertised = self.values["advertised.listeners"] or self.values["listeners"]
        self.advertised_host, advertised_port = parse_listener(advertised)
        # 0 means "the port we bound" (known only after binding).
        self.advertised_port: int | None = advertised_port or None
        if self.advertised_host in ("0.0.0.0", "", "::"):
            self.advertised_host = "127.0.0.1"
        if self.values["metrics.port"] < -1:
            raise ConfigError("metrics.port: must be -1 (off) or a port")

    def listener_security(self) -> ListenerSecurity:
        """The controller listener's security: `security.inter.broker.protocol`, with
        the ssl.* and sasl.* settings (ConfigError when incomplete)."""
        protocol = self.values["security.inter.broker.protocol"]
        values = {**self.values, "listener.security.protocol.map": f"CONTROLLER:{protocol}"}
        return listener_security(values, {}, ["CONTROLLER"])["CONTROLLER"]

    def sasl_factory(self, scram_credentials: ScramCredentialSource) -> SaslServerFactory | None:
        """A SASL listener's mechanisms: PLAIN users (`user_<name>` in sasl.jaas.config),
        SCRAM credentials from `scram_credentials` (the /config/users cache)."""
        security = self.listener_security()
        if not security.uses_sasl:
            return None
        users: dict[str, str] = {}
        if text := security.jaas.get("PLAIN", ""):
            try:
                users = plain_users(dict(parse_jaas_config(text).options))
            except ValueError as exc:
                raise ConfigError(f"sasl.jaas.config: {exc}") from None
        return SaslServerFactory(security.sasl_mechanisms, users, scram_credentials)

    def broker_security(self) -> SecurityConfig | None:
        """How the controller connects to brokers (None: PLAINTEXT); ConfigError."""
        v = self.values
        if v["security.inter.broker.protocol"] == "PLAINTEXT":
            return None
        properties = {
            "security.protocol": v["security.inter.broker.protocol"],
            "sasl.mechanism": v["sasl.mechanism.inter.broker.protocol"],
            "sasl.jaas.config": v["sasl.jaas.config"],
            "ssl.truststore.location": v["ssl.truststore.location"],
            "ssl.keystore.location": v["ssl.keystore.location"],
            "ssl.key.password": v["ssl.key.password"],
        }
        try:
            return SecurityConfig.from_properties(properties)
        except ValueError as exc:
            raise ConfigError(f"the controller's connections to brokers: {exc}") from None

    @property
    def controller_id(self) -> int:
        return self.values["controller.id"]

    @property
    def log_dir(self) -> Path:
        return Path(self.values["log.dir"])
