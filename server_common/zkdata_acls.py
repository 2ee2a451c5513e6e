"""The ACL znodes, as Kafka 2.8's AclAuthorizer writes them (ZkData.scala, AclEntry.scala).

Pure functions from values to (path, bytes) and back:
- a literal pattern's ACLs live in `/kafka-acl/<ResourceType>/<name>` ("Topic", "Group",
  "Cluster", "TransactionalId"), a prefixed one's in
  `/kafka-acl-extended/prefixed/<ResourceType>/<name>`, as
  `{"version":1,"acls":[{"principal":"User:bob","permissionType":"Allow",
  "operation":"Read","host":"*"}]}`;
- a change is announced by a sequential `acl_changes_<seq>` znode: under
  `/kafka-acl-changes` for a literal pattern, holding `<RESOURCE_TYPE>:<name>` (Kafka
  2.8 writes the Java enum's name, "TOPIC:orders", and reads any case back), under
  `/kafka-acl-extended-changes` for a prefixed one, holding
  `{"version":1,"resourceType":"TOPIC","name":"ord","patternType":"PREFIXED"}`.
Decoders raise `ZkDataError` for malformed znodes.
"""

from __future__ import annotations

import json

from server_common.security.acls import (
    AccessControlEntry,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from server_common.zkdata import ZkDataError

KAFKA_ACL = "/kafka-acl"
KAFKA_ACL_EXTENDED = "/kafka-acl-extended"
KAFKA_ACL_PREFIXED = f"{KAFKA_ACL_EXTENDED}/prefixed"
KAFKA_ACL_CHANGES = "/kafka-acl-changes"
KAFKA_ACL_EXTENDED_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"

# The root of each stored pattern type, and where its changes are announced.
ACL_ROOTS = {PatternType.LITERAL: KAFKA_ACL, PatternType.PREFIXED: KAFKA_ACL_PREFIXED}
CHANGE_ROOTS = {
    PatternType.LITERAL: KAFKA_ACL_CHANGES,
    PatternType.PREFIXED: KAFKA_ACL_EXTENDED_CHANGES,
}
# Paths a broker makes sure of before it watches (Kafka's ZkAclStore.securePaths).
ACL_PATHS = (KAFKA_ACL, KAFKA_ACL_PREFIXED, KAFKA_ACL_CHANGES, KAFKA_ACL_EXTENDED_CHANGES)


def acl_path(pattern: ResourcePattern) -> str:
    root = ACL_ROOTS.get(pattern.pattern_type)
    if root is None:
        raise ValueError(f"pattern type {pattern.pattern_type.name} is not stored")
    return f"{root}/{pattern.resource_type.title}/{pattern.name}"


def encode_acls(entries: frozenset[AccessControlEntry] | set[AccessControlEntry]) -> bytes:
    acls = [
        {
            "principal": e.principal,
            "permissionType": e.permission.title,
            "operation": e.operation.title,
            "host": e.host,
        }
        for e in sorted(entries, key=lambda e: (e.principal, e.permission, e.operation, e.host))
    ]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_acls(path: str, data: bytes | None) -> frozenset[AccessControlEntry]:
    if not data:
        return frozenset()
    try:
        value = json.loads(data.decode("utf-8"))
        found = set()
        for item in value["acls"]:
            found.add(
                AccessControlEntry(
                    principal=_string(item["principal"]),
                    host=_string(item["host"]),
                    operation=AclOperation.parse(_string(item["operation"])),
                    permission=PermissionType.parse(_string(item["permissionType"])),
                )
            )
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise ZkDataError(f"{path}: not an ACL list ({exc})") from None
    return frozenset(found)


def encode_acl_change(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(the sequential znode to create, its data) announcing a change of `pattern`."""
    prefix = f"{CHANGE_ROOTS[pattern.pattern_type]}/{ACL_CHANGE_PREFIX}"
    rtype = pattern.resource_type.name
    if pattern.pattern_type == PatternType.LITERAL:
        return prefix, f"{rtype}:{pattern.name}".encode()
    event = {
        "version": 1,
        "resourceType": rtype,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return prefix, json.dumps(event, separators=(",", ":")).encode()


def decode_acl_change(path: str, data: bytes | None, literal: bool) -> ResourcePattern:
    """The pattern a notification names (`literal`: it is under /kafka-acl-changes)."""
    try:
        text = (data or b"").decode("utf-8")
        if literal:
            rtype, sep, name = text.partition(":")
            if not sep or not name:
                raise ValueError("expected ResourceType:name")
            return ResourcePattern(ResourceType.parse(rtype), name, PatternType.LITERAL)
        event = json.loads(text)
        if event.get("version", 1) > 1:
            raise ValueError(f"version {event.get('version')}")
        return ResourcePattern(
            ResourceType.parse(_string(event["resourceType"])),
            _string(event["name"]),
            PatternType.parse(_string(event["patternType"])),
        )
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ZkDataError(f"{path}: not an ACL change ({exc})") from None


def acl_change_sequence(name: str) -> int | None:
    digits = name.removeprefix(ACL_CHANGE_PREFIX)
    return int(digits) if name.startswith(ACL_CHANGE_PREFIX) and digits.isdigit() else None


def _string(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value
