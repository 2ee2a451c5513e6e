"""The Kafka listener's request dispatcher: each kio request through its translation to
the native handlers and back.

How it works: `KafkaDispatcher` is the request handler of a Kafka listener's connections
(`serve_connection` with `KafkaServerConnection`, wire.py). For each decoded kio request
it looks up the API's `Translation` (`versions.translations()`, every translate module's
table merged), turns the request into the native one (`to_native`), hands that to the
same native handler a native listener uses (`RequestHandlers.handle(header, request,
listener)`, through the broker's interceptor) and translates what comes back into the
kio response of the version the client asked for (`from_native`). A `Reply` that a
purgatory fills later (a waiting fetch, an acks=all produce) becomes a `Reply` of the
translated response, so the connection keeps pipelining; a `NativeBatch` (a Kafka
request batching several native ones) is served one native request after another;
NO_RESPONSE (acks=0 produce) and CLOSE_CONNECTION pass through; a `RespondAndClose` (a
failed authentication) is translated and still closes. A request-level native
error answer, a `KafkaRequestError` from `to_native`, a failing native handler or any
other translation failure is answered with the API's `error_response` carrying that code
(UNKNOWN_SERVER_ERROR for bugs, INVALID_REQUEST for a native `ProtocolError`), so
nothing a translation does can break a connection. Every response whose schema has
`throttle_time` carries the throttle time the quota gate (broker/quota_gate.py) gave
its request, noted in a `RequestThrottle` set in `REQUEST_THROTTLE` around the native
call (Kafka's request quota applies to every non-exempt API, not only Produce/Fetch).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from broker.kafka import versions
from broker.kafka.translation import (
    KafkaHeader,
    KafkaRequestError,
    NativeBatch,
    Translation,
    has_field,
    ms_of,
    timedelta_ms,
)
from client.protocol.codec import RequestHeader
from client.protocol.errors import ErrorCode, ProtocolError
from server_common.network import (
    CLOSE_CONNECTION,
    NO_RESPONSE,
    REQUEST_THROTTLE,
    Reply,
    RequestThrottle,
    RespondAndClose,
    error_answer,
    is_error_answer,
)

log = logging.getLogger(__name__)

NativeHandler = Callable[[RequestHeader, Any], Awaitable[Any]]


class KafkaDispatcher:
    """Serves kio requests through `translations` and the native `handle_native`."""

    def __init__(
        self,
        handle_native: NativeHandler,
        translations: Callable[[], dict[int, Translation]] | None = None,
    ) -> None:
        self._handle_native = handle_native
        self._translations = translations or versions.translations

    async def __call__(self, header: KafkaHeader, request: Any) -> Any:
        translation = self._translations().get(header.api_key)
        if translation is None:  # the decoder only lets through what is translated
            return error_answer(ErrorCode.UNSUPPORTED_VERSION, f"api {header.api_key}")
        version = header.api_version
        try:
            native = translation.to_native(request, header)
        except KafkaRequestError as exc:
            log.info("answering api %s with %s: %s", header.api_key, exc.code, exc)
            return _error_response(translation, request, version, exc.code)
        except Exception:
            log.exception("cannot translate a request of api %s v%s", header.api_key, version)
            return _error_response(translation, request, version, ErrorCode.UNKNOWN_SERVER_ERROR)
        note = RequestThrottle()  # the quota gate notes this request's throttle time in it
        REQUEST_THROTTLE.set(note)
        try:
            native_header = header.native(translation.native_api_key)
            if isinstance(native, NativeBatch):
                outcome: Any = await self._handle_batch(native_header, native)
                if outcome is CLOSE_CONNECTION:
                    return outcome
            else:
                outcome = await self._handle_native(native_header, native)
        except ProtocolError as exc:  # what the native loop answers with INVALID_REQUEST
            log.info("bad request %s (api %s): %s", header.correlation_id, header.api_key, exc)
            return _error_response(translation, request, version, ErrorCode.INVALID_REQUEST)
        except Exception:
            log.exception("handler for api %s failed (Kafka listener)", header.api_key)
            return _error_response(translation, request, version, ErrorCode.UNKNOWN_SERVER_ERROR)
        finally:
            REQUEST_THROTTLE.set(None)
        return _translate_outcome(translation, request, version, outcome, note)

    async def _handle_batch(
        self, header: RequestHeader, batch: NativeBatch
    ) -> list[tuple[Any, Any]] | Any:
        """Each request of the batch through the native handlers, one at a time: (request,
        answer) pairs, an error answer as its ErrorCode, a later answer waited for."""
        answers = []
        for item in batch.requests:
            outcome = await self._handle_native(header, item)
            if outcome is CLOSE_CONNECTION:
                return outcome  # the SASL gate refused it: the connection closes
            if isinstance(outcome, Reply):
                outcome = await outcome.wait()
            if is_error_answer(outcome):
                outcome = ErrorCode.from_code(outcome.code)
            answers.append((item, outcome))
        return answers


def _translate_outcome(
    translation: Translation, request: Any, version: int, outcome: Any, note: RequestThrottle
) -> Any:
    if outcome is NO_RESPONSE or outcome is CLOSE_CONNECTION:
        return outcome
    if isinstance(outcome, RespondAndClose):  # a failed authentication
        return RespondAndClose(
            _translate_outcome(translation, request, version, outcome.response, note)
        )
    if isinstance(outcome, Reply):
        return outcome.then(
            lambda value: _translate_outcome(translation, request, version, value, note)
        )
    if is_error_answer(outcome):
        return _with_throttle(_error_response(translation, request, version, outcome.code), note)
    try:
        response = translation.from_native(outcome, version)
    except Exception:
        log.exception("cannot translate a response of api %s v%s", translation.api_key, version)
        response = _error_response(translation, request, version, ErrorCode.UNKNOWN_SERVER_ERROR)
    return _with_throttle(response, note)


def _with_throttle(response: Any, note: RequestThrottle) -> Any:
    """`response` with the throttle time a quota gave its request (Kafka's request quota
    and byte-rate quotas, broker/quota_gate.py) in its `throttle_time`, for every API
    whose response has the field; the translations themselves mostly answer 0."""
    if note.ms <= 0 or not _has_throttle_time(response):
        return response
    if ms_of(response.throttle_time) >= note.ms:
        return response
    return dataclasses.replace(response, throttle_time=timedelta_ms(note.ms))


def _has_throttle_time(response: Any) -> bool:
    return (
        dataclasses.is_dataclass(response)
        and not isinstance(response, type)
        and has_field(type(response), "throttle_time")
    )


def _error_response(translation: Translation, request: Any, version: int, code: int) -> Any:
    try:
        return translation.error_response(request, version, int(code))
    except Exception:
        log.exception("cannot build an error response of api %s", translation.api_key)
        return error_answer(ErrorCode.from_code(int(code)), "")  # the wire's generic one
