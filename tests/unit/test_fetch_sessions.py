"""Fetch sessions (KIP-227), example by example: the leader's contexts and cache
(broker/core/fetch_sessions.py) and the fetcher's session handler
(client/protocol/fetch_session.py), talking to each other as a fetcher and a leader do.
The hypothesis state machines are in test_fetch_sessions_stateful.py.
"""

from __future__ import annotations

import random

from broker.core.delayed_fetch import FetchPartitionRequest
from broker.core.fetch_sessions import (
    FetchManager,
    FetchSessionCache,
    FetchSessionConfig,
)
from broker.core.replication import FetchedPartition
from client.protocol.errors import ErrorCode
from client.protocol.fetch_session import (
    INITIAL,
    FetchMetadata,
    FetchSessionHandler,
    next_epoch,
)
from client.protocol.types import TopicPartition

A, B, C = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)
NOW = 1_000_000


def ask(offset: int = 0, epoch: int = 0) -> FetchPartitionRequest:
    return FetchPartitionRequest(
        fetch_offset=offset, current_leader_epoch=epoch, partition_max_bytes=1 << 20
    )


def ok(hw: int = 0, log_start: int = 0, records: bytes = b"") -> FetchedPartition:
    return FetchedPartition(ErrorCode.NONE, hw, log_start, hw, records)


def manager(**config) -> FetchManager:
    return FetchManager(FetchSessionCache(FetchSessionConfig(**config), random.Random(7)))


def full_session(fm: FetchManager, partitions, results, *, follower=False, now=NOW) -> int:
    context = fm.new_context(now, 0, 0, partitions, [], from_follower=follower)
    assert context.kind == "full"
    answer = context.respond(results, now)
    assert answer.partitions == results
    return answer.session_id


def incremental(fm: FetchManager, session_id, epoch, changes=None, forgotten=(), now=NOW):
    return fm.new_context(now, session_id, epoch, dict(changes or {}), list(forgotten), False)


# -- the leader's contexts ------------------------------------------------------------------


def test_a_full_fetch_creates_a_session_and_incremental_ones_answer_only_what_changed():
    fm = manager()
    session_id = full_session(fm, {A: ask(5), B: ask(0)}, {A: ok(5), B: ok(3, records=b"r")})
    assert session_id != 0 and len(fm.cache) == 1

    # Epoch 1: the fetcher moved B to 3; nothing changed since: an empty answer, but both
    # partitions were read (with A at its cached offset).
    context = incremental(fm, session_id, 1, {B: ask(3)})
    assert context.kind == "incremental"
    assert context.partitions == {A: ask(5), B: ask(3)}
    answer = context.respond({A: ok(5), B: ok(3)}, NOW)
    assert (answer.error_code, answer.session_id, answer.partitions) == (
        ErrorCode.NONE,
        session_id,
        {},
    )

    # Epoch 2: new records for A, B's log start moved.
    context = incremental(fm, session_id, 2)
    news = {A: ok(5, records=b"x"), B: ok(3, log_start=1)}
    assert context.respond(news, NOW).partitions == news
    # ...and the HW of A moved after that: A only.
    context = incremental(fm, session_id, 3)
    assert context.respond({A: ok(6), B: ok(3, log_start=1)}, NOW).partitions == {A: ok(6)}
    assert fm.served == {"sessionless": 0, "full": 1, "incremental": 3, "error": 0}


def test_an_error_is_always_answered_and_its_end_answered_again():
    fm = manager()
    session_id = full_session(fm, {A: ask()}, {A: ok(4)})
    fenced = FetchedPartition(ErrorCode.FENCED_LEADER_EPOCH, 4, 0, 4)
    for epoch in (1, 2):  # the same error twice: answered both times
        assert incremental(fm, session_id, epoch).respond({A: fenced}, NOW).partitions == {
            A: fenced
        }
    # The error is gone, the HW is what it was before it: answered anyway.
    assert incremental(fm, session_id, 3).respond({A: ok(4)}, NOW).partitions == {A: ok(4)}
    assert incremental(fm, session_id, 4).respond({A: ok(4)}, NOW).partitions == {}


