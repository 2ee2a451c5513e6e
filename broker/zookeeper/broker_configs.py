"""Dynamic broker configs as this broker knows them: read from ZooKeeper, applied live.

How it works: `BrokerConfigs` owns this broker's `BrokerConfigLayers`
(broker/dynamic_config.py). `load()`, at start-up before the logs open, reads
/config/brokers/<default> and /config/brokers/<id> (Kafka's DynamicBrokerConfig
.initialize); `reload(entities)` is called by the config change watcher
(topic_configs.py) for every `brokers/<entity>` notification and re-reads the entities
that concern this broker (`<default>` and its own id). What ZooKeeper holds is
sanitized first (read-only names and bad values are dropped with a warning, as Kafka
does), then the new effective `BrokerConfig` goes to `on_change(old, new)`, where the
server applies it to the parts that change live (topic defaults, connection limits,
the log cleaner). A ZooKeeper failure leaves the current layers in place.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker.config import BrokerConfig
from broker.dynamic_config import BrokerConfigLayers
from broker.zookeeper.gateway import BrokerZkGateway
from server_common import zkdata
from server_common.properties import ConfigError
from server_common.zk import ZkError

log = logging.getLogger(__name__)

DEFAULT = zkdata.BROKER_DEFAULT_ENTITY


class BrokerConfigs:
    def __init__(
        self,
        gateway: BrokerZkGateway,
        static: BrokerConfig,
        on_change: Callable[[BrokerConfig, BrokerConfig], object] = lambda old, new: None,
    ) -> None:
        self.gateway = gateway
        self.layers = BrokerConfigLayers(static)
        self.on_change = on_change
        self.entity = str(static.broker_id)

    @property
    def current(self) -> BrokerConfig:
        return self.layers.current

    async def load(self) -> None:
        """Read both dynamic layers (start-up); failures are logged, not raised."""
        await self.reload([DEFAULT, self.entity])

    async def reload(self, entities: list[str]) -> None:
        """Re-read the named entities that concern this broker and apply them."""
        mine = [e for e in entities if e in (DEFAULT, self.entity)]
        if not mine:
            return
        try:
            stored = await self.gateway.broker_configs(mine)
        except ZkError as exc:
            log.warning("cannot read dynamic broker configs %s: %s", ", ".join(mine), exc)
            return
        layers: dict[str, dict[str, str]] = {}
        for entity, props in stored.items():
            kept, dropped = BrokerConfigLayers.sanitize(props)
            if dropped:
                log.error(
                    "dynamic broker config %s: ignoring %s (read-only or invalid)",
                    entity,
                    ", ".join(sorted(dropped)),
                )
            layers[entity] = kept
        old = self.layers.current
        try:
            new = self.layers.update(default=layers.get(DEFAULT), broker=layers.get(self.entity))
        except ConfigError as exc:
            log.error("dynamic broker configs %s cannot be applied: %s", layers, exc)
            return
        log.info(
            "dynamic broker configs: default %s, broker %s",
            self.layers.dynamic_default,
            self.layers.dynamic_broker,
        )
        if new.values != old.values:
            self.on_change(old, new)
