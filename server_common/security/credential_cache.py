"""The SCRAM credentials a broker checks logins against: a cache of /config/users.

How it works (Kafka's CredentialCache, fed as its ConfigHandler for users is): the
broker's shell reads /config/users/<user> when it starts and whenever a
/config/changes notification names `users/<user>`, and hands the user's config (the
znode's "config" map) to `set_user`; a deleted znode is `remove_user`. Keys that are
SCRAM mechanism names hold a credential string (scram.py); other keys (quotas) are not
this cache's business. A value that does not parse is left out and named in what
`set_user` returns (never the value itself), as Kafka skips it with an error log.
`scram_credential` is the `ScramCredentialSource` of sasl.py.
"""

from __future__ import annotations

from collections.abc import Mapping

from server_common.security.scram import MECHANISMS, ScramCredential, credential_from_string


class ScramCredentialCache:
    def __init__(self) -> None:
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def scram_credential(self, mechanism: str, username: str) -> ScramCredential | None:
        return self._users.get(username, {}).get(mechanism)

    def set_user(self, username: str, config: Mapping[str, object]) -> list[str]:
        """Replace `username`'s credentials with the SCRAM ones in `config`; the
        mechanisms whose value was not a valid credential (left out)."""
        credentials: dict[str, ScramCredential] = {}
        bad: list[str] = []
        for name in MECHANISMS:
            value = config.get(name)
            if value is None:
                continue
            try:
                if not isinstance(value, str):
                    raise ValueError("not a string")
                credentials[name] = credential_from_string(value)
            except ValueError:
                bad.append(name)
        if credentials:
            self._users[username] = credentials
        else:
            self._users.pop(username, None)
        return bad

    def remove_user(self, username: str) -> None:
        self._users.pop(username, None)

    def users(self) -> dict[str, list[str]]:
        """Each user with credentials, and its mechanisms."""
        return {user: sorted(creds) for user, creds in sorted(self._users.items())}
