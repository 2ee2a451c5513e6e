"""The consumer: assigned partitions, positions, long-poll fetches, records out of `poll()`.

How it works (Kafka 2.8's KafkaConsumer with manual assignment; no groups):
- Each assigned partition has a `_PartitionState`: its position (the next offset to hand
  out), a pending reset ("earliest"/"latest" from `auto_offset_reset` or
  `seek_to_beginning/end`), records fetched but not yet returned, a retry backoff and an
  error to raise from the next `poll()`. `seek()` bumps the state's generation, so the
  answer of a fetch sent before the seek is dropped instead of applied.
- A background fetcher task loops: partitions awaiting a reset get a ListOffsets to
  their leader (-2 earliest, -1 latest); partitions with a position and nothing buffered
  are fetched, one long-poll Fetch per leader broker at a time (`fetch_min_bytes`,
  `fetch_max_wait_ms`, `max_partition_fetch_bytes`, `fetch_max_bytes`), each partition
  naming the leader epoch from metadata (KIP-320). It sleeps until woken by a poll, a
  seek, an answer or fresh metadata.
- An answer's record batches come whole, so records below the position are skipped.
  OFFSET_OUT_OF_RANGE resets the position by `auto_offset_reset`, or with "none" makes
  the next `poll()` raise `OffsetOutOfRangeError`. A stale-leader error
  (NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH, ...) or a lost connection asks
  for fresh metadata and retries that partition after `retry_backoff_ms`.
- `poll(timeout_ms)` hands out up to `max_poll_records` buffered records (advancing the
  positions), else waits until the fetcher brings some or the timeout passes.

`async with open_consumer("host:port", auto_offset_reset="earliest") as consumer:`
builds one. Timings use `trio.current_time()` (MockClock in tests).
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any, NamedTuple

import trio

from client.connection import BrokerConnectionError, ConnectionPool, Connector, open_connection_pool
from client.metadata import (
    DEFAULT_METADATA_MAX_AGE_MS,
    Metadata,
    open_client_nursery,
    sleep_seconds,
)
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.records import RecordError, decode_records, iter_batches
from client.protocol.types import TopicPartition

log = logging.getLogger(__name__)

EARLIEST = "earliest"
LATEST = "latest"
NONE = "none"
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


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    leader_epoch: int  # the epoch of the leader that appended it (-1 if unknown)


class ConsumerStateError(RuntimeError):
    """The call does not fit the consumer's state (nothing assigned, closed...)."""


class NoOffsetForPartitionError(ConsumerStateError):
    """A partition has no position and `auto_offset_reset` is "none": seek first."""

    def __init__(self, partitions: Iterable[TopicPartition]) -> None:
        self.partitions = sorted(partitions)
        names = ", ".join(str(tp) for tp in self.partitions)
        super().__init__(
            f"no position for partition(s) {names} and auto_offset_reset is 'none': "
            "seek to an offset first"
        )


class OffsetOutOfRangeError(TributaryError):
    """The position is outside the log and `auto_offset_reset` is "none".

    `offsets` maps each partition to the position the broker rejected.
    """

    def __init__(self, offsets: dict[TopicPartition, int], detail: str = "") -> None:
        self.offsets = dict(offsets)
        text = ", ".join(f"{tp} at offset {o}" for tp, o in sorted(offsets.items()))
        super().__init__(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"fetch position out of range for {text} and auto_offset_reset is 'none'"
            + (f" ({detail})" if detail else ""),
        )

    @property
    def retriable(self) -> bool:
        return False


