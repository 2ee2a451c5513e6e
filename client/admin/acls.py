"""The admin client's ACL requests: create, describe and delete ACLs (Kafka's
CreateAcls, DescribeAcls, DeleteAcls; AdminClient.createAcls and friends).

How it works: an `Acl` is one binding (resource type, name, pattern type, principal,
host, operation, permission; the enums of `client.protocol.acl_types`); an `AclFilter`
selects bindings (None or ANY matches anything; pattern type MATCH selects every ACL
that applies to the named resource: the literal name, the literal "*", its prefixes).
Every request goes to any broker (`_request_any`): each keeps every ACL, and the one
that gets CreateAcls/DeleteAcls writes ZooKeeper, from where every broker applies it.
`create_acls` returns None or the `TributaryError` of each ACL; `describe_acls` and
`delete_acls` raise the broker's error (SECURITY_DISABLED without an authorizer,
CLUSTER_AUTHORIZATION_FAILED for a principal without Describe/Alter on the cluster).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from client.admin.base import AdminBase, error_or_none
from client.protocol import messages as m
from client.protocol.acl_types import AclOperation, PatternType, PermissionType, ResourceType
from client.protocol.errors import TributaryError, raise_for


@dataclass(frozen=True, slots=True)
class Acl:
    resource_type: ResourceType
    name: str
    principal: str
    operation: AclOperation
    permission: PermissionType = PermissionType.ALLOW
    host: str = "*"
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, "
            f"operation={self.operation.name}, permissionType={self.permission.name})"
        )


@dataclass(frozen=True, slots=True)
class AclFilter:
    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: PermissionType = PermissionType.ANY

    def fields(self) -> dict:
        return {
            "resource_type_filter": int(self.resource_type),
            "resource_name_filter": self.name,
            "pattern_type_filter": int(self.pattern_type),
            "principal_filter": self.principal,
            "host_filter": self.host,
            "operation": int(self.operation),
            "permission_type": int(self.permission),
        }


def _acl(resource_type: int, name: str, pattern_type: int, item) -> Acl:
    return Acl(
        resource_type=ResourceType(resource_type),
        name=name,
        pattern_type=PatternType(pattern_type),
        principal=item.principal,
        host=item.host,
        operation=AclOperation(item.operation),
        permission=PermissionType(item.permission_type),
    )


class AclAdmin(AdminBase):
    """Create, describe and delete ACLs (a mixin of `client.admin.Admin`)."""

    async def create_acls(self, acls: Iterable[Acl]) -> list[TributaryError | None]:
        wanted = list(acls)
        response: m.CreateAclsResponse = await self._request_any(
            m.CreateAclsRequest(
                creations=[
                    m.AclCreation(
                        resource_type=int(a.resource_type),
                        resource_name=a.name,
                        resource_pattern_type=int(a.pattern_type),
                        principal=a.principal,
                        host=a.host,
                        operation=int(a.operation),
                        permission_type=int(a.permission),
                    )
                    for a in wanted
                ]
            )
        )
        return [error_or_none(r.error_code, r.error_message) for r in response.results]

    async def describe_acls(self, selector: AclFilter = AclFilter()) -> list[Acl]:
        response: m.DescribeAclsResponse = await self._request_any(
            m.DescribeAclsRequest(**selector.fields())
        )
        raise_for(response.error_code, response.error_message)
        return [
            _acl(r.resource_type, r.resource_name, r.pattern_type, item)
            for r in response.resources
            for item in r.acls
        ]

    async def delete_acls(self, filters: Iterable[AclFilter]) -> list[list[Acl]]:
        """The ACLs each filter deleted."""
        response: m.DeleteAclsResponse = await self._request_any(
            m.DeleteAclsRequest(filters=[m.DeleteAclsFilter(**f.fields()) for f in filters])
        )
        deleted = []
        for result in response.filter_results:
            raise_for(result.error_code, result.error_message)
            deleted.append(
                [
                    _acl(a.resource_type, a.resource_name, a.pattern_type, a)
                    for a in result.matching_acls
                ]
            )
        return deleted
