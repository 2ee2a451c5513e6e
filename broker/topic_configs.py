"""Topic configs as this broker knows them: Kafka's broker defaults plus each topic's
overrides from ZooKeeper.

How it works: `log_config_for(topic)` answers from memory (the log store asks it when it
creates or rolls a log). `ensure_loaded(topics)` reads /config/topics/<t> for the topics
not seen yet, once each, before their logs are created (LeaderAndIsr awaits it), and
hands each loaded config to `on_loaded` (the log store applies it to logs that exist
already, e.g. ones recovered at start-up). If ZooKeeper cannot be read, the broker
defaults serve until the next LeaderAndIsr for those topics tries again.

Dynamic changes (Kafka's ConfigChangeListener): `watch_changes()` watches the children
of /config/changes. An IncrementalAlterConfigs rewrites /config/topics/<t> and adds a
sequential `config_change_<seq>` znode naming `topics/<t>`; each broker reads the
notifications newer than the last it processed (those present when it started are
already reflected in what `ensure_loaded` reads), re-reads the named topics' configs
and applies them through `on_loaded`: a running log picks up, e.g., a new
`retention.ms` at its next retention check, without a restart. (Kafka also deletes
notifications older than 15 minutes; here they stay until the cluster is removed.)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable

import trio

from broker.core.log.config import LogConfig
from broker.core.log.errors import ConfigError
from broker.zk_gateway import BrokerZkGateway
from server_common import zkdata
from server_common.zk import ZkError

log = logging.getLogger(__name__)

# PLANTED BUG, for tests/chaos/test_planted_bug.py only: with the environment variable
# TRIBUTARY_PLANTED_BUG=skip_min_isr (which only that test sets, on the brokers it starts)
# every topic behaves as if min.insync.replicas were 1, so acks=all records are
# acknowledged by a leader alone. The test proves the chaos checker catches the loss this
# causes. Nothing else reads the variable; unset, this changes nothing.
_PLANTED_BUG = os.environ.get("TRIBUTARY_PLANTED_BUG", "")


def _with_planted_bug(config: LogConfig) -> LogConfig:
    if _PLANTED_BUG == "skip_min_isr":
        log.warning("PLANTED BUG skip_min_isr: min.insync.replicas ignored (tests only)")
        return config.merged(min_insync_replicas=1)
    return config


class TopicConfigs:
    def __init__(
        self,
        gateway: BrokerZkGateway,
        default: LogConfig,
        on_loaded: Callable[[str, LogConfig], object] = lambda topic, config: None,
    ):
        self.gateway = gateway
        self.default = _with_planted_bug(default)
        self.on_loaded = on_loaded
        self._configs: dict[str, LogConfig] = {}

    def log_config_for(self, topic: str) -> LogConfig:
        return self._configs.get(topic, self.default)

    def set(self, topic: str, config: LogConfig) -> None:
        config = _with_planted_bug(config)
        self._configs[topic] = config
        self.on_loaded(topic, config)

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
            self.set(topic, config)

    async def watch_changes(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Apply topic config changes announced under /config/changes (see above)."""
        changes = await self.gateway.watch_config_changes()
        last_seen: int | None = None
        task_status.started()
        async for children in changes:
            sequences = {
                seq: name
                for name in children
                if (seq := zkdata.config_change_sequence(name)) is not None
            }
            if last_seen is None:  # at start: what is there is already in ZooKeeper's configs
                last_seen = max(sequences, default=-1)
                continue
            new = [sequences[seq] for seq in sorted(sequences) if seq > last_seen]
            if not new:
                continue
            last_seen = max(sequences)
            try:
                await self._reload_announced(new)
            except ZkError as exc:
                log.warning("cannot read config changes %s: %s", ", ".join(new), exc)

    async def _reload_announced(self, names: list[str]) -> None:
        entities = await self.gateway.config_change_entities(names)
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
            self.set(topic, config)
