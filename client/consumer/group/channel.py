"""The way to a group's coordinator: finding it (FindCoordinator) and sending it requests.

How it works: `find_coordinator` asks any live broker (the known ones, then the bootstrap
list) which broker coordinates a group, retrying COORDINATOR_NOT_AVAILABLE (the broker
answers that while it creates `__consumer_offsets` or while the group's offsets partition
has no leader) and lost connections after backoff. `CoordinatorChannel` keeps one
member's coordinator in its `GroupMembership` (`ensure()` looks it up while it is
unknown, one lookup at a time) and sends requests there on a connection pool of their
own, so that a long-poll Fetch never delays a heartbeat (Kafka keeps a separate
coordinator socket too). `send()` never raises for what the coordinator (or the network)
answered: it returns the error code, a lost connection or timeout being
NETWORK_EXCEPTION / REQUEST_TIMED_OUT, and the caller's state machine decides. In
`farewell` mode (closing after the consumer's own tasks were cancelled) each request goes
over a connection of its own, opened and closed by the caller's task.

`Wakeup` is the reusable wake-up signal the group tasks use.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import trio

from client.connection import BrokerConnectionError, ConnectionPool, Connector, open_connection
from client.consumer.group.membership import COORDINATOR_ERRORS, GroupMembership
from client.metadata import BrokerInfo, Metadata
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, TributaryError

log = logging.getLogger(__name__)


async def find_coordinator(
    pool: ConnectionPool,
    metadata: Metadata,
    group_id: str,
    *,
    timeout_s: float,
    retry_backoff_ms: float = 100,
    key_type: int = 0,
) -> BrokerInfo:
    """The group's coordinator, asked of any live broker; retries retriable answers and
    lost connections until `timeout_s`. Raises `TributaryError`: COORDINATOR_NOT_AVAILABLE
    after the timeout, or at once a non-retriable answer (INVALID_GROUP_ID,
    UNSUPPORTED_VERSION from a broker without group support...)."""
    deadline = trio.current_time() + timeout_s
    request = m.FindCoordinatorRequest(key=group_id, key_type=key_type)  # 1: transactional id
    what = f"transactional id {group_id!r}" if key_type == 1 else f"group {group_id!r}"
    last: BaseException | None = None
    while True:
        addresses = [b.address for b in sorted(metadata.cluster.brokers.values())]
        addresses += [a for a in metadata.bootstrap if a not in addresses]
        for address in addresses:
            remaining = deadline - trio.current_time()
            try:
                response = await pool.request(*address, request, timeout_s=max(remaining, 0.001))
                code = ErrorCode.from_code(response.error_code)
                detail = response.error_message
            except BrokerConnectionError as exc:
                last = exc
                continue
            except TributaryError as exc:  # a request-level error answer
                code, detail, response = exc.code, exc.message, None
            if code is ErrorCode.NONE:
                return BrokerInfo(response.node_id, response.host, response.port)
            error = TributaryError(
                code, f"looking up the coordinator of {what}: {detail or code.name}"
            )
            if not code.is_retriable:
                raise error
            last = error
            break  # retriable: back off, then ask again
        if trio.current_time() + retry_backoff_ms / 1000 >= deadline:
            raise TributaryError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                f"no coordinator for {what} within {timeout_s:g} s"
                + (f" (last error: {last})" if last is not None else ""),
            )
        await trio.sleep(retry_backoff_ms / 1000)


class Wakeup:
    """A reusable wake-up: `set()` any time; `wait()` returns once set, then re-arms."""

    def __init__(self) -> None:
        self._event = trio.Event()

    def set(self) -> None:
        self._event.set()

    async def wait(self, timeout_s: float = math.inf) -> None:
        with trio.move_on_after(timeout_s):
            await self._event.wait()
        if self._event.is_set():
            self._event = trio.Event()


class CoordinatorChannel:
    """One member's coordinator: looked up on demand, talked to on its own connections."""

    def __init__(
        self,
        membership: GroupMembership,
        metadata: Metadata,
        *,
        pool: ConnectionPool,
        coordinator_pool: ConnectionPool,
        request_timeout_ms: float,
        retry_backoff_ms: float,
        client_id: str | None = None,
        connector: Connector | None = None,
    ) -> None:
        self.membership = membership
        self.group_id = membership.group_id
        self.metadata = metadata
        self._pool = pool
        self._coordinator_pool = coordinator_pool
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._client_id = client_id
        self._connector = connector
        self._lookup_lock = trio.Lock()
        self.found = Wakeup()  # set whenever a coordinator is found
        self.farewell = False

    async def ensure(self) -> tuple[int, str, int]:
        """The coordinator's (node id, host, port), looking it up (and retrying) as long as
        it is unknown; raises a non-retriable lookup error."""
        ms = self.membership
        if ms.coordinator is None and self.farewell:
            raise TributaryError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "closing: no coordinator")
        while ms.coordinator is None:
            async with self._lookup_lock:
                if ms.coordinator is not None:
                    break
                try:
                    node = await find_coordinator(
                        self._pool,
                        self.metadata,
                        self.group_id,
                        timeout_s=self.request_timeout_ms / 1000,
                        retry_backoff_ms=self.retry_backoff_ms,
                    )
                except TributaryError as exc:
                    if not exc.retriable:
                        raise
                    log.info("group %s: %s", self.group_id, exc)
                    await trio.sleep(self.retry_backoff_ms / 1000)
                    continue
                log.debug("group %s: coordinator is broker %d", self.group_id, node.node_id)
                ms.coordinator_found(node.node_id, node.host, node.port, trio.current_time() * 1000)
                self.found.set()
        assert ms.coordinator is not None
        return ms.coordinator

    async def send(self, request: Any, timeout_ms: float) -> tuple[ErrorCode, Any]:
        """(The answer's error code, the answer or None) from the coordinator we know
        (COORDINATOR_NOT_AVAILABLE if none)."""
        coordinator = self.membership.coordinator
        if coordinator is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        _, host, port = coordinator
        try:
            if self.farewell:
                async with open_connection(
                    host, port, client_id=self._client_id, connector=self._connector
                ) as connection:
                    response = await connection.request(request, timeout_s=timeout_ms / 1000)
            else:
                response = await self._coordinator_pool.request(
                    host, port, request, timeout_s=timeout_ms / 1000
                )
        except BrokerConnectionError as exc:
            log.info("group %s: request to the coordinator failed: %s", self.group_id, exc)
            code = exc.code if exc.code in COORDINATOR_ERRORS else ErrorCode.NETWORK_EXCEPTION
            return code, None
        except TributaryError as exc:  # a request-level error answer
            return exc.code, None
        return ErrorCode.from_code(getattr(response, "error_code", 0)), response

    async def drop_connection(self) -> None:
        """Close the coordinator connection: an answer we no longer wait for (a JoinGroup
        parked for a rebalance) would hold up every answer queued behind it."""
        coordinator = self.membership.coordinator
        if coordinator is not None and not self.farewell:
            await self._coordinator_pool.discard(*coordinator[1:])
