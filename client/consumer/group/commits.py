"""A group consumer's committed offsets: commits, auto-commit, and starting positions
from what the group committed (Kafka 2.8's ConsumerCoordinator offset handling).

How it works: `GroupCommits` runs three tasks in the consumer's nursery.
- committer: commits run one at a time in the order they were asked for, so a
  `commit_async` cannot land after a later `commit()`. Each goes out with the
  generation of the moment: a subscribed member must be Stable
  (`RebalanceInProgressError` while rebalancing, `CommitFailedError` when out of the
  group, both from `GroupMembership.commit_generation`); a consumer without a
  subscription commits with generation -1 and member id "", as Kafka's manual
  assignment does. `commit()` retries retriable errors (coordinator moving or loading)
  for the request timeout; `commit_async()` makes one attempt and calls its callback
  with the offsets and the error (None on success). The answer's per-partition codes go
  through `GroupMembership.commit_error`, which also resets the generation when the
  coordinator says it is stale; the membership task is woken to rejoin.
- resolver: partitions waiting for a starting position (`Consumer._awaiting_committed`:
  new in an assignment, or `assign()`ed with a group id) get an OffsetFetch; the
  consumer applies the answer (a committed offset is the position; none means
  `auto_offset_reset`). Retriable failures are retried after backoff.
- auto-commit (`enable_auto_commit`): every `auto_commit_interval_ms`, an asynchronous
  commit of `Consumer._consumed_offsets()`: the positions poll() had reached when it was
  last called, so a record is committed only once the application came back for more
  (Kafka's auto-commit runs in poll() and commits what the previous poll() returned).
"""

from __future__ import annotations

import inspect
import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from client.consumer.group.channel import CoordinatorChannel, Wakeup
from client.consumer.group.membership import (
    COORDINATOR_ERRORS,
    NO_GENERATION,
    GroupMembership,
    MemberState,
)
from client.consumer.group.offsets import (
    CommittedOffset,
    OffsetAndEpoch,
    committed_offsets,
    offset_commit_errors,
    offset_commit_request,
    offset_fetch_request,
)
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.types import TopicPartition

log = logging.getLogger(__name__)

CommitCallback = Callable[[dict[TopicPartition, OffsetAndEpoch], BaseException | None], Any]


class OffsetOwner(Protocol):
    """What the commits need of the consumer (client/consumer/consumer.py)."""

    def _consumed_offsets(self) -> dict[TopicPartition, OffsetAndEpoch]: ...

    def _awaiting_committed(self) -> dict[TopicPartition, int]: ...

    def _apply_committed(
        self,
        wanted: Mapping[TopicPartition, int],
        found: Mapping[TopicPartition, CommittedOffset] | None,
        error: TributaryError | None,
    ) -> None: ...


async def call_back(callback: Callable[..., Any] | None, *args: Any) -> None:
    """Call a plain or async callback."""
    if callback is None:
        return
    result = callback(*args)
    if inspect.isawaitable(result):
        await result


def normalize_offsets(
    offsets: Mapping[TopicPartition, OffsetAndEpoch | int],
) -> dict[TopicPartition, OffsetAndEpoch]:
    out: dict[TopicPartition, OffsetAndEpoch] = {}
    for tp, value in offsets.items():
        tp = TopicPartition(*tp)
        offset, epoch = (value[0], value[1]) if isinstance(value, tuple) else (value, -1)
        if offset < 0:
            raise ValueError(f"cannot commit a negative offset ({offset}) for {tp}")
        out[tp] = OffsetAndEpoch(int(offset), int(epoch))
    return out


@dataclass
class _CommitJob:
    offsets: dict[TopicPartition, OffsetAndEpoch]
    deadline: float | None  # trio time to retry until; None: one attempt (commit_async)
    callback: CommitCallback | None = None
    done: trio.Event = field(default_factory=trio.Event)
    error: BaseException | None = None


