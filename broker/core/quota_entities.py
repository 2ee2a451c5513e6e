"""Client quota entities and which one applies to a (user, client-id), as Kafka 2.8.

How it works: a quota entity is a user, a client-id, or both; either part may be the
default (`<default>`, Kafka's ConfigEntityName.Default). Entities are keyed as
`QuotaEntity(user, client_id)` with the parts' ZooKeeper names (Kafka's Sanitizer for
users and client-ids, `DEFAULT` for the default) and None for a part not named, so the
key of `/config/users/alice/clients/<default>` is `QuotaEntity("alice", "<default>")`.

`QuotaConfigs` holds every entity's quota values (`producer_byte_rate`,
`consumer_byte_rate`, `request_percentage`); `find(quota, user, client_id)` answers for
one quota type, in Kafka's order of precedence (DefaultQuotaCallback):

1. /config/users/<user>/clients/<client-id>
2. /config/users/<user>/clients/<default>
3. /config/users/<user>
4. /config/users/<default>/clients/<client-id>
5. /config/users/<default>/clients/<default>
6. /config/users/<default>
7. /config/clients/<client-id>
8. /config/clients/<default>

with the metric tags of what it found: a quota of a user (or the default user) is shared
by all the user's client-ids (tags user, ""), one of a client-id by all users of that
client-id ("", client-id), one of both by that pair; without any quota the tags are
("", client-id) and the rate is unbounded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from server_common.zkdata import sanitize_entity_name

DEFAULT = "<default>"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)
# Kafka's names of the entity types (ClientQuotaEntity / kafka-configs.sh).
USER, CLIENT_ID = "user", "client-id"


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """A quota entity by the ZooKeeper names of its parts (None: that part not named)."""

    user: str | None = None
    client_id: str | None = None

    def path(self) -> str:
        """The entity path of /config/<path> and of its change notification."""
        if self.user is not None and self.client_id is not None:
            return f"users/{self.user}/clients/{self.client_id}"
        if self.user is not None:
            return f"users/{self.user}"
        if self.client_id is not None:
            return f"clients/{self.client_id}"
        raise ValueError("a quota entity names a user, a client-id or both")

    @classmethod
    def from_path(cls, path: str) -> QuotaEntity | None:
        """`users/u`, `users/u/clients/c` or `clients/c`; None for anything else."""
        parts = path.split("/")
        if len(parts) == 2 and parts[0] == "users" and parts[1]:
            return cls(user=parts[1])
        if len(parts) == 2 and parts[0] == "clients" and parts[1]:
            return cls(client_id=parts[1])
        if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
            if parts[1] and parts[3]:
                return cls(user=parts[1], client_id=parts[3])
        return None


@dataclass(frozen=True, slots=True)
class QuotaMatch:
    """The quota that applies (math.inf: none) and the metric tags it is counted under."""

    bound: float
    user_tag: str
    client_tag: str
    entity: QuotaEntity | None


def quota_values(config: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of an entity's config znode (others, e.g. SCRAM credentials, and
    values that are not numbers are left out)."""
    values: dict[str, float] = {}
    for key in QUOTA_KEYS:
        text = config.get(key)
        if text is None:
            continue
        try:
            value = float(text)
        except ValueError:
            continue
        if math.isfinite(value) and value >= 0:
            values[key] = value
    return values


def precedence(user: str, client_id: str) -> list[QuotaEntity]:
    """The eight entities that may apply to (sanitized user, sanitized client-id), most
    specific first."""
    return [
        QuotaEntity(user, client_id),
        QuotaEntity(user, DEFAULT),
        QuotaEntity(user, None),
        QuotaEntity(DEFAULT, client_id),
        QuotaEntity(DEFAULT, DEFAULT),
        QuotaEntity(DEFAULT, None),
        QuotaEntity(None, client_id),
        QuotaEntity(None, DEFAULT),
    ]


class QuotaConfigs:
    """Every entity's quotas, as ZooKeeper holds them."""

    def __init__(self) -> None:
        self._entities: dict[QuotaEntity, dict[str, float]] = {}
        self.version = 0  # bumped by every change (callers may cache on it)

    def set(self, entity: QuotaEntity, config: Mapping[str, str]) -> None:
        """An entity's config znode now (its quota keys; none: the entity is gone)."""
        values = quota_values(config)
        if values:
            self._entities[entity] = values
        else:
            self._entities.pop(entity, None)
        self.version += 1

    def replace_all(self, configs: Mapping[QuotaEntity, Mapping[str, str]]) -> None:
        self._entities = {}
        for entity, config in configs.items():
            if values := quota_values(config):
                self._entities[entity] = values
        self.version += 1

    def entities(self) -> dict[QuotaEntity, dict[str, float]]:
        return {entity: dict(values) for entity, values in self._entities.items()}

    def find(self, quota: str, user: str, client_id: str) -> QuotaMatch:
        """The `quota` that applies to `user` (a principal's name) and `client_id`."""
        sanitized_user = sanitize_entity_name(user)
        sanitized_client = sanitize_entity_name(client_id)
        for entity in precedence(sanitized_user, sanitized_client):
            bound = self._entities.get(entity, {}).get(quota)
            if bound is None:
                continue
            user_tag = user if entity.user is not None else ""
            client_tag = client_id if entity.client_id is not None else ""
            return QuotaMatch(bound, user_tag, client_tag, entity)
        return QuotaMatch(math.inf, "", client_id, None)
