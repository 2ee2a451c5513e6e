"""Users' SCRAM credentials as this broker knows them: /config/users, kept in step.

How it works (Kafka's DynamicConfigManager with its UserConfigHandler feeding the
CredentialCache): `load()` reads every /config/users/<user> into the broker's
`ScramCredentialCache` (server_common/security/credential_cache.py), which the SASL
servers of its listeners check SCRAM logins against. The config change watcher
(topic_configs.py) hands every `users/<sanitized user>` notification to `reload`, which
re-reads those users: a user created with AlterUserScramCredentials (or `tributary
configs alter --entity-type users`) on any broker can log in on every broker as soon as
the notification arrives, and a deleted credential stops working as soon. A ZooKeeper
failure keeps what the cache had; a bad value is left out with a warning (never logged).
"""

from __future__ import annotations

import logging

from broker.zookeeper.gateway import BrokerZkGateway
from server_common import zkdata
from server_common.security.credential_cache import ScramCredentialCache
from server_common.zk import ZkError

log = logging.getLogger(__name__)


class UserCredentials:
    def __init__(self, gateway: BrokerZkGateway) -> None:
        self.gateway = gateway
        self.cache = ScramCredentialCache()

    async def load(self) -> None:
        """Read every user's credentials (start-up); failures are logged, not raised."""
        try:
            configs = await self.gateway.all_user_configs()
        except ZkError as exc:
            log.warning("cannot read SCRAM credentials from /config/users: %s", exc)
            return
        for user in set(self.cache.users()) - set(configs):
            self.cache.remove_user(user)
        for user, config in configs.items():
            self._set(user, config)

    async def reload(self, entities: list[str]) -> None:
        """Re-read the users named by `users/<sanitized user>` notifications."""
        users = []
        for entity in entities:
            try:
                users.append(zkdata.desanitize_entity_name(entity))
            except UnicodeDecodeError:
                log.warning("ignoring a user change for %r: not a sanitized name", entity[:100])
        if not users:
            return
        try:
            configs = await self.gateway.user_configs(users)
        except ZkError as exc:
            log.warning("cannot read the SCRAM credentials of %s: %s", ", ".join(users), exc)
            return
        for user, config in configs.items():
            self._set(user, config)
            log.info("user %s: SCRAM credentials now %s", user, self.cache.users().get(user, []))

    def _set(self, user: str, config: dict[str, str]) -> None:
        bad = self.cache.set_user(user, config)
        if bad:
            log.warning("user %s: ignoring unreadable %s credential(s)", user, ", ".join(bad))
