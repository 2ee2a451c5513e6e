"""Fetch sessions (KIP-227), the leader's side: Kafka 2.8's FetchSession.scala.

How it works: a fetcher that asks for a session (a full fetch, epoch 0) is answered in
full, and the leader remembers what it asked for each partition and what it was told
(`CachedPartition`: the request, the high watermark and log start offset answered) in a
`FetchSession` with a random non-zero id. Its next fetches are incremental (that id, the
next epoch): they name only the partitions that are new or whose request changed, and
those to forget; the leader reads every partition of the session, and answers only those
with something new (Kafka's `CachedPartition.maybeUpdateResponseData`): records, a
preferred read replica (KIP-392), another high watermark or log start offset than last
answered, or an error (after which the
cached high watermark is -1, so the partition is answered again once the error is gone).
The last stable offset is the high watermark here (no transactions), so it is covered.
Answered partitions move to the end of the session, so no partition starves behind
`max_bytes`. A fetcher that followed the rules therefore knows every partition's
latest state: the partitions it was not told about are as last answered.

`FetchManager.new_context` is Kafka's `FetchManager.newContext`: it classifies a request
by its session id and epoch into a `FetchContext`, whose `partitions` are what to read
and whose `respond(results, now_ms)` makes the answer (a `FetchAnswer`):

- epoch -1 (clients without sessions; also closes the session named): sessionless, read
  and answer the request's partitions, session id 0;
- epoch 0: a full fetch (closing the session named, if any); answered in full, with the
  id of a new session if the cache has room for it (else 0);
- epoch >= 1: an unknown id is FETCH_SESSION_ID_NOT_FOUND, another epoch than the
  session's INVALID_FETCH_SESSION_EPOCH (answers without partitions, session id 0);
  else the session is updated and read in full, answered incrementally. A session left
  empty is closed, and the request served sessionless.

`FetchSessionCache` bounds the sessions (Kafka's `FetchSessionCache`): at most
`max_slots` sessions (`max.incremental.fetch.session.cache.slots`, 0 turns sessions
off) and, beyond Kafka, at most `max_partitions` cached partitions in all, so memory is
bounded however clients behave. A session that does not fit is not created (the full
answer carries id 0) unless another can be evicted (`try_evict`, Kafka's rules): one
unused for more than `eviction_ms` (`min.incremental.fetch.session.eviction.ms`), or
else the least valuable evictable one if the new one is worth at least as much. Value
orders by (privileged, size): followers' sessions are privileged; a session is
evictable by anyone only once older than `eviction_ms`, and a consumer's session is
evictable by a follower's at any age. An incremental fetch that would take the cache
past `max_partitions` closes its session and is answered sessionless but whole (every
partition of the session, so the fetcher misses nothing; its next fetch is full).
Nothing here reads a clock (time comes as `now_ms`) or the network; session ids come
from the injected `random.Random`.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from broker.core.delayed_fetch import FetchPartitionRequest
from broker.core.replication import FetchedPartition
from client.protocol.errors import ErrorCode
from client.protocol.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    next_epoch,
)
from client.protocol.types import TopicPartition

log = logging.getLogger(__name__)

_MAX_SESSION_ID = 2**31 - 1  # ids are positive int32 (Kafka: nextInt(1, Int.MaxValue))


@dataclass(frozen=True)
class FetchSessionConfig:
    max_slots: int = 1_000  # max.incremental.fetch.session.cache.slots (Kafka's)
    eviction_ms: int = 120_000  # min.incremental.fetch.session.eviction.ms (Kafka's)
    max_partitions: int = 100_000  # max.incremental.fetch.session.cache.partitions (ours)


class CachedPartition:
    """What one partition of a session was asked and answered last."""

    __slots__ = ("request", "high_watermark", "log_start_offset", "last_stable_offset")

    def __init__(
        self, request: FetchPartitionRequest, high_watermark: int = -1, log_start_offset: int = -1
    ) -> None:
        self.request = request
        self.high_watermark = high_watermark
        self.log_start_offset = log_start_offset
        self.last_stable_offset = -1  # a read_committed reader waits for it to move

    @classmethod
    def answered(cls, request: FetchPartitionRequest, result: FetchedPartition) -> CachedPartition:
        """A partition of a new session, as its full answer left it (an error's high
        watermark is cached as -1, as Kafka's error answers carry)."""
        hw = -1 if result.error_code is not ErrorCode.NONE else result.high_watermark
        cached = cls(request, hw, result.log_start_offset)
        cached.last_stable_offset = result.last_stable_offset
        return cached

    def must_respond(self, result: FetchedPartition) -> bool:
        """Whether an incremental answer must carry `result`; remembers what it carries."""
        respond = bool(result.records) or result.preferred_read_replica >= 0
        if self.high_watermark != result.high_watermark:
            respond = True
            self.high_watermark = result.high_watermark
        if self.log_start_offset != result.log_start_offset:
            respond = True
            self.log_start_offset = result.log_start_offset
        if self.last_stable_offset != result.last_stable_offset:
            respond = True
            self.last_stable_offset = result.last_stable_offset
        if result.error_code is not ErrorCode.NONE:
            self.high_watermark = -1  # answered again once the error is gone
            respond = True
        return respond


class FetchSession:
    """One fetcher's session: its partitions in answer order, its epoch, its use."""

    __slots__ = (
        "id",
        "privileged",
        "partitions",
        "creation_ms",
        "last_used_ms",
        "epoch",
        "cached_size",
        "evictable_by_privileged",
        "evictable_by_all",
    )

    def __init__(
        self,
        session_id: int,
        privileged: bool,
        partitions: dict[TopicPartition, CachedPartition],
        now_ms: int,
    ) -> None:
        self.id = session_id
        self.privileged = privileged
        self.partitions = partitions
        self.creation_ms = now_ms
        self.last_used_ms = now_ms
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.cached_size = -1  # the size the cache counted at the last touch; -1: not in it
        self.evictable_by_privileged = False
        self.evictable_by_all = False

    def evictable_key(self) -> tuple[bool, int, int]:
        """Kafka's EvictableKey: lower is less valuable (unprivileged, then smaller)."""
        return (self.privileged, self.cached_size, self.id)

    def update(
        self,
        changes: dict[TopicPartition, FetchPartitionRequest],
        forgotten: Iterable[TopicPartition],
    ) -> None:
        """Add or update the partitions an incremental request names; drop the forgotten."""
        partitions = self.partitions
        for tp, request in changes.items():
            cached = partitions.get(tp)
            if cached is None:
                partitions[tp] = CachedPartition(request)
            else:
                cached.request = request
        for tp in forgotten:
            partitions.pop(tp, None)

    def to_read(self) -> dict[TopicPartition, FetchPartitionRequest]:
        return {tp: cached.request for tp, cached in self.partitions.items()}


class FetchSessionCache:
    """The sessions of this broker, bounded in number and in partitions (see above)."""

    def __init__(self, config: FetchSessionConfig, rng: random.Random | None = None) -> None:
        self.config = config
        self._rng = rng or random.Random()
        self.sessions: dict[int, FetchSession] = {}
        self._by_last_use: dict[int, FetchSession] = {}  # least recently used first
        self.total_partitions = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def maybe_create_session(
        self, now_ms: int, privileged: bool, partitions: dict[TopicPartition, CachedPartition]
    ) -> int:
        """The id of a new session holding `partitions`, or 0 if it does not fit (evicting
        stale or less valuable sessions to make room, when Kafka's rules allow)."""
        size = len(partitions)
        config = self.config
        if size > config.max_partitions:
            return INVALID_SESSION_ID
        key = (privileged, size, 0)
        while (
            len(self.sessions) >= config.max_slots
            or self.total_partitions + size > config.max_partitions
        ):
            if not self.try_evict(privileged, key, now_ms):
                return INVALID_SESSION_ID
        session = FetchSession(self._new_session_id(), privileged, partitions, now_ms)
        self.sessions[session.id] = session
        self.touch(session, now_ms)
        return session.id

    def try_evict(self, privileged: bool, key: tuple[bool, int, int], now_ms: int) -> bool:
        """Evict one session to make room for one worth `key`: the least recently used if
        unused for more than eviction_ms, else the least valuable one evictable by such a
        session if `key` is worth at least as much. False if none may go."""
        oldest = next(iter(self._by_last_use.values()), None)
        if oldest is None:
            return False
        if now_ms - oldest.last_used_ms > self.config.eviction_ms:
            self._evict(oldest)
            return True
        candidates = [
            s
            for s in self.sessions.values()
            if (s.evictable_by_privileged if privileged else s.evictable_by_all)
        ]
        if not candidates:
            return False
        victim = min(candidates, key=FetchSession.evictable_key)
        if key < victim.evictable_key():
            return False
        self._evict(victim)
        return True

    def _evict(self, session: FetchSession) -> None:
        log.debug("evicting fetch session %d (%d partitions)", session.id, session.cached_size)
        self.remove(session.id)
        self.evictions += 1

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            self._by_last_use.pop(session_id, None)
            self.total_partitions -= max(session.cached_size, 0)
            session.cached_size = -1
        return session

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """Record a use of `session` now and recount its size (Kafka's touch)."""
        self._by_last_use.pop(session.id, None)
        self._by_last_use[session.id] = session
        session.last_used_ms = now_ms
        if session.cached_size >= 0:
            self.total_partitions -= session.cached_size
        session.cached_size = len(session.partitions)
        self.total_partitions += session.cached_size
        old = now_ms - session.creation_ms > self.config.eviction_ms
        session.evictable_by_privileged = (not session.privileged) or old
        session.evictable_by_all = old

    def _new_session_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, _MAX_SESSION_ID - 1)
            if session_id not in self.sessions:
                return session_id