class _PartitionState:
    __slots__ = (
        "backoff_until_ms",
        "buffer",
        "buffer_index",
        "error",
        "fetching",
        "generation",
        "high_watermark",
        "log_start_offset",
        "next_fetch_offset",
        "position",
        "position_epoch",
        "reset",
        "resetting",
    )

    def __init__(self) -> None:
        self.position: int | None = None
        self.position_epoch = -1  # leader epoch of the last record handed out
        self.reset: str | None = None
        self.resetting = False
        self.fetching = False
        self.generation = 0
        self.buffer: list[ConsumerRecord] = []
        self.buffer_index = 0
        self.next_fetch_offset: int | None = None  # where the buffered fetch ended
        self.backoff_until_ms = -math.inf
        self.error: BaseException | None = None
        self.high_watermark = -1
        self.log_start_offset = -1

    def clear_buffer(self) -> None:
        self.buffer = []
        self.buffer_index = 0
        self.next_fetch_offset = None

    @property
    def buffered(self) -> int:
        return len(self.buffer) - self.buffer_index

    def set_position(self, offset: int | None, reset: str | None = None) -> None:
        self.position = offset
        self.reset = reset
        self.error = None
        self.generation += 1
        self.backoff_until_ms = -math.inf
        self.clear_buffer()


