"""Users' SCRAM credentials from ZooKeeper (/config/users), kept in step, for brokers and
controllers alike.

How it works (Kafka's DynamicConfigManager with its UserConfigHandler feeding the
CredentialCache): `read_entity_configs` reads `{"version":1,"config":{...}}` config znodes
(users', brokers'...); `read_user_configs` / `read_all_user_configs` the users'.
`UserCredentials.load()` reads every /config/users/<user> into a `ScramCredentialCache`
(credential_cache.py), which the SASL servers of a process's listeners check SCRAM logins
against; `reload(entities)` re-reads the users that `users/<sanitized user>` config change
notifications name (a broker's config change watcher calls it), so a user created with
AlterUserScramCredentials (or `tributary configs alter --entity-type users`) on any
broker can log in everywhere as soon as the notification arrives, and a deleted
credential stops working as soon. A controller, which keeps no notification sequence,
calls `load()` again whenever /config/users or /config/changes changes (`follow`).
A ZooKeeper failure keeps what the cache had; a bad value is left out with a warning
(the value is never logged).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from server_common import zkdata
from server_common.security.credential_cache import ScramCredentialCache
from server_common.zk import ZkError, ZooKeeper

log = logging.getLogger(__name__)


async def read_entity_configs(
    zk: ZooKeeper, entities: list[str], path_of: Callable[[str], str], kind: str
) -> dict[str, dict[str, str]]:
    """The config znodes of `entities` ({} where there is none or it is unreadable, with a
    warning); ZkError when ZooKeeper cannot answer."""
    paths = [path_of(e) for e in entities]
    configs: dict[str, dict[str, str]] = {}
    for entity, path, result in zip(entities, paths, await zk.get_many(paths), strict=True):
        configs[entity] = {}
        if result is not None and result[0]:  # a parent created empty holds no config
            try:
                configs[entity] = zkdata.decode_entity_config(path, result[0])
            except zkdata.ZkDataError as exc:
                log.warning("ignoring a bad %s config: %s", kind, exc)
    return configs


async def read_user_configs(zk: ZooKeeper, users: list[str]) -> dict[str, dict[str, str]]:
    """Configs of `users` (/config/users/<sanitized user>; {} where there are none)."""
    configs: dict[str, dict[str, str]] = {u: {} for u in users if u in (".", "..")}
    users = [u for u in users if u not in configs]  # no znode can hold those two
    configs.update(await read_entity_configs(zk, users, zkdata.user_config_path, "user"))
    return configs


async def read_all_user_configs(zk: ZooKeeper) -> dict[str, dict[str, str]]:
    """Every user with a znode under /config/users, and its config."""
    users = []
    for child in await zk.get_children_or_empty(zkdata.CONFIG_USERS):
        try:
            users.append(zkdata.desanitize_entity_name(child))
        except UnicodeDecodeError:
            log.warning("ignoring /config/users/%s: not a sanitized user name", child)
    return await read_user_configs(zk, users)


class UserCredentials:
    def __init__(self, zk: ZooKeeper) -> None:
        self.zk = zk
        self.cache = ScramCredentialCache()

    async def load(self) -> None:
        """Read every user's credentials; failures are logged, not raised."""
        try:
            configs = await read_all_user_configs(self.zk)
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
            configs = await read_user_configs(self.zk, users)
        except ZkError as exc:
            log.warning("cannot read the SCRAM credentials of %s: %s", ", ".join(users), exc)
            return
        for user, config in configs.items():
            self._set(user, config)
            log.info("user %s: SCRAM credentials now %s", user, self.cache.users().get(user, []))

    async def follow(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Load every user (then `task_status.started()`) and again after each change of
        /config/users' children or a new /config/changes notification, until cancelled:
        for a process without a config change watcher of its own (the controller)."""
        changed = trio.Event()

        async def watch(path: str, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
            children = await self.zk.watch_children(path)
            await children.receive()  # the children now: the first load below reads them
            task_status.started()
            async for _ in children:
                changed.set()

        async with trio.open_nursery() as nursery:
            await nursery.start(watch, zkdata.CONFIG_USERS)
            await nursery.start(watch, zkdata.CONFIG_CHANGES)
            await self.load()
            task_status.started()
            while True:
                await changed.wait()
                changed = trio.Event()
                await self.load()

    def _set(self, user: str, config: dict[str, str]) -> None:
        bad = self.cache.set_user(user, config)
        if bad:
            log.warning("user %s: ignoring unreadable %s credential(s)", user, ", ".join(bad))
