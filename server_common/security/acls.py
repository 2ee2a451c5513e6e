"""ACLs and the authorizer's decision: Kafka 2.8 AclAuthorizer's rules, sans-IO.

How it works: an ACL binds a `ResourcePattern` (a resource type, a name, and whether the
name is LITERAL, the literal "*" meaning every resource of the type, or a PREFIXED one)
to an `AccessControlEntry` (principal "User:bob" or "User:*", host "*" or an address,
operation, Allow or Deny). `AclAuthorizer` holds every ACL (the ZooKeeper shell,
broker/zookeeper/acls.py, feeds it with `set_acls`) and answers `authorize(principal,
host, operation, resource_type, name)` as AclAuthorizer.authorizeAction does:

- a principal named in `super.users` may do anything;
- the ACLs that apply are those on the literal name, on the literal "*" of the type and
  on every prefix of the name; with none of them, the answer is
  `allow.everyone.if.no.acl.found` (default false);
- a matching Deny (same operation or All, principal or User:*, host or "*") refuses;
- otherwise a matching Allow grants: for Describe an Allow of Read, Write, Delete or
  Alter also counts, for DescribeConfigs an Allow of AlterConfigs (Kafka's implied
  operations).

Filters (`AclBindingFilter`) select bindings as Kafka's ResourcePatternFilter and
AccessControlEntryFilter do for DescribeAcls and DeleteAcls (ANY, and MATCH: every
pattern that would apply to the named resource). The enum values are Kafka's wire codes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from client.protocol.acl_types import AclOperation, PatternType, PermissionType, ResourceType

__all__ = [
    "CLUSTER_NAME",
    "AccessControlEntry",
    "AclAuthorizer",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "PatternType",
    "PermissionType",
    "ResourcePattern",
    "ResourceType",
]

WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"


# The resource types, pattern types, operations and permissions an ACL may hold.
CONCRETE_RESOURCE_TYPES = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)
CONCRETE_OPERATIONS = tuple(op for op in AclOperation if op >= AclOperation.ALL)

# An Allow of any of these operations also allows the key (AclAuthorizer.authorizeAction).
IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str  # "User:bob", or "User:*" for every user
    host: str  # an address, or "*"
    operation: AclOperation
    permission: PermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


def validate_binding(binding: AclBinding) -> str | None:
    """Why this binding cannot be stored (Kafka's CreateAcls checks), or None."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type not in CONCRETE_RESOURCE_TYPES:
        return f"resource type {pattern.resource_type.name} cannot hold an ACL"
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"pattern type {pattern.pattern_type.name} cannot hold an ACL"
    if not pattern.name:
        return "the resource name is empty"
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"the cluster resource is named {CLUSTER_NAME!r}"
    if entry.operation not in CONCRETE_OPERATIONS:
        return f"operation {entry.operation.name} cannot be granted"
    if entry.permission not in (PermissionType.ALLOW, PermissionType.DENY):
        return f"permission {entry.permission.name} is neither Allow nor Deny"
    principal_type, sep, name = entry.principal.partition(":")
    if not sep or not principal_type or not name:
        return f"not a principal (TYPE:name): {entry.principal[:100]!r}"
    if not entry.host:
        return "the host is empty"
    return None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls/DeleteAcls select: None (or ANY) matches anything."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: PermissionType = PermissionType.ANY

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        """Kafka's ResourcePatternFilter.matches."""
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:  # MATCH
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        return self.name.startswith(pattern.name)  # MATCH against PREFIXED

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        """Kafka's AccessControlEntryFilter.matches."""
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission in (PermissionType.ANY, entry.permission)
        )

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)


def parse_super_users(value: str) -> frozenset[str]:
    """`super.users`: principals separated by semicolons ("User:a;User:b")."""
    return frozenset(p.strip() for p in value.split(";") if p.strip())