def test_a_full_answer_with_an_error_is_followed_by_its_end():
    fm = manager()
    gone = FetchedPartition(ErrorCode.NOT_LEADER_OR_FOLLOWER, 4, 0, 4)
    session_id = full_session(fm, {A: ask()}, {A: gone})
    assert incremental(fm, session_id, 1).respond({A: ok(4)}, NOW).partitions == {A: ok(4)}


def test_added_partitions_are_answered_forgotten_ones_are_not_read():
    fm = manager()
    session_id = full_session(fm, {A: ask()}, {A: ok(1)})
    context = incremental(fm, session_id, 1, {C: ask(2)}, forgotten=[A])
    assert context.partitions == {C: ask(2)}
    assert context.respond({C: ok(2)}, NOW).partitions == {C: ok(2)}
    assert fm.cache.total_partitions == 1


def test_answered_partitions_move_to_the_end_of_the_session():
    fm = manager()
    session_id = full_session(fm, {A: ask(), B: ask(), C: ask()}, {A: ok(), B: ok(), C: ok()})
    context = incremental(fm, session_id, 1)
    context.respond({A: ok(1), B: ok(), C: ok()}, NOW)
    assert list(incremental(fm, session_id, 2).partitions) == [B, C, A]


def test_forgetting_every_partition_closes_the_session_and_serves_the_request_sessionless():
    fm = manager()
    session_id = full_session(fm, {A: ask()}, {A: ok()})
    context = incremental(fm, session_id, 1, forgotten=[A])
    assert context.kind == "sessionless" and context.partitions == {}
    assert context.respond({}, NOW).session_id == 0
    assert fm.cache.get(session_id) is None and fm.cache.total_partitions == 0


def test_unknown_sessions_and_wrong_epochs_are_session_errors_without_partitions():
    fm = manager()
    session_id = full_session(fm, {A: ask()}, {A: ok()})
    unknown = incremental(fm, session_id + 1, 1)
    assert unknown.kind == "error" and unknown.partitions == {}
    answer = unknown.respond({}, NOW)
    assert (answer.error_code, answer.session_id, answer.partitions) == (
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        0,
        {},
    )
    for epoch in (2, 7, -5):
        wrong = incremental(fm, session_id, epoch).respond({}, NOW)
        assert wrong.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    # The session survives a wrong epoch: the right one still works.
    assert incremental(fm, session_id, 1).kind == "incremental"


def test_a_duplicate_request_answered_late_gets_invalid_epoch():
    """Two requests with the same epoch (a retry): the second one wins; the first, still
    waiting in the purgatory, is answered INVALID_FETCH_SESSION_EPOCH."""
    fm = manager()
    session_id = full_session(fm, {A: ask()}, {A: ok()})
    first = incremental(fm, session_id, 1)
    second = incremental(fm, session_id, 2)
    assert first.respond({A: ok(1)}, NOW).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert second.respond({A: ok(1)}, NOW).partitions == {A: ok(1)}


def test_epoch_minus_one_is_sessionless_and_closes_the_session_named():
    fm = manager()
    session_id = full_session(fm, {A: ask()}, {A: ok()})
    context = fm.new_context(NOW, session_id, -1, {B: ask()}, [], from_follower=False)
    assert context.kind == "sessionless" and context.partitions == {B: ask()}
    assert context.respond({B: ok()}, NOW).session_id == 0
    assert len(fm.cache) == 0
    # A full fetch naming a session closes it too, and opens another.
    first = full_session(fm, {A: ask()}, {A: ok()})
    context = fm.new_context(NOW, first, 0, {A: ask()}, [], from_follower=False)
    second = context.respond({A: ok()}, NOW).session_id
    assert second not in (0, first) and list(fm.cache.sessions) == [second]


# -- the cache's bounds and eviction ----------------------------------------------------------


