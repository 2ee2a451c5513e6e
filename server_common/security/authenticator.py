"""The SASL authentication state machine of one connection, pure (no I/O, no clock).

How it works (Kafka's `SaslServerAuthenticator`): a connection on a SASL listener starts
in HANDSHAKE: it may ask ApiVersions once (a second one closes the connection, as Kafka's
"Unexpected ApiVersions request received during SASL authentication state" does, so an
unauthenticated client cannot keep its connection busy, hence open, with them) and then
must send SaslHandshake naming a mechanism. An enabled mechanism moves it to AUTHENTICATE, where
each SaslAuthenticate token goes to the mechanism's `SaslServer` until that completes
(COMPLETE: the principal is the mechanism's; every request is served from then on).

`admit(api_key)` says what to do with each request: SERVE it (one ApiVersions before the
handshake, anything once complete), HANDSHAKE or AUTHENTICATE it (feed `handshake()` /
`authenticate()`), or CLOSE the connection without an answer (any other request before
authentication completes, a second handshake, a token before the handshake: Kafka's
ILLEGAL_SASL_STATE, which closes the connection). The answers say what to send and
whether to close after sending: an unknown mechanism is answered
UNSUPPORTED_SASL_MECHANISM with the enabled list and closed; a failed authentication
(wrong password, unknown user, a malformed token) is answered SASL_AUTHENTICATION_FAILED
after `failed_delay_ms` (`connection.failed.authentication.delay.ms`) and closed (FAILED).
Failure messages never carry a password: the mechanisms' `SaslAuthenticationFailed`
messages are safe to send (server_common/security/sasl.py).

A token's size is bounded before it gets here: it arrives inside a request frame, which
the connection loop refuses past the frame limit before allocating it.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from client.protocol.api import ApiKey
from client.protocol.errors import ErrorCode
from server_common.security.principal import KafkaPrincipal
from server_common.security.sasl import (
    SaslAuthenticationFailed,
    SaslServer,
    SaslServerFactory,
    UnsupportedSaslMechanism,
)


class AuthState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


class Admission(enum.Enum):
    SERVE = "serve"
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    CLOSE = "close"


@dataclass(frozen=True)
class HandshakeAnswer:
    error_code: ErrorCode
    mechanisms: Sequence[str]
    close: bool = False


@dataclass(frozen=True)
class AuthenticateAnswer:
    error_code: ErrorCode
    error_message: str | None = None
    token: bytes = b""
    close: bool = False
    delay_ms: int = 0  # answer only after this long (a failed authentication)


class Authenticator:
    """One connection's SASL exchange against a listener's `SaslServerFactory`."""

    def __init__(self, factory: SaslServerFactory, failed_delay_ms: int = 100) -> None:
        self._factory = factory
        self._failed_delay_ms = failed_delay_ms
        self._server: SaslServer | None = None
        self.state = AuthState.HANDSHAKE
        self.principal: KafkaPrincipal | None = None
        self.mechanism: str | None = None
        self.failure: str | None = None  # why it failed (for the log; no secrets)
        self._versions_served = False  # the one ApiVersions before the handshake

    @property
    def complete(self) -> bool:
        return self.state is AuthState.COMPLETE

    def is_complete(self) -> bool:
        return self.state is AuthState.COMPLETE

    def admit(self, api_key: int) -> Admission:
        state = self.state
        if state is AuthState.COMPLETE:
            return Admission.SERVE
        if state is AuthState.HANDSHAKE:
            if api_key == ApiKey.API_VERSIONS and not self._versions_served:
                self._versions_served = True
                return Admission.SERVE
            if api_key == ApiKey.SASL_HANDSHAKE:
                return Admission.HANDSHAKE
        elif state is AuthState.AUTHENTICATE and api_key == ApiKey.SASL_AUTHENTICATE:
            return Admission.AUTHENTICATE
        self._fail(f"request of api {api_key} in SASL state {state.value}")
        return Admission.CLOSE

    def handshake(self, mechanism: str) -> HandshakeAnswer:
        enabled = self._factory.mechanisms
        if self.state is not AuthState.HANDSHAKE:
            self._fail("a second SaslHandshake")
            return HandshakeAnswer(ErrorCode.ILLEGAL_SASL_STATE, enabled, close=True)
        try:
            self._server = self._factory.create(mechanism)
        except UnsupportedSaslMechanism:
            self._fail(f"unsupported SASL mechanism {mechanism[:64]!r}")
            return HandshakeAnswer(ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled, close=True)
        self.mechanism = mechanism
        self.state = AuthState.AUTHENTICATE
        return HandshakeAnswer(ErrorCode.NONE, enabled)

    def authenticate(self, token: bytes) -> AuthenticateAnswer:
        server = self._server
        if self.state is not AuthState.AUTHENTICATE or server is None:
            self._fail("SaslAuthenticate outside the exchange")
            return AuthenticateAnswer(
                ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate before SaslHandshake", close=True
            )
        try:
            challenge = server.evaluate(token)
        except SaslAuthenticationFailed as exc:
            self._fail(exc.reason or str(exc))  # the reason says more, never a password
            return AuthenticateAnswer(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                str(exc),
                close=True,
                delay_ms=self._failed_delay_ms,
            )
        except Exception as exc:  # a mechanism's bug or a token it chokes on: a failure
            self._fail(f"{type(exc).__name__} in {self.mechanism}")
            return AuthenticateAnswer(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                f"Authentication failed during authentication due to invalid credentials "
                f"with SASL mechanism {self.mechanism}",
                close=True,
                delay_ms=self._failed_delay_ms,
            )
        if server.complete:
            self.principal = server.principal
            self.state = AuthState.COMPLETE
        return AuthenticateAnswer(ErrorCode.NONE, None, challenge)

    def _fail(self, reason: str) -> None:
        self.state = AuthState.FAILED
        self._server = None
        self.failure = reason
