"""SASL on the server side, pure (no I/O): PLAIN and SCRAM-SHA-256/512 as Kafka 2.8 has them.

How it works: the connection loop asks `SaslServerFactory.create(mechanism)` for a
`SaslServer` once the client has named its mechanism (Kafka's SaslHandshake), then feeds
each token the client sends to `evaluate` and sends back what it returns, until
`complete`; `principal` is then User:<username>. Any bad token (wrong password, unknown
user, malformed bytes of any size) raises `SaslAuthenticationFailed`, whose text is
the message Kafka's SaslServerAuthenticator would send the client: a
SaslAuthenticationException's own message ("Authentication failed: Invalid username or
password" for PLAIN), otherwise "Authentication failed during authentication due to
invalid credentials with SASL mechanism <M>". It never holds a password; `reason` says
more for the broker's log (also password-free).

- PLAIN (Kafka's PlainSaslServer): one token `authzid NUL username NUL password`; the
  users are the `user_<name>="<password>"` options of the listener's JAAS config
  (`plain_users`); passwords are compared in constant time, also for unknown users; the
  authzid must be empty or the username.
- SCRAM (Kafka's ScramSaslServer, on the `scramp` library): client-first, server-first,
  client-final, server-final. Credentials come from a `ScramCredentialSource` (the
  broker's cache of /config/users); a user without one, one with fewer than 4096
  iterations, or the `tokenauth` extension (delegation tokens, not supported) fails,
  as does a message over `MAX_SCRAM_MESSAGE_BYTES`. The client-final's nonce must be
  the server-first's (RFC 5802, and Kafka since the fix of its `endsWith` check), with one
  exception Kafka 2.8 accepted: librdkafka before 2.6.1 (kcat 1.7.1 in Debian) sends
  its own nonce again in front of it (confluentinc/librdkafka#4895). The proof is still
  checked over the message exactly as sent, so this admits no one without the password.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping, Sequence
from typing import Protocol

from scramp import ScramMechanism as _ScrampMechanism
from scramp.core import Nonce as _ScrampNonce

from server_common.security.principal import KafkaPrincipal
from server_common.security.scram import MECHANISMS, ScramCredential

PLAIN = "PLAIN"
SUPPORTED_MECHANISMS = (PLAIN, *MECHANISMS)
# SCRAM messages are a few hundred bytes; a longer one is refused before scramp's
# SASLprep, which costs milliseconds per kilobyte on the connection's task.
MAX_SCRAM_MESSAGE_BYTES = 8192


class SaslAuthenticationFailed(Exception):
    """A failed authentication. `str(e)` is safe to send to the client and to log;
    `reason` (also password-free) says more, for the broker's log."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason or message


class UnsupportedSaslMechanism(Exception):
    """The client asked for a mechanism that is not enabled (or not known)."""

    def __init__(self, mechanism: str, enabled: Sequence[str] = ()) -> None:
        self.mechanism = mechanism
        self.enabled = list(enabled)
        super().__init__(f"Unsupported SASL mechanism {mechanism[:100]}")


class SaslServer(Protocol):
    mechanism: str

    def evaluate(self, token: bytes) -> bytes: ...

    @property
    def complete(self) -> bool: ...

    @property
    def principal(self) -> KafkaPrincipal: ...


class ScramCredentialSource(Protocol):
    def scram_credential(self, mechanism: str, username: str) -> ScramCredential | None: ...


def _invalid_credentials(mechanism: str, reason: str) -> SaslAuthenticationFailed:
    """A failure Kafka answers with its generic text (a SaslException, not a
    SaslAuthenticationException)."""
    return SaslAuthenticationFailed(
        "Authentication failed during authentication due to invalid credentials "
        f"with SASL mechanism {mechanism}",
        reason,
    )


class _Completion:
    """What both servers share: the completion state and the principal."""

    mechanism: str
    _username: str | None = None

    @property
    def complete(self) -> bool:
        return self._username is not None

    @property
    def principal(self) -> KafkaPrincipal:
        if self._username is None:
            raise RuntimeError("SASL authentication has not completed")
        return KafkaPrincipal.user(self._username)

    def _check_not_complete(self) -> None:
        if self._username is not None:
            raise _invalid_credentials(self.mechanism, "token after completion")


class PlainSaslServer(_Completion):
    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._failed = False

    def evaluate(self, token: bytes) -> bytes:
        self._check_not_complete()
        if self._failed:
            raise _invalid_credentials(PLAIN, "token after a failure")
        self._failed = True  # until it succeeds: one try per server
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise _invalid_credentials(PLAIN, "SASL/PLAIN response is not UTF-8") from None
        tokens = text.split("\x00")
        if len(tokens) != 3:
            raise _invalid_credentials(
                PLAIN, f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}"
            )
        authzid, username, password = tokens
        if not username:
            raise SaslAuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailed("Authentication failed: password not specified")
        expected = self._users.get(username)
        # Compare in constant time, also when the user is unknown (against itself), so
        # the time taken says nothing about the password or whether the user exists.
        given = password.encode("utf-8")
        ok = hmac.compare_digest(given, (expected if expected is not None else password).encode())
        if expected is None or not ok:
            raise SaslAuthenticationFailed(
                "Authentication failed: Invalid username or password",
                f"PLAIN login failed for user {username[:100]!r}",
            )
        if authzid and authzid != username:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self._failed = False
        self._username = username
        return b""


