"""DescribeAcls, CreateAcls and DeleteAcls: the ACLs in ZooKeeper, as Kafka 2.8's
AclAuthorizer serves them.

How it works: DescribeAcls answers from this broker's copy of the ACLs (the authorizer
the `AclStore` keeps up to date), grouped by resource pattern. CreateAcls validates each
ACL (a concrete resource type and pattern type, an operation and permission that can be
granted, a principal `Type:name`; anything else is INVALID_REQUEST for that ACL alone)
and adds them to their resources' znodes with the store's conditional writes; DeleteAcls
finds the bindings each filter matches and removes them the same way, answering each
filter with what it deleted. Whether the principal may (Describe, or Alter, on the
cluster) is checked before, in authorization.py. Without an authorizer every ACL API is
answered SECURITY_DISABLED, as Kafka does.
"""

from __future__ import annotations

import logging

from broker.zookeeper.acls import AclStore
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from server_common.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    validate_binding,
)
from server_common.zk import ZkError

log = logging.getLogger(__name__)

NO_AUTHORIZER = "No Authorizer is configured on the broker"


def _enum(cls, value: int):
    try:
        return cls(value)
    except ValueError:
        return cls.UNKNOWN


def binding_of(creation: m.AclCreation) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            _enum(ResourceType, creation.resource_type),
            creation.resource_name,
            _enum(PatternType, creation.resource_pattern_type),
        ),
        AccessControlEntry(
            creation.principal,
            creation.host,
            _enum(AclOperation, creation.operation),
            _enum(PermissionType, creation.permission_type),
        ),
    )


def filter_of(f: m.DescribeAclsRequest | m.DeleteAclsFilter) -> AclBindingFilter:
    return AclBindingFilter(
        resource_type=_enum(ResourceType, f.resource_type_filter),
        name=f.resource_name_filter,
        pattern_type=_enum(PatternType, f.pattern_type_filter),
        principal=f.principal_filter,
        host=f.host_filter,
        operation=_enum(AclOperation, f.operation),
        permission=_enum(PermissionType, f.permission_type),
    )


def _filter_problem(selector: AclBindingFilter) -> str | None:
    unknown = [
        what
        for what, value in (
            ("resource type", selector.resource_type),
            ("pattern type", selector.pattern_type),
            ("operation", selector.operation),
            ("permission type", selector.permission),
        )
        if value == 0
    ]
    return f"unknown {', '.join(unknown)}" if unknown else None


