"""Follower fetcher tasks: one Trio task per leader broker this broker follows.

How it works: `FetcherManager.reconcile()` is the core's `followers_changed` callback,
called after every LeaderAndIsr and StopReplica; it compares the running tasks with the
core's `followers.leaders()` and starts or cancels tasks. Each `ReplicaFetcher` loops
against its leader:

1. partitions in the TRUNCATING phase: one OffsetForLeaderEpoch request for all of them,
   answers applied by the core (KIP-101/279 truncation);
2. partitions in the FETCHING phase: one Fetch request for all of them (long-poll:
   `replica.fetch.wait.max.ms`), the response applied by the core (append, follower HW).
   The fetches are in a fetch session with the leader (KIP-227; the fetcher's
   `FetchSessionHandler`, client/protocol/fetch_session.py): after the first, full one,
   a fetch names only the partitions whose fetch offset, epoch or log start changed (and
   those to forget), and the leader answers only the partitions with news, so an idle
   partition costs neither side a message. A session error, an answer the handler
   refuses or a failed round trip makes the next fetch a full one;
3. nothing ready (all backing off): sleep until the earliest back-off ends or the
   manager reports a change.

A connection failure backs off every partition of the request; the core decides what
each partition-level error means. The fetcher itself holds no replication state: it
sees the replica manager, a way to find a broker's address, the fetch settings, a clock
and a connector (TCP, or a test's in-memory network).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import trio

from broker.core.follower_fetch import FollowerFetchPartition
from broker.core.metadata_cache import BrokerEndpoint
from broker.core.replica_manager import FetchedPartition, ReplicaManager
from client.connection import BrokerConnection, BrokerConnectionError, Connector
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, ProtocolError, TributaryError
from client.protocol.fetch_session import FetchSessionHandler
from client.protocol.types import TopicPartition

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FetcherContext:
    """What every fetcher of this broker shares."""

    broker_id: int
    replica_manager: ReplicaManager
    endpoint: Callable[[int], BrokerEndpoint | None]  # where broker <id> listens
    clock: Callable[[], int]
    connector: Connector
    socket_timeout_s: float  # replica.socket.timeout.ms


class FetcherManager:
    def __init__(self, context: FetcherContext):
        self.context = context
        self._running: dict[int, trio.CancelScope] = {}
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._changed = trio.Event()

    def reconcile(self) -> None:
        self._changed.set()
        for fetcher in self._fetchers.values():
            fetcher.wake()

    def leaders(self) -> list[int]:
        return sorted(self._running)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                await self._changed.wait()
                self._changed = trio.Event()
                desired = set(self.context.replica_manager.followers.leaders())
                for leader_id in sorted(set(self._running) - desired):
                    log.info("stopping the fetcher for leader %d", leader_id)
                    self._running.pop(leader_id).cancel()
                    self._fetchers.pop(leader_id, None)
                for leader_id in sorted(desired - set(self._running)):
                    log.info("starting a fetcher for leader %d", leader_id)
                    scope = trio.CancelScope()
                    fetcher = ReplicaFetcher(self.context, leader_id)
                    self._running[leader_id] = scope
                    self._fetchers[leader_id] = fetcher
                    nursery.start_soon(self._run_fetcher, fetcher, scope)

    async def _run_fetcher(self, fetcher: ReplicaFetcher, scope: trio.CancelScope) -> None:
        with scope:
            await fetcher.run()


class ReplicaFetcher:
    def __init__(self, context: FetcherContext, leader_id: int):
        self.context = context
        self.leader_id = leader_id
        self.rm = context.replica_manager
        self.settings = context.replica_manager.config
        self._wakeup = trio.Event()
        self._connection: BrokerConnection | None = None
        self._endpoint: tuple[str, int] | None = None
        self.session: FetchSessionHandler[FollowerFetchPartition] = FetchSessionHandler(
            f"broker {leader_id}"
        )

    def wake(self) -> None:
        self._wakeup.set()

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            try:
                while True:
                    await self._one_round(nursery)
            finally:
                if self._connection is not None:
                    with trio.CancelScope(shield=True):
                        await self._connection.aclose()

    async def _connection_for_leader(self, nursery: trio.Nursery) -> BrokerConnection | None:
        endpoint = self.context.endpoint(self.leader_id)
        if endpoint is None:
            return None
        address = (endpoint.host, endpoint.port)
        if self._connection is not None and (self._connection.closed or address != self._endpoint):
            await self._connection.aclose()
            self._connection = None
        if self._connection is None:
            self._connection = await BrokerConnection.connect(
                *address,
                nursery=nursery,
                client_id=f"replica-fetcher-{self.context.broker_id}-{self.leader_id}",
                connect_timeout_s=self.context.socket_timeout_s,
                connector=self.context.connector,
            )
            self._endpoint = address
        return self._connection

    async def _one_round(self, nursery: trio.Nursery) -> None:
        rm = self.rm
        now = self.context.clock()
        truncating = rm.followers.truncation_requests(self.leader_id, now)
        fetching = rm.followers.fetch_request(self.leader_id, now) if not truncating else []
        if not truncating and not fetching:
            await self._idle()
            return
        involved = list(truncating) or [p.topic_partition for p in fetching]
        try:
            connection = await self._connection_for_leader(nursery)
            if connection is None:
                raise BrokerConnectionError(f"no endpoint known for broker {self.leader_id}")
            timeout = self.context.socket_timeout_s
            if truncating:
                answer = await connection.request(
                    _offset_for_leader_epoch_request(self.context.broker_id, truncating),
                    timeout_s=timeout,
                )
                rm.followers.apply_truncation(
                    self.leader_id, _epoch_answers(answer), self.context.clock()
                )
                return
            response = await connection.request(self._fetch_request(fetching), timeout_s=timeout)
            rm.followers.apply_fetch(
                self.leader_id, fetching, self._answered(response), self.context.clock()
            )
        except (BrokerConnectionError, TributaryError, ProtocolError, OSError) as exc:
            self.session.handle_error()
            rm.followers.fetch_failed(self.leader_id, involved, self.context.clock())
            if self._connection is not None:
                await self._connection.aclose()
                self._connection = None
            log.debug("fetch from leader %d failed: %s", self.leader_id, exc)
            await trio.sleep(self.settings.replica_fetch_backoff_ms / 1000)

    def _fetch_request(self, fetching: list[FollowerFetchPartition]) -> m.FetchRequest:
        """The next fetch of the session for `fetching` (every partition wanted now)."""
        data = self.session.build({p.topic_partition: p for p in fetching})
        by_topic: dict[str, list[m.FetchPartition]] = {}
        for p in data.to_send.values():
            by_topic.setdefault(p.topic_partition.topic, []).append(
                m.FetchPartition(
                    partition=p.topic_partition.partition,
                    current_leader_epoch=p.current_leader_epoch,
                    fetch_offset=p.fetch_offset,
                    log_start_offset=p.log_start_offset,
                    partition_max_bytes=p.partition_max_bytes,
                )
            )
        return m.FetchRequest(
            replica_id=self.context.broker_id,
            max_wait_ms=self.settings.replica_fetch_wait_max_ms,
            min_bytes=self.settings.replica_fetch_min_bytes,
            max_bytes=self.settings.replica_fetch_response_max_bytes,
            session_id=data.metadata.session_id,
            session_epoch=data.metadata.epoch,
            topics=[m.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
            forgotten_topics_data=[
                m.FetchForgottenTopic(topic=t, partitions=ps)
                for t, ps in data.forgotten_by_topic().items()
            ],
        )

    def _answered(self, response: m.FetchResponse) -> dict[TopicPartition, FetchedPartition]:
        """The partitions of `response` to apply: none if the session handler refuses it
        (a session error: the next fetch is full); in an incremental answer, only the
        partitions with news (the others stand as they were)."""
        results = _fetched(response)
        if not self.session.handle_response(response.error_code, response.session_id, results):
            return {}
        return results

    async def _idle(self) -> None:
        wake_at = self.rm.followers.next_wakeup_ms(self.leader_id)
        now = self.context.clock()
        delay = 1.0 if wake_at is None else max(0.0, (wake_at - now) / 1000)
        self._wakeup = trio.Event()
        with trio.move_on_after(min(delay, 1.0) or 0.001):
            await self._wakeup.wait()


def _offset_for_leader_epoch_request(
    broker_id: int, truncating: dict[TopicPartition, tuple[int, int]]
) -> m.OffsetForLeaderEpochRequest:
    by_topic: dict[str, list[m.OffsetForLeaderEpochPartition]] = {}
    for tp, (current_epoch, epoch) in truncating.items():
        by_topic.setdefault(tp.topic, []).append(
            m.OffsetForLeaderEpochPartition(
                partition=tp.partition, current_leader_epoch=current_epoch, leader_epoch=epoch
            )
        )
    return m.OffsetForLeaderEpochRequest(
        replica_id=broker_id,
        topics=[m.OffsetForLeaderEpochTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
    )


def _epoch_answers(
    response: m.OffsetForLeaderEpochResponse,
) -> dict[TopicPartition, tuple[ErrorCode, int, int]]:
    return {
        TopicPartition(t.topic, p.partition): (
            ErrorCode.from_code(p.error_code),
            p.leader_epoch,
            p.end_offset,
        )
        for t in response.topics
        for p in t.partitions
    }


def _fetched(response: m.FetchResponse) -> dict[TopicPartition, FetchedPartition]:
    return {
        TopicPartition(t.topic, p.partition): FetchedPartition(
            ErrorCode.from_code(p.error_code),
            p.high_watermark,
            p.log_start_offset,
            -1,
            p.records,
        )
        for t in response.topics
        for p in t.partitions
    }
