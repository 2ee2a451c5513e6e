"""The controller core under random cluster histories (hypothesis stateful).

Brokers die, restart (with a new broker epoch), shut down in a controlled way; leaders
shrink and expand their ISRs as brokers do; preferred elections run. Each step applies
the core's decisions as the shell would (ZooKeeper accepts every write), and after each
step the invariants a user relies on must hold:

- a partition's leader is -1 or a registered broker inside the ISR; the ISR is never
  empty; registered-ness: only an offline partition may keep a dead member (its last);
- an offline partition really has no electable replica (given its unclean setting);
- every controller write bumps the leader epoch by exactly one;
- a new leader comes from the previous ISR, unless the election was unclean, which only
  happens where the topic allows it and is counted.
"""

from __future__ import annotations

from hypothesis import note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition
from controller.core.context import BrokerInfo, ControllerContext
from controller.core.decisions import (
    on_broker_failure,
    on_broker_startup,
    on_new_partitions,
    preferred_elections,
)
from controller.core.shutdown import controlled_shutdown_changes, shutdown_request_error
from server_common.zkdata import NO_LEADER, LeaderAndIsr, TopicAssignment

BROKERS = (1, 2, 3, 4)


@st.composite
def assignments(draw):
    rf = draw(st.integers(1, 3))
    return tuple(draw(st.permutations(BROKERS))[:rf])


class ControllerCore(RuleBasedStateMachine):
    @initialize(
        topics=st.lists(
            st.tuples(st.lists(assignments(), min_size=1, max_size=3), st.booleans()),
            min_size=1,
            max_size=3,
        ),
        alive=st.sets(st.sampled_from(BROKERS), min_size=1),
    )
    def setup(self, topics, alive):
        self.ctx = ControllerContext(controller_id=0, epoch=1, epoch_zk_version=0)
        self.next_broker_epoch = 100
        for broker in sorted(alive):
            self._register(broker)
        for index, (partitions, unclean) in enumerate(topics):
            name = f"t{index}"
            self.ctx.add_topic(
                TopicAssignment(name, dict(enumerate(partitions))),
                {"unclean.leader.election.enable": str(unclean).lower()},
            )
        self.unclean_written = 0
        self._write(on_new_partitions(self.ctx, self.ctx.all_partitions()))

    # -- helpers --------------------------------------------------------------------------
    def _register(self, broker: int) -> None:
        self.next_broker_epoch += 1
        self.ctx.add_live_broker(BrokerInfo(broker, "h", broker, epoch=self.next_broker_epoch))

    def _write(self, changes) -> None:
        for change in changes:
            note(f"{change.tp}: {change.old} -> {change.new} ({change.reason})")
            old = change.old
            if old is not None:
                assert change.new.leader_epoch == old.leader_epoch + 1
                assert self.ctx.states[change.tp] == old  # decided from the current state
                if change.new.leader >= 0 and change.new.leader != old.leader:
                    if change.new.leader not in old.isr:
                        assert change.unclean and self.ctx.unclean_enabled(change.tp.topic)
            if change.unclean:
                self.unclean_written += 1
            version = 0 if old is None else old.zk_version + 1
            self.ctx.apply(change, version)

    def _partitions(self):
        return self.ctx.all_partitions()

    # -- rules ------------------------------------------------------------------------------
    @rule(broker=st.sampled_from(BROKERS))
    def broker_dies(self, broker):
        if not self.ctx.is_registered(broker):
            return
        self.ctx.remove_live_broker(broker)
        self._write(on_broker_failure(self.ctx, {broker}))

    @rule(broker=st.sampled_from(BROKERS))
    def broker_starts(self, broker):
        if self.ctx.is_registered(broker):
            return
        self._register(broker)
        self._write(on_broker_startup(self.ctx, [broker]))

    @rule(broker=st.sampled_from(BROKERS))
    def broker_bounces(self, broker):
        if not self.ctx.is_registered(broker):
            return
        self.ctx.remove_live_broker(broker)
        self._write(on_broker_failure(self.ctx, {broker}))
        self._register(broker)
        self._write(on_broker_startup(self.ctx, [broker]))

    @rule(broker=st.sampled_from(BROKERS))
    def controlled_shutdown(self, broker):
        epoch = self.ctx.broker_epoch(broker)
        if shutdown_request_error(self.ctx, broker, epoch) is not ErrorCode.NONE:
            return
        self.ctx.shutting_down.add(broker)
        self._write(controlled_shutdown_changes(self.ctx, broker))

    @rule(data=st.data())
    def leader_shrinks_isr(self, data):
        """What a leader does on its own: drop a lagging follower (no new leader epoch)."""
        shrinkable = [
            tp
            for tp, s in self.ctx.states.items()
            if s.leader >= 0 and self.ctx.is_registered(s.leader) and len(s.isr) > 1
        ]
        if not shrinkable:
            return
        tp = data.draw(st.sampled_from(sorted(shrinkable)))
        state = self.ctx.states[tp]
        victim = data.draw(st.sampled_from([r for r in state.isr if r != state.leader]))
        self._broker_sets_isr(tp, tuple(r for r in state.isr if r != victim))

    @rule(data=st.data())
    def follower_catches_up(self, data):
        """The leader adds a registered follower that caught up back to the ISR."""
        candidates = [
            (tp, r)
            for tp, s in self.ctx.states.items()
            if s.leader >= 0 and self.ctx.is_registered(s.leader)
            for r in self.ctx.replicas[tp]
            if r not in s.isr and self.ctx.is_registered(r)
        ]
        if not candidates:
            return
        tp, replica = data.draw(st.sampled_from(sorted(candidates)))
        self._broker_sets_isr(tp, self.ctx.states[tp].isr + (replica,))

    def _broker_sets_isr(self, tp: TopicPartition, isr: tuple[int, ...]) -> None:
        state = self.ctx.states[tp]
        note(f"{tp}: leader {state.leader} sets ISR {isr}")
        self.ctx.states[tp] = LeaderAndIsr(
            state.leader, state.leader_epoch, isr, state.controller_epoch, state.zk_version + 1
        )

    @rule()
    def preferred_election(self):
        self._write(preferred_elections(self.ctx, self._partitions()))

    # -- invariants ---------------------------------------------------------------------------
    @invariant()
    def leaders_are_registered_isr_members(self):
        for tp, state in self.ctx.states.items():
            assert state.isr, tp
            if state.leader != NO_LEADER:
                assert self.ctx.is_registered(state.leader), tp
                assert state.leader in state.isr, tp
                assert all(self.ctx.is_registered(r) for r in state.isr), tp
            else:
                dead = [r for r in state.isr if not self.ctx.is_registered(r)]
                assert not dead or state.isr == tuple(dead) and len(dead) == 1, tp

    @invariant()
    def offline_partitions_have_no_electable_replica(self):
        for tp, state in self.ctx.states.items():
            if state.leader != NO_LEADER:
                continue
            assert not any(self.ctx.is_live(r) for r in state.isr), tp
            if self.ctx.unclean_enabled(tp.topic):
                assert not any(self.ctx.is_live(r) for r in self.ctx.replicas[tp]), tp

    @invariant()
    def uninitialized_partitions_have_no_live_replica(self):
        for tp in self._partitions():
            if tp not in self.ctx.states:
                assert not any(self.ctx.is_live(r) for r in self.ctx.replicas[tp]), tp

    @invariant()
    def unclean_elections_are_counted(self):
        assert self.ctx.stats.unclean_leader_elections == self.unclean_written


ControllerCore.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
test_controller_core_stateful = ControllerCore.TestCase
