"""Client quotas from ZooKeeper (/config/users, /config/clients), kept in step.

How it works (Kafka's DynamicConfigManager with its UserConfigHandler and
ClientIdConfigHandler feeding the quota managers): `load()` reads every quota entity's
znode (`users/<u>`, `users/<u>/clients/<c>`, `clients/<c>`, `<default>` included) into
the broker's `QuotaConfigs` (broker/core/quota_entities.py); `reload(entity_paths)`
re-reads the entities that `/config/changes` notifications name (the config change
watcher, topic_configs.py, hands them over), so AlterClientQuotas or `tributary configs
alter --entity-type clients|users` on any broker applies on every broker at its next
request, without a restart. Only the quota keys count: SCRAM credentials in the same
user znode are the credential cache's business. A ZooKeeper failure keeps what the
broker had.
"""

from __future__ import annotations

import logging

from broker.core.quota_entities import QuotaConfigs, QuotaEntity
from broker.zookeeper.gateway import BrokerZkGateway
from server_common.zk import ZkError

log = logging.getLogger(__name__)


class QuotaConfigStore:
    def __init__(self, gateway: BrokerZkGateway, configs: QuotaConfigs) -> None:
        self.gateway = gateway
        self.configs = configs

    async def load(self) -> None:
        """Read every quota entity; failures are logged, not raised."""
        try:
            paths = await self.gateway.quota_entity_paths()
            configs = await self.gateway.entity_configs(paths)
        except ZkError as exc:
            log.warning("cannot read client quotas from /config/users, /config/clients: %s", exc)
            return
        entities = {}
        for path, config in configs.items():
            entity = QuotaEntity.from_path(path)
            if entity is not None:
                entities[entity] = config
        self.configs.replace_all(entities)

    async def reload(self, entity_paths: list[str]) -> None:
        """Re-read the entities named by `users/...` and `clients/...` notifications."""
        wanted = {p: e for p in entity_paths if (e := QuotaEntity.from_path(p)) is not None}
        if not wanted:
            return
        try:
            configs = await self.gateway.entity_configs(sorted(wanted))
        except ZkError as exc:
            log.warning("cannot read the quotas of %s: %s", ", ".join(sorted(wanted)), exc)
            return
        for path, entity in wanted.items():
            before = self.configs.entities().get(entity)
            self.configs.set(entity, configs.get(path, {}))
            after = self.configs.entities().get(entity)
            if before != after:
                log.info("client quotas of %s now %s", path, after or "none")