def sized(n: int, topic: str = "big") -> tuple[dict, dict]:
    tps = [TopicPartition(topic, i) for i in range(n)]
    return {tp: ask() for tp in tps}, {tp: ok() for tp in tps}


def test_zero_slots_turn_sessions_off():
    fm = manager(max_slots=0)
    assert full_session(fm, {A: ask()}, {A: ok()}) == 0
    assert full_session(fm, {A: ask()}, {A: ok()}, follower=True) == 0
    assert len(fm.cache) == 0


def test_a_full_cache_evicts_a_stale_session_first():
    fm = manager(max_slots=2, eviction_ms=1_000)
    old = full_session(fm, *sized(1), now=NOW)
    young = full_session(fm, *sized(1), now=NOW + 500)
    newcomer = full_session(fm, *sized(1), now=NOW + 1_001)  # `old` unused for > 1 s
    assert set(fm.cache.sessions) == {young, newcomer}
    assert old not in fm.cache.sessions and fm.cache.evictions == 1


def test_young_sessions_are_kept_unless_a_follower_needs_the_room_of_a_consumer():
    fm = manager(max_slots=2, eviction_ms=10_000)
    consumer = full_session(fm, *sized(50))
    follower = full_session(fm, *sized(1), follower=True)
    # Another consumer, even a bigger one, cannot evict sessions younger than 10 s.
    assert full_session(fm, *sized(100), now=NOW + 10) == 0
    # A follower evicts the consumer's session (unprivileged), never a follower's.
    second_follower = full_session(fm, *sized(1), follower=True, now=NOW + 20)
    assert set(fm.cache.sessions) == {follower, second_follower}
    assert consumer not in fm.cache.sessions
    assert full_session(fm, *sized(1), follower=True, now=NOW + 30) == 0


def test_once_old_the_smallest_session_gives_way_to_a_bigger_one():
    fm = manager(max_slots=2, eviction_ms=1_000)
    small = full_session(fm, *sized(2))
    big = full_session(fm, *sized(10))
    # Both are used again after 1 s of age (touched: evictable by all now), so neither
    # is stale.
    for session_id in (small, big):
        fm.cache.touch(fm.cache.get(session_id), NOW + 1_001)
    assert full_session(fm, *sized(1), now=NOW + 1_500) == 0  # smaller than both
    bigger = full_session(fm, *sized(5), now=NOW + 1_500)
    assert set(fm.cache.sessions) == {big, bigger} and small not in fm.cache.sessions


def test_the_cached_partitions_are_bounded_too():
    fm = manager(max_partitions=10, eviction_ms=1_000)
    assert full_session(fm, *sized(11)) == 0  # never fits
    first = full_session(fm, *sized(6))
    assert full_session(fm, *sized(5), now=NOW + 10) == 0  # no room, nothing evictable
    assert fm.cache.total_partitions == 6
    # An incremental fetch that would take the cache past the bound closes its session.
    context = incremental(fm, first, 1, sized(5, "more")[0])
    assert context.kind == "sessionless"
    assert context.partitions == {**sized(6)[0], **sized(5, "more")[0]}  # all of it
    assert fm.cache.get(first) is None and fm.cache.total_partitions == 0
    # A stale session gives its room to a new one.
    second = full_session(fm, *sized(6), now=NOW + 100)
    third = full_session(fm, *sized(6), now=NOW + 1_101)
    assert set(fm.cache.sessions) == {third} and second != third


def test_session_ids_are_random_positive_and_unique():
    fm = manager(max_slots=500)
    ids = {full_session(fm, {A: ask()}, {A: ok()}) for _ in range(500)}
    assert len(ids) == 500 and all(0 < i < 2**31 for i in ids)


# -- the fetcher's session handler ------------------------------------------------------------


