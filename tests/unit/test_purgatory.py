"""Purgatory: try-complete-else-watch, completion by key, expiry, and no leaks."""

import gc
import weakref

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.core.purgatory import DelayedOperation, Purgatory


class Waiter(DelayedOperation):
    """Completes once `ready` is set; records how it ended."""

    def __init__(self, deadline_ms, ready=False):
        super().__init__(deadline_ms)
        self.ready = ready
        self.outcomes = []

    def try_complete(self, now_ms):
        return self.ready

    def on_expiration(self):
        self.outcomes.append("expired")

    def on_complete(self):
        self.outcomes.append("completed")


def test_completes_immediately_without_watching():
    purgatory = Purgatory("test")
    op = Waiter(100, ready=True)
    assert purgatory.try_complete_else_watch(op, ["a"], now_ms=0)
    assert op.outcomes == ["completed"]
    assert purgatory.pending == 0 and purgatory.watched_keys() == 0


def test_completion_through_one_key_unlinks_it_from_all_keys():
    purgatory = Purgatory("test")
    op = Waiter(100)
    assert not purgatory.try_complete_else_watch(op, ["a", "b", "c"], now_ms=0)
    assert purgatory.watchers_for("b") == 1
    op.ready = True
    assert purgatory.check_and_complete("b", now_ms=5) == 1
    assert op.outcomes == ["completed"]
    assert op.completed_ms == 5
    assert purgatory.watched_keys() == 0
    assert purgatory.pending == 0
    # A later check on another key finds nothing and does not complete it twice.
    assert purgatory.check_and_complete("a", now_ms=6) == 0
    assert op.outcomes == ["completed"]


def test_expiry_fires_once_and_only_when_due():
    purgatory = Purgatory("test")
    early, late = Waiter(10), Waiter(20)
    purgatory.try_complete_else_watch(early, ["a"], 0)
    purgatory.try_complete_else_watch(late, ["a"], 0)
    assert purgatory.next_deadline_ms() == 10
    assert purgatory.expire_due(9) == 0
    assert purgatory.expire_due(10) == 1
    assert early.outcomes == ["expired", "completed"]
    assert late.outcomes == []
    assert purgatory.next_deadline_ms() == 20
    late.ready = True
    purgatory.check_and_complete("a", 15)
    assert purgatory.next_deadline_ms() is None
    assert purgatory.expire_due(100) == 0
    assert late.outcomes == ["completed"]


def test_force_complete_all_answers_everything():
    purgatory = Purgatory("test")
    ops = [Waiter(1000) for _ in range(5)]
    for i, op in enumerate(ops):
        purgatory.try_complete_else_watch(op, [i % 2], 0)
    assert purgatory.force_complete_all(3) == 5
    assert all(op.outcomes == ["expired", "completed"] for op in ops)
    assert purgatory.pending == 0 and purgatory.watched_keys() == 0


def test_heap_does_not_keep_many_completed_operations():
    purgatory = Purgatory("test")
    ops = [Waiter(10_000 + i) for i in range(5000)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["k"], 0)
    for op in ops:
        op.ready = True
    purgatory.check_and_complete("k", 1)
    assert purgatory.pending == 0
    # Dead heap entries were purged, not kept until their deadlines.
    assert len(purgatory._heap) < 1024


def test_a_completed_operation_and_what_it_holds_are_freed_at_once():
    """Its deadline is far off, yet the operation (and its response) goes as soon as it
    completes: nothing lingers for the cycle collector to find."""

    class Response:
        pass

    purgatory = Purgatory("test")
    op = Waiter(30_000)
    op.response = Response()
    response = weakref.ref(op.response)
    purgatory.try_complete_else_watch(op, ["k"], 0)
    op.ready = True
    enabled = gc.isenabled()
    gc.disable()
    try:
        assert purgatory.check_and_complete("k", 1) == 1
        del op
        assert response() is None
    finally:
        if enabled:
            gc.enable()
    assert purgatory.next_deadline_ms() is None


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["add", "ready", "check", "tick"]),
            st.integers(0, 4),
            st.integers(1, 50),
        ),
        max_size=60,
    )
)
def test_every_operation_completes_exactly_once(steps):
    purgatory = Purgatory("model")
    now = 0
    ops: list[tuple[Waiter, set[int]]] = []
    for action, key, value in steps:
        if action == "add":
            keys = {key, (key + value) % 5}
            op = Waiter(now + value)
            purgatory.try_complete_else_watch(op, keys, now)
            ops.append((op, keys))
        elif action == "ready" and ops:
            ops[value % len(ops)][0].ready = True
        elif action == "check":
            purgatory.check_and_complete(key, now)
        else:
            now += value
            purgatory.expire_due(now)
    now += 1000
    purgatory.expire_due(now)
    for op, _ in ops:
        assert op.outcomes.count("completed") == 1
        assert op.completed
    assert purgatory.pending == 0
    assert purgatory.watched_keys() == 0


def test_the_shell_is_woken_only_when_the_earliest_deadline_moves_earlier():
    """The purgatory reports a new earliest deadline itself (`wake_at`), so nobody who adds
    an operation has to remember to reschedule the shell's expiry timer."""
    woken = []
    purgatory = Purgatory("test", wake_at=woken.append)
    purgatory.try_complete_else_watch(Waiter(500), ["a"], now_ms=0)
    purgatory.try_complete_else_watch(Waiter(900), ["a"], now_ms=0)  # later: no wake-up
    purgatory.try_complete_else_watch(Waiter(200), ["b"], now_ms=0)
    purgatory.try_complete_else_watch(Waiter(100, ready=True), ["c"], now_ms=0)  # done now
    assert woken == [500, 200]
    assert purgatory.next_deadline_ms() == 200
