"""Fetch sessions (KIP-227) under hypothesis, on a fake clock: the leader's real cache and
contexts (broker/core/fetch_sessions.py) and the fetcher's real session handler
(client/protocol/fetch_session.py).

1. `FetcherSeesLatestState`: a fetcher that follows the rules (it applies only answers
   its handler accepts, consumes what it is given, at most two records per partition and
   fetch, and resets to the log start on OFFSET_OUT_OF_RANGE) against a leader whose
   partitions change between rounds (new records, log start moves, errors that come and
   go), while its session is evicted by other clients' sessions or closed, requests and
   answers are lost, and partitions come and go from what it fetches. After every
   accepted answer, what the fetcher knows of each partition it fetches (error, high
   watermark, log start) is what a sessionless full fetch at the same offsets says now,
   and it got records exactly where that full fetch would have returned some. A refused
   answer is followed by a full fetch.
2. `CacheStaysBounded`: sessions of random sizes, privileged or not, created, used, grown
   and removed as time passes. The cache never holds more sessions than its slots nor more
   partitions than its bound (its running count matches the sessions), and every session
   evicted was either unused for longer than the eviction time or evictable (Kafka's
   rules) and worth no more than the one that evicted it; nothing is evicted when there
   is room.
"""

from __future__ import annotations

import random

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from broker.core.delayed_fetch import FetchPartitionRequest
from broker.core.fetch_sessions import (
    CachedPartition,
    FetchManager,
    FetchSession,
    FetchSessionCache,
    FetchSessionConfig,
)
from broker.core.replication import FetchedPartition
from client.protocol.errors import ErrorCode
from client.protocol.fetch_session import FetchSessionHandler
from client.protocol.types import TopicPartition

PARTITIONS = [TopicPartition(t, p) for t in ("a", "b") for p in range(3)]
ERRORS = [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH]
EVICTION_MS = 1_000
MAX_RECORDS = 2  # per partition and fetch, as if limited by partition_max_bytes

partition = st.sampled_from(PARTITIONS)


