"""The Trio side of a group consumer's membership: joining and syncing, heartbeats,
rebalance callbacks, leaving (Kafka 2.8's ConsumerCoordinator, eager protocol). The
decisions are `GroupMembership`'s (client/consumer/group/membership.py); this module sends
what it asks for (through `CoordinatorChannel`, client/consumer/group/channel.py) and
carries out what it answers. What the member joins with, and the leader's plan, are
`GroupAssignment`'s (client/consumer/group/assignment.py); commits and committed offsets
are `GroupCommits`' (client/consumer/group/commits.py).

How it works: `ConsumerCoordinator` runs, while the consumer is subscribed, these tasks:
- membership: waits until the member must (re)join or the coordinator is unknown, then
  looks the coordinator up. Before a join it revokes (Kafka's onJoinPrepare): the
  consumer stops handing out records of its partitions, commits what poll() had handed
  out when it was last called (auto-commit on), calls `on_revoked` (`on_lost` when the
  generation was lost, so nothing could be committed) and drops the assignment and its
  buffered records. Then JoinGroup, with a subscription per configured assignor in
  preference order (topics; the sticky assignor's user data: the last assignment and
  its generation; owned partitions, which an eager member has just given up). The
  leader decodes every member's subscription, refreshes metadata for the union of their
  topics, runs the assignor the coordinator chose (`GroupAssignment.plan`) and sends the
  plan in SyncGroup; everyone gets its own assignment, which becomes the consumer's
  (positions from the committed offsets) before `on_assigned` is called.
- heartbeats: every `heartbeat_interval_ms` while joined; an answer asking to rejoin or
  naming a lost coordinator wakes the membership task. If poll() has not been called for
  `max_poll_interval_ms` (a poll() waiting for records counts as polling) the member
  leaves the group (LeaveGroup for dynamic members) and rejoins on the next poll(). A
  session timeout without answers marks the coordinator unknown.
- metadata watch: the leader rejoins when a group topic's partition count changes or a
  subscribed topic appears or goes, as Kafka's leader does.
`unsubscribe()` and closing stop those tasks (dropping the coordinator connection if a
join was out), revoke, and leave the group (dynamic members only: a static member keeps
its place until its session times out, KIP-345). Callbacks may be plain functions or
coroutine functions; their exceptions are raised from the next poll().
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from client.connection import ConnectionPool, Connector
from client.consumer.group.assignment import GroupAssignment
from client.consumer.group.assignors import PartitionAssignor
from client.consumer.group.channel import CoordinatorChannel, Wakeup
from client.consumer.group.commits import CommitCallback, GroupCommits, OffsetOwner, call_back
from client.consumer.group.membership import GroupMembership, MemberState, Step
from client.consumer.group.offsets import OffsetAndEpoch
from client.metadata import Metadata, current_ms, sleep_seconds
from client.protocol.consumer_protocol import ConsumerProtocolError, decode_assignment
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.types import TopicPartition

log = logging.getLogger(__name__)

# Kafka gives a JoinGroup the rebalance timeout plus this long to answer.
JOIN_GROUP_SLACK_MS = 5_000

RebalanceCallback = Callable[[set[TopicPartition]], Any]
__all__ = ["CommitCallback", "ConsumerCoordinator", "GroupSettings", "RebalanceCallback"]


# --- what the coordinator needs of the consumer -------------------------------------------------


class AssignmentOwner(OffsetOwner, Protocol):
    """The consumer as the coordinator sees it (client/consumer/consumer.py implements it)."""

    metadata: Metadata
    _in_poll: int

    def assignment(self) -> set[TopicPartition]: ...

    def _current_offsets(self) -> dict[TopicPartition, OffsetAndEpoch]: ...

    def _begin_revocation(self, partitions: Iterable[TopicPartition]) -> None: ...

    def _set_group_assignment(self, partitions: Iterable[TopicPartition]) -> None: ...

    def _wake_pollers(self) -> None: ...


@dataclass
class GroupSettings:
    group_id: str
    group_instance_id: str | None = None
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5_000
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 3_000
    max_poll_interval_ms: int = 300_000
    partition_assignment_strategy: tuple[str | PartitionAssignor, ...] = ("range",)
    request_timeout_ms: float = 30_000
    retry_backoff_ms: float = 100


class ConsumerCoordinator:
    """Group membership of one consumer, with its commits (`commits`) and its way to the
    coordinator (`channel`); see the module docstring. Built by the consumer when it has
    a group id."""

    def __init__(
        self,
        consumer: AssignmentOwner,
        settings: GroupSettings,
        *,
        pool: ConnectionPool,
        coordinator_pool: ConnectionPool,
        client_id: str | None = None,
        connector: Connector | None = None,
    ) -> None:
        if not settings.group_id:
            raise ValueError("a group consumer needs a non-empty group_id")
        self.settings = settings
        self.group_id = settings.group_id
        self.assignment = GroupAssignment(
            settings.group_id,
            settings.partition_assignment_strategy,
            consumer.metadata,
            request_timeout_ms=settings.request_timeout_ms,
        )
        self.membership = GroupMembership(
            settings.group_id,
            group_instance_id=settings.group_instance_id,
            session_timeout_ms=settings.session_timeout_ms,
            rebalance_timeout_ms=settings.max_poll_interval_ms,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
            retry_backoff_ms=int(settings.retry_backoff_ms),
        )
        self._consumer = consumer
        self.metadata = consumer.metadata
        self.channel = CoordinatorChannel(
            self.membership,
            consumer.metadata,
            pool=pool,
            coordinator_pool=coordinator_pool,
            request_timeout_ms=settings.request_timeout_ms,
            retry_backoff_ms=settings.retry_backoff_ms,
            client_id=client_id,
            connector=connector,
        )
        self.commits = GroupCommits(
            consumer,
            self.membership,
            self.channel,
            subscribed=lambda: bool(self._subscription),
            state_changed=self._wake,
            fatal=self._fatal,
            enable_auto_commit=settings.enable_auto_commit,
            auto_commit_interval_ms=settings.auto_commit_interval_ms,
            request_timeout_ms=settings.request_timeout_ms,
            retry_backoff_ms=settings.retry_backoff_ms,
        )
        self._subscription: tuple[str, ...] = ()
        self.on_revoked: RebalanceCallback | None = None
        self.on_assigned: RebalanceCallback | None = None
        self.on_lost: RebalanceCallback | None = None
        self._joined_subscription: tuple[str, ...] | None = None
        self._needs_join_prepare = True
        self._waiting_for_poll = False
        self.callback_error: BaseException | None = None
        self._work = Wakeup()  # the membership task has something to do
        self._heartbeat_wakeup = Wakeup()
        self._nursery: trio.Nursery | None = None
        self._membership_scope: trio.CancelScope | None = None  # while subscribed
        self._closed = False
        self.rebalances = 0  # completed joins, for tests and tools

    # --- lifecycle -------------------------------------------------------------------

    def start(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        if self._subscription:
            self._start_membership()
        self.commits.start(nursery)

    def _start_membership(self) -> None:
        """Run the membership tasks (join, heartbeats, metadata watch) until
        `_stop_membership`: they run only while subscribed."""
        if self._membership_scope is not None or self._nursery is None or self._closed:
            return
        scope = self._membership_scope = trio.CancelScope()
        self._nursery.start_soon(self._membership_tasks, scope)

    async def _stop_membership(self) -> None:
        """Cancel the membership tasks; a JoinGroup or SyncGroup they had out on the
        coordinator connection would hold up later answers behind it: drop that
        connection."""
        if self._membership_scope is None:
            return
        self._membership_scope.cancel()
        self._membership_scope = None
        if self.membership.rebalancing:
            await self.channel.drop_connection()

    async def _membership_tasks(self, scope: trio.CancelScope) -> None:
        with scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._heartbeat_loop)
                nursery.start_soon(self._metadata_watch)
                nursery.start_soon(self._wake_heartbeats_on_lookups)
                await self._membership_loop()

    async def _wake_heartbeats_on_lookups(self) -> None:
        while True:
            await self.channel.found.wait()
            self._heartbeat_wakeup.set()

    async def close(self, *, graceful: bool = True, tasks_alive: bool = True) -> None:
        """Stop the membership; commit (auto-commit on: everything handed out when
        `graceful`, else what poll() had handed out before its latest call); revoke;
        leave the group (dynamic members). Errors are logged, not raised.

        `tasks_alive=False` says the consumer's background tasks and connections are
        already cancelled (its block was cancelled from outside): the last commit and the
        LeaveGroup then go over a connection of their own, and queued commits are dropped.
        """
        if self._closed:
            return
        self._closed = True
        self.channel.farewell = not tasks_alive
        await self._stop_membership()
        self.commits.stop_auto_commit()
        ms = self.membership
        try:
            if self.settings.enable_auto_commit and (
                not self._subscription or ms.state is MemberState.STABLE
            ):
                offsets = (
                    self._consumer._current_offsets()
                    if graceful
                    else self._consumer._consumed_offsets()
                )
                if offsets and tasks_alive:
                    await self.commits.commit(offsets)
                elif offsets:
                    await self.commits.commit_once(offsets)
        except TributaryError as exc:
            log.warning("group %s: the commit on close failed: %s", self.group_id, exc)
        if self._subscription:
            await self._revoke("the consumer is closing")
            await self._leave_group("the consumer is being closed")

    # --- subscription ----------------------------------------------------------------

    @property
    def subscription(self) -> tuple[str, ...]:
        return self._subscription

    def subscribe(
        self,
        topics: Iterable[str],
        *,
        on_revoked: RebalanceCallback | None = None,
        on_assigned: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        topics = tuple(dict.fromkeys(topics))
        if not topics:
            raise ValueError("subscribe to at least one topic (unsubscribe() to stop)")
        self.on_revoked, self.on_assigned, self.on_lost = on_revoked, on_assigned, on_lost
        if topics != self._subscription:
            self._subscription = topics
            self.metadata.set_topics(self.group_topics())
            if self._joined_subscription is not None:
                self.membership.request_rejoin("the subscription changed")
        self.membership.poll_called(current_ms())
        self._start_membership()
        self._work.set()

    async def unsubscribe(self) -> None:
        """Stop the membership, revoke the assignment (callbacks), leave the group,
        forget the subscription."""
        if not self._subscription:
            return
        await self._stop_membership()
        await self._revoke("the consumer unsubscribed")
        await self._leave_group("the consumer unsubscribed from all topics")
        self._subscription = ()
        self._joined_subscription = None
        self._needs_join_prepare = True
        self._waiting_for_poll = False
        self.assignment.snapshot = None
        self.metadata.set_topics(())

    def group_topics(self) -> set[str]:
        """The topics whose metadata the membership needs (the leader: the group's)."""
        return set(self._subscription) | self.assignment.topics()

    # --- poll() hooks ------------------------------------------------------------------

    def poll_called(self) -> None:
        """poll() was called: raise a fatal group error, restart max.poll.interval.ms,
        rejoin after a poll timeout."""
        self.raise_error()
        self.membership.poll_called(current_ms())
        if self._waiting_for_poll:
            self._waiting_for_poll = False
            self._work.set()
        self._heartbeat_wakeup.set()

    def raise_error(self) -> None:
        """Raise the fatal group error (every time) or a callback's exception (once)."""
        if self.membership.fatal_error is not None:
            raise self.membership.fatal_error
        if self.callback_error is not None:
            error, self.callback_error = self.callback_error, None
            raise error

    def _wake(self) -> None:
        self._work.set()

    # --- the membership task ---------------------------------------------------------

    def _has_work(self) -> bool:
        ms = self.membership
        return (
            bool(self._subscription)
            and ms.fatal_error is None
            and not self._waiting_for_poll
            and (ms.needs_join or ms.coordinator is None)
        )

    async def _membership_loop(self) -> None:
        while True:
            while not self._has_work():
                await self._work.wait()
            try:
                await self.channel.ensure()
            except TributaryError as exc:
                self._fatal(exc)
                continue
            if self.membership.needs_join:
                await self._join_group()

    def _fatal(self, error: TributaryError) -> None:
        self.membership.fatal_error = error
        log.error("group %s: %s", self.group_id, error)
        self._consumer._wake_pollers()

    async def _join_group(self) -> None:
        """Join and sync until Stable, or until the coordinator must be found again (the
        caller loops) or a fatal error."""
        ms = self.membership
        while ms.needs_join and ms.fatal_error is None and not self._waiting_for_poll:
            if self._needs_join_prepare:
                await self._on_join_prepare()
                self._needs_join_prepare = False
            if ms.coordinator is None:
                return
            subscription = self._subscription
            owned = tuple(sorted(self._consumer.assignment()))  # empty after an eager revoke
            request = ms.join_request(self.assignment.protocols(subscription, owned))
            code, response = await self.channel.send(
                request, self.settings.max_poll_interval_ms + JOIN_GROUP_SLACK_MS
            )
            step = ms.on_join_response(code, response, current_ms())
            if step is Step.OK:
                self._joined_subscription = subscription
                self._heartbeat_wakeup.set()
                assignments: dict[str, bytes] = {}
                if ms.is_leader:
                    try:
                        assignments = await self.assignment.plan(response, self._subscription)
                    except TributaryError as exc:
                        ms.fatal_error = exc
                        step = Step.FATAL
                if step is Step.OK:
                    code, response = await self.channel.send(
                        ms.sync_request(assignments), self.settings.request_timeout_ms
                    )
                    step = ms.on_sync_response(code, current_ms())
                    if step is Step.OK:
                        await self._on_join_complete(response.assignment)
                        continue
            if step is Step.FATAL:
                assert ms.fatal_error is not None
                self._fatal(ms.fatal_error)
                return
            if step is Step.FIND_COORDINATOR:
                return
            if step is Step.RETRY:
                await trio.sleep(self.settings.retry_backoff_ms / 1000)

    async def _on_join_prepare(self) -> None:
        """Before a (re)join: stop handing out records, commit what poll() had handed out
        before its latest call (auto-commit), revoke."""
        assigned = self._consumer.assignment()
        self._consumer._begin_revocation(assigned)
        if assigned and self.settings.enable_auto_commit:
            offsets = self._consumer._consumed_offsets()
            if offsets and self.membership.state is MemberState.STABLE:
                try:
                    await self.commits.commit(offsets)
                except TributaryError as exc:
                    log.warning(
                        "group %s: the commit before rebalancing failed: %s", self.group_id, exc
                    )
        await self._revoke(self.membership.rejoin_reason)

    async def _revoke(self, reason: str) -> None:
        """Call on_revoked (on_lost if the generation is gone) with the assignment, then
        drop it. on_lost defaults to on_revoked, as Kafka's."""
        assigned = self._consumer.assignment()
        if not assigned:
            return
        self._consumer._begin_revocation(assigned)
        lost = self.membership.generation_lost
        log.info(
            "group %s: %s partitions %s (%s)",
            self.group_id,
            "lost" if lost else "revoking",
            sorted(map(str, assigned)),
            reason,
        )
        callback = (self.on_lost or self.on_revoked) if lost else self.on_revoked
        await self._run_callback(callback, set(assigned))
        self._consumer._set_group_assignment(())

    async def _run_callback(self, callback: RebalanceCallback | None, partitions: set) -> None:
        try:
            await call_back(callback, partitions)
        except Exception as exc:  # raised from the next poll(), as Kafka's
            log.exception("group %s: a rebalance callback raised", self.group_id)
            self.callback_error = exc
            self._consumer._wake_pollers()

    async def _on_join_complete(self, assignment_bytes: bytes) -> None:
        ms = self.membership
        try:
            assignment = decode_assignment(assignment_bytes)
        except ConsumerProtocolError as exc:
            log.error("group %s: unreadable assignment (%s); rejoining", self.group_id, exc)
            ms.request_rejoin("the assignment was unreadable")
            return
        partitions = set(assignment.partitions)
        foreign = sorted(str(tp) for tp in partitions if tp.topic not in self._subscription)
        if foreign:
            ms.request_rejoin(
                f"the assignment names topics we are not subscribed to ({', '.join(foreign)})"
            )
            return
        self.rebalances += 1
        self.assignment.completed(partitions, ms.generation.generation_id, leader=ms.is_leader)
        if not ms.is_leader:
            self.metadata.set_topics(self._subscription)
        log.info(
            "group %s: generation %d, member %s%s assigned %s",
            self.group_id,
            ms.generation.generation_id,
            ms.generation.member_id,
            " (leader)" if ms.is_leader else "",
            sorted(map(str, partitions)),
        )
        self._consumer._set_group_assignment(partitions)
        self._needs_join_prepare = True
        await self._run_callback(self.on_assigned, partitions)
        self._consumer._wake_pollers()

    async def _leave_group(self, reason: str) -> None:
        ms = self.membership
        request = ms.leave_request()
        self.assignment.snapshot = None
        if request is None:
            return
        log.info("group %s: member %s leaves (%s)", self.group_id, request.members[0], reason)
        code, response = await self.channel.send(request, self.settings.request_timeout_ms)
        if code is ErrorCode.NONE and response is not None:
            codes = [ErrorCode.from_code(r.error_code) for r in response.members]
            code = next((c for c in codes if c is not ErrorCode.NONE), ErrorCode.NONE)
        if code is not ErrorCode.NONE:
            log.info("group %s: LeaveGroup answered %s", self.group_id, code.name)

    # --- heartbeats, poll timeout, metadata ------------------------------------------

    async def _heartbeat_loop(self) -> None:
        ms = self.membership
        while True:
            now = current_ms()
            if self._consumer._in_poll:
                ms.poll_called(now)  # a poll() waiting for records counts as polling
            joined = ms.state in (MemberState.COMPLETING_REBALANCE, MemberState.STABLE)
            if (
                joined
                and self._subscription
                and not self._waiting_for_poll
                and ms.poll_timeout_expired(now)
            ):
                log.warning(
                    "group %s: poll() was not called for max_poll_interval_ms (%d ms): "
                    "leaving the group; the next poll() rejoins",
                    self.group_id,
                    self.settings.max_poll_interval_ms,
                )
                self._waiting_for_poll = True
                self._consumer._begin_revocation(self._consumer.assignment())
                await self._leave_group("consumer poll timeout has expired")
                continue
            if not ms.heartbeat_wanted:
                await self._heartbeat_wakeup.wait()
                continue
            if ms.session_expired(now):
                ms.coordinator_unknown("the session timed out without a heartbeat answer")
                self._work.set()
                continue
            delay = ms.time_to_next_heartbeat(now)
            if self._subscription and not self._waiting_for_poll:
                delay = min(delay, ms.time_to_poll_timeout(now) + 1)
            if delay > 0:
                await self._heartbeat_wakeup.wait(sleep_seconds(delay))
                continue
            request, sent = ms.heartbeat_request(now)
            timeout_ms = min(self.settings.request_timeout_ms, self.settings.session_timeout_ms)
            code, _ = await self.channel.send(request, timeout_ms)
            step = ms.on_heartbeat_response(code, sent, current_ms())
            if step is Step.FATAL:
                assert ms.fatal_error is not None
                self._fatal(ms.fatal_error)
            elif step is not Step.OK:
                self._work.set()

    async def _metadata_watch(self) -> None:
        """The leader rejoins when partition counts of the group's topics change."""
        while True:
            await self.metadata.wait_for_update()
            ms = self.membership
            if ms.state is not MemberState.STABLE or not ms.is_leader:
                continue
            changed = self.assignment.changed_topics(self.metadata.cluster)
            if changed:
                ms.request_rejoin(f"the partitions of {', '.join(changed)} changed")
                self._work.set()
