"""Kafka's DescribeClientQuotas and AlterClientQuotas (KIP-546) on the Kafka listener,
translated to and from the native handlers (broker/handlers/quotas.py).

How it works: as in translate_users.py, `to_native` reads the kio request into the
native message, the native handler does the work (Kafka 2.8's checks, ZooKeeper writes,
change notifications) and `from_native` describes the answer for `translation.build`.
The native messages mirror Kafka's field for field, so each maps one to one; an error
answer of Alter gives every entry of the request the code. Versions 0 and 1 (1 is
the flexible encoding of the same fields), as Kafka 2.8.
"""

from __future__ import annotations

from typing import Any

from broker.kafka.translation import KafkaHeader, Translation, build, response_class
from client.protocol import messages as m
from client.protocol.api import ApiKey


def _response(api_key: int, version: int, **values: Any) -> Any:
    values.setdefault("throttle_time", 0)
    return build(response_class(api_key, version), **values)


def _entity(components: Any) -> list[m.ClientQuotaEntityComponent]:
    return [
        m.ClientQuotaEntityComponent(entity_type=c.entity_type, entity_name=c.entity_name)
        for c in components
    ]


def _entity_values(components: list[m.ClientQuotaEntityComponent]) -> list[dict[str, Any]]:
    return [{"entity_type": c.entity_type, "entity_name": c.entity_name} for c in components]


# --- DescribeClientQuotas (48) --------------------------------------------------------------


def describe_to_native(request: Any, header: KafkaHeader) -> m.DescribeClientQuotasRequest:
    return m.DescribeClientQuotasRequest(
        components=[
            m.DescribeClientQuotasComponent(
                entity_type=c.entity_type, match_type=int(c.match_type), match=c.match
            )
            for c in request.components
        ],
        strict=bool(request.strict),
    )


def describe_from_native(response: m.DescribeClientQuotasResponse, version: int) -> Any:
    return _response(
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        version,
        error_code=response.error_code,
        error_message=response.error_message,
        entries=None
        if response.entries is None
        else [
            {
                "entity": _entity_values(e.entity),
                "values": [{"key": v.key, "value": float(v.value)} for v in e.values],
            }
            for e in response.entries
        ],
    )


def describe_error(request: Any, version: int, code: int) -> Any:
    return _response(
        ApiKey.DESCRIBE_CLIENT_QUOTAS, version, error_code=code, error_message=None, entries=None
    )


# --- AlterClientQuotas (49) -----------------------------------------------------------------


def alter_to_native(request: Any, header: KafkaHeader) -> m.AlterClientQuotasRequest:
    return m.AlterClientQuotasRequest(
        entries=[
            m.AlterClientQuotasEntry(
                entity=_entity(e.entity),
                ops=[
                    m.ClientQuotaOp(key=o.key, value=float(o.value), remove=bool(o.remove))
                    for o in e.ops
                ],
            )
            for e in request.entries
        ],
        validate_only=bool(request.validate_only),
    )


def alter_from_native(response: m.AlterClientQuotasResponse, version: int) -> Any:
    return _response(
        ApiKey.ALTER_CLIENT_QUOTAS,
        version,
        entries=[
            {
                "error_code": r.error_code,
                "error_message": r.error_message,
                "entity": _entity_values(r.entity),
            }
            for r in response.entries
        ],
    )


def alter_error(request: Any, version: int, code: int) -> Any:
    return _response(
        ApiKey.ALTER_CLIENT_QUOTAS,
        version,
        entries=[
            {
                "error_code": code,
                "error_message": None,
                "entity": [
                    {"entity_type": c.entity_type, "entity_name": c.entity_name} for c in e.entity
                ],
            }
            for e in request.entries
        ],
    )


TRANSLATIONS: dict[int, Translation] = {
    int(t.api_key): t
    for t in [
        Translation(
            ApiKey.DESCRIBE_CLIENT_QUOTAS,
            0,
            1,
            describe_to_native,
            describe_from_native,
            describe_error,
        ),
        Translation(
            ApiKey.ALTER_CLIENT_QUOTAS, 0, 1, alter_to_native, alter_from_native, alter_error
        ),
    ]
}
