"""The admin client's shared base: its metadata, its connections and how a request is routed.

How it works: an `AdminBase` keeps a `Metadata` of the whole cluster (`all_topics=True`)
over a `ConnectionPool`; describing is reading that metadata fresh (`_fresh_cluster`).
`_request_any` sends a request that any broker can answer (the broker that gets it
writes ZooKeeper, as Kafka 2.x's did): to the broker that last answered Metadata first,
tried on the next broker, then the bootstrap addresses, when a connection fails. The
family mixins of `client.admin` (topics, brokers, replicas, offsets, groups) build on it;
`_ask_every_broker` sends a listing request (ListGroups, ListTransactions) to every
live broker at once and returns the answers of those that could be reached. Requests
with other routing (to a partition's leader, to a group's coordinator) are sent by the
mixin that needs them, through `self._pool`.

`error_or_none` and `topic_error_or_none` turn a result's error code into the per-item
value the admin methods return: None for success, else a `TributaryError`
(`UnknownTopicError` for a topic that does not exist).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import trio

from client.connection import BrokerConnectionError, ConnectionPool
from client.metadata import (
    BrokerInfo,
    ClusterView,
    Metadata,
    NoBrokersAvailableError,
    UnknownTopicError,
    connection_failure_reason,
    format_addresses,
)
from client.protocol.errors import ErrorCode, TributaryError

log = logging.getLogger(__name__)

DEFAULT_ADMIN_TIMEOUT_MS = 30_000  # Kafka's default.api.timeout.ms is 60 s; requests 30 s


def error_or_none(code: int, message: str | None = None) -> TributaryError | None:
    error = ErrorCode.from_code(code)
    return None if error is ErrorCode.NONE else TributaryError(error, message)


def topic_error_or_none(topic: str, code: int, message: str | None) -> TributaryError | None:
    """A topic's result: None, `UnknownTopicError` ("topic 'x' does not exist") or the error."""
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return UnknownTopicError(topic)
    return error_or_none(code, message)


class AdminBase:
    """What every family of admin requests shares; `client.admin.Admin` is the whole."""

    def __init__(
        self,
        pool: ConnectionPool,
        bootstrap: str | Iterable[str],
        *,
        request_timeout_ms: float = DEFAULT_ADMIN_TIMEOUT_MS,
        retry_backoff_ms: float = 100,
    ) -> None:
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.metadata = Metadata(
            pool,
            bootstrap,
            all_topics=True,
            retry_backoff_ms=int(retry_backoff_ms),
            request_timeout_ms=int(request_timeout_ms),
        )
        self._pool = pool

    async def start(self) -> None:
        """Bootstrap; raises `NoBrokersAvailableError` if no broker answers."""
        await self.metadata.refresh()

    async def _request_any(self, request: Any, timeout_ms: float | None = None) -> Any:
        """Send to a live broker (the one that last answered Metadata first), trying the
        next one when a connection fails."""
        timeout_s = (timeout_ms if timeout_ms is not None else self.request_timeout_ms) / 1000
        cluster = self.metadata.cluster
        preferred = self.metadata.preferred_address
        addresses = [] if preferred is None else [preferred]
        addresses += [
            b.address for b in sorted(cluster.brokers.values()) if b.address not in addresses
        ]
        addresses += [a for a in self.metadata.bootstrap if a not in addresses]
        last: BrokerConnectionError | None = None
        for address in addresses:
            try:
                # Leave the broker time to finish (it waits up to the request's timeout).
                return await self._pool.request(*address, request, timeout_s=timeout_s + 5)
            except BrokerConnectionError as exc:
                last = exc
                continue
        raise NoBrokersAvailableError(
            f"cannot reach any broker at {format_addresses(self.metadata.bootstrap)}"
            + (f" ({connection_failure_reason(last)})" if last is not None else "")
        )

    async def _fresh_cluster(self) -> ClusterView:
        self.metadata.request_update()
        return await self.metadata.refresh()

    async def _ask_every_broker(self, request: Any, what: str) -> list[tuple[BrokerInfo, Any]]:
        """`request` to every live broker at once: [(broker, its answer)] from those that
        answered with no error, in broker order. A broker still loading
        (COORDINATOR_LOAD_IN_PROGRESS) is asked again; one that cannot be reached or does
        not answer within the request timeout is skipped (logged), and when none
        answers, `NoBrokersAvailableError`; any other error code raises `TributaryError`.
        `what` names the request in errors ("ListGroups")."""
        cluster = await self._fresh_cluster()
        timeout_s = self.request_timeout_ms / 1000
        answers: dict[int, tuple[BrokerInfo, Any]] = {}
        failures: list[BaseException] = []

        async def ask(broker: BrokerInfo) -> None:
            with trio.move_on_after(timeout_s):
                while True:
                    try:
                        response = await self._pool.request(
                            *broker.address, request, timeout_s=timeout_s
                        )
                    except BrokerConnectionError as exc:
                        failures.append(exc)
                        log.warning("%s to broker %d failed: %s", what, broker.node_id, exc)
                        return
                    code = ErrorCode.from_code(response.error_code)
                    if code is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                        await trio.sleep(self.retry_backoff_ms / 1000)
                        continue
                    if code is not ErrorCode.NONE:
                        raise TributaryError(code, f"{what} to broker {broker.node_id}")
                    answers[broker.node_id] = (broker, response)
                    return
            failures.append(TributaryError(ErrorCode.REQUEST_TIMED_OUT, what))

        brokers = sorted(cluster.brokers.values())
        async with trio.open_nursery() as nursery:
            for broker in brokers:
                nursery.start_soon(ask, broker)
        if brokers and len(failures) == len(brokers):
            raise NoBrokersAvailableError(f"no broker answered {what} ({failures[-1]})")
        return [answers[node_id] for node_id in sorted(answers)]
