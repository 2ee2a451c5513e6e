"""The client's side of SASL PLAIN and SCRAM-SHA-256/512, pure (no I/O).

How it works: the connection sends `initial_response()` as the first SASL token (PLAIN's
`NUL username NUL password`, SCRAM's client-first message), then hands each token the
server answers to `evaluate`, which returns the next token to send or None when the
exchange is done (`complete`). SCRAM runs on the `scramp` library; a server-final
message whose signature does not prove the server knows the credential, or that carries
an error, raises `SaslClientError`, as does any token out of turn or a server-first
message asking for more than `MAX_SERVER_ITERATIONS` (a hostile server's CPU drain).

A password that SASLprep would change (scramp prepares it, Kafka's credentials do not)
is refused with ValueError up front rather than failing every login.

`salted_password` is RFC 5802's Hi() (PBKDF2-HMAC) for KIP-554's
AlterUserScramCredentials, which sends the salted password, never the password;
`new_salt` is a fresh random salt for it.
"""

from __future__ import annotations

import hashlib
import secrets

from scramp import ScramClient
from scramp.utils import saslprep

from client.protocol.errors import ErrorCode, TributaryError

PLAIN = "PLAIN"
# The most PBKDF2 iterations a server may ask for (kafka-python's bound): more would let a
# hostile server spend seconds of this client's CPU. Kafka's brokers store at most 16384.
MAX_SERVER_ITERATIONS = 1_000_000
SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
SUPPORTED_MECHANISMS = (PLAIN, *SCRAM_HASHES)


class SaslClientError(TributaryError):
    """The SASL exchange failed on the client's side (e.g. the server's SCRAM signature
    is wrong)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.SASL_AUTHENTICATION_FAILED, message)


class SaslClient:
    def __init__(self, mechanism: str, username: str, password: str) -> None:
        if mechanism not in SUPPORTED_MECHANISMS:
            raise ValueError(
                f"unsupported SASL mechanism {mechanism[:50]!r} "
                f"(supported: {', '.join(SUPPORTED_MECHANISMS)})"
            )
        self.mechanism = mechanism
        self._username = username
        self._password = password
        self._step = 0  # 0: initial response due, 1..: challenges answered
        self._complete = False
        self._scram: ScramClient | None = None
        if mechanism != PLAIN:
            try:
                self._scram = ScramClient([mechanism], username, password)
                prepared = saslprep(password)
            except Exception as e:  # scramp's ScramException: e.g. a prohibited character
                raise ValueError(f"SCRAM cannot use this username or password: {e}") from None
            if prepared != password:
                # scramp salts the SASLprep'd password; Kafka's credentials (and
                # `salted_password` here) salt it as it is: the proof could never match.
                raise ValueError(
                    "SCRAM cannot use this password: SASLprep changes it (e.g. a non-ASCII "
                    "space or a compatibility character), and Kafka's credentials do not"
                )

    @property
    def complete(self) -> bool:
        return self._complete

    def initial_response(self) -> bytes:
        if self._step != 0:
            raise SaslClientError("the SASL initial response was already sent")
        self._step = 1
        if self._scram is None:
            return f"\x00{self._username}\x00{self._password}".encode()
        return str(self._scram.get_client_first()).encode("utf-8")

    def evaluate(self, challenge: bytes) -> bytes | None:
        if self._step == 0 or self._complete:
            raise SaslClientError("unexpected SASL challenge")
        if self._scram is None:  # PLAIN: the server's (empty) answer ends it
            self._complete = True
            return None
        try:
            text = bytes(challenge).decode("utf-8")
        except UnicodeDecodeError:
            raise SaslClientError("the server's SCRAM message is not UTF-8") from None
        try:
            if self._step == 1:
                _check_iterations(text)
                self._scram.set_server_first(text)
                self._step = 2
                return str(self._scram.get_client_final()).encode("utf-8")
            self._scram.set_server_final(text)
        except Exception as e:  # scramp's ScramException, or anything hostile bytes cause
            raise SaslClientError(f"SCRAM authentication failed: {str(e)[:200]}") from None
        self._complete = True
        return None


def _check_iterations(server_first: str) -> None:
    for attribute in server_first.split(","):
        if attribute.startswith("i=") and attribute[2:].isdigit():
            if len(attribute) > 12 or int(attribute[2:]) > MAX_SERVER_ITERATIONS:
                raise SaslClientError(
                    f"the server asks for more than {MAX_SERVER_ITERATIONS} SCRAM iterations"
                )


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, iterations) for a SCRAM mechanism (ValueError for others)."""
    hash_name = SCRAM_HASHES.get(mechanism)
    if hash_name is None:
        raise ValueError(f"not a SCRAM mechanism: {mechanism[:50]!r}")
    return hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)


def new_salt() -> bytes:
    """A random salt for a new SCRAM credential (32 bytes, as Kafka's 130 random bits
    are at least 16)."""
    return secrets.token_bytes(32)
