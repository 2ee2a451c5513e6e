"""Who is asking: Kafka's KafkaPrincipal, and the principal of the request being served.

How it works: a principal is a type and a name, written "User:alice" (Kafka's
`KafkaPrincipal.toString`); `KafkaPrincipal.parse` reads that form back (the name may
itself hold colons, as an X.500 name does). A connection that did not authenticate
(PLAINTEXT, or SSL without a client certificate) is `ANONYMOUS` (User:ANONYMOUS), as in
Kafka. The connection loop (server_common/network.py) sets `CLIENT_PRINCIPAL` for the
task serving one connection once its authentication has completed; handlers read it with
`current_principal()`, as they read the client's address with `network.client_host()`.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """`User:alice` -> KafkaPrincipal("User", "alice"); ValueError for anything else."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(f"not a principal (TYPE:name): {text[:100]!r}")
        return cls(principal_type, name)

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        return cls(USER_TYPE, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")

CLIENT_PRINCIPAL: contextvars.ContextVar[KafkaPrincipal] = contextvars.ContextVar(
    "client_principal", default=ANONYMOUS
)


def current_principal() -> KafkaPrincipal:
    """The principal of the connection whose request is being served."""
    return CLIENT_PRINCIPAL.get()