class FetcherSeesLatestState(RuleBasedStateMachine):
    @initialize(
        privileged=st.booleans(),
        slots=st.integers(1, 4),
        max_partitions=st.integers(3, 12),
        seed=st.integers(0, 1000),
    )
    def start(self, privileged, slots, max_partitions, seed):
        config = FetchSessionConfig(slots, EVICTION_MS, max_partitions)
        self.manager = FetchManager(FetchSessionCache(config, random.Random(seed)))
        self.privileged = privileged
        self.now = 0
        # The leader's partitions: high watermark, log start, error (NONE if none).
        self.hw = dict.fromkeys(PARTITIONS, 0)
        self.log_start = dict.fromkeys(PARTITIONS, 0)
        self.error = dict.fromkeys(PARTITIONS, ErrorCode.NONE)
        # The fetcher: what it fetches, where, with which leader epoch; what it knows.
        self.handler: FetchSessionHandler[FetchPartitionRequest] = FetchSessionHandler()
        self.wanted = set(PARTITIONS[:3])
        self.offset = dict.fromkeys(PARTITIONS, 0)
        self.epoch = dict.fromkeys(PARTITIONS, 0)
        self.known: dict[TopicPartition, tuple] = {}
        self.refused_last = False
        self.others: list[int] = []

    # -- the leader's partitions change -----------------------------------------------
    @rule(tp=partition, count=st.integers(1, 3))
    def produce(self, tp, count):
        self.hw[tp] += count

    @rule(tp=partition)
    def delete_records(self, tp):
        self.log_start[tp] = min(self.hw[tp], self.log_start[tp] + 2)

    @rule(tp=partition, error=st.sampled_from([ErrorCode.NONE, *ERRORS]))
    def set_error(self, tp, error):
        self.error[tp] = error

    # -- the fetcher's wishes change ---------------------------------------------------
    @rule(tp=partition)
    def toggle_wanted(self, tp):
        self.wanted ^= {tp}

    @rule(tp=partition)
    def new_leader_epoch(self, tp):
        self.epoch[tp] += 1

    # -- others, time, the cache -------------------------------------------------------
    @rule(ms=st.integers(0, 2 * EVICTION_MS))
    def time_passes(self, ms):
        self.now += ms

    @rule(privileged=st.booleans(), size=st.integers(1, 6), really=st.integers(0, 2))
    def another_fetcher_opens_a_session(self, privileged, size, really):
        if really:  # less often than the other rules: the session must live a while
            return
        cached = {
            TopicPartition("other", i): CachedPartition(
                FetchPartitionRequest(0, 0, 1), high_watermark=0
            )
            for i in range(size)
        }
        self.manager.cache.maybe_create_session(self.now, privileged, cached)

    @rule()
    def the_session_is_evicted(self):
        self.manager.cache.remove(self.handler.next_metadata.session_id)

    # -- a round trip --------------------------------------------------------------------
    def read(self, tp: TopicPartition, request: FetchPartitionRequest) -> FetchedPartition:
        hw, log_start = self.hw[tp], self.log_start[tp]
        error = self.error[tp]
        if error is ErrorCode.NONE and request.fetch_offset < log_start:
            error = ErrorCode.OFFSET_OUT_OF_RANGE
        if error is not ErrorCode.NONE:
            return FetchedPartition(error, hw, log_start, hw)
        records = b"r" * min(MAX_RECORDS, hw - request.fetch_offset)  # max_bytes allows 2
        return FetchedPartition(ErrorCode.NONE, hw, log_start, hw, records)

    def ask(self, tp: TopicPartition) -> FetchPartitionRequest:
        return FetchPartitionRequest(self.offset[tp], self.epoch[tp], 1 << 20)

    @rule()
    def fetch(self):
        self.round_trip("nothing")

    @rule(lost=st.sampled_from(["nothing", "request", "answer"]))
    def fetch_over_a_lossy_network(self, lost):
        self.round_trip(lost)

    def round_trip(self, lost: str) -> None:
        wanted = {tp: self.ask(tp) for tp in PARTITIONS if tp in self.wanted}
        data = self.handler.build(wanted)
        if lost == "request":
            self.handler.handle_error()
            return
        context = self.manager.new_context(
            self.now,
            data.metadata.session_id,
            data.metadata.epoch,
            data.to_send,
            data.to_forget,
            self.privileged,
        )
        answer = context.respond(
            {tp: self.read(tp, request) for tp, request in context.partitions.items()},
            self.now,
        )
        if lost == "answer":
            self.handler.handle_error()
            return
        if self.refused_last:
            assert data.metadata.is_full, "a refused answer is followed by a full fetch"
        accepted = self.handler.handle_response(
            answer.error_code, answer.session_id, answer.partitions
        )
        self.refused_last = not accepted
        if not accepted:
            return
        # What a sessionless full fetch at the same offsets says now.
        truth = {tp: self.read(tp, request) for tp, request in wanted.items()}
        for tp, result in answer.partitions.items():
            self.known[tp] = (result.error_code, result.high_watermark, result.log_start_offset)
        for tp, result in truth.items():
            assert self.known.get(tp) == (
                result.error_code,
                result.high_watermark,
                result.log_start_offset,
            ), f"{tp}: knows {self.known.get(tp)}, a full fetch says {result}"
            given = answer.partitions.get(tp)
            assert (given is not None and given.records == result.records) or not result.records
        for tp, result in answer.partitions.items():  # the fetcher consumes, or resets
            if result.records:
                self.offset[tp] += len(result.records)
            elif result.error_code is ErrorCode.OFFSET_OUT_OF_RANGE:
                self.offset[tp] = result.log_start_offset


