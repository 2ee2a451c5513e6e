"""Authentication: SaslHandshake and SaslAuthenticate, Kafka's SASL exchange (KIP-43,
KIP-152) in native messages.

How it works: messages declared with `schema.struct` (the conventions are in the package
docstring). On a SASL listener a client first names a mechanism (SaslHandshake; the
broker answers with the mechanisms it enables), then sends SaslAuthenticate requests
carrying the mechanism's tokens until the broker's answer completes the exchange (one
round for PLAIN, two for SCRAM). Nothing but ApiVersions is served before that.
"""

from __future__ import annotations

from client.protocol.schema import struct

# --- SaslHandshake (17) --------------------------------------------------------------------


@struct
class SaslHandshakeRequest:
    mechanism: str


@struct
class SaslHandshakeResponse:
    error_code: int
    mechanisms: list[str]


# --- SaslAuthenticate (36) -----------------------------------------------------------------


@struct
class SaslAuthenticateRequest:
    auth_bytes: bytes


@struct
class SaslAuthenticateResponse:
    error_code: int
    error_message: str | None = None
    auth_bytes: bytes = b""
    session_lifetime_ms: int = 0
