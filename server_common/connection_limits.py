"""Connection counts per broker and per client address (Kafka's `max.connections`,
`max.connections.per.ip`, `max.connections.per.ip.overrides`), and the rate of new
connections (`max.connection.creation.rate`, KIP-612).

How it works: the shell asks `try_open(host)` for each accepted connection of a
client listener and calls `close(host)` when that connection ends. `try_open` counts
the connection and returns None, or returns why it is refused (the shell then closes
it at once: a refused client hears about it in microseconds instead of timing out).
A per-address override replaces the per-address limit for that address (0 refuses it
altogether, as in Kafka). The inter-broker listener is not counted (Kafka's KIP-402:
clients cannot lock replication and the controller out).

`ConnectionCreationRate.reserve(now)` books the next slot for a new connection and says
how long it must wait for it: at most `rate` a second, a tenth of a second's worth at
once. The shell holds the accepted connection that long before its TLS handshake and
its first read (Kafka's acceptor leaves it in the listen backlog meanwhile): a flood
of new connections, 1,000 failing logins from one address for instance, is spread out
instead of taking the event loop from the clients already connected.

Plain counting, no I/O: the shell owns the sockets, the clock and the log lines.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping

from server_common.properties import ConfigError

# Kafka's default for both limits: Int.MaxValue, i.e. none.
NO_LIMIT = 2**31 - 1


class ConnectionLimits:
    def __init__(
        self,
        max_connections: int = NO_LIMIT,
        max_per_ip: int = NO_LIMIT,
        overrides: Mapping[str, int] | None = None,
    ) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.overrides = dict(overrides or {})
        self.count = 0
        self.per_host: Counter[str] = Counter()
        self.refused = 0

    def limit_for(self, host: str) -> int:
        return self.overrides.get(host, self.max_per_ip)

    def try_open(self, host: str) -> str | None:
        """Count a new connection from `host`, or say why it is refused."""
        if self.count >= self.max_connections:
            self.refused += 1
            return f"max.connections ({self.max_connections}) reached"
        limit = self.limit_for(host)
        if self.per_host[host] >= limit:
            self.refused += 1
            return f"{host} already has {self.per_host[host]} connections (limit {limit})"
        self.count += 1
        self.per_host[host] += 1
        return None

    def close(self, host: str) -> None:
        self.count -= 1
        self.per_host[host] -= 1
        if self.per_host[host] <= 0:
            del self.per_host[host]


class ConnectionCreationRate:
    def __init__(self, rate: int = NO_LIMIT) -> None:
        self.rate = rate
        self.throttled = 0  # connections that had to wait
        self._next_slot = -math.inf

    def reserve(self, now: float) -> float:
        """Book a slot for a new connection: seconds to wait before serving it."""
        if self.rate >= NO_LIMIT:
            return 0.0
        interval = 1.0 / self.rate
        burst = max(1.0, self.rate / 10) * interval
        slot = max(self._next_slot, now - burst)
        self._next_slot = slot + interval
        if slot <= now:
            return 0.0
        self.throttled += 1
        return slot - now


def parse_overrides(text: str) -> dict[str, int]:
    """`max.connections.per.ip.overrides`: `host:count,host:count` (an IPv6 address
    keeps its colons: the count is after the last one)."""
    overrides: dict[str, int] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host or not count.strip().isdigit():
            raise ConfigError(
                f"max.connections.per.ip.overrides: {item!r} is not host:count "
                "(count a non-negative integer)"
            )
        overrides[host] = int(count)
    return overrides
