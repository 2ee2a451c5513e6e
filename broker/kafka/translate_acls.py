"""Kafka's DescribeAcls, CreateAcls and DeleteAcls on the Kafka listener, translated to
and from the native handlers (broker/handlers/acls.py).

How it works: the native messages (client/protocol/messages/acls.py) have Kafka's
fields one for one, with Kafka's codes for resource types, pattern types, operations
and permissions, so each translation copies fields; `error_response` answers the
request's one error (DescribeAcls), or every creation or filter with the code.

Version ranges: 1-3 of each (kio has no v0; v1 added pattern types, KIP-290, v2 is
flexible, v3 only adds the User resource type of KRaft, which is refused here as an
unknown type); kafka-python asks v1, librdkafka and the Java client up to v3.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from broker.kafka.translation import KafkaHeader, Translation, build, response_class
from client.protocol import messages as m
from client.protocol.api import ApiKey


def _response(api_key: int, version: int, **values: Any) -> Any:
    values.setdefault("throttle_time", 0)
    return build(response_class(api_key, version), **values)


def _filter_fields(f: Any) -> dict[str, Any]:
    return {
        "resource_type_filter": int(f.resource_type_filter),
        "resource_name_filter": f.resource_name_filter,
        "pattern_type_filter": int(f.pattern_type_filter),
        "principal_filter": f.principal_filter,
        "host_filter": f.host_filter,
        "operation": int(f.operation),
        "permission_type": int(f.permission_type),
    }


# --- DescribeAcls (29) --------------------------------------------------------------------


def describe_acls_to_native(request: Any, header: KafkaHeader) -> m.DescribeAclsRequest:
    return m.DescribeAclsRequest(**_filter_fields(request))


def describe_acls_from_native(response: m.DescribeAclsResponse, version: int) -> Any:
    return _response(
        ApiKey.DESCRIBE_ACLS,
        version,
        throttle_time=response.throttle_time_ms,
        error_code=response.error_code,
        error_message=response.error_message,
        resources=[
            {
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
                "pattern_type": r.pattern_type,
                "acls": [dataclasses.asdict(a) for a in r.acls],
            }
            for r in response.resources
        ],
    )


def describe_acls_error(request: Any, version: int, code: int) -> Any:
    return _response(
        ApiKey.DESCRIBE_ACLS, version, error_code=code, error_message=None, resources=[]
    )


# --- CreateAcls (30) ----------------------------------------------------------------------


def create_acls_to_native(request: Any, header: KafkaHeader) -> m.CreateAclsRequest:
    return m.CreateAclsRequest(
        creations=[
            m.AclCreation(
                resource_type=int(c.resource_type),
                resource_name=c.resource_name,
                resource_pattern_type=int(c.resource_pattern_type),
                principal=c.principal,
                host=c.host,
                operation=int(c.operation),
                permission_type=int(c.permission_type),
            )
            for c in request.creations
        ]
    )


def create_acls_from_native(response: m.CreateAclsResponse, version: int) -> Any:
    return _response(
        ApiKey.CREATE_ACLS,
        version,
        throttle_time=response.throttle_time_ms,
        results=[dataclasses.asdict(r) for r in response.results],
    )


def create_acls_error(request: Any, version: int, code: int) -> Any:
    return _response(
        ApiKey.CREATE_ACLS,
        version,
        results=[{"error_code": code, "error_message": None} for _ in request.creations],
    )


# --- DeleteAcls (31) ----------------------------------------------------------------------


def delete_acls_to_native(request: Any, header: KafkaHeader) -> m.DeleteAclsRequest:
    return m.DeleteAclsRequest(
        filters=[m.DeleteAclsFilter(**_filter_fields(f)) for f in request.filters]
    )


def delete_acls_from_native(response: m.DeleteAclsResponse, version: int) -> Any:
    return _response(
        ApiKey.DELETE_ACLS,
        version,
        throttle_time=response.throttle_time_ms,
        filter_results=[
            {
                "error_code": r.error_code,
                "error_message": r.error_message,
                "matching_acls": [dataclasses.asdict(a) for a in r.matching_acls],
            }
            for r in response.filter_results
        ],
    )


def delete_acls_error(request: Any, version: int, code: int) -> Any:
    return _response(
        ApiKey.DELETE_ACLS,
        version,
        filter_results=[
            {"error_code": code, "error_message": None, "matching_acls": []}
            for _ in request.filters
        ],
    )


TRANSLATIONS: dict[int, Translation] = {
    int(t.api_key): t
    for t in [
        Translation(
            ApiKey.DESCRIBE_ACLS,
            1,
            3,
            describe_acls_to_native,
            describe_acls_from_native,
            describe_acls_error,
        ),
        Translation(
            ApiKey.CREATE_ACLS,
            1,
            3,
            create_acls_to_native,
            create_acls_from_native,
            create_acls_error,
        ),
        Translation(
            ApiKey.DELETE_ACLS,
            1,
            3,
            delete_acls_to_native,
            delete_acls_from_native,
            delete_acls_error,
        ),
    ]
}
