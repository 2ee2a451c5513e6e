"""Client quotas applied to requests: record what each client used, throttle it.

How it works (Kafka 2.8's KafkaApis with its quota managers): `QuotaGate.serve` is
between a connection and the broker's handlers (both wire protocols; after the SASL
gate, so the principal is the authenticated user, User:ANONYMOUS without one, and the
client-id is the request header's). It times the handler (Kafka's request thread time:
until the handler returns, not a purgatory's wait) and records it as a percentage of one
thread in the request quota; a Produce's record bytes go to the producer byte-rate quota
when it is handled, a consumer Fetch's record bytes to the consumer byte-rate quota
when its answer is ready (follower fetches, controller requests and WriteTxnMarkers
are exempt, as Kafka's ClusterAction requests). The throttle
time is the larger of the two (broker/core/client_quotas.py); when it is not 0 the
answer carries it in `throttle_time_ms` (and in the request's `REQUEST_THROTTLE` note,
from which the Kafka listener fills every response that has the field) and the
connection is throttled for that long (server_common/network.py `CONNECTION_THROTTLE`:
the answer is held and nothing more is read from the client, Kafka 2.x's muted channel;
an acks=0 produce, which has no answer, only mutes). A throttled consumer fetch is
answered as Kafka 2.8 answers it: its record bytes are taken back out of the fetch
quota and the answer has no partitions (error NONE, the throttle time; Kafka's
`getThrottledResponse`). Unlike Kafka, the fetch session has already been updated
when the throttle is known (the answer is built first): the session a throttled full
fetch created is dropped again (answered with session id 0, as Kafka's; making it may
have evicted another), and an incremental one's cached partitions count as answered,
so a partition whose only news was its high watermark is told at its next change.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import Any

from broker.core.client_quotas import ClientQuotas, nanos_to_percentage
from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.codec import RequestHeader
from server_common.network import (
    CONNECTION_THROTTLE,
    NO_RESPONSE,
    REQUEST_THROTTLE,
    ConnectionThrottle,
    Reply,
    RequestThrottle,
    is_error_answer,
)
from server_common.security.principal import current_principal

# Requests between brokers and from the controller: never throttled (Kafka's
# ClusterAction requests are exempt from the request quota).
EXEMPT_APIS = frozenset(
    {
        ApiKey.LEADER_AND_ISR,
        ApiKey.UPDATE_METADATA,
        ApiKey.STOP_REPLICA,
        ApiKey.CONTROLLED_SHUTDOWN,
        ApiKey.WRITE_TXN_MARKERS,
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
    }
)

Call = Callable[[RequestHeader, Any], Awaitable[Any]]


class QuotaGate:
    def __init__(self, quotas: ClientQuotas, clock: Callable[[], int]) -> None:
        self.quotas = quotas
        self.clock = clock
        # Drops a fetch session by id (the broker's session cache `remove`): a throttled
        # full fetch keeps none (set once the handlers exist).
        self.forget_fetch_session: Callable[[int], object] | None = None

    async def serve(self, header: RequestHeader, request: Any, call: Call) -> Any:
        if header.api_key in EXEMPT_APIS or (
            header.api_key == ApiKey.FETCH and getattr(request, "replica_id", -1) >= 0
        ):
            return await call(header, request)
        user = current_principal().name
        client_id = header.client_id or ""
        note = REQUEST_THROTTLE.get()  # read before any await: this request's own
        produced = _produce_bytes(request) if header.api_key == ApiKey.PRODUCE else 0
        started = time.perf_counter_ns()
        outcome = await call(header, request)
        elapsed_ns = time.perf_counter_ns() - started
        now = self.clock()
        throttle_ms = self.quotas.request.record(
            user, client_id, nanos_to_percentage(elapsed_ns), now
        )
        if header.api_key == ApiKey.PRODUCE:
            throttle_ms = max(
                throttle_ms, self.quotas.produce.record(user, client_id, produced, now)
            )
        connection = CONNECTION_THROTTLE.get()
        fetch = header.api_key == ApiKey.FETCH
        full_fetch = fetch and getattr(request, "session_epoch", -1) == 0  # a new session

        def finish(response: Any) -> Any:
            throttle = throttle_ms
            if fetch and isinstance(response, m.FetchResponse):
                response, throttle = self._fetch_answer(
                    response, throttle, user, client_id, full_fetch
                )
            return _throttled(response, throttle, connection, note)

        if isinstance(outcome, Reply):
            return outcome.then(finish)
        if outcome is NO_RESPONSE or is_error_answer(outcome):
            # No answer to carry it (acks=0) or the wire's generic error answer: the
            # connection is muted all the same (Kafka's sendErrorResponseMaybeThrottle).
            return _throttled(outcome, throttle_ms, connection, note)
        if not dataclasses.is_dataclass(outcome):
            return outcome
        return finish(outcome)

    def _fetch_answer(
        self,
        response: m.FetchResponse,
        throttle_ms: int,
        user: str,
        client_id: str,
        full_fetch: bool,
    ) -> tuple[m.FetchResponse, int]:
        """Kafka 2.8's handleFetchRequest: the answer's record bytes go to the fetch
        quota; when either quota throttles, they are taken back out of it and the
        answer is an empty one (no partitions, Kafka's `getThrottledResponse`); a full
        fetch's new session is dropped again (session id 0: Kafka's creates none)."""
        fetched = _fetch_bytes(response)
        now = self.clock()
        throttle_ms = max(throttle_ms, self.quotas.fetch.record(user, client_id, fetched, now))
        if throttle_ms <= 0:
            return response, 0
        self.quotas.fetch.unrecord(user, client_id, fetched, now)
        session_id = response.session_id
        if full_fetch and session_id and self.forget_fetch_session is not None:
            self.forget_fetch_session(session_id)
            session_id = 0
        return dataclasses.replace(response, topics=[], session_id=session_id), throttle_ms


def _throttled(
    response: Any,
    throttle_ms: int,
    connection: ConnectionThrottle | None,
    note: RequestThrottle | None,
) -> Any:
    if throttle_ms <= 0:
        return response
    if connection is not None:
        connection.throttle(throttle_ms)
    if note is not None:
        note.note(throttle_ms)
    if dataclasses.is_dataclass(response) and hasattr(response, "throttle_time_ms"):
        return dataclasses.replace(response, throttle_time_ms=throttle_ms)  # type: ignore[type-var]
    return response


def _produce_bytes(request: Any) -> int:
    if not isinstance(request, m.ProduceRequest):
        return 0
    return sum(len(p.records) for t in request.topics for p in t.partitions)


def _fetch_bytes(response: m.FetchResponse) -> int:
    total = 0
    for topic in response.topics:
        for partition in topic.partitions:
            records = partition.records
            total += len(records) if records is not None else 0
    return total
