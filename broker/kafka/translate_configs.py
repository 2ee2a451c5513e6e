"""Kafka's DescribeConfigs, AlterConfigs and IncrementalAlterConfigs on the Kafka
listener, translated to and from the native handlers (broker/handlers/configs.py).

How it works: as in translate_admin.py, `to_native` reads the kio request into the
native message, the native handler does the work (Kafka's rules: sources, synonyms,
validation, ZooKeeper writes, change notifications) and `from_native` describes the
answer for `translation.build` to fit to the requested version; `error_response`
answers every resource of the request with the error code. The native messages carry
every field Kafka's answers have (config source, synonyms, type, and documentation when
asked for), so each maps one to one.

Version ranges (kio has no DescribeConfigs v0):
- DescribeConfigs 1-4: v1 adds sources and synonyms, v3 types and documentation, v4 is
  flexible;
- AlterConfigs 0-2: v1 only changes the throttle semantics, v2 is flexible;
- IncrementalAlterConfigs 0-1: v1 is flexible.
"""

from __future__ import annotations

from typing import Any

from broker.kafka.translation import KafkaHeader, Translation, build, response_class
from client.protocol import messages as m
from client.protocol.api import ApiKey


def _response(api_key: int, version: int, **values: Any) -> Any:
    values.setdefault("throttle_time", 0)
    return build(response_class(api_key, version), **values)


# --- DescribeConfigs (32) -------------------------------------------------------------------


def describe_configs_to_native(request: Any, header: KafkaHeader) -> m.DescribeConfigsRequest:
    return m.DescribeConfigsRequest(
        resources=[
            m.DescribeConfigsResource(
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                # null or empty: every key (Kafka treats both alike)
                configuration_keys=(
                    None if r.configuration_keys is None else list(r.configuration_keys)
                ),
            )
            for r in request.resources
        ],
        include_synonyms=bool(request.include_synonyms),
        include_documentation=bool(getattr(request, "include_documentation", False)),
    )


def _config_entry(entry: m.DescribeConfigsResult) -> dict[str, Any]:
    return {
        "name": entry.name,
        "value": entry.value,
        "read_only": entry.read_only,
        "is_default": entry.is_default,
        "config_source": entry.config_source,
        "is_sensitive": entry.is_sensitive,
        "synonyms": [
            {"name": s.name, "value": s.value, "source": s.source} for s in entry.synonyms
        ],
        "config_type": entry.config_type,
        "documentation": entry.documentation,
    }


def describe_configs_from_native(response: m.DescribeConfigsResponse, version: int) -> Any:
    return _response(
        ApiKey.DESCRIBE_CONFIGS,
        version,
        throttle_time=response.throttle_time_ms,
        results=[
            {
                "error_code": r.error_code,
                "error_message": r.error_message,
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
                "configs": [_config_entry(c) for c in r.configs],
            }
            for r in response.results
        ],
    )


def describe_configs_error(request: Any, version: int, code: int) -> Any:
    return _response(
        ApiKey.DESCRIBE_CONFIGS,
        version,
        results=[
            {
                "error_code": code,
                "error_message": None,
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
                "configs": [],
            }
            for r in request.resources
        ],
    )


# --- AlterConfigs (33) and IncrementalAlterConfigs (44) -----------------------------------


def alter_configs_to_native(request: Any, header: KafkaHeader) -> m.AlterConfigsRequest:
    return m.AlterConfigsRequest(
        resources=[
            m.AlterConfigsRequestResource(
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                configs=[
                    m.AlterConfigsRequestConfig(name=c.name, value=c.value) for c in r.configs
                ],
            )
            for r in request.resources
        ],
        validate_only=bool(request.validate_only),
    )


def incremental_alter_configs_to_native(
    request: Any, header: KafkaHeader
) -> m.IncrementalAlterConfigsRequest:
    return m.IncrementalAlterConfigsRequest(
        resources=[
            m.AlterConfigsResource(
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                configs=[
                    m.AlterableConfig(
                        name=c.name, config_operation=int(c.config_operation), value=c.value
                    )
                    for c in r.configs
                ],
            )
            for r in request.resources
        ],
        validate_only=bool(request.validate_only),
    )


def _alter_from_native(api_key: int) -> Any:
    def from_native(response: Any, version: int) -> Any:
        return _response(
            api_key,
            version,
            throttle_time=response.throttle_time_ms,
            responses=[
                {
                    "error_code": r.error_code,
                    "error_message": r.error_message,
                    "resource_type": r.resource_type,
                    "resource_name": r.resource_name,
                }
                for r in response.responses
            ],
        )

    return from_native


def _alter_error(api_key: int) -> Any:
    def error_response(request: Any, version: int, code: int) -> Any:
        return _response(
            api_key,
            version,
            responses=[
                {
                    "error_code": code,
                    "error_message": None,
                    "resource_type": r.resource_type,
                    "resource_name": r.resource_name,
                }
                for r in request.resources
            ],
        )

    return error_response


TRANSLATIONS: dict[int, Translation] = {
    int(t.api_key): t
    for t in [
        Translation(
            ApiKey.DESCRIBE_CONFIGS,
            1,
            4,
            describe_configs_to_native,
            describe_configs_from_native,
            describe_configs_error,
        ),
        Translation(
            ApiKey.ALTER_CONFIGS,
            0,
            2,
            alter_configs_to_native,
            _alter_from_native(ApiKey.ALTER_CONFIGS),
            _alter_error(ApiKey.ALTER_CONFIGS),
        ),
        Translation(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            0,
            1,
            incremental_alter_configs_to_native,
            _alter_from_native(ApiKey.INCREMENTAL_ALTER_CONFIGS),
            _alter_error(ApiKey.INCREMENTAL_ALTER_CONFIGS),
        ),
    ]
}
