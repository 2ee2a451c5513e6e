"""Topic configs as this broker knows them: Kafka's broker defaults plus each topic's
overrides from ZooKeeper.

How it works: `log_config_for(topic)` answers from memory (the log store asks it when it
creates or rolls a log). `ensure_loaded(topics)` reads /config/topics/<t> for the topics
not seen yet, once each, before their logs are created (LeaderAndIsr awaits it), and
hands each loaded config to `on_loaded` (the log store applies it to logs that exist
already, e.g. ones recovered at start-up). If ZooKeeper cannot be read, the broker
defaults serve until the next LeaderAndIsr for those topics tries again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from broker.core.log.config import LogConfig
from broker.core.log.errors import ConfigError
from broker.zk_gateway import BrokerZkGateway
from server_common.zk import ZkError

log = logging.getLogger(__name__)


class TopicConfigs:
    def __init__(
        self,
        gateway: BrokerZkGateway,
        default: LogConfig,
        on_loaded: Callable[[str, LogConfig], object] = lambda topic, config: None,
    ):
        self.gateway = gateway
        self.default = default
        self.on_loaded = on_loaded
        self._configs: dict[str, LogConfig] = {}

    def log_config_for(self, topic: str) -> LogConfig:
        return self._configs.get(topic, self.default)

    def set(self, topic: str, config: LogConfig) -> None:
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
