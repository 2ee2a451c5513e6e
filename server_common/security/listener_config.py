"""Each listener's security settings: its protocol, TLS files and SASL mechanisms.

How it works: Kafka's `listener.security.protocol.map` (`NAME:PROTOCOL,...`, protocols
PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) gives each listener its security protocol.
As in Kafka, a listener named like a protocol (`SASL_SSL://...`) uses that protocol
unless mapped otherwise; a listener with another name that the map leaves out stays
PLAINTEXT (Kafka would refuse it), so configurations with a `KAFKA` or `BROKER` listener
written before security existed keep working.

The TLS and SASL keys are Kafka's (`ssl.keystore.location`, `sasl.enabled.mechanisms`,
...), each also accepted with Kafka's listener prefix `listener.name.<listener>.<key>`
(lower-case listener name), which wins for that listener; a SASL mechanism's JAAS
config is `listener.name.<listener>.<mechanism>.sasl.jaas.config` (e.g.
`listener.name.sasl_ssl.plain.sasl.jaas.config`) or `sasl.jaas.config`.
`split_listener_prefixed()` takes the prefixed keys out of a server's properties before
its `ConfigDef` parses the rest; `listener_security()` combines both into one
`ListenerSecurity` per listener (the JAAS configs are read by broker/listener_sasl.py).
Pure: no file is read here (see tls.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from server_common.properties import ConfigError, ConfigKey, at_least, one_of

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
SECURITY_PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
TLS_PROTOCOLS = (SSL, SASL_SSL)
SASL_PROTOCOLS = (SASL_PLAINTEXT, SASL_SSL)

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
TLS_VERSIONS = ("TLSv1.2", "TLSv1.3")
LISTENER_PREFIX = "listener.name."
JAAS_SUFFIX = ".sasl.jaas.config"


def _valid_tls_versions(versions: list[str]) -> str | None:
    unknown = [v for v in versions if v not in TLS_VERSIONS]
    if unknown or not versions:
        return f"must be a non-empty list of {', '.join(TLS_VERSIONS)}, got {versions!r}"
    return None


def _valid_mechanisms(mechanisms: list[str]) -> str | None:
    unknown = [m for m in mechanisms if m not in SASL_MECHANISMS]
    if unknown:
        return f"unsupported SASL mechanism(s) {', '.join(unknown)} (have {SASL_MECHANISMS})"
    return None


# The keys a listener prefix may override (besides `<mechanism>.sasl.jaas.config`).
LISTENER_KEYS = (
    ConfigKey("ssl.keystore.type", "str", "PEM", "keystore format (PEM only)", one_of("PEM")),
    ConfigKey(
        "ssl.keystore.location",
        "str",
        "",
        "PEM file with this server's private key and certificate chain (SSL, SASL_SSL)",
    ),
    ConfigKey("ssl.key.password", "str", "", "password of the keystore's private key, if any"),
    ConfigKey("ssl.truststore.type", "str", "PEM", "truststore format (PEM only)", one_of("PEM")),
    ConfigKey(
        "ssl.truststore.location",
        "str",
        "",
        "PEM file of the CA certificates client certificates are checked against",
    ),
    ConfigKey(
        "ssl.client.auth",
        "str",
        "none",
        "client certificates: none, requested (checked when sent) or required (mTLS)",
        one_of("none", "requested", "required"),
    ),
    ConfigKey(
        "ssl.enabled.protocols",
        "list",
        ["TLSv1.2", "TLSv1.3"],
        "TLS versions accepted",
        _valid_tls_versions,
    ),
    ConfigKey(
        "sasl.enabled.mechanisms",
        "list",
        list(SASL_MECHANISMS),
        "SASL mechanisms offered on SASL listeners (Kafka's default GSSAPI is not supported)",
        _valid_mechanisms,
    ),
    ConfigKey(
        "sasl.jaas.config",
        "str",
        "",
        'JAAS config of the SASL listeners (PLAIN users as user_<name>="<password>"; the '
        "broker's own username and password)",
    ),
)
_LISTENER_KEY_NAMES = {key.name: key for key in LISTENER_KEYS}

SECURITY_CONFIG_KEYS = (
    ConfigKey(
        "listener.security.protocol.map",
        "str",
        "",
        "NAME:PROTOCOL,... each listener's security protocol (PLAINTEXT, SSL, "
        "SASL_PLAINTEXT, SASL_SSL); a listener named like a protocol defaults to it, any "
        "other unmapped listener is PLAINTEXT",
    ),
    *LISTENER_KEYS,
    ConfigKey(
        "ssl.handshake.timeout.ms",
        "int",
        10_000,
        "close a connection whose TLS handshake has not completed within this (Tributary's)",
        at_least(1),
    ),
    ConfigKey(
        "sasl.server.max.receive.size",
        "int",
        524_288,
        "largest request a SASL listener reads before the connection has authenticated "
        "(Kafka 3.x's; bigger ones close the connection before they take any memory)",
        at_least(1024),
    ),
    ConfigKey(
        "connection.failed.authentication.delay.ms",
        "int",
        100,
        "answer a failed authentication after this delay, then close the connection",
        at_least(0),
    ),
    ConfigKey(
        "sasl.mechanism.inter.broker.protocol",
        "str",
        "PLAIN",
        "SASL mechanism brokers and the controller use to authenticate to brokers",
        one_of(*SASL_MECHANISMS),
    ),
    ConfigKey(
        "security.inter.broker.protocol",
        "str",
        "",
        "the inter-broker listener is the one named like this protocol (when "
        "inter.broker.listener.name is not set)",
        lambda v: None if v in ("", *SECURITY_PROTOCOLS) else f"unknown protocol {v!r}",
    ),
)


@dataclass(frozen=True)
class TlsSettings:
    """PEM files and options for one TLS listener (or client)."""

    keystore_location: str = ""  # private key + certificate chain
    key_password: str = ""
    truststore_location: str = ""  # CA certificates
    client_auth: str = "none"
    enabled_protocols: tuple[str, ...] = TLS_VERSIONS


@dataclass(frozen=True)
class ListenerSecurity:
    name: str
    protocol: str = PLAINTEXT
    tls: TlsSettings | None = None
    sasl_mechanisms: tuple[str, ...] = ()
    # JAAS config per mechanism ("PLAIN", ...): the mechanism's own or the listener's.
    jaas: Mapping[str, str] = field(default_factory=dict)
    failed_authentication_delay_ms: int = 100
    handshake_timeout_ms: int = 10_000

    @property
    def uses_tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS


PLAINTEXT_LISTENER = ListenerSecurity(name="")


def split_listener_prefixed(
    values: Mapping[str, Any], listeners: Sequence[str] | None = None
) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    """(the other properties, {LISTENER: {key: value}}) for `listener.name.<l>.<key>` keys.

    `listener.name.<l>.<mechanism>.sasl.jaas.config` is kept as
    `<MECHANISM>.sasl.jaas.config`. ConfigError for a prefixed key that is not one a
    listener may override, or (given `listeners`) for an unknown listener.
    """
    rest: dict[str, Any] = {}
    prefixed: dict[str, dict[str, str]] = {}
    for name, value in values.items():
        if not name.startswith(LISTENER_PREFIX):
            rest[name] = value
            continue
        listener, _, key = name[len(LISTENER_PREFIX) :].partition(".")
        listener = listener.upper()
        if key.endswith(JAAS_SUFFIX) and key != "sasl.jaas.config":
            mechanism = key[: -len(JAAS_SUFFIX)].upper()
            if mechanism not in SASL_MECHANISMS:
                raise ConfigError(f"{name}: unknown SASL mechanism {mechanism.lower()!r}")
            key = f"{mechanism}{JAAS_SUFFIX}"
        elif key not in _LISTENER_KEY_NAMES:
            raise ConfigError(f"{name}: {key!r} cannot be set per listener")
        if not listener or (listeners is not None and listener not in listeners):
            raise ConfigError(f"{name}: {listener or '?'} is not in listeners")
        prefixed.setdefault(listener, {})[key] = value
    return rest, prefixed


def parse_protocol_map(text: str, listeners: Sequence[str]) -> dict[str, str]:
    """Each listener's security protocol from `listener.security.protocol.map`."""
    mapped: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL with a "
                f"protocol in {', '.join(SECURITY_PROTOCOLS)}"
            )
        if name in mapped:
            raise ConfigError(f"listener.security.protocol.map: {name} is mapped twice")
        if name not in listeners:
            raise ConfigError(f"listener.security.protocol.map: {name} is not in listeners")
        mapped[name] = protocol
    return {
        name: mapped.get(name, name if name in SECURITY_PROTOCOLS else PLAINTEXT)
        for name in listeners
    }


