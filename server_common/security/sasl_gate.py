"""The SASL gate of one connection: nothing reaches a request handler before the
connection has authenticated (the Trio shell of authenticator.py).

How it works: the connection loop calls its handler for one request at a time, in
arrival order, in the connection's own task (server_common/network.py); a `SaslGate`
wraps the native handler of one connection and asks its `Authenticator` about each
request: served (ApiVersions before the handshake, anything once authenticated),
answered here (SaslHandshake, SaslAuthenticate) or refused by closing the connection.
A failed authentication is answered after the authenticator's delay (this connection's
task sleeps, other connections go on) and the connection then closes
(`RespondAndClose`). Once authenticated, the mechanism's principal is set as
`CLIENT_PRINCIPAL` for the connection's task, so every handler after sees it. On a
Kafka listener the gate sits behind the Kafka dispatcher, which translates Kafka's
SaslHandshake v1 / SaslAuthenticate v0-2 to and from the native messages
(broker/kafka/translate_sasl.py), so both wire protocols share it. On a listener
without SASL (no authenticator) SaslHandshake and SaslAuthenticate are answered
ILLEGAL_SASL_STATE, as Kafka answers them there, and everything else is served.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.errors import ErrorCode
from server_common.network import CLIENT_ADDRESS, CLOSE_CONNECTION, RespondAndClose
from server_common.security.authenticator import Admission, Authenticator
from server_common.security.principal import CLIENT_PRINCIPAL

log = logging.getLogger(__name__)

Handler = Callable[[Any, Any], Awaitable[Any]]
# Told of every failed authentication: (peer, mechanism or None, reason without secrets).
FailureObserver = Callable[[str, str | None, str], None]


class SaslGate:
    def __init__(
        self,
        handle: Handler,
        authenticator: Authenticator | None,
        on_failure: FailureObserver | None = None,
    ) -> None:
        self._handle = handle
        self._authenticator = authenticator
        self._on_failure = on_failure

    async def __call__(self, header: Any, request: Any) -> Any:
        auth = self._authenticator
        if auth is None:
            if header.api_key == ApiKey.SASL_HANDSHAKE:
                return m.SaslHandshakeResponse(
                    error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[]
                )
            if header.api_key == ApiKey.SASL_AUTHENTICATE:
                return m.SaslAuthenticateResponse(
                    error_code=ErrorCode.ILLEGAL_SASL_STATE,
                    error_message="this listener does not use SASL",
                )
            return await self._handle(header, request)
        admission = auth.admit(header.api_key)
        if admission is Admission.SERVE:
            return await self._handle(header, request)
        if admission is Admission.CLOSE:
            self._failed(auth, "closing the connection")
            return CLOSE_CONNECTION
        if admission is Admission.HANDSHAKE:
            shake = auth.handshake(request.mechanism)
            response: Any = m.SaslHandshakeResponse(
                error_code=shake.error_code, mechanisms=list(shake.mechanisms)
            )
            if shake.close:
                self._failed(auth, "answered and closed")
                return RespondAndClose(response)
            return response
        answer = auth.authenticate(request.auth_bytes)
        response = m.SaslAuthenticateResponse(
            error_code=answer.error_code,
            error_message=answer.error_message,
            auth_bytes=answer.token,
        )
        if answer.close:
            self._failed(auth, f"answered after {answer.delay_ms} ms and closed")
            if answer.delay_ms:
                await trio.sleep(answer.delay_ms / 1000)
            return RespondAndClose(response)
        if auth.complete and auth.principal is not None:
            CLIENT_PRINCIPAL.set(auth.principal)
            log.debug(
                "%s authenticated as %s (%s)", CLIENT_ADDRESS.get(), auth.principal, auth.mechanism
            )
        return response

    def _failed(self, auth: Authenticator, outcome: str) -> None:
        reason = auth.failure or "?"
        log.info("failed authentication from %s: %s; %s", CLIENT_ADDRESS.get(), reason, outcome)
        if self._on_failure is not None:
            self._on_failure(CLIENT_ADDRESS.get(), auth.mechanism, reason)
