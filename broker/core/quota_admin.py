"""The client quota admin APIs' rules (KIP-546), as Kafka 2.8's ZkAdminManager applies
them: which entity a request names, what its operations make of the entity's config,
and which entities a describe filter matches.

How it works: `entity_of(components)` turns a request's (type, name) components into a
`QuotaEntity` with ZooKeeper names (sanitized; None names the default), or a
`QuotaError` (Kafka's INVALID_REQUEST for an unknown or repeated type, an empty entity);
`apply_ops(config, ops)` applies set and remove operations to an entity's config znode
(other keys, such as a user's SCRAM credentials, kept) and checks keys and values
(byte rates are whole numbers, as Kafka's LONG configs; none may be negative);
`describe(entities, components, strict)` answers a filter over every entity's quotas.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from broker.core.quota_entities import (
    CLIENT_ID,
    DEFAULT,
    QUOTA_KEYS,
    REQUEST_PERCENTAGE,
    USER,
    QuotaEntity,
)
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from server_common.zkdata import desanitize_entity_name, sanitize_entity_name


@dataclass(frozen=True, slots=True)
class QuotaError:
    code: ErrorCode
    message: str


def entity_of(components: list[m.ClientQuotaEntityComponent]) -> QuotaEntity | QuotaError:
    names: dict[str, str | None] = {}
    for component in components:
        if component.entity_type not in (USER, CLIENT_ID):
            return QuotaError(
                ErrorCode.INVALID_REQUEST,
                f"Unhandled client quota entity type: {component.entity_type[:100]}",
            )
        if component.entity_type in names:
            return QuotaError(
                ErrorCode.INVALID_REQUEST,
                f"Duplicate {component.entity_type} found in request",
            )
        if component.entity_name is not None and component.entity_name == "":
            return QuotaError(ErrorCode.INVALID_REQUEST, "Empty entity name")
        names[component.entity_type] = component.entity_name
    if not names:
        return QuotaError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")

    def zk_name(entity_type: str) -> str | None:
        if entity_type not in names:
            return None
        name = names[entity_type]
        return DEFAULT if name is None else sanitize_entity_name(name)

    return QuotaEntity(zk_name(USER), zk_name(CLIENT_ID))


def components_of(entity: QuotaEntity) -> list[m.ClientQuotaEntityComponent]:
    """The KIP-546 components of an entity (None names the default)."""

    def name(zk_name: str) -> str | None:
        return None if zk_name == DEFAULT else desanitize_entity_name(zk_name)

    components = []
    if entity.user is not None:
        components.append(
            m.ClientQuotaEntityComponent(entity_type=USER, entity_name=name(entity.user))
        )
    if entity.client_id is not None:
        components.append(
            m.ClientQuotaEntityComponent(entity_type=CLIENT_ID, entity_name=name(entity.client_id))
        )
    return components


def apply_ops(config: Mapping[str, str], ops: list[m.ClientQuotaOp]) -> dict[str, str] | QuotaError:
    """The entity's config after `ops`, or why they cannot apply."""
    new = dict(config)
    seen: set[str] = set()
    for op in ops:
        if op.key not in QUOTA_KEYS:
            return QuotaError(
                ErrorCode.INVALID_REQUEST, f"Invalid configuration key {op.key[:100]}"
            )
        if op.key in seen:
            return QuotaError(ErrorCode.INVALID_REQUEST, f"Duplicate quota key {op.key}")
        seen.add(op.key)
        if op.remove:
            new.pop(op.key, None)
            continue
        value = op.value
        if not math.isfinite(value) or value < 0:
            return QuotaError(
                ErrorCode.INVALID_REQUEST, f"Configuration {op.key} must be a positive number"
            )
        if op.key == REQUEST_PERCENTAGE:
            new[op.key] = repr(float(value))
        else:
            if value != int(value):
                return QuotaError(
                    ErrorCode.INVALID_REQUEST, f"Configuration {op.key} must be a Long value"
                )
            new[op.key] = str(int(value))
    return new


def _matches(entity: QuotaEntity, component: m.DescribeClientQuotasComponent) -> bool:
    zk_name = entity.user if component.entity_type == USER else entity.client_id
    if zk_name is None:
        return False
    if component.match_type == m.MATCH_DEFAULT:
        return zk_name == DEFAULT
    if component.match_type == m.MATCH_EXACT:
        return zk_name != DEFAULT and zk_name == sanitize_entity_name(component.match or "")
    return True  # MATCH_ANY: any entity that names this type


def check_filter(components: list[m.DescribeClientQuotasComponent]) -> QuotaError | None:
    seen: set[str] = set()
    for component in components:
        if component.entity_type not in (USER, CLIENT_ID):
            return QuotaError(
                ErrorCode.INVALID_REQUEST,
                f"Custom entity type {component.entity_type[:100]} not supported",
            )
        if component.entity_type in seen:
            return QuotaError(
                ErrorCode.INVALID_REQUEST, f"Duplicate {component.entity_type} filter component"
            )
        if component.match_type not in (m.MATCH_EXACT, m.MATCH_DEFAULT, m.MATCH_ANY):
            return QuotaError(ErrorCode.INVALID_REQUEST, "Unknown match type")
        if component.match_type == m.MATCH_EXACT and component.match is None:
            return QuotaError(ErrorCode.INVALID_REQUEST, "Exact match needs a name")
        seen.add(component.entity_type)
    return None


def describe(
    entities: Mapping[QuotaEntity, Mapping[str, float]],
    components: list[m.DescribeClientQuotasComponent],
    strict: bool,
) -> list[m.DescribeClientQuotasEntry]:
    """The entries of the entities (with quotas) that the filter matches."""
    wanted = {c.entity_type for c in components}
    entries = []
    for entity in sorted(entities, key=lambda e: (e.user or "", e.client_id or "")):
        values = entities[entity]
        if not values:
            continue
        if not all(_matches(entity, c) for c in components):
            continue
        if strict:
            has = {t for t, n in ((USER, entity.user), (CLIENT_ID, entity.client_id)) if n}
            if has != wanted:
                continue
        entries.append(
            m.DescribeClientQuotasEntry(
                entity=components_of(entity),
                values=[
                    m.ClientQuotaValue(key=key, value=float(values[key]))
                    for key in QUOTA_KEYS
                    if key in values
                ],
            )
        )
    return entries
