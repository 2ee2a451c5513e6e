"""Kafka's SaslHandshake (v1) and SaslAuthenticate (v0-2) on the Kafka listener,
translated to and from the native messages the connection's SASL gate answers
(server_common/security/sasl_gate.py).

How it works: both map one to one. SaslHandshake v0 is advertised (librdkafka only
tries SASL with a broker whose SaslHandshake range includes v0) but not served: after a
v0 handshake Kafka's clients send the mechanism's tokens as bare size-prefixed frames
instead of SaslAuthenticate requests; librdkafka, the Java client, kafka-python and
aiokafka all use v1 with a broker that advertises it, and a v0 request is answered
UNSUPPORTED_VERSION.
"""

from __future__ import annotations

from typing import Any

from broker.kafka.translation import (
    KafkaHeader,
    KafkaRequestError,
    Translation,
    build,
    response_class,
)
from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.errors import ErrorCode


def handshake_to_native(request: Any, header: KafkaHeader) -> m.SaslHandshakeRequest:
    if header.api_version == 0:
        raise KafkaRequestError(ErrorCode.UNSUPPORTED_VERSION, "SaslHandshake v0 (raw tokens)")
    return m.SaslHandshakeRequest(mechanism=request.mechanism)


def handshake_from_native(response: m.SaslHandshakeResponse, version: int) -> Any:
    return build(
        response_class(ApiKey.SASL_HANDSHAKE, version),
        error_code=response.error_code,
        mechanisms=tuple(response.mechanisms),
    )


def handshake_error(request: Any, version: int, code: int) -> Any:
    return build(response_class(ApiKey.SASL_HANDSHAKE, version), error_code=code, mechanisms=())


def authenticate_to_native(request: Any, header: KafkaHeader) -> m.SaslAuthenticateRequest:
    return m.SaslAuthenticateRequest(auth_bytes=bytes(request.auth_bytes))


def authenticate_from_native(response: m.SaslAuthenticateResponse, version: int) -> Any:
    return build(
        response_class(ApiKey.SASL_AUTHENTICATE, version),
        error_code=response.error_code,
        error_message=response.error_message,
        auth_bytes=response.auth_bytes,
        session_lifetime=response.session_lifetime_ms,
    )


def authenticate_error(request: Any, version: int, code: int) -> Any:
    return build(
        response_class(ApiKey.SASL_AUTHENTICATE, version),
        error_code=code,
        error_message=None,
        auth_bytes=b"",
        session_lifetime=0,
    )


TRANSLATIONS = {
    int(ApiKey.SASL_HANDSHAKE): Translation(
        api_key=ApiKey.SASL_HANDSHAKE,
        min_version=0,
        max_version=1,
        to_native=handshake_to_native,
        from_native=handshake_from_native,
        error_response=handshake_error,
    ),
    int(ApiKey.SASL_AUTHENTICATE): Translation(
        api_key=ApiKey.SASL_AUTHENTICATE,
        min_version=0,
        max_version=2,
        to_native=authenticate_to_native,
        from_native=authenticate_from_native,
        error_response=authenticate_error,
    ),
}
