"""The follower caught-up rules that decide ISR membership (SPEC.md, seeds 000/003)."""

from broker.core.replica import FollowerState

LAG = 10_000


def test_reaching_the_leader_leo_is_caught_up_now():
    state = FollowerState(1).after_fetch(100, 0, leader_leo=100, now_ms=5_000)
    assert state.last_caught_up_ms == 5_000
    assert not state.is_out_of_sync(100, now_ms=100_000, max_lag_ms=LAG)  # at the LEO


def test_follower_under_steady_load_is_not_dropped():
    # Every fetch reaches what the leader had at the previous fetch, never the live LEO.
    state = FollowerState(1)
    leader_leo = 0
    for step in range(1, 200):
        now = step * 500
        fetch_offset = leader_leo  # what the leader had one fetch ago
        leader_leo += 50  # new data keeps arriving
        state = state.after_fetch(fetch_offset, 0, leader_leo, now)
        assert not state.is_out_of_sync(leader_leo, now, LAG)


def test_stuck_follower_falls_out_after_the_lag_time():
    state = FollowerState(1).after_fetch(100, 0, leader_leo=100, now_ms=1_000)
    assert not state.is_out_of_sync(150, now_ms=1_000 + LAG, max_lag_ms=LAG)
    assert state.is_out_of_sync(150, now_ms=1_001 + LAG, max_lag_ms=LAG)


def test_slow_follower_that_never_catches_up_falls_out():
    # It fetches often but always far behind both the live LEO and the previous one.
    state = FollowerState(1).after_fetch(0, 0, leader_leo=0, now_ms=0)
    leader_leo = 0
    for step in range(1, 100):
        now = step * 500
        leader_leo += 1000
        state = state.after_fetch(step, 0, leader_leo, now)
    assert state.is_out_of_sync(leader_leo, now_ms=now, max_lag_ms=LAG)


def test_new_term_gives_isr_members_a_grace_period():
    member = FollowerState.for_new_leader_term(2, 40, now_ms=7_000, in_isr=True)
    outsider = FollowerState.for_new_leader_term(3, 40, now_ms=7_000, in_isr=False)
    assert not member.is_out_of_sync(40, 7_000 + LAG, LAG)
    assert outsider.last_caught_up_ms == 0 and outsider.log_end_offset == -1
    # The ISR member's first fetch at the epoch start counts from the term's start.
    after = member.after_fetch(40, 0, leader_leo=60, now_ms=8_000)
    assert after.last_caught_up_ms == 7_000
