"""Topic configs as this broker knows them: Kafka's broker defaults plus each topic's
overrides from ZooKeeper.

How it works: `log_config_for(topic)` answers from memory (the log store asks it when it
creates or rolls a log). `ensure_loaded(topics)` reads /config/topics/<t> for the topics
not seen yet, once each, before their logs are created (LeaderAndIsr awaits it), and
hands each loaded config to `on_loaded` (the log store applies it to logs that exist
already, e.g. ones recovered at start-up). If ZooKeeper cannot be read, the broker
defaults serve until the next LeaderAndIsr for those topics tries again.

Each topic's overrides are kept beside its config, so when the broker's defaults change
(a dynamic broker config, `set_default`) every topic's config is rebuilt from its
overrides over the new defaults and applied again.

Dynamic changes (Kafka's ConfigChangeListener): `watch_changes()` watches the children
of /config/changes. An AlterConfigs or IncrementalAlterConfigs rewrites
/config/topics/<t> (or /config/brokers/<id|<default>>) and adds a sequential
`config_change_<seq>` znode naming `topics/<t>` (or `brokers/<entity>`); each broker
reads the notifications newer than the last it processed (those present when it
started are already reflected in what `ensure_loaded` reads), re-reads the named
topics' configs and applies them through `on_loaded`: a running log picks up, e.g., a
new `retention.ms` at its next retention check, without a restart. Broker entities are
handed to `on_broker_change` (broker_configs.py reloads its layers), user entities to
`on_user_change` (`UserCredentials.reload` re-reads their SCRAM credentials), user and
client-id entities to `on_quota_change` (quota_configs.py re-reads their quotas).

Notifications are deleted once they are older than `change_expiration_ms` (15 minutes,
Kafka's ZkNodeChangeNotificationListener changeExpirationMs), so /config/changes does not
grow forever; every broker purges (a notification already gone is skipped). A
notification's age is counted from when this broker first listed it (not its ZooKeeper
ctime, which the ZooKeeper seam does not carry): never less than its real age, so no
broker deletes one before the others had the time to read it. Kafka purges only when a
new notification arrives; here a timer also wakes the watcher when the oldest one is due.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping

import trio

from broker.core.log.config import LogConfig
from broker.core.log.errors import ConfigError
from broker.zookeeper.gateway import BrokerZkGateway
from server_common import zkdata
from server_common.zk import ZkError

log = logging.getLogger(__name__)

# Kafka's ZkNodeChangeNotificationListener.changeExpirationMs default.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000


class TopicConfigs:
    def __init__(
        self,
        gateway: BrokerZkGateway,
        default: LogConfig,
        on_loaded: Callable[[str, LogConfig], object] = lambda topic, config: None,
        *,
        change_expiration_ms: int = CHANGE_EXPIRATION_MS,
    ):
        self.gateway = gateway
        self.default = default
        self.on_loaded = on_loaded
        self.change_expiration_ms = change_expiration_ms
        self._configs: dict[str, LogConfig] = {}
        self._overrides: dict[str, dict[str, str]] = {}
        self.on_broker_change: Callable[[list[str]], Awaitable[None]] | None = None
        self.on_user_change: Callable[[list[str]], Awaitable[None]] | None = None
        self.on_quota_change: Callable[[list[str]], Awaitable[None]] | None = None

    def log_config_for(self, topic: str) -> LogConfig:
        return self._configs.get(topic, self.default)

    def set(
        self, topic: str, config: LogConfig, overrides: Mapping[str, str] | None = None
    ) -> None:
        self._configs[topic] = config
        if overrides is not None:
            self._overrides[topic] = dict(overrides)
        self.on_loaded(topic, config)

    def set_default(self, default: LogConfig) -> None:
        """New broker defaults (a dynamic broker config changed): every known topic's
        config is rebuilt from its overrides over them and applied."""
        if default == self.default:
            return
        self.default = default
        for topic in list(self._configs):
            overrides = self._overrides.get(topic, {})
            try:
                config = LogConfig.from_properties(overrides, default)
            except ConfigError as exc:
                log.warning(
                    "topic %s: overrides %s invalid over the new defaults (%s)",
                    topic,
                    overrides,
                    exc,
                )
                config = default
            self.set(topic, config)

    async def ensure_loaded(self, topics: Iterable[str]) -> None:
        missing = sorted(t for t in set(topics) if t not in self._configs)
        if not missing:
            return
        try:
            overrides = await self.gateway.topic_configs(missing)
        except ZkError as exc:
            log.warning(
                "cannot read topic configs of %s (%s); using broker defaults until the next "
                "LeaderAndIsr for them",
                ", ".join(missing),
                exc,
            )
            return
        for topic in missing:
            try:
                config = LogConfig.from_properties(overrides[topic], self.default)
            except ConfigError as exc:
                log.warning("topic %s: bad config in ZooKeeper (%s); using defaults", topic, exc)
                config = self.default
            self.set(topic, config, overrides[topic])

    async def watch_changes(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Apply topic config changes announced under /config/changes (see above)."""
        changes = await self.gateway.watch_config_changes()
        last_seen: int | None = None
        expiry_s = self.change_expiration_ms / 1000
        first_listed: dict[str, float] = {}  # notification -> when this broker first saw it
        children: list[str] = []
        task_status.started()
        while True:
            oldest = min(first_listed.values(), default=None)
            wait_s = math.inf if oldest is None else oldest + expiry_s - trio.current_time()
            with trio.move_on_after(max(wait_s, 0)) as timer:
                try:
                    children = await changes.receive()
                except trio.EndOfChannel:
                    return
            now = trio.current_time()
            listed = set(children)
            for name in listed:
                first_listed.setdefault(name, now)
            for name in list(first_listed):
                if name not in listed:
                    del first_listed[name]
            if not timer.cancelled_caught:
                last_seen = await self._process_changes(children, last_seen)
            expired = sorted(n for n, t in first_listed.items() if now - t >= expiry_s)
            if expired:
                try:
                    deleted = await self.gateway.delete_config_changes(expired)
                    log.info("deleted %d expired config change notification(s)", deleted)
                except ZkError as exc:
                    log.warning("cannot delete expired config changes: %s", exc)
                for name in expired:
                    first_listed.pop(name, None)

    async def _process_changes(self, children: list[str], last_seen: int | None) -> int:
        """Reload the topics named by notifications newer than `last_seen`; returns the new
        `last_seen` (at start, None: the notifications there are already reflected)."""
        sequences = {
            seq: name
            for name in children
            if (seq := zkdata.config_change_sequence(name)) is not None
        }
        if last_seen is None:  # at start: what is there is already in ZooKeeper's configs
            return max(sequences, default=-1)
        new = [sequences[seq] for seq in sorted(sequences) if seq > last_seen]
        if not new:
            return last_seen
        try:
            await self._reload_announced(new)
        except ZkError as exc:
            log.warning("cannot read config changes %s: %s", ", ".join(new), exc)
        return max(sequences)

    async def _reload_announced(self, names: list[str]) -> None:
        entities = await self.gateway.config_change_entities(names)
        brokers = sorted({e.split("/", 1)[1] for e in entities if e.startswith("brokers/")})
        if brokers and self.on_broker_change is not None:
            await self.on_broker_change(brokers)
        users = sorted({e.split("/", 1)[1] for e in entities if e.startswith("users/")})
        if users and self.on_user_change is not None:
            # SCRAM credentials are a user's own (not a user+client-id entity's).
            if scram_users := [u for u in users if "/" not in u]:
                await self.on_user_change(scram_users)
        quota_entities = sorted(
            {e for e in entities if e.startswith("users/") or e.startswith("clients/")}
        )
        if quota_entities and self.on_quota_change is not None:
            await self.on_quota_change(quota_entities)
        topics = sorted({e.split("/", 1)[1] for e in entities if e.startswith("topics/")})
        if not topics:
            return
        overrides = await self.gateway.topic_configs(topics)
        for topic in topics:
            try:
                config = LogConfig.from_properties(overrides[topic], self.default)
            except ConfigError as exc:
                log.warning("topic %s: bad config in ZooKeeper (%s); keeping the old", topic, exc)
                continue
            log.info("topic %s: config changed to %s", topic, overrides[topic])
            self.set(topic, config, overrides[topic])
