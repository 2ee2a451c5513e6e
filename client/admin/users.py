"""The admin client's SCRAM credential requests (KIP-554): describe users' credentials,
add or replace and delete them.

How it works: both go to any broker (`_request_any`; the broker reads and writes
/config/users in ZooKeeper). An upsertion takes the password, picks a random salt (or
the one given) and sends only the salted password (Hi(password, salt, iterations),
client/security/sasl_client.py), as Kafka's admin client does; the password never
leaves this process. `describe_user_scram_credentials` returns, per user, its
mechanisms and iteration counts (never a key) or the broker's error;
`alter_user_scram_credentials` returns, per user, None or the `TributaryError` the broker
answered (a user's changes apply all or none).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from client.admin.base import AdminBase, error_or_none
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, TributaryError
from client.security.sasl_client import new_salt, salted_password

SCRAM_MECHANISM_TYPES = {name: code for code, name in m.SCRAM_MECHANISM_NAMES.items()}
DEFAULT_ITERATIONS = 4096
MAX_ITERATIONS = 16384  # the most a broker accepts (Kafka's); more is not even computed


@dataclass(frozen=True)
class ScramCredentialInfo:
    mechanism: str  # "SCRAM-SHA-256" or "SCRAM-SHA-512"
    iterations: int


@dataclass(frozen=True)
class UserScramCredentialUpsertion:
    user: str
    mechanism: str
    password: str
    iterations: int = DEFAULT_ITERATIONS
    salt: bytes | None = None  # None: a random one

    def __repr__(self) -> str:
        return (
            f"UserScramCredentialUpsertion(user={self.user!r}, mechanism={self.mechanism!r}, "
            f"iterations={self.iterations})"
        )


@dataclass(frozen=True)
class UserScramCredentialDeletion:
    user: str
    mechanism: str


def _mechanism_type(name: str) -> int:
    """KIP-554's number for a mechanism; an unknown name travels as 0 (UNKNOWN) and the
    broker answers UNSUPPORTED_SASL_MECHANISM, as with Kafka's admin client."""
    return SCRAM_MECHANISM_TYPES.get(name, m.SCRAM_UNKNOWN)


def _upsertion(change: UserScramCredentialUpsertion) -> m.ScramCredentialUpsertion:
    salt = change.salt if change.salt is not None else new_salt()
    mechanism = _mechanism_type(change.mechanism)
    salted = (
        salted_password(change.mechanism, change.password, salt, change.iterations)
        if mechanism != m.SCRAM_UNKNOWN and 0 < change.iterations <= MAX_ITERATIONS
        else b""
    )
    return m.ScramCredentialUpsertion(
        name=change.user,
        mechanism=mechanism,
        iterations=change.iterations,
        salt=salt,
        salted_password=salted,
    )


class UserAdmin(AdminBase):
    """Users' SCRAM credentials (a mixin of `client.admin.Admin`)."""

    async def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None
    ) -> dict[str, list[ScramCredentialInfo] | TributaryError]:
        """Each user's SCRAM credentials (all users with any when `users` is None), or
        the broker's error for that user (RESOURCE_NOT_FOUND: it has none). Raises a
        request-level error."""
        names = None if users is None else list(users)
        request = m.DescribeUserScramCredentialsRequest(
            users=None
            if names is None
            else [m.DescribeUserScramCredentialsUser(name=name) for name in names]
        )
        response = await self._request_any(request)
        if response.error_code != ErrorCode.NONE:
            raise TributaryError(response.error_code, response.error_message)
        results: dict[str, list[ScramCredentialInfo] | TributaryError] = {}
        for result in response.results:
            error = error_or_none(result.error_code, result.error_message)
            results[result.user] = (
                error
                if error is not None
                else [
                    ScramCredentialInfo(
                        m.SCRAM_MECHANISM_NAMES.get(c.mechanism, "UNKNOWN"), c.iterations
                    )
                    for c in result.credential_infos
                ]
            )
        return results

    async def alter_user_scram_credentials(
        self,
        alterations: Iterable[UserScramCredentialUpsertion | UserScramCredentialDeletion],
    ) -> dict[str, TributaryError | None]:
        """Apply the changes; per user, None or the broker's error."""
        deletions, upsertions = [], []
        for change in alterations:
            if isinstance(change, UserScramCredentialDeletion):
                deletions.append(
                    m.ScramCredentialDeletion(
                        name=change.user, mechanism=_mechanism_type(change.mechanism)
                    )
                )
            else:
                upsertions.append(_upsertion(change))
        request = m.AlterUserScramCredentialsRequest(deletions=deletions, upsertions=upsertions)
        response = await self._request_any(request)
        return {r.user: error_or_none(r.error_code, r.error_message) for r in response.results}
