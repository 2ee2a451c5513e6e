"""The client's view of the cluster: brokers, controller, and every partition's leader.

How it works:
- `ClusterView` is an immutable snapshot built from one Metadata response: broker
  endpoints, the controller id, and per topic its id (KIP-516; None from a broker that
  gives none) and partitions (leader, leader epoch, replicas, ISR, offline replicas) or
  the error the broker gave for it. Lookups are plain
  functions of the snapshot (`leader_for`, `partitions_for`, `available_partitions`...).
- `Metadata` (the Trio shell) keeps the current snapshot fresh. `refresh()` asks any live
  broker: the brokers it already knows first (starting with the last one that answered),
  then the bootstrap addresses. The candidates are raced, staggered ("happy eyeballs"):
  the first is asked at once, the next one `HEDGE_DELAY_MS` later or as soon as every
  earlier one has failed, and the first answer wins (the others are cancelled), so a
  paused, dead or foreign first address costs about a second, not a request timeout.
  If none answers it raises `NoBrokersAvailableError` ("cannot reach any broker at
  HOST:PORT (...)", with every address's reason), or, when a broker refused our
  credentials or certificate, that `SASL_AUTHENTICATION_FAILED` error (not retriable).
  It asks for the topics of interest
  (`add_topics`), or every topic when built with `all_topics=True` (admin). Built with
  `allow_auto_create_topics=True` it lets the broker create a topic it is asked for
  that does not exist (when the broker's `auto.create.topics.enable` allows it), as
  Kafka clients do; the topic is then LEADER_NOT_AVAILABLE until its leaders are known.
- Staleness and backoff as Kafka's `metadata.max.age.ms` and `retry.backoff.ms`: a
  producer or consumer calls `request_update()` after a retriable error (stale leader);
  the background task `run()` refreshes when an update was requested (at most once per
  backoff) or when the snapshot is older than `max_age_ms`, and wakes whoever waits in
  `wait_for_update()`.
- Unknown topics are an error value in the snapshot (`topic_error`), turned into
  `UnknownTopicError` ("topic 'x' does not exist") by `partitions_or_error`.

Times come from `trio.current_time()` so that tests can drive them with `MockClock`.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import NamedTuple

import trio

from client.connection import BrokerConnectionError, ConnectionPool
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.topic_ids import ZERO_TOPIC_ID, topic_id_of_bytes
from client.protocol.types import TopicPartition

log = logging.getLogger(__name__)

# Kafka's defaults.
DEFAULT_METADATA_MAX_AGE_MS = 300_000  # metadata.max.age.ms
DEFAULT_RETRY_BACKOFF_MS = 100  # retry.backoff.ms
DEFAULT_REQUEST_TIMEOUT_MS = 30_000  # request.timeout.ms
# How long one metadata candidate has to answer before the next one is asked as well: a
# Metadata answer takes milliseconds from a live broker, so a second without one means
# it is slow or gone, and asking a second broker in parallel costs little.
HEDGE_DELAY_MS = 1000


class NoBrokersAvailableError(BrokerConnectionError):
    """No bootstrap or known broker answered a Metadata request."""

    def __str__(self) -> str:
        return self.message or "cannot reach any broker"


def connection_failure_reason(error: BaseException) -> str:
    """A short reason for a failed connection: the OS's words ("Connection refused")
    when the error chain has them, else the error's own message."""
    seen: list[BaseException] = []
    pending: list[BaseException] = [error]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.append(current)
        if isinstance(current, OSError) and current.strerror:
            return current.strerror
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        if current.__cause__ is not None:
            pending.append(current.__cause__)
    if isinstance(error, TributaryError) and error.message:
        return error.message
    return str(error)