@dataclass(frozen=True, slots=True)
class FetchAnswer:
    """What a fetch response carries at the top level, and its partitions."""

    error_code: ErrorCode
    session_id: int
    partitions: dict[TopicPartition, FetchedPartition]


class FetchContext:
    """How one fetch request is served: `partitions` to read, `respond` to answer."""

    kind = "sessionless"

    def __init__(self, partitions: dict[TopicPartition, FetchPartitionRequest]) -> None:
        self.partitions = partitions

    def respond(self, results: dict[TopicPartition, FetchedPartition], now_ms: int) -> FetchAnswer:
        return FetchAnswer(ErrorCode.NONE, INVALID_SESSION_ID, results)


class SessionErrorContext(FetchContext):
    kind = "error"

    def __init__(self, error: ErrorCode) -> None:
        super().__init__({})
        self.error = error

    def respond(self, results: dict[TopicPartition, FetchedPartition], now_ms: int) -> FetchAnswer:
        return FetchAnswer(self.error, INVALID_SESSION_ID, {})


class FullFetchContext(FetchContext):
    kind = "full"

    def __init__(
        self,
        cache: FetchSessionCache,
        partitions: dict[TopicPartition, FetchPartitionRequest],
        privileged: bool,
    ) -> None:
        super().__init__(partitions)
        self.cache = cache
        self.privileged = privileged

    def respond(self, results: dict[TopicPartition, FetchedPartition], now_ms: int) -> FetchAnswer:
        requests = self.partitions
        cached = {
            tp: CachedPartition.answered(requests[tp], result)
            for tp, result in results.items()
            if tp in requests
        }
        session_id = self.cache.maybe_create_session(now_ms, self.privileged, cached)
        return FetchAnswer(ErrorCode.NONE, session_id, results)


