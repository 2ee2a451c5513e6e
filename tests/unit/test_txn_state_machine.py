"""Hypothesis drives the sans-IO transaction coordinator with random producers, requests,
marker completions, timeouts and failovers, and checks Kafka's invariants after each step:
every state change is a transition Kafka allows, epochs never go back, and a producer
fenced by a newer InitProducerId of its transactional id never commits.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from broker.core.txn.metadata import VALID_PREVIOUS, TxnState
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition
from tests.unit.test_txn_coordinator import Harness

IDS = ["a", "b"]
PARTS = [TopicPartition("t", i) for i in range(3)]


class CoordinatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness()
        self.now = 0
        self.coordinator_epoch = 0
        self.producers: list[tuple[str, int, int]] = []  # every (id, pid, epoch) handed out
        self.seen: dict[str, tuple[TxnState, int, int]] = {}

    def _newest(self, tid: str) -> tuple[int, int] | None:
        mine = [(p, e) for t, p, e in self.producers if t == tid]
        return mine[-1] if mine else None

    @rule(tid=st.sampled_from(IDS))
    def init(self, tid):
        out = self.h.init(tid, timeout=1000, now=self.now)
        if out is not None and out[0] == ErrorCode.NONE:
            self.producers.append((tid, out[1], out[2]))

    @precondition(lambda self: self.producers)
    @rule(data=st.data(), parts=st.sets(st.sampled_from(PARTS), min_size=1))
    def add(self, data, parts):
        tid, pid, epoch = data.draw(st.sampled_from(self.producers))
        self.h.add(tid, pid, epoch, parts, now=self.now)

    @precondition(lambda self: self.producers)
    @rule(data=st.data(), commit=st.booleans())
    def end(self, data, commit):
        tid, pid, epoch = data.draw(st.sampled_from(self.producers))
        md_before = self.h.state(tid)
        prepared_before = md_before is not None and md_before.state == TxnState.ONGOING
        code = self.h.end(tid, pid, epoch, commit, now=self.now)
        if code == ErrorCode.NONE and commit and prepared_before:
            # Only the newest producer of the id may commit.
            assert (pid, epoch) == self._newest(tid)

    @precondition(lambda self: self.h.jobs)
    @rule(data=st.data())
    def markers(self, data):
        job = data.draw(st.sampled_from(self.h.jobs))
        self.h.coordinator.markers_written(job, self.now)

    @rule(ms=st.integers(0, 1500))
    def tick(self, ms):
        self.now += ms
        self.h.coordinator.abort_timed_out(self.now)

    @rule()
    def failover(self):
        self.coordinator_epoch += 1
        self.h = Harness(self.h.topic, epoch=self.coordinator_epoch)

    @invariant()
    def legal_transitions_and_monotonic_epochs(self):
        for tid in IDS:
            md = self.h.state(tid)
            if md is None:
                continue
            now = (md.state, md.producer_id, md.producer_epoch)
            before = self.seen.get(tid)
            if before is not None and before != now:
                old_state, old_pid, old_epoch = before
                if old_state != md.state:
                    assert old_state in VALID_PREVIOUS[md.state], (old_state, md.state)
                if old_pid == md.producer_id:
                    assert md.producer_epoch >= old_epoch
            self.seen[tid] = now


CoordinatorMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestCoordinatorMachine = CoordinatorMachine.TestCase