def listener_security(
    values: Mapping[str, Any], prefixed: Mapping[str, Mapping[str, str]], listeners: Sequence[str]
) -> dict[str, ListenerSecurity]:
    """Every listener's `ListenerSecurity` from parsed `values` (a ConfigDef with
    SECURITY_CONFIG_KEYS) and the `split_listener_prefixed` overrides."""
    protocols = parse_protocol_map(values["listener.security.protocol.map"], listeners)
    for name, own_values in prefixed.items():
        if name not in listeners:
            raise ConfigError(f"{LISTENER_PREFIX}{name.lower()}.*: {name} is not in listeners")
        for key, value in own_values.items():
            if key in _LISTENER_KEY_NAMES:
                _LISTENER_KEY_NAMES[key].parse(value)  # ConfigError naming the key
    result = {}
    for name in listeners:
        own = prefixed.get(name, {})

        def get(key: str, own: Mapping[str, str] = own) -> Any:
            if key in own:
                return (
                    _LISTENER_KEY_NAMES[key].parse(own[key])
                    if key in _LISTENER_KEY_NAMES
                    else own[key]
                )
            return values[key]

        protocol = protocols[name]
        tls = None
        if protocol in TLS_PROTOCOLS:
            get("ssl.keystore.type")
            get("ssl.truststore.type")
            tls = TlsSettings(
                keystore_location=get("ssl.keystore.location"),
                key_password=get("ssl.key.password"),
                truststore_location=get("ssl.truststore.location"),
                client_auth=get("ssl.client.auth"),
                enabled_protocols=tuple(get("ssl.enabled.protocols")),
            )
            if not tls.keystore_location:
                raise ConfigError(
                    f"listener {name} is {protocol}: ssl.keystore.location (or "
                    f"listener.name.{name.lower()}.ssl.keystore.location) is required"
                )
            if tls.client_auth != "none" and not tls.truststore_location:
                raise ConfigError(
                    f"listener {name}: ssl.client.auth={tls.client_auth} needs "
                    "ssl.truststore.location (the CA that signs client certificates)"
                )
        mechanisms: tuple[str, ...] = ()
        jaas: dict[str, str] = {}
        if protocol in SASL_PROTOCOLS:
            mechanisms = tuple(get("sasl.enabled.mechanisms"))
            if not mechanisms:
                raise ConfigError(
                    f"listener {name} is {protocol}: sasl.enabled.mechanisms is empty"
                )
            general = get("sasl.jaas.config")
            for mechanism in mechanisms:
                jaas[mechanism] = own.get(f"{mechanism}{JAAS_SUFFIX}", general)
        result[name] = ListenerSecurity(
            name=name,
            protocol=protocol,
            tls=tls,
            sasl_mechanisms=mechanisms,
            jaas=jaas,
            failed_authentication_delay_ms=values["connection.failed.authentication.delay.ms"],
            handshake_timeout_ms=values["ssl.handshake.timeout.ms"],
        )
    return result
