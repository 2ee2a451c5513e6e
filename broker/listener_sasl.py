"""A broker's SASL listeners: their mechanisms and the broker's own credentials, from the
listeners' JAAS configs (Kafka's `sasl.jaas.config`, parsed by client/security/jaas.py).

`sasl_factory()` makes a SASL listener's `SaslServerFactory`: PLAIN's users are the
JAAS config's `user_<name>="<password>"` options (Kafka's PlainLoginModule on a broker),
SCRAM's come from /config/users (the credential cache). `own_credentials()` is the
username and password the broker itself logs in with to the inter-broker listener (the
`username`/`password` options, as Kafka's brokers take them).
"""

from __future__ import annotations

from client.security.jaas import parse_jaas_config, plain_users
from server_common.properties import ConfigError
from server_common.security.listener_config import ListenerSecurity
from server_common.security.sasl import SaslServerFactory, ScramCredentialSource


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
