"""The transaction coordinator's marker sender: WriteTxnMarkers to partition leaders,
batched per leader and retried until written (Kafka's TransactionMarkerChannelManager).

How it works: the coordinator hands over a `MarkerJob` (one producer's transaction: its
partitions, COMMIT or ABORT, the coordinator epoch) with `add`. The sender task groups
every partition still waiting, of every job, by its leader in the metadata cache and sends
each leader one WriteTxnMarkersRequest (over the inter-broker listener, through a
connection pool), all leaders at once. Per partition, the answer decides:

- NONE: written; when a job has no partition left, `on_done(job)` (the coordinator
  writes CompleteCommit/CompleteAbort);
- a partition of a topic that no longer exists (not in the metadata cache) is dropped,
  as Kafka drops markers for deleted topics;
- TRANSACTION_COORDINATOR_FENCED / INVALID_PRODUCER_EPOCH: this coordinator is stale, the
  job is dropped (the new coordinator resends);
- anything else (no leader, NOT_LEADER_OR_FOLLOWER, not enough replicas, a timeout, a
  leader that cannot serve the request, a lost connection): retried after
  `retry_backoff_s`, with the leader looked up again.

A job that is no longer current for the coordinator (`is_current`: the partition was
unloaded, or another epoch took over) is dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from broker.core.metadata_cache import MetadataCache
from broker.core.txn.coordinator import MarkerJob
from client.connection import ConnectionPool, Connector
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.types import TopicPartition

log = logging.getLogger(__name__)

FENCED = frozenset({ErrorCode.TRANSACTION_COORDINATOR_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})


@dataclass
class _Pending:
    job: MarkerJob
    partitions: set[TopicPartition] = field(default_factory=set)


@dataclass
class MarkerStats:
    requests: int = 0  # WriteTxnMarkers requests sent
    retries: int = 0  # partitions whose marker had to be sent again
    written: int = 0  # markers written


class MarkerSender:
    def __init__(
        self,
        metadata_cache: MetadataCache,
        *,
        broker_id: int,
        connector: Connector | None,
        on_done: Callable[[MarkerJob], None],
        is_current: Callable[[MarkerJob], bool],
        request_timeout_s: float = 30.0,
        retry_backoff_s: float = 0.1,
    ) -> None:
        self.cache = metadata_cache
        self.broker_id = broker_id
        self.connector = connector
        self.on_done = on_done
        self.is_current = is_current
        self.request_timeout_s = request_timeout_s
        self.retry_backoff_s = retry_backoff_s
        self.stats = MarkerStats()
        self._jobs: dict[tuple[str, int, int, bool, int], _Pending] = {}
        self._wakeup = trio.Event()
        self._warned: set[tuple[int, int]] = set()

    @staticmethod
    def _key(job: MarkerJob) -> tuple[str, int, int, bool, int]:
        return (
            job.transactional_id,
            job.producer_id,
            job.producer_epoch,
            job.commit,
            job.coordinator_epoch,
        )

    def add(self, job: MarkerJob) -> None:
        key = self._key(job)
        if key not in self._jobs:
            self._jobs[key] = _Pending(job, set(job.partitions))
        self._wakeup.set()

    @property
    def pending_jobs(self) -> int:
        return len(self._jobs)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            pool = ConnectionPool(
                nursery,
                client_id=f"txn-marker-sender-{self.broker_id}",
                connector=self.connector,
            )
            task_status.started()
            try:
                while True:
                    self._finish_done()
                    if not self._jobs:
                        self._wakeup = trio.Event()
                        await self._wakeup.wait()
                        continue
                    await self._send_round(pool)
                    self._finish_done()  # complete written jobs now, not after a backoff
                    if self._jobs:
                        await trio.sleep(self.retry_backoff_s)
            finally:
                with trio.CancelScope(shield=True):
                    await pool.aclose()

    def _finish_done(self) -> None:
        for key, pending in list(self._jobs.items()):
            if not self.is_current(pending.job):
                del self._jobs[key]
            elif not pending.partitions:
                del self._jobs[key]
                self.on_done(pending.job)

    def _by_leader(self) -> dict[int, list[tuple[_Pending, TopicPartition]]]:
        out: dict[int, list[tuple[_Pending, TopicPartition]]] = {}
        for pending in self._jobs.values():
            for tp in list(pending.partitions):
                partitions = self.cache.topics.get(tp.topic)
                if partitions is None or tp.partition not in partitions:
                    pending.partitions.discard(tp)  # a deleted topic: no marker needed
                    continue
                leader = partitions[tp.partition].leader
                if leader is None or leader < 0:
                    self.stats.retries += 1
                    continue
                out.setdefault(leader, []).append((pending, tp))
        return out

    async def _send_round(self, pool: ConnectionPool) -> None:
        async with trio.open_nursery() as nursery:
            for leader, entries in self._by_leader().items():
                nursery.start_soon(self._send_to, pool, leader, entries)

    async def _send_to(
        self,
        pool: ConnectionPool,
        leader: int,
        entries: list[tuple[_Pending, TopicPartition]],
    ) -> None:
        markers: dict[tuple, dict[str, list[int]]] = {}
        owners: dict[tuple, _Pending] = {}
        for pending, tp in entries:
            key = self._key(pending.job)
            markers.setdefault(key, {}).setdefault(tp.topic, []).append(tp.partition)
            owners[key] = pending
        request = m.WriteTxnMarkersRequest(
            markers=[
                m.WritableTxnMarker(
                    producer_id=owners[key].job.producer_id,
                    producer_epoch=owners[key].job.producer_epoch,
                    transaction_result=owners[key].job.commit,
                    topics=[
                        m.WritableTxnMarkerTopic(name=t, partition_indexes=sorted(ps))
                        for t, ps in sorted(by_topic.items())
                    ],
                    coordinator_epoch=owners[key].job.coordinator_epoch,
                )
                for key, by_topic in markers.items()
            ]
        )
        endpoint = self.cache.endpoint(leader)
        self.stats.requests += 1
        try:
            if endpoint is None:
                raise TributaryError(
                    ErrorCode.LEADER_NOT_AVAILABLE, f"no endpoint known for broker {leader}"
                )
            response = await pool.request(
                endpoint.host, endpoint.port, request, timeout_s=self.request_timeout_s
            )
        except (TributaryError, OSError) as exc:
            self.stats.retries += len(entries)
            self._warn_once(leader, 0, f"writing transaction markers to broker {leader}: {exc}")
            return
        # Answers are per producer id; the request holds one marker per (job) key.
        by_pid = {key[1]: owners[key] for key in owners}
        for result in response.markers:
            owner = by_pid.get(result.producer_id)
            if owner is None:
                continue
            for topic in result.topics:
                for part in topic.partitions:
                    tp = TopicPartition(topic.name, part.partition_index)
                    self._apply(leader, owner, tp, ErrorCode.from_code(part.error_code))

    def _apply(self, leader: int, pending: _Pending, tp: TopicPartition, code: ErrorCode) -> None:
        if code == ErrorCode.NONE:
            pending.partitions.discard(tp)
            self.stats.written += 1
        elif code in FENCED:
            pending.partitions.clear()
            self._jobs.pop(self._key(pending.job), None)
            log.info("markers of %s: this coordinator is fenced (%s)", pending.job, code.name)
        else:
            self.stats.retries += 1
            self._warn_once(leader, code, f"marker for {tp} on broker {leader}: {code.name}")

    def _warn_once(self, leader: int, code: int, message: str) -> None:
        if (leader, int(code)) not in self._warned:
            self._warned.add((leader, int(code)))
            log.warning("%s; retrying until written", message)
