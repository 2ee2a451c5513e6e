"""DescribeConfigs and IncrementalAlterConfigs: topic configs, as ZooKeeper holds them.

How it works: a topic's overrides live in /config/topics/<t>. DescribeConfigs answers
each key asked for (or all) with the override, else the broker's default, marking which
is which. IncrementalAlterConfigs applies SET and DELETE to the overrides, validates the
result like CreateTopics does (names and values through `LogConfig`, min.insync.replicas
against the replication factor: `min_isr_problem` of topics.py), writes
/config/topics/<t> and announces the change under /config/changes, where every broker's
`TopicConfigs.watch_changes` (broker/zookeeper/topic_configs.py) picks it up. Only topic
resources are served.
"""

from __future__ import annotations

import logging

from broker.core.log.config import LogConfig
from broker.core.log.errors import ConfigError
from broker.handlers.topics import TopicProblem, min_isr_problem
from broker.zookeeper.gateway import BrokerZkGateway
from client.protocol import messages as m
from client.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class ConfigHandlers:
    def __init__(self, gateway: BrokerZkGateway, default_log_config: LogConfig) -> None:
        self.gateway = gateway
        self.default_log_config = default_log_config

    async def incremental_alter_configs(
        self, request: m.IncrementalAlterConfigsRequest
    ) -> m.IncrementalAlterConfigsResponse:
        """Topic config changes: SET and DELETE on the topic's overrides, validated like
        CreateTopics' (names, values, min.insync.replicas against the replication
        factor), written to /config/topics/<t> and announced under /config/changes."""
        responses = []
        for resource in request.resources:
            code, message = ErrorCode.NONE, None
            try:
                config = await self._altered_config(resource)
                if not request.validate_only:
                    await self.gateway.set_topic_config(resource.resource_name, config)
                    log.info("topic %s: config set to %s", resource.resource_name, config)
            except TopicProblem as problem:
                code, message = problem.code, problem.message
            responses.append(
                m.AlterConfigsResourceResponse(
                    error_code=code,
                    error_message=message,
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                )
            )
        return m.IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)

    async def _altered_config(self, resource: m.AlterConfigsResource) -> dict[str, str]:
        name = resource.resource_name
        if resource.resource_type != m.TOPIC_RESOURCE:
            raise TopicProblem(ErrorCode.INVALID_REQUEST, "only topic configs can be altered")
        assignment = await self.gateway.topic_assignment(name)
        if assignment is None:
            raise TopicProblem(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        config = (await self.gateway.topic_configs([name]))[name]
        for entry in resource.configs:
            if entry.config_operation == m.CONFIG_SET and entry.value is not None:
                config[entry.name] = entry.value
            elif entry.config_operation == m.CONFIG_DELETE:
                config.pop(entry.name, None)
            else:
                raise TopicProblem(
                    ErrorCode.INVALID_REQUEST,
                    f"{entry.name}: only SET (with a value) and DELETE are supported",
                )
        try:
            log_config = LogConfig.from_properties(config, self.default_log_config)
        except ConfigError as exc:
            raise TopicProblem(ErrorCode.INVALID_CONFIG, str(exc)) from None
        rf = min((len(r) for r in assignment.partitions.values()), default=0)
        if "min.insync.replicas" in config:
            if (problem := min_isr_problem(log_config.min_insync_replicas, rf)) is not None:
                raise TopicProblem(ErrorCode.INVALID_CONFIG, problem)
        return config

    # -- DescribeConfigs --------------------------------------------------------------------
    async def describe_configs(self, request: m.DescribeConfigsRequest):
        defaults = self.default_log_config.to_properties()
        results = []
        for resource in request.resources:
            name = resource.resource_name
            if resource.resource_type != m.TOPIC_RESOURCE:
                results.append(
                    _configs_result(resource, ErrorCode.INVALID_REQUEST, "only topic configs")
                )
                continue
            if not await self.gateway.topic_exists(name):
                results.append(
                    _configs_result(
                        resource, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}"
                    )
                )
                continue
            overrides = (await self.gateway.topic_configs([name]))[name]
            keys = resource.configuration_keys or sorted(set(defaults) | set(overrides))
            configs = [
                m.DescribeConfigsResult(
                    name=key,
                    value=overrides.get(key, defaults.get(key)),
                    read_only=False,
                    is_default=key not in overrides,
                )
                for key in keys
                if key in overrides or key in defaults
            ]
            results.append(_configs_result(resource, ErrorCode.NONE, None, configs))
        return m.DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _configs_result(
    resource: m.DescribeConfigsResource,
    code: ErrorCode,
    message: str | None,
    configs: list[m.DescribeConfigsResult] | None = None,
) -> m.DescribeConfigsResponseResource:
    return m.DescribeConfigsResponseResource(
        error_code=code,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=configs or [],
    )
