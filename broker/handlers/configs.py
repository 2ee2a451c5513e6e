"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs of topics and brokers, as
Kafka 2.8's ZkAdminManager and ConfigHelper serve them.

How it works: a topic's overrides live in /config/topics/<t>; a broker's dynamic configs
in /config/brokers/<id>, the cluster-wide ones in /config/brokers/<default> (resource
name ""). DescribeConfigs answers a topic with every topic config's effective value (its
overrides over this broker's current defaults) and a broker with its four layers
(`BrokerConfigLayers` of broker/dynamic_config.py: values, sources, synonyms, read-only
flags and types). A BROKER resource naming another broker is INVALID_REQUEST, as in
Kafka: clients send it to that broker.

AlterConfigs replaces a resource's whole dynamic set; IncrementalAlterConfigs applies
SET, DELETE, APPEND and SUBTRACT (the last two on list configs only) to what ZooKeeper
holds. The result is validated before anything is written (Kafka's codes: an unknown
topic config or conflicting values INVALID_CONFIG, a bad value INVALID_REQUEST, as are a
read-only broker config, a null value and a key named twice; Tributary adds
min.insync.replicas against the replication factor, INVALID_CONFIG), then, unless
validate_only, written and announced under /config/changes, where every broker's watcher
(broker/zookeeper/topic_configs.py) picks it up; the broker that wrote a broker config
applies it before answering.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from broker.core.log.config import LogConfig
from broker.core.log.config_defs import TOPIC_CONFIG_DEFS
from broker.core.log.errors import ConfigError, InvalidConfigError
from broker.dynamic_config import BrokerConfigLayers, DynamicConfigError, broker_config_type
from broker.handlers.topics import TopicProblem, min_isr_problem
from broker.zookeeper.broker_configs import DEFAULT, BrokerConfigs
from broker.zookeeper.gateway import BrokerZkGateway
from client.protocol import messages as m
from client.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

_INVALID = ErrorCode.INVALID_REQUEST


