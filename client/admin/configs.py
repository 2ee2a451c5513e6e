"""The admin client's config requests: described with sources and synonyms, altered
incrementally or as a whole, for topics and brokers.

How it works: a topic's and the cluster-wide broker defaults' configs (broker None, the
resource name "") can be asked of any broker (`_request_any`); a broker's own configs
only of that broker (its static configs live in its properties file), so those requests
go to its address from the metadata, as Kafka's admin client routes them.
`describe_config_entries` returns `ConfigEntry`s (value, source, read-only, sensitive,
synonyms); `alter_configs_incrementally` sends IncrementalAlterConfigs (set, delete,
append and subtract), `replace_configs` the legacy AlterConfigs (the resource's dynamic
configs become exactly the given ones). Each returns None or the `TributaryError` the
broker answered.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from client.admin.base import AdminBase, topic_error_or_none
from client.admin.results import ConfigEntry
from client.metadata import NoBrokersAvailableError
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, TributaryError

# Kafka's ConfigSource names, by id.
SOURCE_NAMES = {
    m.SOURCE_UNKNOWN: "UNKNOWN",
    m.SOURCE_DYNAMIC_TOPIC_CONFIG: "DYNAMIC_TOPIC_CONFIG",
    m.SOURCE_DYNAMIC_BROKER_CONFIG: "DYNAMIC_BROKER_CONFIG",
    m.SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    m.SOURCE_STATIC_BROKER_CONFIG: "STATIC_BROKER_CONFIG",
    m.SOURCE_DEFAULT_CONFIG: "DEFAULT_CONFIG",
}


def _resource(broker_id: int | None, topic: str | None) -> tuple[int, str]:
    if topic is not None:
        return m.TOPIC_RESOURCE, topic
    return m.BROKER_RESOURCE, "" if broker_id is None else str(broker_id)


class ConfigAdmin(AdminBase):
    """Describe and alter topic and broker configs (a mixin of `client.admin.Admin`)."""

    async def _request_for(self, broker_id: int | None, topic: str | None, request: Any) -> Any:
        if topic is not None or broker_id is None:
            return await self._request_any(request)
        cluster = await self._fresh_cluster()
        broker = cluster.broker(broker_id)
        if broker is None:
            raise NoBrokersAvailableError(f"broker {broker_id} is not alive")
        return await self._pool.request(
            *broker.address, request, timeout_s=self.request_timeout_ms / 1000 + 5
        )

    async def describe_config_entries(
        self, *, topic: str | None = None, broker_id: int | None = None
    ) -> list[ConfigEntry]:
        """Every config of a topic, a broker, or (neither) the cluster-wide broker
        defaults set dynamically, with sources and synonyms. Raises the broker's error
        (`UnknownTopicError` for a topic that does not exist)."""
        resource_type, name = _resource(broker_id, topic)
        request = m.DescribeConfigsRequest(
            resources=[m.DescribeConfigsResource(resource_type=resource_type, resource_name=name)],
            include_synonyms=True,
        )
        response = await self._request_for(broker_id, topic, request)
        (result,) = response.results
        error = topic_error_or_none(name, result.error_code, result.error_message)
        if error is not None:
            raise error
        return [
            ConfigEntry(
                name=c.name,
                value=c.value,
                source=SOURCE_NAMES.get(c.config_source, "UNKNOWN"),
                read_only=c.read_only,
                sensitive=c.is_sensitive,
                synonyms=[
                    (SOURCE_NAMES.get(s.source, "UNKNOWN"), s.name, s.value) for s in c.synonyms
                ],
            )
            for c in result.configs
        ]

    async def alter_configs_incrementally(
        self,
        *,
        topic: str | None = None,
        broker_id: int | None = None,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Iterable[str] = (),
        append_configs: Mapping[str, str] | None = None,
        subtract_configs: Mapping[str, str] | None = None,
        validate_only: bool = False,
    ) -> TributaryError | None:
        """IncrementalAlterConfigs of one resource (a topic, a broker, or with neither
        the cluster-wide broker defaults); None when the broker accepted it."""
        resource_type, name = _resource(broker_id, topic)
        operations = [
            m.AlterableConfig(name=k, config_operation=m.CONFIG_SET, value=v)
            for k, v in sorted((set_configs or {}).items())
        ]
        operations += [
            m.AlterableConfig(name=k, config_operation=m.CONFIG_DELETE) for k in delete_configs
        ]
        operations += [
            m.AlterableConfig(name=k, config_operation=m.CONFIG_APPEND, value=v)
            for k, v in sorted((append_configs or {}).items())
        ]
        operations += [
            m.AlterableConfig(name=k, config_operation=m.CONFIG_SUBTRACT, value=v)
            for k, v in sorted((subtract_configs or {}).items())
        ]
        request = m.IncrementalAlterConfigsRequest(
            resources=[
                m.AlterConfigsResource(
                    resource_type=resource_type, resource_name=name, configs=operations
                )
            ],
            validate_only=validate_only,
        )
        response = await self._request_for(broker_id, topic, request)
        return _single_result(name, response)

    async def replace_configs(
        self,
        configs: Mapping[str, str],
        *,
        topic: str | None = None,
        broker_id: int | None = None,
        validate_only: bool = False,
    ) -> TributaryError | None:
        """Legacy AlterConfigs: the resource's dynamic configs become exactly `configs`."""
        resource_type, name = _resource(broker_id, topic)
        request = m.AlterConfigsRequest(
            resources=[
                m.AlterConfigsRequestResource(
                    resource_type=resource_type,
                    resource_name=name,
                    configs=[
                        m.AlterConfigsRequestConfig(name=k, value=v)
                        for k, v in sorted(configs.items())
                    ],
                )
            ],
            validate_only=validate_only,
        )
        response = await self._request_for(broker_id, topic, request)
        return _single_result(name, response)


def _single_result(name: str, response: Any) -> TributaryError | None:
    (result,) = response.responses
    if result.error_code == ErrorCode.NONE:
        return None
    return topic_error_or_none(name, result.error_code, result.error_message)