class UnknownTopicError(TributaryError):
    """The cluster has no topic of that name (after a fresh look)."""

    def __init__(self, topic: str) -> None:
        super().__init__(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{topic}' does not exist")
        self.topic = topic

    @property
    def retriable(self) -> bool:  # the caller already looked again
        return False

    def __str__(self) -> str:
        return self.message or ""


class BrokerInfo(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port


class PartitionInfo(NamedTuple):
    topic: str
    partition: int
    leader: int  # -1: no leader
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    error: ErrorCode = ErrorCode.NONE

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class TopicInfo:
    name: str
    error: ErrorCode
    is_internal: bool
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    topic_id: uuid.UUID | None = None  # None: the broker gave none


def parse_bootstrap(servers: str | Iterable[str]) -> list[tuple[str, int]]:
    """`"host:port,host:port"` (or a list of them) as addresses; `ValueError` if malformed."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out: list[tuple[str, int]] = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bad broker address {item!r}: expected HOST:PORT")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("no broker address given")
    return out


def format_addresses(addresses: Iterable[tuple[str, int]]) -> str:
    return ",".join(f"{host}:{port}" for host, port in addresses)


_USABLE_TOPIC = (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE)


class ClusterView:
    """One Metadata response, indexed for lookups. Immutable once built."""

    def __init__(
        self,
        brokers: Iterable[BrokerInfo] = (),
        topics: Iterable[TopicInfo] = (),
        *,
        controller_id: int = -1,
        cluster_id: str | None = None,
    ) -> None:
        self.brokers: dict[int, BrokerInfo] = {b.node_id: b for b in brokers}
        self.topics: dict[str, TopicInfo] = {t.name: t for t in topics}
        self.controller_id = controller_id
        self.cluster_id = cluster_id
        # Lookups the producer makes per record, memoized (the view never changes).
        self._partitions_cache: dict[str, list[int] | None] = {}
        self._available_cache: dict[str, list[int]] = {}

    @classmethod
    def from_response(cls, response: m.MetadataResponse) -> ClusterView:
        topics = []
        for t in response.topics:
            partitions = {
                p.partition: PartitionInfo(
                    topic=t.name,
                    partition=p.partition,
                    leader=p.leader,
                    leader_epoch=p.leader_epoch,
                    replicas=tuple(p.replicas),
                    isr=tuple(p.isr),
                    offline_replicas=tuple(p.offline_replicas),
                    error=ErrorCode.from_code(p.error_code),
                )
                for p in t.partitions
            }
            topic_id = topic_id_of_bytes(t.topic_id)
            topics.append(
                TopicInfo(
                    t.name,
                    ErrorCode.from_code(t.error_code),
                    t.is_internal,
                    partitions,
                    None if topic_id == ZERO_TOPIC_ID else topic_id,
                )
            )
        return cls(
            (BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers),
            topics,
            controller_id=response.controller_id,
            cluster_id=response.cluster_id,
        )

    # --- lookups ---------------------------------------------------------------------

    def topic_error(self, topic: str) -> ErrorCode | None:
        """The broker's error for `topic`, NONE if it is fine, None if we did not ask."""
        info = self.topics.get(topic)
        return None if info is None else info.error

    def partitions_for(self, topic: str) -> list[int] | None:
        """Partition numbers of `topic`, or None if unknown (or not asked for)."""
        try:
            return self._partitions_cache[topic]
        except KeyError:
            pass
        info = self.topics.get(topic)
        parts: list[int] | None = None
        if info is not None and info.partitions and info.error in _USABLE_TOPIC:
            parts = sorted(info.partitions)
        self._partitions_cache[topic] = parts
        return parts

    def partition_count(self, topic: str) -> int | None:
        parts = self.partitions_for(topic)
        return None if parts is None else len(parts)

    def available_partitions(self, topic: str) -> list[int]:
        """Partitions of `topic` that have a leader we know the address of."""
        try:
            return self._available_cache[topic]
        except KeyError:
            pass
        info = self.topics.get(topic)
        available: list[int] = []
        if info is not None:
            brokers = self.brokers
            available = sorted(p for p, part in info.partitions.items() if part.leader in brokers)
        self._available_cache[topic] = available
        return available

    def partition(self, tp: TopicPartition) -> PartitionInfo | None:
        info = self.topics.get(tp.topic)
        return None if info is None else info.partitions.get(tp.partition)

    def leader_for(self, tp: TopicPartition) -> PartitionInfo | None:
        """The partition's info if it has a leader whose address we know, else None."""
        part = self.partition(tp)
        if part is None or part.leader < 0 or part.leader not in self.brokers:
            return None
        return part

    def broker(self, node_id: int) -> BrokerInfo | None:
        return self.brokers.get(node_id)

    def partitions_led_by(self, node_id: int) -> list[TopicPartition]:
        return [
            TopicPartition(t.name, p)
            for t in self.topics.values()
            for p, part in sorted(t.partitions.items())
            if part.leader == node_id
        ]


class Metadata:
    """The cluster view of one client, refreshed from any live broker."""

    def __init__(
        self,
        pool: ConnectionPool,
        bootstrap: str | Iterable[str],
        *,
        all_topics: bool = False,
        max_age_ms: int = DEFAULT_METADATA_MAX_AGE_MS,
        retry_backoff_ms: int = DEFAULT_RETRY_BACKOFF_MS,
        request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
        allow_auto_create_topics: bool = False,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self._pool = pool
        self._all_topics = all_topics
        self.allow_auto_create_topics = allow_auto_create_topics
        self.max_age_ms = max_age_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self.cluster = ClusterView()
        self.version = 0  # bumped on every successful refresh
        self.last_refresh_ms = -math.inf
        self.last_attempt_ms = -math.inf
        self.last_error: BaseException | None = None
        self._topics: set[str] = set()
        self._update_requested = False
        self._wanted = trio.Event()  # set when the refresher has something to do
        self._updated = trio.Event()  # replaced after every refresh attempt
        self._refresh_lock = trio.Lock()
        self._preferred: tuple[str, int] | None = None
        self._failures: dict[tuple[str, int], str] = {}  # why each address failed, last time

    # --- what to ask for -------------------------------------------------------------

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(self._topics)

    def add_topics(self, *names: str) -> bool:
        """Track these topics too; True (and an update requested) if any was new."""
        new = set(names) - self._topics
        if new:
            self._topics |= new
            self.request_update()
        return bool(new)

    def remove_topics(self, *names: str) -> None:
        """Stop tracking these topics (no refresh needed: the next one leaves them out)."""
        self._topics -= set(names)

    def set_topics(self, names: Iterable[str]) -> None:
        names = set(names)
        if names != self._topics:
            self._topics = names
            self.request_update()

    def request_update(self) -> None:
        """Ask the background refresher for a fresh view soon (after a retriable error)."""
        self._update_requested = True
        self._wanted.set()

    @property
    def update_requested(self) -> bool:
        return self._update_requested

    def is_stale(self, now_ms: float | None = None) -> bool:
        now_ms = current_ms() if now_ms is None else now_ms
        return now_ms - self.last_refresh_ms >= self.max_age_ms

    # --- refreshing ------------------------------------------------------------------

    async def refresh(self) -> ClusterView:
        """Fetch a fresh view now; raises `NoBrokersAvailableError` if nobody answers."""
        version = self.version
        async with self._refresh_lock:
            if self.version != version and not self._update_requested:
                return self.cluster  # someone refreshed while we waited for the lock
            return await self._refresh_locked()

    async def _refresh_locked(self) -> ClusterView:
        self._update_requested = False
        self.last_attempt_ms = current_ms()
        request = m.MetadataRequest(
            topics=None if self._all_topics else sorted(self._topics),
            allow_auto_topic_creation=self.allow_auto_create_topics and not self._all_topics,
        )
        answered = await self._race(request)
        if answered is not None:
            (host, port), response = answered
            self._preferred = (host, port)
            self.cluster = ClusterView.from_response(response)
            self.version += 1
            self.last_refresh_ms = current_ms()
            self.last_error = None
            self._wake_waiters()
            return self.cluster
        self._update_requested = True  # still wanted: the refresher retries after backoff
        error = NoBrokersAvailableError(
            f"cannot reach any broker at {format_addresses(self.bootstrap)} "
            f"({self._failure_summary()})"
        )
        self.last_error = error
        self._wake_waiters()
        raise error

    async def _race(
        self, request: m.MetadataRequest
    ) -> tuple[tuple[str, int], m.MetadataResponse] | None:
        """Ask the candidates, staggered by `HEDGE_DELAY_MS`; the first answer (and who
        gave it), or None when every one failed (their reasons in `_failures`)."""
        candidates = self._candidates()
        self._failures = {}
        winner: list[tuple[tuple[str, int], m.MetadataResponse]] = []
        refused: list[TributaryError] = []
        timeout_s = self.request_timeout_ms / 1000

        async def ask(address: tuple[str, int], failed: trio.Event) -> None:
            try:
                response = await self._pool.request(*address, request, timeout_s=timeout_s)
            except BrokerConnectionError as exc:
                self._failures[address] = connection_failure_reason(exc)
                log.debug("metadata from %s:%d failed: %s", *address, exc)
                failed.set()
                return
            except TributaryError as exc:  # a request-level error: try another broker
                self._failures[address] = str(exc)
                if exc.code == ErrorCode.SASL_AUTHENTICATION_FAILED:
                    refused.append(exc)  # not retriable: raised itself if nobody answers
                failed.set()
                return
            if not winner:
                winner.append((address, response))
                nursery.cancel_scope.cancel()

        async with trio.open_nursery() as nursery:
            for address in candidates:
                failed = trio.Event()
                nursery.start_soon(ask, address, failed)
                with trio.move_on_after(HEDGE_DELAY_MS / 1000):
                    await failed.wait()
        if not winner and refused:
            raise refused[0]  # our credentials or certificate were refused
        return winner[0] if winner else None

    def _failure_summary(self) -> str:
        """Why the last refresh failed: one reason, or each address's when they differ."""
        failures = self._failures
        reasons = list(dict.fromkeys(failures.values()))
        if not reasons:
            return "no address to try"
        if len(reasons) == 1:
            return reasons[0]
        return "; ".join(
            reason if reason.startswith(f"{host}:{port} ") else f"{host}:{port}: {reason}"
            for (host, port), reason in failures.items()
        )

    @property
    def preferred_address(self) -> tuple[str, int] | None:
        """The address of the broker that gave the current view (it was alive then)."""
        return self._preferred

    def _candidates(self) -> list[tuple[str, int]]:
        """Known brokers (the last one that answered first), then the bootstrap list."""
        seen: list[tuple[str, int]] = []
        if self._preferred is not None:
            seen.append(self._preferred)
        for broker in self.cluster.brokers.values():
            if broker.address not in seen:
                seen.append(broker.address)
        for address in self.bootstrap:
            if address not in seen:
                seen.append(address)
        return seen

    def _wake_waiters(self) -> None:
        self._updated.set()
        self._updated = trio.Event()

    async def wait_for_update(self, timeout_s: float | None = None) -> bool:
        """Wait for the next refresh attempt to finish; False on timeout."""
        event = self._updated
        if timeout_s is None:
            await event.wait()
            return True
        with trio.move_on_after(timeout_s):
            await event.wait()
            return True
        return False

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Background refresher: on request (at most once per backoff) and at max age."""
        task_status.started()
        while True:
            now = current_ms()
            if self._update_requested:
                wake_at = max(self.last_attempt_ms + self.retry_backoff_ms, now)
            else:
                wake_at = self.last_refresh_ms + self.max_age_ms
            if wake_at > now:
                self._wanted = trio.Event()
                if self._update_requested:  # requested while we computed: just back off
                    await trio.sleep(sleep_seconds(wake_at - now))
                else:
                    with trio.move_on_after(sleep_seconds(wake_at - now)):
                        await self._wanted.wait()
                continue
            try:
                await self.refresh()
            except NoBrokersAvailableError as exc:
                log.warning("%s", exc)

    # --- lookups that can wait -------------------------------------------------------

    async def partitions_or_error(self, topic: str, timeout_s: float | None = None) -> list[int]:
        """Partition numbers of `topic`, refreshing as needed.

        Raises a `TributaryError` TOPIC_AUTHORIZATION_FAILED at once when the broker
        refuses to describe the topic, `UnknownTopicError` when fresh views keep saying
        the topic does not exist
        for `UNKNOWN_TOPIC_GRACE_MS` (a topic created a moment ago may not have reached
        every broker's cache yet), `NoBrokersAvailableError` when no broker answers,
        `trio.TooSlowError` if the topic has no partitions within `timeout_s`.
        """
        self.add_topics(topic)
        deadline = math.inf if timeout_s is None else trio.current_time() + timeout_s
        first_unknown_ms: float | None = None
        with trio.fail_at(deadline):
            while True:
                parts = self.cluster.partitions_for(topic)
                if parts is not None and not self._update_requested:
                    return parts
                await self.refresh()
                parts = self.cluster.partitions_for(topic)
                if parts is not None:
                    return parts
                if self.cluster.topic_error(topic) is ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                    raise TributaryError(  # not retried: Kafka's TopicAuthorizationException
                        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        f"not authorized to access topic '{topic}'",
                    )
                if self.cluster.topic_error(topic) in _NO_SUCH_TOPIC:
                    now = current_ms()
                    first_unknown_ms = now if first_unknown_ms is None else first_unknown_ms
                    if now - first_unknown_ms >= UNKNOWN_TOPIC_GRACE_MS:
                        raise UnknownTopicError(topic)
                await trio.sleep(self.retry_backoff_ms / 1000)
                self.request_update()


_NO_SUCH_TOPIC = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_TOPIC_EXCEPTION)
# How long fresh metadata must keep calling a topic unknown before we believe it: a topic
# created a moment ago reaches every broker's cache through UpdateMetadata, which may
# lag the CreateTopics answer by a few milliseconds.
UNKNOWN_TOPIC_GRACE_MS = 500


def current_ms() -> float:
    """The client's clock in milliseconds (`trio.current_time()`: MockClock in tests)."""
    return trio.current_time() * 1000


# Added to every computed sleep: a deadline a rounding error short of the time it was
# computed for would wake us a hair early, find nothing due, and spin without the clock
# advancing (MockClock makes this easy to hit). A microsecond is far above float error.
TIMER_SLACK_S = 1e-6


def sleep_seconds(delay_ms: float) -> float:
    """Seconds to sleep for a delay in milliseconds: never negative, plus the slack."""
    return max(delay_ms, 0.0) / 1000 + TIMER_SLACK_S


@asynccontextmanager
async def open_client_nursery() -> AsyncIterator[trio.Nursery]:
    """A nursery for a client's background tasks that lets a lone error through as itself.

    Trio wraps whatever leaves a nursery block in an ExceptionGroup; the clients' own
    background tasks do not raise, so a group of one is the caller's error (or a
    `NoBrokersAvailableError` from starting up), and callers should be able to write
    `except TributaryError` around `async with open_producer(...)`.
    """
    try:
        async with trio.open_nursery() as nursery:
            yield nursery
    except BaseExceptionGroup as group:
        if len(group.exceptions) != 1:
            raise
        only = group.exceptions[0]
        while isinstance(only, BaseExceptionGroup) and len(only.exceptions) == 1:
            only = only.exceptions[0]
        context = only.__context__
        try:
            raise only
        finally:
            only.__context__ = context
            del only