def test_the_handler_sends_everything_then_only_changes_and_forgets():
    handler: FetchSessionHandler[FetchPartitionRequest] = FetchSessionHandler("leader")
    first = handler.build({A: ask(0), B: ask(0)})
    assert first.metadata == INITIAL and first.to_send == {A: ask(0), B: ask(0)}
    assert handler.handle_response(ErrorCode.NONE, 42, [A, B])
    assert handler.next_metadata == FetchMetadata(42, 1)

    same = handler.build({A: ask(0), B: ask(0)})
    assert same.metadata == FetchMetadata(42, 1) and same.to_send == {} and same.to_forget == []
    assert handler.handle_response(ErrorCode.NONE, 42, [])
    changed = handler.build({B: ask(7), C: ask(1)})
    assert changed.metadata == FetchMetadata(42, 2)
    assert changed.to_send == {C: ask(1), B: ask(7)} and changed.to_forget == [A]
    assert changed.session_partitions == {B: ask(7), C: ask(1)}
    assert changed.forgotten_by_topic() == {"t": [0]}


def test_the_handler_falls_back_to_full_fetches():
    handler: FetchSessionHandler[FetchPartitionRequest] = FetchSessionHandler()
    handler.build({A: ask()})
    assert handler.handle_response(ErrorCode.NONE, 0, [A])  # no session created
    assert handler.next_metadata == INITIAL
    handler.build({A: ask()})
    assert handler.handle_response(ErrorCode.NONE, 9, [A])

    handler.build({A: ask()})
    assert not handler.handle_response(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, [])
    assert handler.next_metadata == INITIAL

    handler.build({A: ask()})
    handler.handle_response(ErrorCode.NONE, 9, [A])
    handler.build({A: ask()})
    assert not handler.handle_response(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, [])
    assert handler.next_metadata == FetchMetadata(9, 0)  # full, closing session 9

    handler.build({A: ask()})
    assert not handler.handle_response(ErrorCode.NONE, 9, [])  # a full answer missing A
    assert handler.next_metadata == INITIAL
    handler.build({A: ask()})
    handler.handle_response(ErrorCode.NONE, 9, [A])
    handler.build({A: ask()})
    assert not handler.handle_response(ErrorCode.NONE, 9, [B])  # B is not in the session
    assert handler.next_metadata == FetchMetadata(9, 0)
    handler.build({A: ask()})
    handler.handle_response(ErrorCode.NONE, 9, [A])
    handler.build({A: ask()})
    handler.handle_error()
    assert handler.next_metadata == FetchMetadata(9, 0)
    handler.build({A: ask()})
    handler.handle_response(ErrorCode.NONE, 9, [A])
    handler.build({A: ask()})
    assert handler.handle_response(ErrorCode.NONE, 0, [])  # closed by the broker
    assert handler.next_metadata == INITIAL


def test_epochs_wrap_past_int32_and_final_stays_final():
    assert next_epoch(0) == 1 and next_epoch(2**31 - 1) == 1 and next_epoch(-1) == -1


def test_handler_and_leader_together_over_many_rounds():
    """A fetcher and a leader through the real classes: the fetcher's view of every
    partition matches the leader's after every round."""
    fm = manager()
    handler: FetchSessionHandler[FetchPartitionRequest] = FetchSessionHandler()
    hws = {A: 0, B: 0, C: 0}
    offsets = dict.fromkeys(hws, 0)
    seen: dict[TopicPartition, int] = {}
    for round_ in range(30):
        if round_ % 3 == 0:
            hws[[A, B, C][round_ % 2]] += 2
        data = handler.build({tp: ask(offsets[tp]) for tp in hws})
        context = fm.new_context(
            NOW, data.metadata.session_id, data.metadata.epoch, data.to_send, data.to_forget, True
        )
        results = {
            tp: ok(hws[tp], records=b"x" if r.fetch_offset < hws[tp] else b"")
            for tp, r in context.partitions.items()
        }
        answer = context.respond(results, NOW)
        assert handler.handle_response(answer.error_code, answer.session_id, answer.partitions)
        for tp, result in answer.partitions.items():
            seen[tp] = result.high_watermark
            if result.records:
                offsets[tp] = result.high_watermark
        assert seen == hws and offsets == hws
        if round_:
            assert context.kind == "incremental"
            assert len(answer.partitions) <= 1
