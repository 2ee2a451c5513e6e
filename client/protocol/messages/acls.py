"""The ACL admin APIs: DescribeAcls (29), CreateAcls (30) and DeleteAcls (31).

How it works: messages declared with `schema.struct`, field for field Kafka's (v1+
names, so the Kafka listener translates them one to one). Resource types, pattern
types, operations and permissions are Kafka's wire codes
(`server_common.security.acls` names them: Topic 2, Group 3, Cluster 4; LITERAL 3,
PREFIXED 4, MATCH 2, ANY 1; Read 3, Write 4...). A filter's null name, principal or host
matches anything. A broker without an authorizer answers SECURITY_DISABLED.
"""

from __future__ import annotations

from client.protocol.schema import struct

LITERAL_PATTERN = 3


# --- DescribeAcls (29) ----------------------------------------------------------------------


@struct
class DescribeAclsRequest:
    resource_type_filter: int
    resource_name_filter: str | None
    pattern_type_filter: int = LITERAL_PATTERN
    principal_filter: str | None
    host_filter: str | None
    operation: int
    permission_type: int


@struct
class AclDescription:
    principal: str
    host: str
    operation: int
    permission_type: int


@struct
class DescribeAclsResource:
    resource_type: int
    resource_name: str
    pattern_type: int = LITERAL_PATTERN
    acls: list[AclDescription]


@struct
class DescribeAclsResponse:
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    resources: list[DescribeAclsResource]


# --- CreateAcls (30) ------------------------------------------------------------------------


@struct
class AclCreation:
    resource_type: int
    resource_name: str
    resource_pattern_type: int = LITERAL_PATTERN
    principal: str
    host: str
    operation: int
    permission_type: int


@struct
class CreateAclsRequest:
    creations: list[AclCreation]


@struct
class AclCreationResult:
    error_code: int
    error_message: str | None


@struct
class CreateAclsResponse:
    throttle_time_ms: int
    results: list[AclCreationResult]


# --- DeleteAcls (31) ------------------------------------------------------------------------


@struct
class DeleteAclsFilter:
    resource_type_filter: int
    resource_name_filter: str | None
    pattern_type_filter: int = LITERAL_PATTERN
    principal_filter: str | None
    host_filter: str | None
    operation: int
    permission_type: int


@struct
class DeleteAclsRequest:
    filters: list[DeleteAclsFilter]


@struct
class DeleteAclsMatchingAcl:
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str
    pattern_type: int = LITERAL_PATTERN
    principal: str
    host: str
    operation: int
    permission_type: int


@struct
class DeleteAclsFilterResult:
    error_code: int
    error_message: str | None
    matching_acls: list[DeleteAclsMatchingAcl]


@struct
class DeleteAclsResponse:
    throttle_time_ms: int
    filter_results: list[DeleteAclsFilterResult]
