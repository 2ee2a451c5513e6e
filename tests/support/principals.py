"""A test seam until connections authenticate: run a request as the principal its
client id names.

How it works: `as_client_principal(handler)` wraps a broker's request handler (through
`BrokerServer`'s `interceptor`, as the faults do); a request whose client id starts with
`principal=<Type:name>` (then optionally `;anything`) is served with `CLIENT_PRINCIPAL`
set to that principal, the way the connection loop will set it once SASL or mTLS has
authenticated the connection. Other requests keep the connection's principal
(ANONYMOUS). Works for both wire protocols: the Kafka listener's requests reach the
wrapped handler translated, with the Kafka client's client id.
"""

from __future__ import annotations

from typing import Any

from server_common.network import Handler
from server_common.security.principal import CLIENT_PRINCIPAL, KafkaPrincipal

PREFIX = "principal="


def client_id_for(principal: str, rest: str = "test") -> str:
    """The client id that makes requests run as `principal` ("User:bob")."""
    return f"{PREFIX}{principal};{rest}"


def as_client_principal(handler: Handler) -> Handler:
    async def serve(header: Any, request: Any) -> Any:
        client_id = getattr(header, "client_id", None) or ""
        if not client_id.startswith(PREFIX):
            return await handler(header, request)
        principal = KafkaPrincipal.parse(client_id[len(PREFIX) :].split(";", 1)[0])
        token = CLIENT_PRINCIPAL.set(principal)
        try:
            return await handler(header, request)
        finally:
            CLIENT_PRINCIPAL.reset(token)

    return serve