class ConfigHandlers:
    def __init__(
        self,
        gateway: BrokerZkGateway,
        default_log_config: Callable[[], LogConfig],
        broker_configs: BrokerConfigs | None = None,
    ) -> None:
        self.gateway = gateway
        self.default_log_config = default_log_config
        self.broker_configs = broker_configs

    # -- DescribeConfigs --------------------------------------------------------------------
    async def describe_configs(self, request: m.DescribeConfigsRequest):
        results = []
        for resource in request.resources:
            try:
                configs = await self._describe(resource, request)
                results.append(_configs_result(resource, ErrorCode.NONE, None, configs))
            except TopicProblem as problem:
                results.append(_configs_result(resource, problem.code, problem.message))
        return m.DescribeConfigsResponse(throttle_time_ms=0, results=results)

    async def _describe(
        self, resource: m.DescribeConfigsResource, request: m.DescribeConfigsRequest
    ) -> list[m.DescribeConfigsResult]:
        keys = resource.configuration_keys
        include_synonyms = request.include_synonyms
        include_documentation = request.include_documentation
        if resource.resource_type == m.BROKER_RESOURCE:
            entity = self._broker_entity(resource.resource_name)
            return self._layers.describe_broker(
                keys,
                per_broker=entity != DEFAULT,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
        if resource.resource_type != m.TOPIC_RESOURCE:
            raise TopicProblem(
                _INVALID,
                f"unsupported resource type {resource.resource_type} (topics: 2, brokers: 4)",
            )
        name = resource.resource_name
        if not await self.gateway.topic_exists(name):
            raise TopicProblem(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        overrides = (await self.gateway.topic_configs([name]))[name]
        defaults = self.default_log_config()
        try:
            config = LogConfig.from_properties(overrides, defaults)
        except ConfigError as exc:
            log.warning("topic %s: bad config in ZooKeeper (%s); describing defaults", name, exc)
            config, overrides = defaults, {}
        return self._layers.describe_topic(
            overrides,
            config,
            keys,
            include_synonyms=include_synonyms,
            include_documentation=include_documentation,
        )

    @property
    def _layers(self) -> BrokerConfigLayers:
        if self.broker_configs is None:
            raise TopicProblem(_INVALID, "this broker does not serve broker configs")
        return self.broker_configs.layers

    def _broker_entity(self, name: str) -> str:
        """DEFAULT for "", this broker's id for its own; INVALID_REQUEST otherwise."""
        if not name:
            return DEFAULT
        own = self._layers.broker_id
        try:
            broker_id = int(name)
        except ValueError:
            raise TopicProblem(
                _INVALID, f"Broker id must be an integer, but it is: {name}"
            ) from None
        if broker_id != own:
            raise TopicProblem(
                _INVALID,
                f"Unexpected broker id, expected {own} or empty string, but received {name}",
            )
        return str(broker_id)

    # -- AlterConfigs and IncrementalAlterConfigs -------------------------------------------
    async def alter_configs(self, request: m.AlterConfigsRequest) -> m.AlterConfigsResponse:
        """Legacy AlterConfigs: each resource's dynamic configs become exactly these."""
        responses = []
        for resource in request.resources:

            def replace(current: dict[str, str], resource=resource) -> dict[str, str]:
                nulls = [c.name for c in resource.configs if c.value is None]
                if nulls:
                    raise TopicProblem(
                        _INVALID, f"Null value not supported for : {','.join(nulls)}"
                    )
                return {c.name: c.value for c in resource.configs if c.value is not None}

            responses.append(await self._alter(resource, replace, request.validate_only))
        return m.AlterConfigsResponse(throttle_time_ms=0, responses=responses)

    async def incremental_alter_configs(
        self, request: m.IncrementalAlterConfigsRequest
    ) -> m.IncrementalAlterConfigsResponse:
        responses = []
        for resource in request.resources:

            def apply(current: dict[str, str], resource=resource) -> dict[str, str]:
                return _apply_operations(current, resource.configs, resource.resource_type)

            responses.append(await self._alter(resource, apply, request.validate_only))
        return m.IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)

    async def _alter(
        self,
        resource: Any,
        change: Callable[[dict[str, str]], dict[str, str]],
        validate_only: bool,
    ) -> m.AlterConfigsResourceResponse:
        code, message = ErrorCode.NONE, None
        try:
            if resource.resource_type == m.TOPIC_RESOURCE:
                await self._alter_topic(resource.resource_name, change, validate_only)
            elif resource.resource_type == m.BROKER_RESOURCE:
                await self._alter_broker(resource.resource_name, change, validate_only)
            else:
                raise TopicProblem(
                    _INVALID,
                    "AlterConfigs is only supported for topics and brokers, but resource type "
                    f"is {resource.resource_type}",
                )
        except TopicProblem as problem:
            code, message = problem.code, problem.message
            log.info("config change of %s refused: %s", resource.resource_name, message)
        return m.AlterConfigsResourceResponse(
            error_code=code,
            error_message=message,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        )

    async def _alter_topic(
        self, name: str, change: Callable[[dict[str, str]], dict[str, str]], validate_only: bool
    ) -> None:
        assignment = await self.gateway.topic_assignment(name)
        if assignment is None:
            raise TopicProblem(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        current = (await self.gateway.topic_configs([name]))[name]
        config = change(current)
        try:
            log_config = LogConfig.from_properties(config, self.default_log_config())
        except InvalidConfigError as exc:
            raise TopicProblem(ErrorCode.INVALID_CONFIG, str(exc)) from None
        except ConfigError as exc:
            raise TopicProblem(_INVALID, f"Invalid config value for topic {name}: {exc}") from None
        rf = min((len(r) for r in assignment.partitions.values()), default=0)
        if "min.insync.replicas" in config:
            if (problem := min_isr_problem(log_config.min_insync_replicas, rf)) is not None:
                raise TopicProblem(ErrorCode.INVALID_CONFIG, problem)
        if not validate_only:
            await self.gateway.set_topic_config(name, config)
            log.info("topic %s: config set to %s", name, config)

    async def _alter_broker(
        self, name: str, change: Callable[[dict[str, str]], dict[str, str]], validate_only: bool
    ) -> None:
        entity = self._broker_entity(name)
        assert self.broker_configs is not None  # _broker_entity checked
        stored = (await self.gateway.broker_configs([entity]))[entity]
        current, _ = BrokerConfigLayers.sanitize(stored)
        config = change(current)
        try:
            self._layers.validate(config, per_broker=entity != DEFAULT)
        except DynamicConfigError as exc:
            raise TopicProblem(_INVALID, str(exc)) from None
        if not validate_only:
            await self.gateway.set_broker_config(entity, config)
            log.info("broker config %s set to %s", entity, config)
            await self.broker_configs.reload([entity])  # this broker applies it at once


def _list_config(name: str, resource_type: int) -> tuple[bool, str | None]:
    """(is it a list config, its Kafka default as a string) for APPEND and SUBTRACT."""
    if resource_type == m.TOPIC_RESOURCE:
        spec = TOPIC_CONFIG_DEFS.get(name)
        if spec is None:
            raise TopicProblem(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
        default = "delete" if name == "cleanup.policy" else ""
        return spec.kind == "list", default
    if name == "log.cleanup.policy":
        return True, "delete"
    return broker_config_type(name) == "list", ""


def _apply_operations(
    current: dict[str, str], operations: Iterable[m.AlterableConfig], resource_type: int
) -> dict[str, str]:
    """Kafka's prepareIncrementalConfigs over the stored dynamic configs."""
    operations = list(operations)
    names = [op.name for op in operations]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise TopicProblem(_INVALID, f"Error due to duplicate config keys : {','.join(twice)}")
    nulls = [
        f"{op.config_operation}:{op.name}"
        for op in operations
        if op.value is None and op.config_operation != m.CONFIG_DELETE
    ]
    if nulls:
        raise TopicProblem(_INVALID, f"Null value not supported for : {','.join(nulls)}")
    config = dict(current)
    for op in operations:
        if op.config_operation == m.CONFIG_SET:
            assert op.value is not None
            config[op.name] = op.value
        elif op.config_operation == m.CONFIG_DELETE:
            config.pop(op.name, None)
        elif op.config_operation in (m.CONFIG_APPEND, m.CONFIG_SUBTRACT):
            assert op.value is not None
            is_list, default = _list_config(op.name, resource_type)
            verb = "append" if op.config_operation == m.CONFIG_APPEND else "subtract"
            if not is_list:
                raise TopicProblem(
                    _INVALID, f"Config value {verb} is not allowed for config key: {op.name}"
                )
            old = config.get(op.name, default) or ""
            items = [i.strip() for i in old.split(",") if i.strip()]
            given = [i.strip() for i in op.value.split(",") if i.strip()]
            if op.config_operation == m.CONFIG_APPEND:
                items += given
            else:
                items = [i for i in items if i not in given]
            config[op.name] = ",".join(items)
        else:
            raise TopicProblem(
                _INVALID, f"{op.name}: unknown config operation {op.config_operation}"
            )
    return config


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