class AclAuthorizer:
    """Every ACL, and the decision of AclAuthorizer.authorizeAction over them."""

    def __init__(
        self, super_users: Iterable[str] = (), *, allow_everyone_if_no_acl_found: bool = False
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        # (type, pattern type) -> name -> entries; one dict per kind keeps the lookups
        # of one decision to a handful of dict probes.
        self._acls: dict[tuple[ResourceType, PatternType], dict[str, frozenset]] = {}

    # -- the cache -------------------------------------------------------------------
    def set_acls(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """Replace what `pattern` holds (an empty set removes it)."""
        by_name = self._acls.setdefault((pattern.resource_type, pattern.pattern_type), {})
        frozen = frozenset(entries)
        if frozen:
            by_name[pattern.name] = frozen
        else:
            by_name.pop(pattern.name, None)

    def acls_of(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        return self._acls.get((pattern.resource_type, pattern.pattern_type), {}).get(
            pattern.name, frozenset()
        )

    def bindings(self) -> Iterator[AclBinding]:
        for (rtype, ptype), by_name in self._acls.items():
            for name, entries in by_name.items():
                pattern = ResourcePattern(rtype, name, ptype)
                for entry in entries:
                    yield AclBinding(pattern, entry)

    def matching_bindings(self, selector: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self.bindings() if selector.matches(b)]

    # -- the decision ----------------------------------------------------------------
    def matching_acls(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """Every entry that applies to the resource: literal name, literal "*", prefixes."""
        found: list[AccessControlEntry] = []
        literal = self._acls.get((resource_type, PatternType.LITERAL), {})
        found.extend(literal.get(name, ()))
        if name != WILDCARD_RESOURCE:
            found.extend(literal.get(WILDCARD_RESOURCE, ()))
        prefixed = self._acls.get((resource_type, PatternType.PREFIXED))
        if prefixed:
            for end in range(1, len(name) + 1):
                found.extend(prefixed.get(name[:end], ()))
        return found

    def is_super_user(self, principal: str) -> bool:
        return principal in self.super_users

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        acls = self.matching_acls(resource_type, name)
        if not acls:
            return self.allow_everyone_if_no_acl_found
        if _any_match(acls, principal, host, {operation}, PermissionType.DENY):
            return False
        allowing = IMPLIED_BY.get(operation, frozenset({operation}))
        return _any_match(acls, principal, host, allowing, PermissionType.ALLOW)

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """May the principal do `operation` on some resource of the type? (Kafka 3.0's
        Authorizer.authorizeByResourceType, KIP-679: an allow on a literal name, on "*"
        or on a prefix that no deny on the same name, on "*" or on a shorter prefix
        shadows.)"""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True  # super users, and allow.everyone.if.no.acl.found with no ACL
        patterns: dict[tuple[PermissionType, PatternType], set[str]] = {}
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            for name, entries in self._acls.get((resource_type, pattern_type), {}).items():
                for e in entries:
                    if (
                        e.principal in (principal, WILDCARD_PRINCIPAL)
                        and e.host in (host, WILDCARD_HOST)
                        and e.operation in (operation, AclOperation.ALL)
                    ):
                        patterns.setdefault((e.permission, pattern_type), set()).add(name)
        deny_literal = patterns.get((PermissionType.DENY, PatternType.LITERAL), set())
        deny_prefixed = patterns.get((PermissionType.DENY, PatternType.PREFIXED), set())
        allow_literal = patterns.get((PermissionType.ALLOW, PatternType.LITERAL), set())
        allow_prefixed = patterns.get((PermissionType.ALLOW, PatternType.PREFIXED), set())
        if WILDCARD_RESOURCE in deny_literal:
            return False
        if WILDCARD_RESOURCE in allow_literal:
            return True
        for name in allow_literal:
            if name not in deny_literal and not any(name.startswith(d) for d in deny_prefixed):
                return True
        return any(not any(name.startswith(d) for d in deny_prefixed) for name in allow_prefixed)


def _any_match(
    acls: list[AccessControlEntry],
    principal: str,
    host: str,
    operations: Iterable[AclOperation],
    permission: PermissionType,
) -> bool:
    ops = set(operations)
    return any(
        acl.permission == permission
        and (acl.principal == principal or acl.principal == WILDCARD_PRINCIPAL)
        and (acl.operation in ops or acl.operation == AclOperation.ALL)
        and (acl.host == host or acl.host == WILDCARD_HOST)
        for acl in acls
    )
