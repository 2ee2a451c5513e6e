"""The fetcher (Trio): the consumer's background task that resets positions and fetches
records into the partitions' buffers. Kafka 2.8's Fetcher.

How it works: the task loops over the assigned partitions
(client/consumer/subscription.py). Partitions awaiting a reset get a ListOffsets to
their leader (-2 earliest, -1 latest); partitions with a position and nothing buffered
are fetched, one long-poll Fetch per leader broker at a time (`fetch_min_bytes`,
`fetch_max_wait_ms`, `max_partition_fetch_bytes`, `fetch_max_bytes`), each partition
naming the leader epoch from metadata (KIP-320). A partition is also fetched *ahead*
while one answer's records are still buffered (from where that answer ended; at most
one answer ahead), so the broker works on the next chunk while poll() hands out this
one; an answer fetched ahead that fails is dropped and the error met again, and
handled, once the buffer has drained. Partitions the group is still resolving
(position "committed"), being revoked, or backing off are left alone. The task sleeps
until woken by a poll, a seek, an answer or fresh metadata.
- An answer is applied only if the partition's state is the one it was sent for (same
  generation: no seek or reassignment meanwhile). Its bytes are decoded with
  `decode_fetched` (client/consumer/batch.py: CRC checks, records below the position
  skipped) into the buffer; a damaged batch becomes the partition's error once the
  records before it are handed out, and it keeps being raised at that position until
  the application seeks past it. Each arrival sets `data`, on which poll() waits.
- OFFSET_OUT_OF_RANGE resets the position by `auto_offset_reset`, or with "none" makes
  the next `poll()` raise `OffsetOutOfRangeError`. A stale-leader error
  (NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH, ...) or a lost connection asks
  for fresh metadata and retries that partition after `retry_backoff_ms`.
- KIP-392: with `client_rack` set, every fetch carries it; a partition answered with a
  `preferred_read_replica` is fetched from that broker (a follower in our rack) until
  `preferred_replica_max_age_ms` passes, the broker leaves the metadata, or a fetch
  from it fails (an error or a lost connection: back to the leader; OFFSET_OUT_OF_RANGE
  from the follower is asked again of the leader, not reset), as the Java consumer does.
- Every fetch in flight is recorded in an `InFlightRequests` (client/inflight.py): one
  unanswered `fetch_max_wait_ms` + `STALLED_REQUEST_MS` makes the consumer look at fresh
  metadata; if that names another leader (or a newer leader epoch) for one of its
  partitions, the fetch is abandoned and the partitions are fetched from the new
  leader, instead of waiting out the request timeout for a paused or partitioned old
  leader.
- `isolation_level` (Kafka's isolation.level): read_committed fetches and looks up
  "latest" below the last stable offset, and drops aborted transactions' records with
  the answer's aborted transactions (`decode_fetched`); markers are never handed out.
- `list_offsets` serves `beginning_offsets`, `end_offsets` and `offsets_for_times`:
  ListOffsets to each partition's leader, retried for `request_timeout_ms`.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import trio

from client.connection import BrokerConnectionError, ConnectionPool
from client.consumer.batch import READ_COMMITTED, decode_fetched
from client.consumer.errors import OffsetOutOfRangeError
from client.consumer.subscription import (
    COMMITTED,
    EARLIEST,
    LATEST,
    NONE,
    PartitionState,
    SubscriptionState,
)
from client.inflight import InFlightRequest, InFlightRequests
from client.list_offsets import list_offsets_from
from client.metadata import ClusterView, Metadata, current_ms, sleep_seconds
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.records import RecordError
from client.protocol.types import TopicPartition

log = logging.getLogger(__name__)

_RESET_TIMESTAMPS = {EARLIEST: m.EARLIEST_TIMESTAMP, LATEST: m.LATEST_TIMESTAMP}
# Partition errors after which the leader we know is stale: refresh metadata, retry.
_STALE_LEADER_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.OFFSET_NOT_AVAILABLE,
    }
)

# What one Fetch was sent for, per partition: (its state, its generation, the offset).
Sent = dict[TopicPartition, tuple[PartitionState, int, int]]


@dataclass(frozen=True)
class FetchConfig:
    fetch_min_bytes: int = 1
    fetch_max_wait_ms: int = 500
    max_partition_fetch_bytes: int = 1_048_576
    fetch_max_bytes: int = 52_428_800
    request_timeout_ms: float = 30_000
    retry_backoff_ms: float = 100
    check_crcs: bool = True
    # KIP-392: the consumer's rack, sent with every fetch ("" : none, leader only), and
    # how long a preferred read replica is kept (Kafka: metadata.max.age.ms).
    client_rack: str = ""
    preferred_replica_max_age_ms: float = 300_000
    isolation_level: int = 0  # 1: read_committed


class Fetcher:
    """The fetcher task and what it does with answers; see the module docstring."""

    def __init__(
        self,
        subscriptions: SubscriptionState,
        metadata: Metadata,
        pool: ConnectionPool,
        config: FetchConfig,
    ) -> None:
        self.subscriptions = subscriptions
        self.metadata = metadata
        self.config = config
        self._pool = pool
        self._nursery: trio.Nursery | None = None
        self._in_flight = InFlightRequests("fetch", expected_ms=config.fetch_max_wait_ms)
        self._nodes_resetting: set[int] = set()
        self._wakeup = trio.Event()
        self.data = trio.Event()  # set (and replaced) when records or an error arrive
        self.positions_changed = trio.Event()  # set (and replaced) when positions resolve

    def start(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        nursery.start_soon(self._in_flight.abandon_on_metadata, self.metadata, self.wake)
        nursery.start_soon(self._in_flight.refresh_while_stalled, self.metadata)
        nursery.start_soon(self._fetcher_loop)

    def wake(self) -> None:
        """Something may need fetching or resetting now: look again."""
        self._wakeup.set()

    def data_arrived(self) -> None:
        """Wake every poll() waiting for records (or an error to raise)."""
        self.data.set()
        self.data = trio.Event()

    def positions_resolved(self) -> None:
        """Wake every position() waiting for a reset or a committed offset."""
        self.positions_changed.set()
        self.positions_changed = trio.Event()

    # --- the loop --------------------------------------------------------------------

    async def _fetcher_loop(self) -> None:
        assert self._nursery is not None
        while True:
            self._wakeup = trio.Event()
            now = current_ms()
            cluster = self.metadata.cluster
            states = self.subscriptions.states
            next_wake = math.inf
            resets: dict[int, dict[TopicPartition, str]] = {}
            fetches: dict[int, list[TopicPartition]] = {}
            stale = refused = False
            for tp, state in states.items():
                if state.error is not None or state.fetching or state.resetting:
                    continue
                if state.revoking or state.reset == COMMITTED:
                    continue  # going away, or waiting for the group's committed offset
                if state.position is None and state.reset is None:
                    continue
                if state.position is not None and not state.wants_fetch:
                    continue
                if state.backoff_until_ms > now:
                    next_wake = min(next_wake, state.backoff_until_ms)
                    continue
                leader = cluster.leader_for(tp)
                if leader is None:
                    if cluster.topic_error(tp.topic) is ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                        # Not retried: poll() raises it (Kafka's TopicAuthorizationException).
                        state.error = TributaryError(
                            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                            f"not authorized to read topic '{tp.topic}'",
                        )
                        refused = True
                        continue
                    stale = True
                    continue
                if state.position is None:
                    assert state.reset is not None
                    resets.setdefault(leader.leader, {})[tp] = state.reset
                else:
                    node = self._read_replica(state, leader.leader, cluster, now)
                    fetches.setdefault(node, []).append(tp)
            if stale:
                self.metadata.request_update()
            if refused:
                self.data_arrived()
            for node, wanted in resets.items():
                broker = cluster.broker(node)
                if broker is None or node in self._nodes_resetting:
                    continue
                self._nodes_resetting.add(node)
                for tp in wanted:
                    states[tp].resetting = True
                # The generations as of this decision: a seek before the task even starts
                # must make its answer stale.
                generations = {tp: states[tp].generation for tp in wanted}
                self._nursery.start_soon(
                    self._reset_positions, node, broker.address, wanted, generations
                )
            for node, tps in fetches.items():
                broker = cluster.broker(node)
                if broker is None or self._in_flight.count(node):
                    continue
                request, sent = self._build_fetch(tps, cluster)
                in_flight = self._in_flight.add(node, sent, cluster)
                self._nursery.start_soon(self._fetch, in_flight, broker.address, request, sent)
            if next_wake == math.inf:
                await self._wakeup.wait()
            else:
                with trio.move_on_after(sleep_seconds(next_wake - current_ms())):
                    await self._wakeup.wait()

    def _read_replica(
        self, state: PartitionState, leader: int, cluster: ClusterView, now: float
    ) -> int:
        """The broker to fetch from (Kafka's Fetcher.selectReadReplica): the preferred
        read replica the leader named while it is fresh and known, else the leader."""
        preferred = state.preferred_read_replica
        if preferred < 0:
            return leader
        if state.preferred_until_ms <= now or cluster.broker(preferred) is None:
            state.preferred_read_replica = -1
            return leader
        return preferred

    def _back_off(self, state: PartitionState, code: ErrorCode | None) -> None:
        state.backoff_until_ms = current_ms() + self.config.retry_backoff_ms
        if code is None or code in _STALE_LEADER_ERRORS:
            self.metadata.request_update()

    # --- fetching --------------------------------------------------------------------

    def _build_fetch(
        self, tps: list[TopicPartition], cluster: ClusterView
    ) -> tuple[m.FetchRequest, Sent]:
        """The Fetch for these partitions at their positions, with what to check the
        answer against (state, generation, offset); marks them as being fetched."""
        config = self.config
        states = self.subscriptions.states
        sent: Sent = {}
        topics: dict[str, list[m.FetchPartition]] = {}
        for tp in tps:
            state = states[tp]
            offset = state.fetch_offset
            assert offset is not None
            info = cluster.partition(tp)
            epoch = info.leader_epoch if info is not None else -1
            sent[tp] = (state, state.generation, offset)
            state.fetching = True
            topics.setdefault(tp.topic, []).append(
                m.FetchPartition(
                    partition=tp.partition,
                    current_leader_epoch=epoch,
                    fetch_offset=offset,
                    partition_max_bytes=config.max_partition_fetch_bytes,
                )
            )
        request = m.FetchRequest(
            replica_id=m.CONSUMER_REPLICA_ID,
            max_wait_ms=config.fetch_max_wait_ms,
            min_bytes=config.fetch_min_bytes,
            max_bytes=config.fetch_max_bytes,
            isolation_level=config.isolation_level,
            topics=[m.FetchTopic(topic=t, partitions=p) for t, p in topics.items()],
            rack_id=config.client_rack,
        )
        return request, sent

    async def _fetch(
        self,
        in_flight: InFlightRequest,
        address: tuple[str, int],
        request: m.FetchRequest,
        sent: Sent,
    ) -> None:
        node = in_flight.node
        try:
            timeout_s = (self.config.request_timeout_ms + self.config.fetch_max_wait_ms) / 1000
            response = None
            with in_flight.scope:
                response = await self._pool.request(*address, request, timeout_s=timeout_s)
            if response is None:  # abandoned: the leader moved
                raise in_flight.error()
        except TributaryError as exc:
            log.info("fetch from broker %d failed: %s", node, exc)
            for state, generation, _ in sent.values():
                state.preferred_read_replica = -1  # back to the leader (as Kafka's)
                if state.generation == generation:
                    self._back_off(state, None)
            if isinstance(exc, BrokerConnectionError):
                self.metadata.request_update()
            return
        finally:
            self._in_flight.remove(in_flight)
            for state, _, _ in sent.values():
                state.fetching = False
            self.wake()
        arrived = False
        states = self.subscriptions.states
        for topic in response.topics:
            for part in topic.partitions:
                tp = TopicPartition(topic.topic, part.partition)
                entry = sent.get(tp)
                if entry is None:
                    continue
                state, generation, offset = entry
                if states.get(tp) is not state or state.generation != generation:
                    continue  # unassigned or sought while the fetch was out: drop the answer
                arrived |= self.apply_fetched(tp, state, offset, part, node)
        if arrived:
            self.data_arrived()

    def apply_fetched(
        self,
        tp: TopicPartition,
        state: PartitionState,
        offset: int,
        part: m.FetchResponsePartition,
        node: int = -1,
    ) -> bool:
        """Buffer one partition's answer; True if poll() has something new (records or
        an error to raise). An answer fetched ahead (records still buffered) is appended
        to the buffer; if it failed it is dropped, and the error comes again, and is
        handled, when the buffer has drained and the same offset is fetched."""
        code = ErrorCode.from_code(part.error_code)
        ahead = state.buffered > 0
        if code is ErrorCode.NONE and part.preferred_read_replica >= 0:
            # KIP-392: the leader sends us to a replica (no records): fetch from it next.
            state.preferred_read_replica = part.preferred_read_replica
            state.preferred_until_ms = current_ms() + self.config.preferred_replica_max_age_ms
            return False
        if code is not ErrorCode.NONE and state.preferred_read_replica >= 0:
            # An error from the preferred replica: back to the leader. Out of range there
            # is not out of range on the leader (the follower may lag): ask the leader.
            state.preferred_read_replica = -1
            if code is ErrorCode.OFFSET_OUT_OF_RANGE:
                return False
        if ahead and code is not ErrorCode.NONE:
            self._back_off(state, code)
            return False
        if code is ErrorCode.NONE:
            state.high_watermark = part.high_watermark
            state.log_start_offset = part.log_start_offset
            if not part.records:
                return False
            aborted = None
            if self.config.isolation_level == READ_COMMITTED:
                aborted = [(a.producer_id, a.first_offset) for a in part.aborted_transactions]
            try:
                batch, next_offset, corrupt = decode_fetched(
                    tp,
                    part.records,
                    offset,
                    check_crcs=self.config.check_crcs,
                    broker=node,
                    aborted=aborted,
                )
            except RecordError as exc:
                state.error = TributaryError(
                    ErrorCode.CORRUPT_MESSAGE, f"{tp} at offset {offset}: {exc}"
                )
                return True
            if corrupt is not None and not batch:
                if ahead:  # raised once the records before it are handed out
                    self._back_off(state, None)
                    return False
                log.error("%s", corrupt)
                state.error = corrupt
                return True
            if ahead:
                assert state.buffer is not None
                state.buffer.extend(batch)
                state.next_fetch_offset = max(offset, next_offset)
                state.fetches_buffered += 1
                return bool(batch)
            state.buffer = batch
            state.buffer_index = 0
            state.next_fetch_offset = next_offset
            state.fetches_buffered = 1
            if not batch:  # everything was below the position: skip ahead
                state.position = max(offset, next_offset)
                state.clear_buffer()
                return False
            return True
        auto_offset_reset = self.subscriptions.auto_offset_reset
        if code is ErrorCode.OFFSET_OUT_OF_RANGE:
            if auto_offset_reset == NONE:
                state.error = OffsetOutOfRangeError(
                    {tp: offset},
                    f"log is [{part.log_start_offset}, {part.high_watermark}]"
                    if part.high_watermark >= 0
                    else "",
                )
                return True
            log.info(
                "%s: offset %d is out of range; resetting to %s", tp, offset, auto_offset_reset
            )
            state.set_position(None, reset=auto_offset_reset)
            return False
        if code in _STALE_LEADER_ERRORS or code.is_retriable:
            log.debug("%s: fetch answered %s; refreshing metadata", tp, code.name)
            self._back_off(state, code)
            return False
        state.error = TributaryError(code, f"fetching {tp} at offset {offset}")
        return True

    # --- offsets (ListOffsets) -------------------------------------------------------

    async def _reset_positions(
        self,
        node: int,
        address: tuple[str, int],
        wanted: dict[TopicPartition, str],
        generations: dict[TopicPartition, int],
    ) -> None:
        try:
            found = await self._list_offsets_from(
                address, {tp: _RESET_TIMESTAMPS[how] for tp, how in wanted.items()}
            )
        except TributaryError as exc:
            log.info("ListOffsets to broker %d failed: %s", node, exc)
            found = {}
            self.metadata.request_update()
        finally:
            for tp in wanted:
                state = self.subscriptions.states.get(tp)
                if state is not None:
                    state.resetting = False
            self._nodes_resetting.discard(node)
            self.wake()
        for tp in wanted:
            state = self.subscriptions.states.get(tp)
            if state is None or state.generation != generations[tp]:
                continue
            code, offset, _ = found.get(tp, (ErrorCode.NETWORK_EXCEPTION, -1, -1))
            if code is ErrorCode.NONE:
                state.position = offset
                state.reset = None
            elif code.is_retriable or code in _STALE_LEADER_ERRORS:
                self._back_off(state, code)
            else:
                state.error = TributaryError(code, f"looking up the {wanted[tp]} offset of {tp}")
                self.data_arrived()
        self.positions_resolved()
        self.wake()

    async def _list_offsets_from(
        self, address: tuple[str, int], timestamps: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[ErrorCode, int, int]]:
        """One ListOffsets request: (error, offset, timestamp) per partition."""
        return await list_offsets_from(
            self._pool,
            address,
            self.metadata.cluster,
            timestamps,
            self.config.request_timeout_ms / 1000,
            self.config.isolation_level,
        )

    async def list_offsets(
        self, timestamps: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int]]:
        """(offset, timestamp) per partition from its leader, retrying retriable errors
        for up to `request_timeout_ms` (the topics are known to exist)."""
        request_timeout_ms = self.config.request_timeout_ms
        self.metadata.add_topics(*{tp.topic for tp in timestamps})
        result: dict[TopicPartition, tuple[int, int]] = {}
        remaining = dict(timestamps)
        last_error: BaseException | None = None
        with trio.move_on_after(request_timeout_ms / 1000):
            while True:
                cluster = self.metadata.cluster
                by_node: dict[int, dict[TopicPartition, int]] = {}
                for tp, ts in remaining.items():
                    leader = cluster.leader_for(tp)
                    if leader is not None:
                        by_node.setdefault(leader.leader, {})[tp] = ts
                for node, wanted in by_node.items():
                    broker = cluster.broker(node)
                    assert broker is not None
                    try:
                        found = await self._list_offsets_from(broker.address, wanted)
                    except TributaryError as exc:
                        last_error = exc
                        continue
                    for tp, (code, offset, ts) in found.items():
                        if tp not in remaining:
                            continue
                        if code is ErrorCode.NONE:
                            result[tp] = (offset, ts)
                            del remaining[tp]
                            continue
                        error = TributaryError(code, f"looking up offsets of {tp}")
                        if not (code.is_retriable or code in _STALE_LEADER_ERRORS):
                            raise error
                        last_error = error
                if not remaining:
                    return result
                await trio.sleep(self.config.retry_backoff_ms / 1000)
                self.metadata.request_update()
                await self.metadata.refresh()
        raise TributaryError(
            ErrorCode.REQUEST_TIMED_OUT,
            f"could not look up offsets of {', '.join(map(str, sorted(remaining)))} within "
            f"{request_timeout_ms:g} ms" + (f" (last error: {last_error})" if last_error else ""),
        )
