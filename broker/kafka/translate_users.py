"""Kafka's DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554) on the
Kafka listener, translated to and from the native handlers (broker/handlers/users.py).

How it works: as in translate_configs.py, `to_native` reads the kio request into the
native message, the native handler does the work (Kafka 2.8's checks, ZooKeeper writes,
change notifications) and `from_native` describes the answer for `translation.build`.
The native messages mirror Kafka's field for field, so each maps one to one; an error
answer gives every user of the request the code. Both APIs have only version 0 (flexible).
"""

from __future__ import annotations

from typing import Any

from broker.kafka.translation import KafkaHeader, Translation, build, response_class
from client.protocol import messages as m
from client.protocol.api import ApiKey


def _response(api_key: int, version: int, **values: Any) -> Any:
    values.setdefault("throttle_time", 0)
    return build(response_class(api_key, version), **values)


# --- DescribeUserScramCredentials (50) ------------------------------------------------------


def describe_to_native(request: Any, header: KafkaHeader) -> m.DescribeUserScramCredentialsRequest:
    users = request.users
    return m.DescribeUserScramCredentialsRequest(
        users=None
        if users is None
        else [m.DescribeUserScramCredentialsUser(name=u.name) for u in users]
    )


def describe_from_native(response: m.DescribeUserScramCredentialsResponse, version: int) -> Any:
    return _response(
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        version,
        error_code=response.error_code,
        error_message=response.error_message,
        results=[
            {
                "user": r.user,
                "error_code": r.error_code,
                "error_message": r.error_message,
                "credential_infos": [
                    {"mechanism": c.mechanism, "iterations": c.iterations}
                    for c in r.credential_infos
                ],
            }
            for r in response.results
        ],
    )


def describe_error(request: Any, version: int, code: int) -> Any:
    return _response(
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        version,
        error_code=code,
        error_message=None,
        results=[],
    )


# --- AlterUserScramCredentials (51) ---------------------------------------------------------


def alter_to_native(request: Any, header: KafkaHeader) -> m.AlterUserScramCredentialsRequest:
    return m.AlterUserScramCredentialsRequest(
        deletions=[
            m.ScramCredentialDeletion(name=d.name, mechanism=int(d.mechanism))
            for d in request.deletions
        ],
        upsertions=[
            m.ScramCredentialUpsertion(
                name=u.name,
                mechanism=int(u.mechanism),
                iterations=int(u.iterations),
                salt=bytes(u.salt),
                salted_password=bytes(u.salted_password),
            )
            for u in request.upsertions
        ],
    )


def alter_from_native(response: m.AlterUserScramCredentialsResponse, version: int) -> Any:
    return _response(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        version,
        results=[
            {"user": r.user, "error_code": r.error_code, "error_message": r.error_message}
            for r in response.results
        ],
    )


def alter_error(request: Any, version: int, code: int) -> Any:
    users = [d.name for d in request.deletions] + [u.name for u in request.upsertions]
    return _response(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        version,
        results=[
            {"user": user, "error_code": code, "error_message": None}
            for user in dict.fromkeys(users)
        ],
    )


TRANSLATIONS: dict[int, Translation] = {
    int(t.api_key): t
    for t in [
        Translation(
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
            0,
            0,
            describe_to_native,
            describe_from_native,
            describe_error,
        ),
        Translation(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
            0,
            0,
            alter_to_native,
            alter_from_native,
            alter_error,
        ),
    ]
}
