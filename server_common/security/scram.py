"""SCRAM credentials as Kafka 2.8 keeps them: the mechanisms, the stored form, derivation.

How it works: a `ScramCredential` is what a server needs to check a SCRAM login without
the password (RFC 5802): the salt, StoredKey = H(HMAC(SaltedPassword, "Client Key")),
ServerKey = HMAC(SaltedPassword, "Server Key") and the iteration count. KIP-554's
AlterUserScramCredentials carries the salt and SaltedPassword, never the password, so
`from_salted_password` derives the keys from those (Kafka's
ScramFormatter.generateCredential); `from_password` first computes SaltedPassword
(Hi() = PBKDF2-HMAC, for tests and tools).

`credential_to_string` / `credential_from_string` are Kafka's ScramCredentialUtils: the
value of a mechanism's key in /config/users/<user>, `salt=<b64>,stored_key=<b64>,
server_key=<b64>,iterations=<n>`. `MECHANISMS` holds Kafka's ScramMechanism table: the
hash and the iteration bounds (4096 to 16384) the admin API enforces.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass

SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    """Kafka's ScramMechanism: its name, hash and iteration bounds."""

    name: str
    hash_name: str
    min_iterations: int = 4096
    max_iterations: int = 16384


MECHANISMS: dict[str, ScramMechanism] = {
    SCRAM_SHA_256: ScramMechanism(SCRAM_SHA_256, "sha256"),
    SCRAM_SHA_512: ScramMechanism(SCRAM_SHA_512, "sha512"),
}

# KIP-554's ScramMechanism enum as numbers on the wire (0 is UNKNOWN).
MECHANISM_TYPES: dict[int, str] = {1: SCRAM_SHA_256, 2: SCRAM_SHA_512}
MECHANISM_TYPE_IDS: dict[str, int] = {name: code for code, name in MECHANISM_TYPES.items()}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # keys stay out of logs and tracebacks
        return f"ScramCredential(iterations={self.iterations})"


def mechanism(name: str) -> ScramMechanism:
    """The SCRAM mechanism called `name`; ValueError if it is not SCRAM-SHA-256/512."""
    found = MECHANISMS.get(name)
    if found is None:
        raise ValueError(f"unsupported SCRAM mechanism {name[:50]!r}")
    return found


def salted_password(mechanism_name: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(password, salt, i): PBKDF2 with the mechanism's HMAC (UTF-8 password,
    as Kafka's ScramFormatter normalizes it)."""
    hash_name = mechanism(mechanism_name).hash_name
    return hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)


def from_salted_password(
    mechanism_name: str, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    hash_name = mechanism(mechanism_name).hash_name
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    stored_key = hashlib.new(hash_name, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hash_name).digest()
    return ScramCredential(salt, stored_key, server_key, iterations)


def from_password(
    mechanism_name: str, password: str, salt: bytes, iterations: int
) -> ScramCredential:
    salted = salted_password(mechanism_name, password, salt, iterations)
    return from_salted_password(mechanism_name, salt, salted, iterations)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def credential_to_string(credential: ScramCredential) -> str:
    """Kafka's ScramCredentialUtils.credentialToString."""
    return (
        f"salt={_b64(credential.salt)},stored_key={_b64(credential.stored_key)},"
        f"server_key={_b64(credential.server_key)},iterations={credential.iterations}"
    )


_FIELDS = ("salt", "stored_key", "server_key", "iterations")


def credential_from_string(text: str) -> ScramCredential:
    """Kafka's ScramCredentialUtils.credentialFromString; ValueError if `text` is not one
    (the message never repeats the keys)."""
    props: dict[str, str] = {}
    for token in text.split(","):
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise ValueError("SCRAM credential is not key=value pairs")
        props[key] = value
    if len(props) != len(_FIELDS) or set(props) != set(_FIELDS):
        raise ValueError(f"SCRAM credential must have exactly {', '.join(_FIELDS)}")
    try:
        salt, stored_key, server_key = (
            base64.b64decode(props[name], validate=True) for name in _FIELDS[:3]
        )
    except (binascii.Error, ValueError):
        raise ValueError("SCRAM credential has a value that is not base64") from None
    iterations_text = props["iterations"]
    if not iterations_text.isascii() or not iterations_text.isdigit() or len(iterations_text) > 9:
        raise ValueError("SCRAM credential iterations is not a number")
    return ScramCredential(salt, stored_key, server_key, int(iterations_text))
