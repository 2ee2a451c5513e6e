"""Client quotas (KIP-546): DescribeClientQuotas and AlterClientQuotas.

How it works: messages declared with `schema.struct` (the conventions are in the package
docstring), field for field Kafka's. An entity is a list of (entity type, name)
components: `user` and/or `client-id`, a name of None meaning the default
(`<default>`). A describe filter component matches a type's exact name
(`MATCH_EXACT`), its default (`MATCH_DEFAULT`) or any name but the default's absence
(`MATCH_ANY`, any entity that names that type); `strict` asks for entities with no
other component. Quota values are numbers (`producer_byte_rate`, `consumer_byte_rate`,
`request_percentage`). Any broker serves both: it reads and writes /config/users and
/config/clients in ZooKeeper, as Kafka 2.8's brokers do.
"""

from __future__ import annotations

from client.protocol.schema import empty_list, struct

# KIP-546's match types of a filter component.
MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_ANY = 2


@struct
class ClientQuotaEntityComponent:
    entity_type: str  # "user" or "client-id"
    entity_name: str | None  # None: the default entity of that type


# --- DescribeClientQuotas (48) -------------------------------------------------------------


@struct
class DescribeClientQuotasComponent:
    entity_type: str
    match_type: int
    match: str | None = None


@struct
class DescribeClientQuotasRequest:
    components: list[DescribeClientQuotasComponent]
    strict: bool = False


@struct
class ClientQuotaValue:
    key: str
    value: float


@struct
class DescribeClientQuotasEntry:
    entity: list[ClientQuotaEntityComponent]
    values: list[ClientQuotaValue]


@struct
class DescribeClientQuotasResponse:
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    entries: list[DescribeClientQuotasEntry] | None = None


# --- AlterClientQuotas (49) ----------------------------------------------------------------


@struct
class ClientQuotaOp:
    key: str
    value: float = 0.0
    remove: bool = False


@struct
class AlterClientQuotasEntry:
    entity: list[ClientQuotaEntityComponent]
    ops: list[ClientQuotaOp] = empty_list()


@struct
class AlterClientQuotasRequest:
    entries: list[AlterClientQuotasEntry]
    validate_only: bool = False


@struct
class AlterClientQuotasResult:
    error_code: int
    error_message: str | None
    entity: list[ClientQuotaEntityComponent]


@struct
class AlterClientQuotasResponse:
    throttle_time_ms: int
    entries: list[AlterClientQuotasResult]
