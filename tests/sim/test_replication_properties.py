"""Hypothesis drives the simulated cluster with produces, stalls, link cuts, crashes and
leader moves; the replication invariants must hold after every step, and after healing
every acknowledged write must be on every replica."""

from __future__ import annotations

import tempfile

from hypothesis import HealthCheck, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from client.protocol.types import TopicPartition
from tests.sim.harness import SimCluster
from tests.sim.invariants import InvariantTracker

PARTITIONS = [TopicPartition("t", 0), TopicPartition("t", 1)]
BROKERS = (1, 2, 3)


class ReplicationMachine(RuleBasedStateMachine):
    @initialize(seed=st.integers(0, 2**16))
    def start(self, seed):
        self.tmp = tempfile.TemporaryDirectory(prefix="sim-")
        self.cluster = SimCluster(self.tmp.name, BROKERS, seed=seed)
        self.cluster.create_partition(PARTITIONS[0], (1, 2, 3))
        self.cluster.create_partition(PARTITIONS[1], (2, 3, 1))
        self.tracker = InvariantTracker(self.cluster)

    def teardown(self):
        if hasattr(self, "tmp"):
            for broker in self.cluster.brokers.values():
                if broker.alive:
                    broker.crash()
            self.tmp.cleanup()

    @rule(
        partition=st.sampled_from(PARTITIONS),
        count=st.integers(1, 5),
        acks=st.sampled_from([-1, -1, -1, 1]),
    )
    def produce(self, partition, count, acks):
        for _ in range(count):
            self.cluster.produce(partition, acks=acks)

    @rule(ms=st.integers(1, 60))
    def step(self, ms):
        self.cluster.step(ms)

    @rule(ms=st.sampled_from([200, 600, 1500]))
    def run(self, ms):
        self.cluster.run_for(ms)

    @rule(partition=st.sampled_from(PARTITIONS), offset=st.integers(0, 30))
    def consume(self, partition, offset):
        leader = self.cluster.leader_of(partition)
        if leader is None:
            return
        start = min(offset, leader.partition(partition).high_watermark)
        start = max(start, leader.partition(partition).log_start_offset)
        self.cluster.consume(partition, start)

    @rule(broker=st.sampled_from(BROKERS))
    def toggle_stall(self, broker):
        b = self.cluster.brokers[broker]
        if b.alive:
            b.stalled = not b.stalled
            note(f"broker {broker} stalled={b.stalled}")

    @rule(a=st.sampled_from(BROKERS), b=st.sampled_from(BROKERS))
    def cut_link(self, a, b):
        if a != b:
            self.cluster.network.cut_link(a, b)
            note(f"cut {a}<->{b}")

    @rule()
    def heal_links(self):
        self.cluster.network.heal_all()

    @precondition(lambda self: len(self.cluster.live()) >= 2)
    @rule(broker=st.sampled_from(BROKERS))
    def crash(self, broker):
        if self.cluster.brokers[broker].alive:
            note(f"crash {broker}")
            self.cluster.crash(broker)

    @rule(broker=st.sampled_from(BROKERS))
    def restart(self, broker):
        if not self.cluster.brokers[broker].alive:
            note(f"restart {broker}")
            self.cluster.restart(broker)

    @rule(broker=st.sampled_from(BROKERS))
    def bounce(self, broker):
        # A follower restarting faster than the controller notices (the KIP-101 setting).
        # A bounced *leader* is always noticed: the real controller sees its new broker
        # epoch and runs failure + startup, which `crash` + `restart` model.
        leads = any(self.cluster.zk.get(tp).leader == broker for tp in PARTITIONS)
        if self.cluster.brokers[broker].alive and not leads:
            note(f"bounce {broker}")
            self.cluster.bounce(broker)

    @rule(partition=st.sampled_from(PARTITIONS), new_leader=st.sampled_from(BROKERS))
    def move_leader(self, partition, new_leader):
        if self.cluster.controller.move_leader(partition, new_leader):
            note(f"leader of {partition} -> {new_leader}")

    @invariant()
    def replication_invariants(self):
        if hasattr(self, "tracker"):
            self.tracker.check()

    def check_after_healing(self):
        cluster = self.cluster
        cluster.network.heal_all()
        for broker in cluster.brokers.values():
            if not broker.alive:
                cluster.restart(broker.broker_id)
            broker.stalled = False
        for tp in PARTITIONS:
            leader_ok = cluster.run_until(lambda tp=tp: cluster.leader_of(tp) is not None, 5_000)
            assert leader_ok, f"{tp}: no leader after healing"

        def settled() -> bool:
            for tp in PARTITIONS:
                state = cluster.zk.get(tp)
                if len(state.isr) != 3:
                    return False
                leader = cluster.leader_of(tp).partition(tp)
                if leader.high_watermark != leader.log_end_offset:
                    return False
            return True

        assert cluster.run_until(settled, 30_000), "the ISR did not return to all replicas"
        cluster.run_for(500)
        self.tracker.check()
        for tp in PARTITIONS:
            contents = [dict(b.read_all(tp)) for b in cluster.brokers.values()]
            assert contents[0] == contents[1] == contents[2], f"{tp}: replicas differ"
            for write in cluster.history.acked:
                if write.tp == tp:
                    assert contents[0].get(write.offset) == write.value


class HealingMachine(ReplicationMachine):
    def teardown(self):
        if hasattr(self, "cluster"):
            try:
                self.check_after_healing()
            finally:
                super().teardown()


TestReplication = HealingMachine.TestCase
TestReplication.settings = settings(
    max_examples=40,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
