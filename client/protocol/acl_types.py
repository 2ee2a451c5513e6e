"""ACL resource types, pattern types, operations and permissions: Kafka's wire codes and
the names AclAuthorizer writes ("Topic", "TransactionalId", "Read", "ClusterAction").

How it works: each is an IntEnum of Kafka's codes (ResourceType, PatternType,
AclOperation, AclPermissionType in org.apache.kafka.common); `.title` is the name Kafka
stores in ZooKeeper and shows, `parse` reads any spelling of it back ("cluster_action",
"ClusterAction", "CLUSTER_ACTION"). Shared by the broker's authorizer and the clients.
"""

from __future__ import annotations

import enum


class _Named(enum.IntEnum):
    """An enum with Kafka's wire codes and its AclAuthorizer names ("Topic", "Read")."""

    @property
    def title(self) -> str:
        return _TITLES.get(self.name, "".join(w.capitalize() for w in self.name.split("_")))

    @classmethod
    def parse(cls, text: str):
        """From "Topic", "TOPIC", "topic", "cluster_action" or "ClusterAction"."""
        key = text.replace("-", "").replace("_", "").upper()
        for member in cls:
            if member.name.replace("_", "") == key:
                return member
        raise ValueError(f"unknown {cls.__name__}: {text[:100]!r}")


_TITLES = {"TRANSACTIONAL_ID": "TransactionalId"}


class ResourceType(_Named):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6


class PatternType(_Named):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_Named):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class PermissionType(_Named):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3
