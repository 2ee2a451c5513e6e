"""The public consumer: assigned or subscribed partitions, positions, records out of
`poll()`. Kafka 2.8's KafkaConsumer, on Trio.

How it works: `Consumer` wires the parts and holds the API; the work is theirs:
- `SubscriptionState` (client/consumer/subscription.py) holds the assigned partitions,
  each one's position, pending reset, buffered records and error; `assign()`, `seek()`,
  `seek_to_beginning/end()` change it, and wake the fetcher.
- The `Fetcher` (client/consumer/fetcher.py) is the background task that resets
  positions (ListOffsets) and fetches records into the partitions' buffers, one
  long-poll Fetch per leader broker, fetching one answer ahead while poll() hands out
  the last, checking CRCs and decoding the record batches into columns
  (client/consumer/batch.py), and abandoning fetches from a leader that moved
  (client/inflight.py).
- `poll(timeout_ms)` hands out up to `max_poll_records` buffered records (advancing the
  positions), else waits until the fetcher brings some or the timeout passes. On entry
  it notes each position as "consumed": what auto-commit may commit (Kafka commits in
  poll() what the previous poll() returned). `poll()` builds a `ConsumerRecord` per
  record from the columns; `poll_batches(timeout_ms)` is the same call (same records,
  `max_poll_records`, positions, errors, auto-commit and rebalance behaviour) handing
  out the columns themselves, one `ConsumerBatch` per partition: for callers that take
  many records at once (the CLI, `perf consume`), at a fraction of the cost per record.
  A partition's error (client/consumer/errors.py) is raised by the next poll(), once.

Consumer groups (with a `group_id`; client/consumer/group/coordinator.py does the
work): `subscribe(topics)` makes the consumer a group member whose assignment the
group's leader decides; a rebalance marks the revoked partitions (no more records of
them come out of poll(), their buffers are dropped) before `on_revoked` runs, and new
partitions start with the position "committed" (`COMMITTED`): the coordinator's
resolver looks the group's committed offset up (else `auto_offset_reset` applies) while
the fetcher leaves them alone. `assign()` with a group id starts partitions the same way
and commits with no membership (generation -1). `commit()`, `commit_async()` and
`committed()` go to the group's coordinator. Leaving the `open_consumer` block commits
(auto-commit on) and leaves the group. With `allow_auto_create_topics=True` (Kafka's
`allow.auto.create.topics`; off by default here) a subscribed topic that does not exist
is created by the broker, if its `auto.create.topics.enable` allows. `client_rack`
(Kafka's `client.rack`, KIP-392) names the consumer's rack: a leader whose brokers run
a rack-aware `replica.selector.class` sends it to a replica in that rack to fetch from.

`async with open_consumer("host:port", auto_offset_reset="earliest") as consumer:`
builds one. Timings use `trio.current_time()` (MockClock in tests).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from itertools import chain
from typing import Any

import trio

from client.connection import ConnectionPool, Connector, open_connection_pool
from client.consumer.batch import ConsumerBatch, ConsumerRecord, isolation_level_of
from client.consumer.errors import ConsumerStateError, NoOffsetForPartitionError
from client.consumer.fetcher import FetchConfig, Fetcher
from client.consumer.group.coordinator import (
    CommitCallback,
    ConsumerCoordinator,
    GroupSettings,
    RebalanceCallback,
)
from client.consumer.group.offsets import CommittedOffset, OffsetAndEpoch
from client.consumer.subscription import EARLIEST, LATEST, NONE, SubscriptionState
from client.metadata import DEFAULT_METADATA_MAX_AGE_MS, Metadata, open_client_nursery
from client.producer.transactions import ConsumerGroupMetadata
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.types import TopicPartition
from client.security.secure_connector import with_security


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
        check_crcs: bool = True,
        isolation_level: str = "read_uncommitted",
        metadata_max_age_ms: float = DEFAULT_METADATA_MAX_AGE_MS,
        group_id: str | None = None,
        group_instance_id: str | None = None,
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5_000,
        session_timeout_ms: int = 10_000,
        heartbeat_interval_ms: int = 3_000,
        max_poll_interval_ms: int = 300_000,
        partition_assignment_strategy: Iterable[Any] | str = ("range",),
        coordinator_pool: ConnectionPool | None = None,
        client_id: str | None = None,
        allow_auto_create_topics: bool = False,
        connector: Connector | None = None,
        client_rack: str = "",
    ) -> None:
        if auto_offset_reset not in (EARLIEST, LATEST, NONE):
            raise ValueError(
                f"auto_offset_reset must be earliest, latest or none, not {auto_offset_reset!r}"
            )
        if max_poll_records < 1:
            raise ValueError("max_poll_records must be at least 1")
        self.auto_offset_reset = auto_offset_reset
        self.max_poll_records = max_poll_records
        self.request_timeout_ms = request_timeout_ms
        self.metadata = Metadata(
            pool,
            bootstrap,
            max_age_ms=int(metadata_max_age_ms),
            retry_backoff_ms=int(retry_backoff_ms),
            request_timeout_ms=int(request_timeout_ms),
            allow_auto_create_topics=allow_auto_create_topics,
        )
        self.subscriptions = SubscriptionState(auto_offset_reset, group=group_id is not None)
        self.fetcher = Fetcher(
            self.subscriptions,
            self.metadata,
            pool,
            FetchConfig(
                fetch_min_bytes=fetch_min_bytes,
                fetch_max_wait_ms=fetch_max_wait_ms,
                max_partition_fetch_bytes=max_partition_fetch_bytes,
                fetch_max_bytes=fetch_max_bytes,
                request_timeout_ms=request_timeout_ms,
                retry_backoff_ms=retry_backoff_ms,
                check_crcs=check_crcs,
                client_rack=client_rack,
                preferred_replica_max_age_ms=metadata_max_age_ms,
                isolation_level=isolation_level_of(isolation_level),
            ),
        )
        self._nursery: trio.Nursery | None = None
        self._closed = False
        self._in_poll = 0  # poll() calls under way (a waiting poll counts as polling)
        self.group_id = group_id
        self._coordinator: ConsumerCoordinator | None = None
        if group_id is not None:
            if isinstance(partition_assignment_strategy, str):
                partition_assignment_strategy = (partition_assignment_strategy,)
            self._coordinator = ConsumerCoordinator(
                self,
                GroupSettings(
                    group_id=group_id,
                    group_instance_id=group_instance_id,
                    enable_auto_commit=enable_auto_commit,
                    auto_commit_interval_ms=auto_commit_interval_ms,
                    session_timeout_ms=session_timeout_ms,
                    heartbeat_interval_ms=heartbeat_interval_ms,
                    max_poll_interval_ms=max_poll_interval_ms,
                    partition_assignment_strategy=tuple(partition_assignment_strategy),
                    request_timeout_ms=request_timeout_ms,
                    retry_backoff_ms=retry_backoff_ms,
                ),
                pool=pool,
                coordinator_pool=coordinator_pool or pool,
                client_id=client_id,
                connector=connector,
            )
        elif group_instance_id is not None:
            raise ValueError("group_instance_id needs a group_id")

    @property
    def check_crcs(self) -> bool:
        return self.fetcher.config.check_crcs

    # --- lifecycle -------------------------------------------------------------------

    async def start(self, nursery: trio.Nursery) -> None:
        """Bootstrap (raises `NoBrokersAvailableError` if nobody answers), start tasks."""
        await self.metadata.refresh()
        self._nursery = nursery
        await nursery.start(self.metadata.run)
        self.fetcher.start(nursery)
        if self._coordinator is not None:
            self._coordinator.start(nursery)

    async def aclose(self, *, graceful: bool = True) -> None:
        """Close: a group consumer first commits (auto-commit on; everything handed out,
        or with `graceful=False` only what poll() had handed out before its latest call),
        calls on_revoked and leaves the group (dynamic members), within
        `request_timeout_ms`; then the background tasks stop. Idempotent."""
        await self._close(graceful=graceful)

    async def _close(self, *, graceful: bool) -> None:
        # No checkpoint after cancelling the nursery: open_consumer closes from inside
        # it, and a Cancelled raised there would replace the exception leaving the block.
        if self._closed:
            return
        self._closed = True
        # Inside a cancelled scope the background tasks and connections (nested in it)
        # are being cancelled too: the goodbye then goes over a connection of its own.
        tasks_alive = trio.current_effective_deadline() != -math.inf
        try:
            if self._coordinator is not None:
                # Shielded: closing after a cancellation still says goodbye to the group.
                with trio.CancelScope(shield=True) as scope:
                    scope.deadline = trio.current_time() + self.request_timeout_ms / 1000
                    await self._coordinator.close(graceful=graceful, tasks_alive=tasks_alive)
            else:
                await trio.lowlevel.checkpoint()
        finally:
            if self._nursery is not None:
                self._nursery.cancel_scope.cancel()

    # --- assignment and positions ----------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Consume exactly these partitions (replacing the previous assignment). Positions
        of partitions kept are kept; new ones start at the group's committed offset (with
        a group_id), else by `auto_offset_reset`. Not while subscribed."""
        if self.subscription():
            raise ConsumerStateError(
                "assign() and subscribe() are mutually exclusive: unsubscribe() first"
            )
        wanted = [TopicPartition(*tp) for tp in partitions]
        self.subscriptions.assign(wanted)
        self.metadata.set_topics({tp.topic for tp in wanted})
        self.fetcher.wake()
        self._wake_resolver()

    def assignment(self) -> set[TopicPartition]:
        return self.subscriptions.assignment()

    # --- consumer groups -------------------------------------------------------------

    @property
    def group(self) -> ConsumerCoordinator | None:
        """The group membership (None without a group_id): generation, member id, state
        in `group.membership`."""
        return self._coordinator

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group and this member's generation, member id and instance id (KIP-447):
        what a transactional producer's `send_offsets_to_transaction` takes, so that the
        group coordinator fences a member that is no longer in the group (Kafka's
        `groupMetadata()`)."""
        membership = self._group_or_error("group_metadata()").membership
        generation = membership.generation
        return ConsumerGroupMetadata(
            self.group_id or "",
            generation.generation_id,
            generation.member_id,
            membership.group_instance_id,
        )

    def _group_or_error(self, what: str) -> ConsumerCoordinator:
        if self._coordinator is None:
            raise ConsumerStateError(f"{what} needs a group_id")
        return self._coordinator

    def subscription(self) -> set[str]:
        return set(self._coordinator.subscription) if self._coordinator is not None else set()

    def subscribe(
        self,
        topics: Iterable[str] | str,
        *,
        on_revoked: RebalanceCallback | None = None,
        on_assigned: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        """Consume these topics as a member of the group: the group's leader assigns the
        partitions; they change on every rebalance. The callbacks (plain or async
        functions of a set[TopicPartition]) run on the consumer's background task:
        `on_revoked` before a rebalance with the partitions being taken away (their
        records are no longer handed out; with auto-commit, what poll() had handed out
        before its latest call is committed first), `on_assigned` with the new ones,
        `on_lost` (default: on_revoked) when the membership was lost, so nothing could
        be committed. Subscribing again replaces the topics and the callbacks."""
        coordinator = self._group_or_error("subscribe()")
        if self.subscriptions.states and not coordinator.subscription:
            raise ConsumerStateError(
                "assign() and subscribe() are mutually exclusive: assign([]) first"
            )
        coordinator.subscribe(
            [topics] if isinstance(topics, str) else topics,
            on_revoked=on_revoked,
            on_assigned=on_assigned,
            on_lost=on_lost,
        )
        self._wake_pollers()

    async def unsubscribe(self) -> None:
        """Give the partitions back (on_revoked), leave the group, forget the topics."""
        if self._coordinator is not None:
            await self._coordinator.unsubscribe()
            self._wake_pollers()
        else:
            await trio.lowlevel.checkpoint()

    async def commit(
        self,
        offsets: dict[TopicPartition, int] | dict[TopicPartition, OffsetAndEpoch] | None = None,
    ) -> None:
        """Commit `offsets` (the next offset to read, per partition) or, by default, the
        positions of every assigned partition (everything poll() has handed out), and
        wait. Retries retriable errors for `request_timeout_ms`. Raises
        `CommitFailedError` when this member's generation is no longer the group's (the
        group rebalanced without it), `RebalanceInProgressError` during a rebalance."""
        commits = self._group_or_error("commit()").commits
        await commits.commit(self._current_offsets() if offsets is None else offsets)

    def commit_async(
        self,
        offsets: dict[TopicPartition, int] | dict[TopicPartition, OffsetAndEpoch] | None = None,
        callback: CommitCallback | None = None,
    ) -> None:
        """Commit in the background, once (no retries), after any commit asked for
        earlier; `callback(offsets, error_or_None)` (plain or async) when done."""
        commits = self._group_or_error("commit_async()").commits
        commits.commit_async(self._current_offsets() if offsets is None else offsets, callback)

    async def committed(
        self,
        partitions: Iterable[TopicPartition | tuple[str, int]],
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition (None: nothing committed)."""
        commits = self._group_or_error("committed()").commits
        found = await commits.fetch_committed(
            [TopicPartition(*tp) for tp in partitions], timeout_ms
        )
        return {tp: c.offset for tp, c in found.items()}

    # What the group coordinator calls (client/consumer/group/coordinator.py
    # `AssignmentOwner`).

    def _current_offsets(self) -> dict[TopicPartition, OffsetAndEpoch]:
        return self.subscriptions.current_offsets()

    def _consumed_offsets(self) -> dict[TopicPartition, OffsetAndEpoch]:
        return self.subscriptions.consumed_offsets()

    def _begin_revocation(self, partitions: Iterable[TopicPartition]) -> None:
        self.subscriptions.begin_revocation(partitions)

    def _set_group_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        self.subscriptions.set_group_assignment(partitions)
        self.fetcher.wake()
        self._wake_resolver()

    def _awaiting_committed(self) -> dict[TopicPartition, int]:
        return self.subscriptions.awaiting_committed()

    def _apply_committed(
        self,
        wanted: Mapping[TopicPartition, int],
        found: Mapping[TopicPartition, CommittedOffset] | None,
        error: TributaryError | None,
    ) -> None:
        self.subscriptions.apply_committed(wanted, found, error)
        if error is not None:
            self.fetcher.data_arrived()
        self.fetcher.positions_resolved()
        self.fetcher.wake()

    def _wake_pollers(self) -> None:
        self.fetcher.data_arrived()

    def _wake_resolver(self) -> None:
        if self._coordinator is not None:
            self._coordinator.commits.wake_resolver()

    # --- positions -------------------------------------------------------------------

    def seek(self, tp: TopicPartition | tuple[str, int], offset: int) -> None:
        """The next `poll()` returns records of `tp` from `offset` on."""
        self.subscriptions.seek(tp, offset)
        self.fetcher.wake()

    def seek_to_beginning(
        self, partitions: Iterable[TopicPartition | tuple[str, int]] | None = None
    ) -> None:
        """Start these partitions (default: all assigned) at their log start offset."""
        self.subscriptions.seek_to(EARLIEST, partitions)
        self.fetcher.wake()

    def seek_to_end(self, partitions: Iterable[TopicPartition | tuple[str, int]] | None = None):
        """Start these partitions (default: all assigned) at their end (the HW)."""
        self.subscriptions.seek_to(LATEST, partitions)
        self.fetcher.wake()

    async def position(
        self, tp: TopicPartition | tuple[str, int], timeout_ms: float = 60_000
    ) -> int:
        """The offset of the next record `poll()` will return for `tp`, resolving a pending
        reset first (for at most `timeout_ms`, Kafka's default.api.timeout.ms). Raises
        `NoOffsetForPartitionError` with auto_offset_reset "none"."""
        tp = TopicPartition(*tp)
        with trio.move_on_after(timeout_ms / 1000):
            while True:
                state = self.subscriptions.state_or_error(tp)
                if state.position is not None:
                    return state.position
                if state.error is not None:
                    error, state.error = state.error, None
                    raise error
                if state.reset is None:
                    raise NoOffsetForPartitionError([tp])
                event = self.fetcher.positions_changed
                self.fetcher.wake()
                await event.wait()
        raise TributaryError(
            ErrorCode.REQUEST_TIMED_OUT, f"no position for {tp} within {timeout_ms:g} ms"
        )

    def highwater(self, tp: TopicPartition | tuple[str, int]) -> int | None:
        """The high watermark the last fetch of `tp` saw (None before any)."""
        hw = self.subscriptions.state_or_error(tp).high_watermark
        return hw if hw >= 0 else None

    async def partitions_for(self, topic: str) -> list[int]:
        """Partition numbers of `topic`; raises `UnknownTopicError`."""
        was_tracked = topic in self.metadata.topics
        try:
            return await self.metadata.partitions_or_error(topic, self.request_timeout_ms / 1000)
        finally:
            if not was_tracked and topic not in self._needed_topics():
                self.metadata.remove_topics(topic)

    def _needed_topics(self) -> set[str]:
        topics = {tp.topic for tp in self.subscriptions.states}
        if self._coordinator is not None:
            topics |= self._coordinator.group_topics()
        return topics

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
        batches = await self._poll(timeout_ms)
        if len(batches) == 1:
            return batches[0].records()
        return list(chain.from_iterable(batch.records() for batch in batches))

    async def poll_batches(self, timeout_ms: float = 0) -> list[ConsumerBatch]:
        """`poll()`'s records as one `ConsumerBatch` (columns) per partition: the same
        records, positions, errors and commit semantics, without an object per record."""
        return await self._poll(timeout_ms)

    async def _poll(self, timeout_ms: float) -> list[ConsumerBatch]:
        if self._closed:
            raise ConsumerStateError("the consumer is closed")
        # Checkpoint first: between draining the buffers and returning nothing may run
        # (a rebalance must not revoke a partition whose records are on their way out).
        await trio.lowlevel.checkpoint()
        group = self._coordinator
        if group is not None:
            group.poll_called()  # raises a fatal group error or a callback's exception
        subscriptions = self.subscriptions
        if not subscriptions.states and not self.subscription():
            raise ConsumerStateError(
                "no partitions are assigned: call assign() or subscribe() first"
            )
        subscriptions.note_consumed()
        deadline = trio.current_time() + max(timeout_ms, 0) / 1000
        self._in_poll += 1
        try:
            while True:
                if group is not None:
                    group.raise_error()
                subscriptions.raise_pending_error(self._wake_resolver)
                batches = subscriptions.drain(self.max_poll_records)
                self.fetcher.wake()
                if batches:
                    return batches
                if trio.current_time() >= deadline:
                    return []
                event = self.fetcher.data
                with trio.move_on_at(deadline):
                    await event.wait()
        finally:
            self._in_poll -= 1

    async def _list_offsets(
        self, timestamps: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int]]:
        """(offset, timestamp) per partition from its leader, retrying retriable errors
        for up to `request_timeout_ms`. Raises `UnknownTopicError` for a missing topic."""
        for topic in {tp.topic for tp in timestamps}:
            await self.partitions_for(topic)  # UnknownTopicError, before waiting for leaders
        return await self.fetcher.list_offsets(timestamps)


@asynccontextmanager
async def open_consumer(
    bootstrap: str | Iterable[str],
    *,
    client_id: str | None = "tributary-consumer",
    connector: Connector | None = None,
    **config: Any,
) -> AsyncIterator[Consumer]:
    """A started consumer (assign or subscribe next); closed when the block ends (a group
    consumer commits, with auto-commit on, and leaves its group: see `Consumer.aclose`;
    when the block raises, it commits only what poll() had handed out before its latest
    call).

    Raises `NoBrokersAvailableError` at once when no bootstrap broker answers.
    """
    connector = with_security(connector, config)  # security_protocol, ssl_*, sasl_*
    async with (
        open_connection_pool(client_id=client_id, connector=connector) as pool,
        open_connection_pool(client_id=client_id, connector=connector) as coordinator_pool,
        open_client_nursery() as nursery,
    ):
        consumer = Consumer(
            pool,
            bootstrap,
            coordinator_pool=coordinator_pool,
            client_id=client_id,
            connector=connector,
            **config,
        )
        await consumer.start(nursery)
        try:
            yield consumer
        except BaseException:
            await consumer._close(graceful=False)
            raise
        else:
            await consumer.aclose()
        finally:
            consumer._closed = True
            nursery.cancel_scope.cancel()