class Consumer:
    """Build with `open_consumer()`; see the module docstring for how it works."""

    def __init__(
        self,
        pool: ConnectionPool,
        bootstrap: str | Iterable[str],
        *,
        auto_offset_reset: str = LATEST,
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        max_partition_fetch_bytes: int = 1_048_576,
        fetch_max_bytes: int = 52_428_800,
        max_poll_records: int = 500,
        request_timeout_ms: float = 30_000,
        retry_backoff_ms: float = 100,
        metadata_max_age_ms: float = DEFAULT_METADATA_MAX_AGE_MS,
    ) -> None:
        if auto_offset_reset not in (EARLIEST, LATEST, NONE):
            raise ValueError(
                f"auto_offset_reset must be earliest, latest or none, not {auto_offset_reset!r}"
            )
        if max_poll_records < 1:
            raise ValueError("max_poll_records must be at least 1")
        self.auto_offset_reset = auto_offset_reset
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.fetch_max_bytes = fetch_max_bytes
        self.max_poll_records = max_poll_records
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.metadata = Metadata(
            pool,
            bootstrap,
            max_age_ms=int(metadata_max_age_ms),
            retry_backoff_ms=int(retry_backoff_ms),
            request_timeout_ms=int(request_timeout_ms),
        )
        self._pool = pool
        self._states: dict[TopicPartition, _PartitionState] = {}
        self._nodes_fetching: set[int] = set()
        self._nodes_resetting: set[int] = set()
        self._nursery: trio.Nursery | None = None
        self._wakeup = trio.Event()
        self._data = trio.Event()  # set when records or an error arrive for poll()
        self._positions_changed = trio.Event()
        self._poll_start = 0
        self._closed = False

    # --- lifecycle -------------------------------------------------------------------

    async def start(self, nursery: trio.Nursery) -> None:
        """Bootstrap (raises `NoBrokersAvailableError` if nobody answers), start tasks."""
        await self.metadata.refresh()
        self._nursery = nursery
        await nursery.start(self.metadata.run)
        nursery.start_soon(self._wake_on_metadata)
        nursery.start_soon(self._fetcher_loop)

    async def aclose(self) -> None:
        self._closed = True
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()
        await trio.lowlevel.checkpoint()

    # --- assignment and positions ----------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Consume exactly these partitions (replacing the previous assignment). Positions
        of partitions kept are kept; new ones start by `auto_offset_reset`."""
        wanted = [TopicPartition(*tp) for tp in partitions]
        states: dict[TopicPartition, _PartitionState] = {}
        for tp in wanted:
            state = self._states.get(tp)
            if state is None:
                state = _PartitionState()
                self._initial_position(state)
            states[tp] = state
        self._states = states
        self.metadata.set_topics({tp.topic for tp in wanted})
        self._wake()

    def _initial_position(self, state: _PartitionState) -> None:
        if self.auto_offset_reset == NONE:
            state.reset = None
        else:
            state.reset = self.auto_offset_reset

    def assignment(self) -> set[TopicPartition]:
        return set(self._states)

    def _state_or_error(self, tp: TopicPartition | tuple[str, int]) -> _PartitionState:
        state = self._states.get(TopicPartition(*tp))
        if state is None:
            raise ConsumerStateError(f"partition {TopicPartition(*tp)} is not assigned")
        return state

    def seek(self, tp: TopicPartition | tuple[str, int], offset: int) -> None:
        """The next `poll()` returns records of `tp` from `offset` on."""
        if offset < 0:
            raise ValueError(f"cannot seek to a negative offset ({offset})")
        self._state_or_error(tp).set_position(offset)
        self._wake()

    def seek_to_beginning(
        self, partitions: Iterable[TopicPartition | tuple[str, int]] | None = None
    ) -> None:
        """Start these partitions (default: all assigned) at their log start offset."""
        self._seek_to(EARLIEST, partitions)

    def seek_to_end(self, partitions: Iterable[TopicPartition | tuple[str, int]] | None = None):
        """Start these partitions (default: all assigned) at their end (the HW)."""
        self._seek_to(LATEST, partitions)

    def _seek_to(self, where: str, partitions) -> None:
        tps = list(self._states) if partitions is None else [TopicPartition(*p) for p in partitions]
        for tp in tps:
            self._state_or_error(tp).set_position(None, reset=where)
        self._wake()

    async def position(
        self, tp: TopicPartition | tuple[str, int], timeout_ms: float = 60_000
    ) -> int:
        """The offset of the next record `poll()` will return for `tp`, resolving a pending
        reset first (for at most `timeout_ms`, Kafka's default.api.timeout.ms). Raises
        `NoOffsetForPartitionError` with auto_offset_reset "none"."""
        tp = TopicPartition(*tp)
        with trio.move_on_after(timeout_ms / 1000):
            while True:
                state = self._state_or_error(tp)
                if state.position is not None:
                    return state.position
                if state.error is not None:
                    error, state.error = state.error, None
                    raise error
                if state.reset is None:
                    raise NoOffsetForPartitionError([tp])
                event = self._positions_changed
                self._wake()
                await event.wait()
        raise TributaryError(
            ErrorCode.REQUEST_TIMED_OUT, f"no position for {tp} within {timeout_ms:g} ms"
        )

    def highwater(self, tp: TopicPartition | tuple[str, int]) -> int | None:
        """The high watermark the last fetch of `tp` saw (None before any)."""
        hw = self._state_or_error(tp).high_watermark
        return hw if hw >= 0 else None

    async def partitions_for(self, topic: str) -> list[int]:
        """Partition numbers of `topic`; raises `UnknownTopicError`."""
        was_tracked = topic in self.metadata.topics
        try:
            return await self.metadata.partitions_or_error(topic, self.request_timeout_ms / 1000)
        finally:
            if not was_tracked and topic not in {tp.topic for tp in self._states}:
                self.metadata.remove_topics(topic)

    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition | tuple[str, int]]
    ) -> dict[TopicPartition, int]:
        found = await self._list_offsets({TopicPartition(*tp): -2 for tp in partitions})
        return {tp: offset for tp, (offset, _) in found.items()}

    async def end_offsets(
        self, partitions: Iterable[TopicPartition | tuple[str, int]]
    ) -> dict[TopicPartition, int]:
        found = await self._list_offsets({TopicPartition(*tp): -1 for tp in partitions})
        return {tp: offset for tp, (offset, _) in found.items()}

    async def offsets_for_times(
        self, timestamps: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int] | None]:
        """The first (offset, timestamp) at or after each time, None if there is none."""
        found = await self._list_offsets({TopicPartition(*tp): ts for tp, ts in timestamps.items()})
        return {tp: (o, ts) if o >= 0 else None for tp, (o, ts) in found.items()}

    # --- polling ---------------------------------------------------------------------

    async def poll(self, timeout_ms: float = 0) -> list[ConsumerRecord]:
        """Up to `max_poll_records` records, waiting up to `timeout_ms` for some.

        Raises `OffsetOutOfRangeError` / `NoOffsetForPartitionError` (auto_offset_reset
        "none"), or a partition's unexpected broker error, once each.
        """
        if self._closed:
            raise ConsumerStateError("the consumer is closed")
        if not self._states:
            raise ConsumerStateError("no partitions are assigned: call assign() first")
        deadline = trio.current_time() + max(timeout_ms, 0) / 1000
        while True:
            self._raise_pending_error()
            records = self._drain_buffers()
            self._wake()
            if records:
                await trio.lowlevel.checkpoint()
                return records
            if trio.current_time() >= deadline:
                await trio.lowlevel.checkpoint()
                return []
            event = self._data
            with trio.move_on_at(deadline):
                await event.wait()

    def _raise_pending_error(self) -> None:
        missing = [
            tp
            for tp, s in self._states.items()
            if s.position is None and s.reset is None and s.error is None
        ]
        if missing:
            raise NoOffsetForPartitionError(missing)
        for state in self._states.values():
            if state.error is not None:
                error, state.error = state.error, None
                raise error

    def _drain_buffers(self) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        room = self.max_poll_records
        tps = list(self._states)
        start = self._poll_start % len(tps)
        self._poll_start += 1
        for tp in tps[start:] + tps[:start]:
            state = self._states[tp]
            if not state.buffered:
                continue
            take = state.buffer[state.buffer_index : state.buffer_index + room]
            state.buffer_index += len(take)
            out.extend(take)
            room -= len(take)
            last = take[-1]
            state.position = last.offset + 1
            state.position_epoch = last.leader_epoch
            if not state.buffered:
                if state.next_fetch_offset is not None:
                    state.position = max(state.position, state.next_fetch_offset)
                state.clear_buffer()
            if room <= 0:
                break
        return out

    # --- the fetcher task ------------------------------------------------------------

    def _wake(self) -> None:
        self._wakeup.set()

    def _data_arrived(self) -> None:
        self._data.set()
        self._data = trio.Event()

    async def _wake_on_metadata(self) -> None:
        while True:
            await self.metadata.wait_for_update()
            self._wake()

    async def _fetcher_loop(self) -> None:
        assert self._nursery is not None
        while True:
            self._wakeup = trio.Event()
            now = _now_ms()
            cluster = self.metadata.cluster
            next_wake = math.inf
            resets: dict[int, dict[TopicPartition, str]] = {}
            fetches: dict[int, list[TopicPartition]] = {}
            stale = False
            for tp, state in self._states.items():
                if state.error is not None or state.fetching or state.resetting:
                    continue
                if state.position is None and state.reset is None:
                    continue
                if state.position is not None and state.buffered:
                    continue
                if state.backoff_until_ms > now:
                    next_wake = min(next_wake, state.backoff_until_ms)
                    continue
                leader = cluster.leader_for(tp)
                if leader is None:
                    stale = True
                    continue
                if state.position is None:
                    assert state.reset is not None
                    resets.setdefault(leader.leader, {})[tp] = state.reset
                else:
                    fetches.setdefault(leader.leader, []).append(tp)
            if stale:
                self.metadata.request_update()
            for node, wanted in resets.items():
                broker = cluster.broker(node)
                if broker is None or node in self._nodes_resetting:
                    continue
                self._nodes_resetting.add(node)
                for tp in wanted:
                    self._states[tp].resetting = True
                self._nursery.start_soon(self._reset_positions, node, broker.address, wanted)
            for node, tps in fetches.items():
                broker = cluster.broker(node)
                if broker is None or node in self._nodes_fetching:
                    continue
                self._nodes_fetching.add(node)
                request, sent = self._build_fetch(tps)
                self._nursery.start_soon(self._fetch, node, broker.address, request, sent)
            if next_wake == math.inf:
                await self._wakeup.wait()
            else:
                with trio.move_on_after(sleep_seconds(next_wake - _now_ms())):
                    await self._wakeup.wait()

    def _back_off(self, state: _PartitionState, code: ErrorCode | None) -> None:
        state.backoff_until_ms = _now_ms() + self.retry_backoff_ms
        if code is None or code in _STALE_LEADER_ERRORS:
            self.metadata.request_update()

    def _build_fetch(
        self, tps: list[TopicPartition]
    ) -> tuple[m.FetchRequest, dict[TopicPartition, tuple[_PartitionState, int, int]]]:
        """The Fetch for these partitions at their positions, with what to check the
        answer against (state, generation, offset); marks them as being fetched."""
        cluster = self.metadata.cluster
        sent: dict[TopicPartition, tuple[_PartitionState, int, int]] = {}
        topics: dict[str, list[m.FetchPartition]] = {}
        for tp in tps:
            state = self._states[tp]
            assert state.position is not None
            info = cluster.partition(tp)
            epoch = info.leader_epoch if info is not None else -1
            sent[tp] = (state, state.generation, state.position)
            state.fetching = True
            topics.setdefault(tp.topic, []).append(
                m.FetchPartition(
                    partition=tp.partition,
                    current_leader_epoch=epoch,
                    fetch_offset=state.position,
                    partition_max_bytes=self.max_partition_fetch_bytes,
                )
            )
        request = m.FetchRequest(
            replica_id=m.CONSUMER_REPLICA_ID,
            max_wait_ms=self.fetch_max_wait_ms,
            min_bytes=self.fetch_min_bytes,
            max_bytes=self.fetch_max_bytes,
            topics=[m.FetchTopic(topic=t, partitions=p) for t, p in topics.items()],
        )
        return request, sent

    async def _fetch(
        self,
        node: int,
        address: tuple[str, int],
        request: m.FetchRequest,
        sent: dict[TopicPartition, tuple[_PartitionState, int, int]],
    ) -> None:
        try:
            timeout_s = (self.request_timeout_ms + self.fetch_max_wait_ms) / 1000
            response = await self._pool.request(*address, request, timeout_s=timeout_s)
        except TributaryError as exc:
            log.info("fetch from broker %d failed: %s", node, exc)
            for state, generation, _ in sent.values():
                if state.generation == generation:
                    self._back_off(state, None)
            if isinstance(exc, BrokerConnectionError):
                self.metadata.request_update()
            return
        finally:
            for state, _, _ in sent.values():
                state.fetching = False
            self._nodes_fetching.discard(node)
            self._wake()
        arrived = False
        for topic in response.topics:
            for part in topic.partitions:
                tp = TopicPartition(topic.topic, part.partition)
                entry = sent.get(tp)
                if entry is None:
                    continue
                state, generation, offset = entry
                if self._states.get(tp) is not state or state.generation != generation:
                    continue  # unassigned or sought while the fetch was out: drop the answer
                arrived |= self._apply_fetched(tp, state, offset, part)
        if arrived:
            self._data_arrived()

    def _apply_fetched(
        self,
        tp: TopicPartition,
        state: _PartitionState,
        offset: int,
        part: m.FetchResponsePartition,
    ) -> bool:
        """Buffer one partition's answer; True if poll() has something new (records or
        an error to raise)."""
        code = ErrorCode.from_code(part.error_code)
        if code is ErrorCode.NONE:
            state.high_watermark = part.high_watermark
            state.log_start_offset = part.log_start_offset
            if not part.records:
                return False
            try:
                records, next_offset = _decode(tp, part.records, offset)
            except RecordError as exc:
                state.error = TributaryError(
                    ErrorCode.CORRUPT_MESSAGE, f"{tp} at offset {offset}: {exc}"
                )
                return True
            state.buffer = records
            state.buffer_index = 0
            state.next_fetch_offset = next_offset
            if not records:  # everything was below the position: skip ahead
                state.position = max(offset, next_offset)
                state.clear_buffer()
                return False
            return True
        if code is ErrorCode.OFFSET_OUT_OF_RANGE:
            if self.auto_offset_reset == NONE:
                state.error = OffsetOutOfRangeError(
                    {tp: offset},
                    f"log is [{part.log_start_offset}, {part.high_watermark}]"
                    if part.high_watermark >= 0
                    else "",
                )
                return True
            log.info(
                "%s: offset %d is out of range; resetting to %s",
                tp,
                offset,
                self.auto_offset_reset,
            )
            state.set_position(None, reset=self.auto_offset_reset)
            return False
        if code in _STALE_LEADER_ERRORS or code.is_retriable:
            log.debug("%s: fetch answered %s; refreshing metadata", tp, code.name)
            self._back_off(state, code)
            return False
        state.error = TributaryError(code, f"fetching {tp} at offset {offset}")
        return True

    async def _reset_positions(
        self, node: int, address: tuple[str, int], wanted: dict[TopicPartition, str]
    ) -> None:
        generations = {tp: self._states[tp].generation for tp in wanted}
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
                state = self._states.get(tp)
                if state is not None:
                    state.resetting = False
            self._nodes_resetting.discard(node)
            self._wake()
        for tp in wanted:
            state = self._states.get(tp)
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
                self._data_arrived()
        self._positions_changed.set()
        self._positions_changed = trio.Event()
        self._wake()

    # --- ListOffsets -----------------------------------------------------------------

    async def _list_offsets_from(
        self, address: tuple[str, int], timestamps: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[ErrorCode, int, int]]:
        """One ListOffsets request: (error, offset, timestamp) per partition."""
        cluster = self.metadata.cluster
        topics: dict[str, list[m.ListOffsetsPartition]] = {}
        for tp, timestamp in timestamps.items():
            info = cluster.partition(tp)
            topics.setdefault(tp.topic, []).append(
                m.ListOffsetsPartition(
                    partition=tp.partition,
                    current_leader_epoch=info.leader_epoch if info is not None else -1,
                    timestamp=timestamp,
                )
            )
        request = m.ListOffsetsRequest(
            topics=[m.ListOffsetsTopic(name=t, partitions=p) for t, p in topics.items()]
        )
        response = await self._pool.request(
            *address, request, timeout_s=self.request_timeout_ms / 1000
        )
        return {
            TopicPartition(topic.name, p.partition): (
                ErrorCode.from_code(p.error_code),
                p.offset,
                p.timestamp,
            )
            for topic in response.topics
            for p in topic.partitions
        }

    async def _list_offsets(
        self, timestamps: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int]]:
        """(offset, timestamp) per partition from its leader, retrying retriable errors
        for up to `request_timeout_ms`. Raises `UnknownTopicError` for a missing topic."""
        for topic in {tp.topic for tp in timestamps}:
            await self.partitions_for(topic)  # UnknownTopicError, before waiting for leaders
        self.metadata.add_topics(*{tp.topic for tp in timestamps})
        result: dict[TopicPartition, tuple[int, int]] = {}
        remaining = dict(timestamps)
        last_error: BaseException | None = None
        with trio.move_on_after(self.request_timeout_ms / 1000):
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
                await trio.sleep(self.retry_backoff_ms / 1000)
                self.metadata.request_update()
                await self.metadata.refresh()
        raise TributaryError(
            ErrorCode.REQUEST_TIMED_OUT,
            f"could not look up offsets of {', '.join(map(str, sorted(remaining)))} within "
            f"{self.request_timeout_ms:g} ms"
            + (f" (last error: {last_error})" if last_error else ""),
        )


def _decode(tp: TopicPartition, data: bytes, position: int) -> tuple[list[ConsumerRecord], int]:
    """Records at or above `position` in whole batches, and the offset after the last."""
    view = memoryview(data)
    out: list[ConsumerRecord] = []
    next_offset = position
    topic, partition = tp
    for pos, header in iter_batches(view):
        next_offset = header.next_offset
        if next_offset <= position:
            continue
        epoch = header.partition_leader_epoch
        for r in decode_records(view[pos : pos + header.size]):
            if r.offset >= position:
                out.append(
                    ConsumerRecord(
                        topic, partition, r.offset, r.timestamp, r.key, r.value, r.headers, epoch
                    )
                )
    return out, next_offset


def _now_ms() -> float:
    return trio.current_time() * 1000


@asynccontextmanager
async def open_consumer(
    bootstrap: str | Iterable[str],
    *,
    client_id: str | None = "tributary-consumer",
    connector: Connector | None = None,
    **config: Any,
) -> AsyncIterator[Consumer]:
    """A started consumer (assign partitions next); closed when the block ends.

    Raises `NoBrokersAvailableError` at once when no bootstrap broker answers.
    """
    async with (
        open_connection_pool(client_id=client_id, connector=connector) as pool,
        open_client_nursery() as nursery,
    ):
        consumer = Consumer(pool, bootstrap, **config)
        await consumer.start(nursery)
        try:
            yield consumer
        finally:
            consumer._closed = True
            nursery.cancel_scope.cancel()
