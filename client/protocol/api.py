"""API keys and the registry of (api key, version) -> request and response classes.

How it works: `ApiKey` holds Kafka's numbers for the APIs Tributary speaks. An
`ApiRegistry` is built from `ApiSpec` entries (`messages/registry.py` builds the
project's one, `messages.REGISTRY`); the codec asks it which classes decode a request
header's (api_key, api_version), and clients ask it which version to send. For a pair it does not
know `spec()` returns None; the codec turns that into `UnsupportedApiError`, which the
broker answers with UNSUPPORTED_VERSION.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from enum import IntEnum


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22  # the idempotent producer (KIP-98, no transactions)
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    # Tributary's own, outside Kafka's numbering: an on-demand scrub of a broker's logs.
    VERIFY_LOG_DIRS = 1017


@dataclasses.dataclass(frozen=True, slots=True)
class ApiSpec:
    """One version of one API: the classes its request and response decode into."""

    api_key: ApiKey
    version: int
    request_type: type[object]
    response_type: type[object]


@dataclasses.dataclass(frozen=True, slots=True)
class VersionRange:
    min_version: int
    max_version: int


class ApiRegistry:
    """Lookup of API specs by (api_key, version) and by request class."""

    def __init__(self, specs: Iterable[ApiSpec]) -> None:
        self._by_key_version: dict[tuple[int, int], ApiSpec] = {}
        self._versions: dict[ApiKey, list[int]] = {}
        self._api_of_type: dict[type, ApiKey] = {}
        for spec in specs:
            pair = (int(spec.api_key), spec.version)
            if pair in self._by_key_version:
                raise ValueError(f"duplicate registration of {spec.api_key.name} v{spec.version}")
            self._by_key_version[pair] = spec
            self._versions.setdefault(spec.api_key, []).append(spec.version)
            for message_type in (spec.request_type, spec.response_type):
                known = self._api_of_type.setdefault(message_type, spec.api_key)
                if known is not spec.api_key:
                    raise ValueError(f"{message_type.__name__} registered for two APIs")

    def spec(self, api_key: int, version: int) -> ApiSpec | None:
        return self._by_key_version.get((api_key, version))

    def version_range(self, api_key: int) -> VersionRange | None:
        try:
            versions = self._versions[ApiKey(api_key)]
        except (ValueError, KeyError):
            return None
        return VersionRange(min(versions), max(versions))

    def supported(self) -> dict[ApiKey, VersionRange]:
        """Every API with its version range, in api key order (for ApiVersions)."""
        return {
            key: VersionRange(min(versions), max(versions))
            for key, versions in sorted(self._versions.items())
        }

    def api_key_of(self, message_type: type) -> ApiKey:
        """The API a request or response class belongs to (TypeError if not registered)."""
        try:
            return self._api_of_type[message_type]
        except KeyError:
            raise TypeError(f"{message_type.__name__} is not a registered message") from None

    def latest_version(self, api_key: ApiKey) -> int:
        return max(self._versions[api_key])