class IncrementalFetchContext(FetchContext):
    kind = "incremental"

    def __init__(self, session: FetchSession, request_epoch: int) -> None:
        super().__init__(session.to_read())
        self.session = session
        self.request_epoch = request_epoch

    def respond(self, results: dict[TopicPartition, FetchedPartition], now_ms: int) -> FetchAnswer:
        session = self.session
        if session.epoch != next_epoch(self.request_epoch):
            # Another request of this session came in between: a duplicate.
            log.info(
                "fetch session %d is at epoch %d, not %d: a duplicate request?",
                session.id,
                session.epoch,
                next_epoch(self.request_epoch),
            )
            return FetchAnswer(ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id, {})
        cached_partitions = session.partitions
        answered: dict[TopicPartition, FetchedPartition] = {}
        for tp, result in results.items():
            cached = cached_partitions.get(tp)
            if cached is None:  # forgotten by a later request meanwhile
                continue
            if cached.must_respond(result):
                answered[tp] = result
                del cached_partitions[tp]  # to the end: answered last next time
                cached_partitions[tp] = cached
        return FetchAnswer(ErrorCode.NONE, session.id, answered)


@dataclass
class FetchManager:
    """Kafka's FetchManager: each fetch request's context, over the session cache."""

    cache: FetchSessionCache
    served: dict[str, int] = field(
        default_factory=lambda: {"sessionless": 0, "full": 0, "incremental": 0, "error": 0}
    )

    def new_context(
        self,
        now_ms: int,
        session_id: int,
        epoch: int,
        partitions: dict[TopicPartition, FetchPartitionRequest],
        forgotten: list[TopicPartition],
        from_follower: bool,
    ) -> FetchContext:
        context = self._context(now_ms, session_id, epoch, partitions, forgotten, from_follower)
        self.served[context.kind] += 1
        return context

    def _context(
        self,
        now_ms: int,
        session_id: int,
        epoch: int,
        partitions: dict[TopicPartition, FetchPartitionRequest],
        forgotten: list[TopicPartition],
        from_follower: bool,
    ) -> FetchContext:
        cache = self.cache
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                cache.remove(session_id)  # a full fetch closes the session it names
            if epoch == FINAL_EPOCH:
                return FetchContext(partitions)
            return FullFetchContext(cache, partitions, from_follower)
        session = cache.get(session_id)
        if session is None:
            return SessionErrorContext(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return SessionErrorContext(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        session.update(partitions, forgotten)
        size = len(session.partitions)
        if not size:
            cache.remove(session_id)
            return FetchContext(partitions)
        if cache.total_partitions - session.cached_size + size > cache.config.max_partitions:
            log.info(
                "fetch session %d would hold %d partitions, more than the cache's %d: closed",
                session_id,
                size,
                cache.config.max_partitions,
            )
            cache.remove(session_id)
            # Answer every partition of the session, without one: complete, so the
            # fetcher (told the session is closed) misses nothing before its full fetch.
            return FetchContext(session.to_read())
        cache.touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        return IncrementalFetchContext(session, epoch)