class GroupCommits:
    """Commits, the committed-offset resolver and auto-commit of one group consumer."""

    def __init__(
        self,
        consumer: OffsetOwner,
        membership: GroupMembership,
        channel: CoordinatorChannel,
        *,
        subscribed: Callable[[], bool],
        state_changed: Callable[[], None],
        fatal: Callable[[TributaryError], None],
        enable_auto_commit: bool,
        auto_commit_interval_ms: float,
        request_timeout_ms: float,
        retry_backoff_ms: float,
    ) -> None:
        self._consumer = consumer
        self.membership = membership
        self.channel = channel
        self.group_id = membership.group_id
        self._subscribed = subscribed
        self._state_changed = state_changed
        self._fatal = fatal
        self.enable_auto_commit = enable_auto_commit
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._jobs: deque[_CommitJob] = deque()
        self._job_queued = Wakeup()
        self._resolver_wakeup = Wakeup()
        self._auto_commit_scope = trio.CancelScope()

    def start(self, nursery: trio.Nursery) -> None:
        nursery.start_soon(self._committer_loop)
        nursery.start_soon(self._resolver_loop)
        nursery.start_soon(self._auto_commit_loop)

    def stop_auto_commit(self) -> None:
        self._auto_commit_scope.cancel()

    def wake_resolver(self) -> None:
        self._resolver_wakeup.set()

    # --- commits ---------------------------------------------------------------------

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndEpoch | int]) -> None:
        """Commit after every commit asked for earlier, and wait; retries retriable
        errors for the request timeout."""
        deadline = trio.current_time() + self.request_timeout_ms / 1000
        job = _CommitJob(normalize_offsets(offsets), deadline)
        self._enqueue(job)
        await job.done.wait()
        if job.error is not None:
            raise job.error

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndEpoch | int],
        callback: CommitCallback | None = None,
    ) -> None:
        """Commit in the background (one attempt); `callback(offsets, error_or_None)`."""
        self._enqueue(_CommitJob(normalize_offsets(offsets), None, callback))

    def _enqueue(self, job: _CommitJob) -> None:
        self._jobs.append(job)
        self._job_queued.set()

    async def _committer_loop(self) -> None:
        while True:
            while not self._jobs:
                await self._job_queued.wait()
            job = self._jobs[0]
            try:
                await self._run_job(job)
            except TributaryError as exc:
                job.error = exc
            finally:
                self._jobs.popleft()
                job.done.set()
            if job.callback is not None:
                try:
                    await call_back(job.callback, dict(job.offsets), job.error)
                except Exception:
                    log.exception("group %s: a commit callback raised", self.group_id)
            elif job.deadline is None and job.error is not None:
                log.warning("group %s: an asynchronous commit failed: %s", self.group_id, job.error)

    async def _run_job(self, job: _CommitJob) -> None:
        """One attempt (commit_async) or retries until the deadline (commit); either way
        bounded in time, coordinator lookup included."""
        deadline = job.deadline
        if deadline is None:
            deadline = trio.current_time() + self.request_timeout_ms / 1000
        last: TributaryError | None = None
        with trio.move_on_at(deadline):
            while True:
                try:
                    await self.commit_once(job.offsets)
                    return
                except TributaryError as exc:
                    if job.deadline is None or not exc.retriable:
                        raise
                    last = exc
                    log.debug("group %s: commit failed (%s); retrying", self.group_id, exc)
                await trio.sleep(self.retry_backoff_ms / 1000)
        raise TributaryError(
            ErrorCode.REQUEST_TIMED_OUT,
            f"the commit to group {self.group_id!r} did not complete in time"
            + (f" (last error: {last})" if last is not None else ""),
        )

    async def commit_once(self, offsets: Mapping[TopicPartition, OffsetAndEpoch | int]) -> None:
        """One OffsetCommit, now, outside the queue (closing uses it directly)."""
        offsets = normalize_offsets(offsets)
        if not offsets:
            return
        ms = self.membership
        member = self._subscribed()
        generation = ms.commit_generation() if member else NO_GENERATION
        await self.channel.ensure()
        request = offset_commit_request(
            self.group_id,
            offsets,
            generation_id=generation.generation_id,
            member_id=generation.member_id,
            group_instance_id=ms.group_instance_id if member else None,
        )
        code, response = await self.channel.send(request, self.request_timeout_ms)
        if code is ErrorCode.NONE and response is not None:
            errors = offset_commit_errors(response)
        else:
            errors = dict.fromkeys(offsets, code)
        error = ms.commit_error(errors, generation)
        if ms.fatal_error is not None:
            self._fatal(ms.fatal_error)
        if error is not None:
            self._state_changed()  # the answer may ask for a rejoin or a new coordinator
            raise error

    # --- committed offsets -----------------------------------------------------------

    async def fetch_committed(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> dict[TopicPartition, CommittedOffset]:
        """The group's committed offsets, retrying retriable errors until the timeout."""
        wanted = sorted({TopicPartition(*tp) for tp in partitions})
        if not wanted:
            return {}
        timeout_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
        deadline = trio.current_time() + timeout_ms / 1000
        with trio.move_on_at(deadline):
            return await self._fetch_committed_until(wanted, deadline)
        raise TributaryError(
            ErrorCode.REQUEST_TIMED_OUT,
            f"no committed offsets from group {self.group_id!r} within {timeout_ms:g} ms",
        )

    async def _fetch_committed_until(
        self, wanted: list[TopicPartition], deadline: float
    ) -> dict[TopicPartition, CommittedOffset]:
        while True:
            await self.channel.ensure()
            code, response = await self.channel.send(
                offset_fetch_request(self.group_id, wanted), self.request_timeout_ms
            )
            if code is ErrorCode.NONE:
                found = committed_offsets(response)
                retry = [tp for tp, c in found.items() if c.error is not ErrorCode.NONE]
                if not retry:
                    none = CommittedOffset(None, -1, None, ErrorCode.NONE)
                    return {tp: found.get(tp, none) for tp in wanted}
                code = found[retry[0]].error
                if not code.is_retriable:
                    raise TributaryError(code, f"fetching the committed offset of {retry[0]}")
            elif code in COORDINATOR_ERRORS:
                self.membership.coordinator_unknown(f"OffsetFetch: {code.name}")
                self._state_changed()
            elif code is not ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                raise TributaryError(code, f"fetching the committed offsets of {self.group_id!r}")
            if trio.current_time() + self.retry_backoff_ms / 1000 >= deadline:
                raise TributaryError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"no committed offsets from group {self.group_id!r} in time "
                    f"(last error: {code.name})",
                )
            await trio.sleep(self.retry_backoff_ms / 1000)

    async def _resolver_loop(self) -> None:
        while True:
            wanted = self._consumer._awaiting_committed()
            if not wanted:
                await self._resolver_wakeup.wait()
                continue
            found: dict[TopicPartition, CommittedOffset] | None = None
            error: TributaryError | None = None
            try:
                found = await self.fetch_committed(wanted)
            except TributaryError as exc:
                if exc.retriable:  # REQUEST_TIMED_OUT included
                    log.info("group %s: %s; retrying", self.group_id, exc)
                    await trio.sleep(self.retry_backoff_ms / 1000)
                    continue
                error = exc
            self._consumer._apply_committed(wanted, found, error)

    async def _auto_commit_loop(self) -> None:
        if not self.enable_auto_commit:
            return
        with self._auto_commit_scope:
            while True:
                await trio.sleep(self.auto_commit_interval_ms / 1000)
                if self._subscribed() and self.membership.state is not MemberState.STABLE:
                    continue
                offsets = self._consumer._consumed_offsets()
                if offsets:
                    self.commit_async(offsets)
