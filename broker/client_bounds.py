"""What bounds a broker's connections: counts, the rate of new ones, request memory.

How it works: `ConnectionBounds` holds, from the broker's config, the client listeners'
connection counts (`max.connections`, `max.connections.per.ip[.overrides]`:
`server_common.connection_limits.ConnectionLimits`), their connection creation rate
(`max.connection.creation.rate`, KIP-612: `ConnectionCreationRate`), one memory pool for
their request bytes (`queued.max.request.bytes`: `server_common.memory_pool`) and a pool
of the same size for the inter-broker listener alone (clients on other listeners cannot
starve replication or the controller). Client listeners are every one but the
inter-broker listener, which none of the limits apply to. `admitted(listener, host)`
wraps one client connection: refused (closed at once, never left silent; one log line a
second at most however many are refused) when a count is reached, else held until its
creation-rate slot comes, then counted until it ends. `reconfigure` applies a new
dynamic broker config, `register_metrics` exposes the figures.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from broker.config import BrokerConfig
from server_common.connection_limits import ConnectionCreationRate, ConnectionLimits
from server_common.memory_pool import MemoryPool
from server_common.metrics import MetricsRegistry

log = logging.getLogger(__name__)


class ConnectionBounds:
    def __init__(self, config: BrokerConfig) -> None:
        self.limits = ConnectionLimits(
            config["max.connections"],
            config["max.connections.per.ip"],
            resolve_overrides(config.max_connections_per_ip_overrides),
        )
        self.creation_rate = ConnectionCreationRate(config["max.connection.creation.rate"])
        self.pool = MemoryPool(config["queued.max.request.bytes"])
        self.inter_broker_pool = MemoryPool(config["queued.max.request.bytes"])
        self._refusals = _RefusalLog()

    def reconfigure(self, old: BrokerConfig, new: BrokerConfig) -> None:
        """Apply the dynamic limits of a new effective broker config."""
        self.limits.max_connections = new["max.connections"]
        self.limits.max_per_ip = new["max.connections.per.ip"]
        if new["max.connections.per.ip.overrides"] != old["max.connections.per.ip.overrides"]:
            self.limits.overrides = resolve_overrides(new.max_connections_per_ip_overrides)
        self.creation_rate.rate = new["max.connection.creation.rate"]

    @asynccontextmanager
    async def admitted(self, listener: str, stream: trio.abc.Stream) -> AsyncIterator[bool]:
        """Yields whether the client connection `stream` may be served (when False it
        is closed already); counted until the block ends."""
        host = peer_host(stream)
        refused = self.limits.try_open(host)
        if refused is not None:
            self._refusals.note(listener, host, refused)
            with trio.CancelScope(shield=True):
                await stream.aclose()
            yield False
            return
        try:
            await trio.sleep(self.creation_rate.reserve(trio.current_time()))
            yield True
        finally:
            self.limits.close(host)

    def register_metrics(self, metrics: MetricsRegistry) -> None:
        """Kafka's MemoryPoolAvailable/connection-count/refused figures, read when scraped."""
        limits, rate, pool, inter_broker = (
            self.limits,
            self.creation_rate,
            self.pool,
            self.inter_broker_pool,
        )
        metrics.gauge(
            "client_connections", "open connections on client listeners", lambda: limits.count
        )
        metrics.counter_of(
            "connections_refused_total",
            "client connections closed at once for max.connections / max.connections.per.ip",
            lambda: limits.refused,
        )
        metrics.counter_of(
            "connection_creation_throttled_total",
            "new client connections held back for max.connection.creation.rate",
            lambda: rate.throttled,
        )
        metrics.gauge(
            "request_memory_pool_used_bytes",
            "request bytes reserved from queued.max.request.bytes",
            lambda: pool.used,
        )
        metrics.gauge(
            "request_memory_pool_waiting",
            "client connections waiting for request memory (reading nothing meanwhile)",
            lambda: pool.waiting,
        )
        metrics.gauge(
            "inter_broker_request_memory_pool_used_bytes",
            "request bytes reserved on the inter-broker listener (its own pool)",
            lambda: inter_broker.used,
        )


def peer_host(stream: trio.abc.Stream) -> str:
    sock = getattr(stream, "socket", None)  # a SocketStream's (or what a wrapper forwards)
    if sock is None:
        return "?"  # an in-memory test transport: one "address" for everyone
    try:
        return str(sock.getpeername()[0])
    except (OSError, AttributeError, IndexError, TypeError):
        return "?"


def resolve_overrides(overrides: dict[str, int]) -> dict[str, int]:
    """`max.connections.per.ip.overrides` keyed by address: a host name counts for each
    address it resolves to at startup (as Kafka resolves it once)."""
    resolved: dict[str, int] = {}
    for host, count in overrides.items():
        try:
            ipaddress.ip_address(host)
            resolved[host] = count
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(host, None)
        except OSError as exc:
            log.warning("max.connections.per.ip.overrides: cannot resolve %s: %s", host, exc)
            continue
        for info in infos:
            resolved[str(info[4][0])] = count
    return resolved


class _RefusalLog:
    """One log line per second at most for refused connections (a flood must not
    flood the log), with how many were refused since the last line."""

    INTERVAL_S = 1.0

    def __init__(self) -> None:
        self._last = -math.inf
        self._since = 0

    def note(self, listener: str, host: str, reason: str) -> None:
        self._since += 1
        now = trio.current_time()
        if now - self._last >= self.INTERVAL_S:
            log.warning(
                "closed a new connection from %s on %s at once: %s (%d refused since the last "
                "such line)",
                host,
                listener,
                reason,
                self._since,
            )
            self._last, self._since = now, 0
