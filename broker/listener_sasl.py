"""A broker's SASL listeners: their mechanisms and the broker's own credentials, from the
listeners' JAAS configs (Kafka's `sasl.jaas.config`, parsed by client/security/jaas.py).

`sasl_factory()` makes a SASL listener's `SaslServerFactory`: PLAIN's users are the
JAAS config's `user_<name>="<password>"` options (Kafka's PlainLoginModule on a broker),
SCRAM's come from /config/users (the credential cache). `own_credentials()` is the
username and password the broker itself logs in with to the inter-broker listener (the
`username`/`password` options, as Kafka's brokers take them); `inter_broker_security()`
is the client side of that: how the broker connects to the others;
`inter_broker_authenticates()` says whether brokers and the controller prove who they are
there (else, with the authorizer on, the broker warns at start).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from client.security.jaas import parse_jaas_config, plain_users
from client.security.secure_connector import SecurityConfig
from server_common.properties import ConfigError
from server_common.security.listener_config import PLAINTEXT, ListenerSecurity
from server_common.security.sasl import SaslServerFactory, ScramCredentialSource

if TYPE_CHECKING:
    from broker.config import BrokerConfig


def _jaas_options(security: ListenerSecurity, mechanism: str) -> dict[str, str]:
    text = security.jaas.get(mechanism, "")
    if not text:
        return {}
    try:
        return dict(parse_jaas_config(text).options)
    except ValueError as exc:
        raise ConfigError(
            f"listener {security.name}: the {mechanism} sasl.jaas.config: {exc}"
        ) from None


def sasl_factory(
    security: ListenerSecurity, scram_credentials: ScramCredentialSource
) -> SaslServerFactory:
    """The mechanisms of a SASL listener: PLAIN's users from its JAAS config
    (`user_<name>="<password>"`), SCRAM's from `scram_credentials` (/config/users)."""
    users = plain_users(_jaas_options(security, "PLAIN")) if "PLAIN" in security.jaas else {}
    return SaslServerFactory(security.sasl_mechanisms, users, scram_credentials)


def own_credentials(security: ListenerSecurity, mechanism: str) -> tuple[str, str] | None:
    """(username, password) a broker logs in with on this listener: the `username` and
    `password` options of the mechanism's JAAS config, as Kafka's brokers take them."""
    options = _jaas_options(security, mechanism)
    if "username" in options and "password" in options:
        return options["username"], options["password"]
    return None


def inter_broker_authenticates(config: BrokerConfig) -> bool:
    """Whether brokers and the controller prove who they are on the inter-broker
    listener (SASL, or TLS with `ssl.client.auth=required`)."""
    security = config.security[config.inter_broker_listener]
    mtls = security.tls is not None and security.tls.client_auth == "required"
    return security.uses_sasl or mtls


def inter_broker_security(config: BrokerConfig) -> SecurityConfig | None:
    """How this broker connects to the others' inter-broker listener (its followers'
    fetchers, repairs): that listener's protocol; TLS trusting its truststore and showing
    its keystore (for `ssl.client.auth`); SASL with `sasl.mechanism.inter.broker.protocol`
    and the username/password of that mechanism's JAAS config. None for PLAINTEXT."""
    security = config.security[config.inter_broker_listener]
    if security.protocol == PLAINTEXT:
        return None
    tls = security.tls
    username = password = None
    mechanism = config["sasl.mechanism.inter.broker.protocol"]
    if security.uses_sasl:
        if mechanism not in security.sasl_mechanisms:
            raise ConfigError(
                f"sasl.mechanism.inter.broker.protocol: {mechanism} is not enabled on the "
                f"inter-broker listener {security.name}"
            )
        credentials = own_credentials(security, mechanism)
        if credentials is None:
            raise ConfigError(
                f"the inter-broker listener {security.name} uses SASL: its {mechanism} "
                "sasl.jaas.config needs the broker's username and password options"
            )
        username, password = credentials
    try:
        return SecurityConfig(
            security_protocol=security.protocol,
            ssl_cafile=(tls.truststore_location or None) if tls else None,
            ssl_certfile=(tls.keystore_location or None) if tls else None,
            ssl_password=(tls.key_password or None) if tls else None,
            sasl_mechanism=mechanism,
            sasl_plain_username=username,
            sasl_plain_password=password,
        )
    except ValueError as exc:
        raise ConfigError(f"inter-broker security: {exc}") from None