def _has_tokenauth(client_first: str) -> bool:
    """Whether a client-first message carries Kafka's `tokenauth=true` extension."""
    return any(attr.lower() == "tokenauth=true" for attr in client_first.split(",")[4:] if attr)


class ScramSaslServer(_Completion):
    def __init__(self, mechanism: str, credentials: ScramCredentialSource) -> None:
        self.mechanism = mechanism
        self._credentials = credentials
        self._scramp = _ScrampMechanism(mechanism).make_server(self._lookup)
        self._stage = 0  # 0: expecting client-first, 1: client-final, 2: failed
        self._candidate: str | None = None
        self._unknown_reason: str | None = None

    def _lookup(self, username: str) -> tuple[bytes, bytes, bytes, int] | None:
        credential = self._credentials.scram_credential(self.mechanism, username)
        self._candidate = username
        if credential is None:
            self._unknown_reason = f"no {self.mechanism} credential for user {username[:100]!r}"
            return None
        minimum = MECHANISMS[self.mechanism].min_iterations
        if credential.iterations < minimum:
            self._unknown_reason = (
                f"Iterations {credential.iterations} is less than the minimum {minimum} "
                f"for {self.mechanism}"
            )
            return None
        return (
            credential.salt,
            credential.stored_key,
            credential.server_key,
            (credential.iterations),
        )

    def evaluate(self, token: bytes) -> bytes:
        self._check_not_complete()
        stage, self._stage = self._stage, 2  # failed unless this step succeeds
        if stage == 2:
            raise _invalid_credentials(self.mechanism, "token after a failure")
        if len(token) > MAX_SCRAM_MESSAGE_BYTES:
            raise _invalid_credentials(
                self.mechanism, f"SCRAM message of {len(token)} bytes is too long"
            )
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise _invalid_credentials(self.mechanism, "SCRAM message is not UTF-8") from None
        if stage == 0:
            if _has_tokenauth(text):
                raise _invalid_credentials(
                    self.mechanism, "delegation tokens (tokenauth) are not supported"
                )
            try:
                self._scramp.set_client_first(text)
                answer = self._scramp.get_server_first()
            # scramp raises ScramException on bad input; anything else it raises on
            # hostile input is a failed login too, never a crashed connection task.
            except Exception as e:
                reason = self._unknown_reason or f"invalid client-first message: {e}"
                raise _invalid_credentials(self.mechanism, reason[:300]) from None
            self._stage = 1
            return str(answer).encode("utf-8")
        try:
            self._accept_librdkafka_nonce(text)
            self._scramp.set_client_final(text)
            answer = self._scramp.get_server_final()
        except Exception as e:
            raise _invalid_credentials(
                self.mechanism,
                f"invalid client-final message for user {str(self._candidate)[:100]!r}: "
                f"{str(e)[:200]}",
            ) from None
        self._username = self._candidate
        return str(answer).encode("utf-8")

    def _accept_librdkafka_nonce(self, client_final: str) -> None:
        """Let scramp take a client-final whose nonce is the client's nonce followed by
        the combined one (librdkafka < 2.6.1's form): only that exact repetition."""
        combined = str(self._scramp.nonce)
        client_nonce = combined[: len(combined) - len(str(self._scramp.s_nonce))]
        sent = next((a[2:] for a in client_final.split(",") if a.startswith("r=")), None)
        if sent is not None and sent != combined and sent == client_nonce + combined:
            self._scramp.nonce = _ScrampNonce(sent)


class SaslServerFactory:
    """The enabled mechanisms of one listener (`sasl.enabled.mechanisms`) and what they
    authenticate against."""

    def __init__(
        self,
        mechanisms: Sequence[str],
        plain_users: Mapping[str, str],
        scram_credentials: ScramCredentialSource,
    ) -> None:
        unknown = [name for name in mechanisms if name not in SUPPORTED_MECHANISMS]
        if unknown:
            raise UnsupportedSaslMechanism(unknown[0], SUPPORTED_MECHANISMS)
        self._mechanisms = list(dict.fromkeys(mechanisms))
        self._plain_users = dict(plain_users)
        self._scram_credentials = scram_credentials

    @property
    def mechanisms(self) -> list[str]:
        return list(self._mechanisms)

    def create(self, mechanism: str) -> SaslServer:
        if mechanism not in self._mechanisms:
            raise UnsupportedSaslMechanism(mechanism, self._mechanisms)
        if mechanism == PLAIN:
            return PlainSaslServer(self._plain_users)
        return ScramSaslServer(mechanism, self._scram_credentials)
