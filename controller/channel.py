"""Request sending to brokers (Kafka's ControllerChannelManager).

How it works: one unbounded queue and one sender task per live broker. `send()` only
appends to the queue, so the event loop never waits for a broker. The sender takes
requests in order and sends each one, waiting for its answer before the next (brokers
must apply controller requests in the order they were decided). A connection failure or
timeout closes the connection; the sender waits a short, growing back-off, reconnects
and sends the same request again, until it succeeds or the broker is removed
(`remove_broker`, on broker death or bounce, cancels the task and drops its queue). A
refused login or TLS handshake is retried the same way (with a warning): Kafka's
RequestSendThread retries whatever failed, and dropping a LeaderAndIsr because a
broker's listener refused the controller once would leave that broker behind for good.

Answers are checked: a request-level error or a partition error is logged (partition
errors that only mean "you told me that already" at debug level), then handed to the
request's callback, if any (topic deletion waits for StopReplica answers this way).
A broker answering with a request-level error code is not retried: the request is
dropped, as Kafka does.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio

from client.connection import BrokerConnection, BrokerConnectionError, Connector
from client.protocol.errors import ErrorCode, TributaryError
from client.security.secure_connector import AuthenticationFailedError
from controller.core.context import BrokerInfo

log = logging.getLogger(__name__)

# Back-off between reconnects to a broker: short first (a broker restarting is back in
# well under a second), capped so a dead-but-registered broker costs little.
RECONNECT_BACKOFF_S = 0.05
MAX_RECONNECT_BACKOFF_S = 1.0
CONNECT_TIMEOUT_S = 5.0

ResponseCallback = Callable[[Any | None], None]

# Partition errors a broker answers when a request repeats what it already applied
# (a new controller resends everything): not worth a warning.
_ROUTINE_PARTITION_ERRORS = {ErrorCode.NONE, ErrorCode.STALE_CONTROLLER_EPOCH}


@dataclass
class _Item:
    request: Any
    on_response: ResponseCallback | None


class _BrokerSender:
    def __init__(self, broker: BrokerInfo):
        self.broker = broker
        self.send, self.receive = trio.open_memory_channel[_Item](math.inf)
        self.scope = trio.CancelScope()
        self.sent = 0


class ControllerChannelManager:
    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        controller_id: int,
        request_timeout_s: float,
        connector: Connector | None = None,
    ):
        self._nursery = nursery
        self._client_id = f"controller-{controller_id}"
        self._timeout_s = request_timeout_s
        self._connector = connector
        self._senders: dict[int, _BrokerSender] = {}

    def add_broker(self, broker: BrokerInfo) -> None:
        """Start a queue and sender for `broker` (replacing one for an older registration)."""
        existing = self._senders.get(broker.broker_id)
        if existing is not None:
            if existing.broker == broker:
                return
            self.remove_broker(broker.broker_id)
        sender = _BrokerSender(broker)
        self._senders[broker.broker_id] = sender
        self._nursery.start_soon(
            self._run_sender, sender, name=f"controller-sender-{broker.broker_id}"
        )

    def remove_broker(self, broker_id: int) -> None:
        """Stop sending to `broker_id`; queued requests are dropped: their callbacks get
        None now, the one being delivered gets None as its sender unwinds."""
        sender = self._senders.pop(broker_id, None)
        if sender is None:
            return
        sender.scope.cancel()
        sender.send.close()
        while True:
            try:
                item = sender.receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
            _call(item.on_response, None)

    def send(
        self, broker_id: int, request: Any, on_response: ResponseCallback | None = None
    ) -> bool:
        """Queue `request` for `broker_id`; False (and the callback gets None) if unknown."""
        sender = self._senders.get(broker_id)
        if sender is None:
            _call(on_response, None)
            return False
        sender.send.send_nowait(_Item(request, on_response))
        return True

    def queued(self, broker_id: int) -> int:
        sender = self._senders.get(broker_id)
        return sender.send.statistics().current_buffer_used if sender else 0

    @property
    def brokers(self) -> list[int]:
        return sorted(self._senders)

    def close(self) -> None:
        for broker_id in list(self._senders):
            self.remove_broker(broker_id)

    # -- the sender task ------------------------------------------------------------------
    async def _run_sender(self, sender: _BrokerSender) -> None:
        broker = sender.broker
        connection: BrokerConnection | None = None
        current: _Item | None = None
        with sender.scope:
            try:
                async for item in sender.receive:
                    current = item
                    response, connection = await self._deliver(sender, item, connection)
                    current = None
                    sender.sent += 1
                    _check_response(broker.broker_id, item.request, response)
                    _call(item.on_response, response)
            except Exception:  # a bug here must not take the controller down
                log.exception("sender to broker %d stopped", broker.broker_id)
            finally:
                if current is not None:  # removed while delivering: never answered
                    _call(current.on_response, None)
                if connection is not None:
                    with trio.CancelScope(shield=True):
                        await connection.aclose()

    async def _deliver(
        self, sender: _BrokerSender, item: _Item, connection: BrokerConnection | None
    ) -> tuple[Any | None, BrokerConnection | None]:
        """Send until answered; (response or None after a request-level error, connection)."""
        broker = sender.broker
        backoff = RECONNECT_BACKOFF_S
        while True:
            try:
                if connection is None or connection.closed:
                    connection = await BrokerConnection.connect(
                        broker.host,
                        broker.port,
                        nursery=self._nursery,
                        client_id=self._client_id,
                        connect_timeout_s=CONNECT_TIMEOUT_S,
                        connector=self._connector,
                    )
                return await connection.request(item.request, timeout_s=self._timeout_s), connection
            except (BrokerConnectionError, AuthenticationFailedError) as exc:
                refused = isinstance(exc, AuthenticationFailedError)
                (log.warning if refused else log.info)(
                    "sending %s to broker %d failed (%s); retrying in %.2fs",
                    type(item.request).__name__,
                    broker.broker_id,
                    exc,
                    backoff,
                )
                await trio.sleep(backoff)
                backoff = min(backoff * 2, MAX_RECONNECT_BACKOFF_S)
            except TributaryError as exc:
                log.warning(
                    "broker %d refused %s: %s", broker.broker_id, type(item.request).__name__, exc
                )
                return None, connection


def _call(callback: ResponseCallback | None, response: Any | None) -> None:
    if callback is None:
        return
    try:
        callback(response)
    except Exception:
        log.exception("response callback failed")


def _check_response(broker_id: int, request: Any, response: Any | None) -> None:
    if response is None:
        return
    name = type(request).__name__
    code = ErrorCode.from_code(getattr(response, "error_code", 0))
    if code is not ErrorCode.NONE:
        log.warning("broker %d answered %s with %s", broker_id, name, code.name)
        return
    errors = getattr(response, "partition_errors", None) or []
    for error in errors:
        error_code = ErrorCode.from_code(error.error_code)
        if error_code in _ROUTINE_PARTITION_ERRORS:
            if error_code is not ErrorCode.NONE:
                log.debug(
                    "broker %d: %s for %s-%d: %s",
                    broker_id,
                    name,
                    error.topic,
                    error.partition,
                    error_code.name,
                )
            continue
        log.warning(
            "broker %d: %s for %s-%d failed: %s",
            broker_id,
            name,
            error.topic,
            error.partition,
            error_code.name,
        )
