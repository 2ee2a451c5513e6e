"""Connection counts per broker and per client address (Kafka's `max.connections`,
`max.connections.per.ip`, `max.connections.per.ip.overrides`).

How it works: the shell asks `try_open(host)` for each accepted connection of a
client listener and calls `close(host)` when that connection ends. `try_open` counts
the connection and returns None, or returns why it is refused (the shell then closes
it at once: a refused client hears about it in microseconds instead of timing out).
A per-address override replaces the per-address limit for that address (0 refuses it
altogether, as in Kafka). The inter-broker listener is not counted (Kafka's KIP-402:
clients cannot lock replication and the controller out).

Plain counting, no I/O: the shell owns the sockets and the log lines.
"""

from __future__ import annotations

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
