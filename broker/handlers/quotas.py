"""DescribeClientQuotas and AlterClientQuotas (KIP-546), as Kafka 2.8's brokers serve
them from ZooKeeper.

How it works: any broker answers. Describe checks the filter and reads every quota
entity under /config/users and /config/clients (broker/core/quota_admin.py matches
them). Alter checks each entry's entity and operations, reads the entity's config znode
(a user's may hold SCRAM credentials too: they are kept), applies the operations and,
unless `validate_only`, writes it with a /config/changes notification, which every
broker's watcher turns into its quota configs (broker/zookeeper/quota_configs.py). An
entry's result is NONE or its first problem; a ZooKeeper failure is answered
UNKNOWN_SERVER_ERROR (for the entry, or for the whole describe).
"""

from __future__ import annotations

import logging

from broker.core import quota_admin
from broker.core.quota_entities import QuotaEntity, quota_values
from broker.zookeeper.gateway import BrokerZkGateway
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from server_common.zk import ZkError

log = logging.getLogger(__name__)


class QuotaHandlers:
    def __init__(self, gateway: BrokerZkGateway) -> None:
        self.gateway = gateway

    async def describe_client_quotas(
        self, request: m.DescribeClientQuotasRequest
    ) -> m.DescribeClientQuotasResponse:
        problem = quota_admin.check_filter(request.components)
        if problem is not None:
            return m.DescribeClientQuotasResponse(
                throttle_time_ms=0, error_code=int(problem.code), error_message=problem.message
            )
        try:
            paths = await self.gateway.quota_entity_paths()
            configs = await self.gateway.entity_configs(paths)
        except ZkError as exc:
            log.warning("DescribeClientQuotas: cannot read the quota configs: %s", exc)
            return m.DescribeClientQuotasResponse(
                throttle_time_ms=0,
                error_code=int(ErrorCode.UNKNOWN_SERVER_ERROR),
                error_message=f"cannot read quota configs: {exc}",
            )
        entities = {
            entity: quota_values(config)
            for path, config in configs.items()
            if (entity := QuotaEntity.from_path(path)) is not None
        }
        entries = quota_admin.describe(entities, request.components, request.strict)
        return m.DescribeClientQuotasResponse(
            throttle_time_ms=0, error_code=0, error_message=None, entries=entries
        )

    async def alter_client_quotas(
        self, request: m.AlterClientQuotasRequest
    ) -> m.AlterClientQuotasResponse:
        results = []
        for entry in request.entries:
            problem = await self._alter(entry, request.validate_only)
            results.append(
                m.AlterClientQuotasResult(
                    error_code=int(problem.code) if problem else 0,
                    error_message=problem.message if problem else None,
                    entity=entry.entity,
                )
            )
        return m.AlterClientQuotasResponse(throttle_time_ms=0, entries=results)

    async def _alter(
        self, entry: m.AlterClientQuotasEntry, validate_only: bool
    ) -> quota_admin.QuotaError | None:
        entity = quota_admin.entity_of(entry.entity)
        if isinstance(entity, quota_admin.QuotaError):
            return entity
        path = entity.path()
        try:
            config = (await self.gateway.entity_configs([path]))[path]
            new = quota_admin.apply_ops(config, entry.ops)
            if isinstance(new, quota_admin.QuotaError) or validate_only:
                return new if isinstance(new, quota_admin.QuotaError) else None
            await self.gateway.set_entity_config(path, new)
        except ZkError as exc:
            log.warning("AlterClientQuotas: ZooKeeper failed for %s: %s", path, exc)
            return quota_admin.QuotaError(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"ZooKeeper failed: {exc}"
            )
        log.info("client quotas of %s altered: %s", path, quota_values(new))
        return None