class CacheStaysBounded(RuleBasedStateMachine):
    @initialize(
        slots=st.integers(0, 4),
        max_partitions=st.integers(0, 30),
        seed=st.integers(0, 1000),
    )
    def start(self, slots, max_partitions, seed):
        self.config = FetchSessionConfig(slots, EVICTION_MS, max_partitions)
        self.cache = FetchSessionCache(self.config, random.Random(seed))
        self.manager = FetchManager(self.cache)
        self.now = 0
        self.created = 0

    def snapshot(self) -> dict[int, tuple]:
        return {
            s.id: (s.privileged, s.cached_size, s.creation_ms, s.last_used_ms)
            for s in self.cache.sessions.values()
        }

    @rule(privileged=st.booleans(), size=st.integers(0, 12))
    def create(self, privileged, size):
        before = self.snapshot()
        room = len(before) < self.config.max_slots and (
            self.cache.total_partitions + size <= self.config.max_partitions
        )
        partitions = {
            TopicPartition("t", self.created * 100 + i): FetchPartitionRequest(0, 0, 1)
            for i in range(size)
        }
        self.created += 1
        context = self.manager.new_context(self.now, 0, 0, partitions, [], privileged)
        session_id = context.respond(
            {tp: FetchedPartition(ErrorCode.NONE, 0, 0, 0) for tp in partitions}, self.now
        ).session_id
        evicted = set(before) - set(self.cache.sessions)
        if room:
            assert session_id != 0 and not evicted
        new_key = (privileged, size, 0)
        for victim in evicted:
            v_privileged, v_size, created, last_used = before[victim]
            stale = self.now - last_used > EVICTION_MS
            old = last_used - created > EVICTION_MS  # as of its last use (Kafka's touch)
            evictable = (not v_privileged or old) if privileged else old
            assert stale or (evictable and new_key >= (v_privileged, v_size, victim)), (
                f"session {victim} {before[victim]} evicted for {new_key} at {self.now}"
            )
        if session_id:
            assert self.cache.get(session_id).partitions.keys() == partitions.keys()

    @rule(data=st.data(), grow=st.integers(0, 6), forget=st.integers(0, 3))
    def use(self, data, grow, forget):
        if not self.cache.sessions:
            return
        session: FetchSession = data.draw(st.sampled_from(list(self.cache.sessions.values())))
        added = {
            TopicPartition("grown", self.created * 100 + i): FetchPartitionRequest(0, 0, 1)
            for i in range(grow)
        }
        self.created += 1
        forgotten = list(session.partitions)[:forget]
        context = self.manager.new_context(
            self.now, session.id, session.epoch, added, forgotten, session.privileged
        )
        assert context.kind in ("incremental", "sessionless")
        if context.kind == "incremental":
            assert session.last_used_ms == self.now

    @rule(ms=st.integers(0, 2 * EVICTION_MS))
    def time_passes(self, ms):
        self.now += ms

    @rule(data=st.data())
    def close(self, data):
        if self.cache.sessions:
            session_id = data.draw(st.sampled_from(sorted(self.cache.sessions)))
            self.manager.new_context(self.now, session_id, -1, {}, [], False)
            assert self.cache.get(session_id) is None

    @invariant()
    def bounded(self):
        if not hasattr(self, "cache"):
            return
        sessions = self.cache.sessions
        assert len(sessions) <= self.config.max_slots
        sizes = [len(s.partitions) for s in sessions.values()]
        assert all(s.cached_size == len(s.partitions) for s in sessions.values())
        assert self.cache.total_partitions == sum(sizes) <= self.config.max_partitions
        assert set(self.cache._by_last_use) == set(sessions)
        assert all(session_id > 0 for session_id in sessions)


TestFetcherSeesLatestState = FetcherSeesLatestState.TestCase
TestFetcherSeesLatestState.settings = settings(
    max_examples=100, stateful_step_count=60, deadline=None
)
TestCacheStaysBounded = CacheStaysBounded.TestCase
TestCacheStaysBounded.settings = settings(max_examples=100, stateful_step_count=50, deadline=None)