class AclHandlers:
    def __init__(self, store: AclStore | None) -> None:
        self.store = store

    async def describe_acls(self, request: m.DescribeAclsRequest) -> m.DescribeAclsResponse:
        def answer(code: ErrorCode, message: str | None, resources=()) -> m.DescribeAclsResponse:
            return m.DescribeAclsResponse(
                throttle_time_ms=0,
                error_code=code,
                error_message=message,
                resources=list(resources),
            )

        if self.store is None:
            return answer(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
        selector = filter_of(request)
        if problem := _filter_problem(selector):
            return answer(ErrorCode.INVALID_REQUEST, problem)
        by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
        for binding in self.store.authorizer.matching_bindings(selector):
            by_pattern.setdefault(binding.pattern, []).append(binding.entry)
        return answer(
            ErrorCode.NONE,
            None,
            (
                m.DescribeAclsResource(
                    resource_type=pattern.resource_type,
                    resource_name=pattern.name,
                    pattern_type=pattern.pattern_type,
                    acls=[
                        m.AclDescription(
                            principal=e.principal,
                            host=e.host,
                            operation=e.operation,
                            permission_type=e.permission,
                        )
                        for e in sorted(entries, key=_entry_order)
                    ],
                )
                for pattern, entries in sorted(by_pattern.items(), key=_pattern_order)
            ),
        )

    async def create_acls(self, request: m.CreateAclsRequest) -> m.CreateAclsResponse:
        results: list[m.AclCreationResult | None] = [None] * len(request.creations)
        if self.store is None:
            results = [
                m.AclCreationResult(
                    error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER
                )
                for _ in request.creations
            ]
            return m.CreateAclsResponse(throttle_time_ms=0, results=results)  # type: ignore[arg-type]
        wanted: dict[ResourcePattern, list[tuple[int, AccessControlEntry]]] = {}
        for i, creation in enumerate(request.creations):
            binding = binding_of(creation)
            problem = validate_binding(binding) or _znode_problem(binding.pattern)
            if problem:
                results[i] = m.AclCreationResult(
                    error_code=ErrorCode.INVALID_REQUEST, error_message=problem
                )
            else:
                wanted.setdefault(binding.pattern, []).append((i, binding.entry))
        for pattern, items in wanted.items():
            entries = {entry for _, entry in items}
            code, message = ErrorCode.NONE, None

            def add(old: frozenset[AccessControlEntry], new=entries) -> frozenset:
                return old | new

            try:
                await self.store.update(pattern, add)
                log.info("ACLs added to %s: %s", pattern, sorted(map(str, entries)))
            except ZkError as exc:
                code, message = ErrorCode.UNKNOWN_SERVER_ERROR, f"cannot write the ACLs: {exc}"
            for i, _ in items:
                results[i] = m.AclCreationResult(error_code=code, error_message=message)
        return m.CreateAclsResponse(throttle_time_ms=0, results=results)  # type: ignore[arg-type]

    async def delete_acls(self, request: m.DeleteAclsRequest) -> m.DeleteAclsResponse:
        outcomes = []
        for f in request.filters:
            outcomes.append(await self._delete_one(f))
        return m.DeleteAclsResponse(throttle_time_ms=0, filter_results=outcomes)

    async def _delete_one(self, f: m.DeleteAclsFilter) -> m.DeleteAclsFilterResult:
        if self.store is None:
            return _filter_result(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
        selector = filter_of(f)
        if problem := _filter_problem(selector):
            return _filter_result(ErrorCode.INVALID_REQUEST, problem)
        patterns = {b.pattern for b in self.store.authorizer.matching_bindings(selector)}
        deleted: list[AclBinding] = []
        for pattern in sorted(patterns, key=lambda p: _pattern_order((p, None))):

            def keep(old, pattern=pattern):
                return frozenset(e for e in old if not selector.matches(AclBinding(pattern, e)))

            try:
                before, after = await self.store.update(pattern, keep)
            except ZkError as exc:
                return _filter_result(
                    ErrorCode.UNKNOWN_SERVER_ERROR, f"cannot write the ACLs: {exc}"
                )
            deleted.extend(AclBinding(pattern, e) for e in sorted(before - after, key=_entry_order))
        if deleted:
            log.info("ACLs deleted: %s", [str(b) for b in deleted])
        return m.DeleteAclsFilterResult(
            error_code=0,
            error_message=None,
            matching_acls=[
                m.DeleteAclsMatchingAcl(
                    error_code=0,
                    error_message=None,
                    resource_type=b.pattern.resource_type,
                    resource_name=b.pattern.name,
                    pattern_type=b.pattern.pattern_type,
                    principal=b.entry.principal,
                    host=b.entry.host,
                    operation=b.entry.operation,
                    permission_type=b.entry.permission,
                )
                for b in deleted
            ],
        )


def _filter_result(code: ErrorCode, message: str) -> m.DeleteAclsFilterResult:
    return m.DeleteAclsFilterResult(error_code=code, error_message=message, matching_acls=[])


def _znode_problem(pattern: ResourcePattern) -> str | None:
    """A name ZooKeeper cannot hold as one znode under the type's path."""
    if "/" in pattern.name or pattern.name in (".", ".."):
        return f"a resource name cannot be {pattern.name[:100]!r} (a ZooKeeper path)"
    return None


def _entry_order(e: AccessControlEntry) -> tuple:
    return (e.principal, e.host, int(e.operation), int(e.permission))


def _pattern_order(item: tuple[ResourcePattern, object]) -> tuple:
    p = item[0]
    return (int(p.resource_type), int(p.pattern_type), p.name)
