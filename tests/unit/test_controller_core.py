"""The controller's pure decisions: what it writes and sends when the cluster changes."""

from __future__ import annotations

from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition
from controller.core.context import BrokerInfo, ControllerContext
from controller.core.decisions import (
    epoch_bumps,
    initial_state,
    on_broker_failure,
    on_broker_startup,
    on_new_partitions,
    preferred_elections,
    reassignment_completion,
)
from controller.core.deletion import TopicDeletions
from controller.core.reassignment import Reassignment, is_complete
from controller.core.rebalance import auto_rebalance_candidates, imbalance_by_broker
from controller.core.requests import ALL_PARTITIONS, RequestBatch
from controller.core.shutdown import (
    controlled_shutdown_changes,
    followed_partitions,
    remaining_leaderships,
    shutdown_request_error,
)
from controller.core.state_change import Reason
from server_common.zkdata import LEADER_DURING_DELETE, NO_LEADER, LeaderAndIsr, TopicAssignment

T0, T1, T2 = (TopicPartition("t", p) for p in range(3))


def make_ctx(brokers=(1, 2, 3), topics=None, states=None, unclean=False) -> ControllerContext:
    ctx = ControllerContext(controller_id=9, epoch=5, epoch_zk_version=4, default_unclean=unclean)
    for b in brokers:
        ctx.add_live_broker(BrokerInfo(b, "127.0.0.1", 9000 + b, epoch=100 + b))
    for topic, assignment in (topics or {"t": {0: (1, 2, 3)}}).items():
        ctx.add_topic(TopicAssignment(topic, assignment))
    for tp, (leader, isr) in (states or {}).items():
        ctx.states[tp] = LeaderAndIsr(leader, 3, tuple(isr), controller_epoch=1, zk_version=7)
    return ctx


def write(ctx: ControllerContext, changes) -> None:
    """What the shell does once ZooKeeper accepted the changes."""
    for change in changes:
        ctx.apply(change, 0 if change.old is None else change.old.zk_version + 1)


def by_tp(changes):
    return {c.tp: c for c in changes}


# -- new partitions ---------------------------------------------------------------------------
def test_initial_state_leads_with_the_first_live_assigned_replica():
    ctx = make_ctx(brokers=(2, 3), topics={"t": {0: (1, 2, 3)}})
    change = initial_state(ctx, T0)
    assert change.creates and change.reason is Reason.NEW_PARTITION
    assert (change.new.leader, change.new.isr, change.new.leader_epoch) == (2, (2, 3), 0)
    assert change.new.controller_epoch == 5


def test_partitions_without_live_replicas_stay_uninitialized_until_a_broker_appears():
    ctx = make_ctx(brokers=(3,), topics={"t": {0: (1, 2), 1: (3, 1)}})
    assert [c.tp for c in on_new_partitions(ctx, [T0, T1])] == [T1]
    write(ctx, on_new_partitions(ctx, [T0, T1]))
    ctx.add_live_broker(BrokerInfo(2, "h", 1, epoch=7))
    started = by_tp(on_broker_startup(ctx, [2]))
    assert set(started) == {T0}
    assert started[T0].creates and started[T0].new.leader == 2


# -- broker failure ---------------------------------------------------------------------------
def test_failure_elects_for_led_partitions_and_shrinks_isr_of_followed_ones():
    ctx = make_ctx(
        topics={"t": {0: (1, 2, 3), 1: (2, 1, 3), 2: (2, 3)}},
        states={T0: (1, (1, 2, 3)), T1: (2, (2, 1, 3)), T2: (2, (2, 3))},
    )
    changes = by_tp(on_broker_failure(ctx, {1}))
    assert set(changes) == {T0, T1}  # t-2 has no replica on broker 1
    led, followed = changes[T0], changes[T1]
    assert (led.new.leader, led.new.isr, led.reason) == (2, (2, 3), Reason.OFFLINE_ELECTION)
    assert (followed.new.leader, followed.new.isr) == (2, (2, 3))
    assert followed.reason is Reason.ISR_REMOVAL
    for change in changes.values():
        assert change.new.leader_epoch == change.old.leader_epoch + 1
        assert change.new.zk_version == 7  # the conditional set expects the version read
        assert change.new.controller_epoch == 5


def test_no_candidate_means_offline_with_the_last_isr_member_kept():
    ctx = make_ctx(brokers=(3,), topics={"t": {0: (1, 2, 3)}}, states={T0: (1, (1, 2))})
    (change,) = on_broker_failure(ctx, {1, 2})
    assert (change.new.leader, change.new.isr) == (NO_LEADER, (1,))
    assert change.reason is Reason.PARTITION_OFFLINE and change.goes_offline
    write(ctx, [change])
    assert ctx.offline_partitions() == [T0]
    # nothing more to write while it stays offline
    assert on_broker_failure(ctx, {1, 2}) == []
    # it comes back when that last member does (3 is alive but was never in the ISR)
    ctx.add_live_broker(BrokerInfo(1, "h", 1, epoch=200))
    (back,) = on_broker_startup(ctx, [1])
    assert (back.new.leader, back.new.isr, back.unclean) == (1, (1,), False)
    assert back.new.leader_epoch == change.new.leader_epoch + 1


def test_unclean_election_is_counted_once_written():
    ctx = make_ctx(brokers=(3,), topics={"t": {0: (1, 2, 3)}}, states={T0: (1, (1,))})
    ctx.topic_configs["t"]["unclean.leader.election.enable"] = "true"
    (change,) = on_broker_failure(ctx, {1})
    assert (change.new.leader, change.new.isr, change.unclean) == (3, (3,), True)
    assert change.reason is Reason.UNCLEAN_ELECTION
    assert ctx.stats.unclean_leader_elections == 0
    write(ctx, [change])
    assert ctx.stats.unclean_leader_elections == 1 and ctx.stats.leader_elections == 1


def test_topic_config_overrides_the_default_unclean_setting():
    ctx = make_ctx(brokers=(3,), states={T0: (1, (1,))}, unclean=True)
    ctx.topic_configs["t"]["unclean.leader.election.enable"] = "false"
    (change,) = on_broker_failure(ctx, {1})
    assert change.new.leader == NO_LEADER


def test_shutting_down_brokers_are_not_offline_election_candidates():
    ctx = make_ctx(states={T0: (1, (1, 2, 3))})
    ctx.shutting_down.add(2)
    (change,) = on_broker_failure(ctx, {1})
    # as in Kafka, the new ISR keeps only brokers that may lead (isReplicaOnline)
    assert change.new.leader == 3 and change.new.isr == (3,)


def test_partitions_of_topics_being_deleted_are_left_alone():
    ctx = make_ctx(states={T0: (1, (1, 2, 3))})
    ctx.topics_to_delete.add("t")
    assert on_broker_failure(ctx, {1}) == []


# -- controlled shutdown ------------------------------------------------------------------------
def test_controlled_shutdown_moves_leaders_and_leaves_isrs():
    ctx = make_ctx(
        topics={"t": {0: (1, 2, 3), 1: (2, 1, 3), 2: (1, 2)}, "solo": {0: (1,)}},
        states={T0: (1, (1, 2, 3)), T1: (2, (2, 1, 3)), T2: (1, (1,))},
    )
    solo = TopicPartition("solo", 0)
    ctx.states[solo] = LeaderAndIsr(1, 0, (1,), 1, 0)
    assert shutdown_request_error(ctx, 1, 101) is ErrorCode.NONE
    ctx.shutting_down.add(1)
    changes = by_tp(controlled_shutdown_changes(ctx, 1))
    assert (changes[T0].new.leader, changes[T0].new.isr) == (2, (2, 3))
    assert (changes[T1].new.leader, changes[T1].new.isr) == (2, (2, 3))
    assert T2 not in changes and solo not in changes  # nobody else in the ISR / RF 1
    assert followed_partitions(ctx, 1) == [T1]
    write(ctx, changes.values())
    # t-2 has another replica, but not in the ISR: still led here; RF 1 is not reported
    assert remaining_leaderships(ctx, 1) == [T2]


def test_controlled_shutdown_request_checks():
    ctx = make_ctx()
    assert shutdown_request_error(ctx, 7, -1) is ErrorCode.BROKER_NOT_AVAILABLE
    assert shutdown_request_error(ctx, 1, 100) is ErrorCode.STALE_BROKER_EPOCH
    assert shutdown_request_error(ctx, 1, -1) is ErrorCode.NONE  # epoch unknown to it


# -- preferred replicas -------------------------------------------------------------------------
def test_preferred_election_only_where_the_preferred_replica_can_lead():
    ctx = make_ctx(
        topics={"t": {0: (1, 2), 1: (1, 2), 2: (3, 2)}},
        states={T0: (2, (2, 1)), T1: (2, (2,)), T2: (3, (3, 2))},
    )
    (change,) = preferred_elections(ctx, [T0, T1, T2])
    assert change.tp == T0 and change.new.leader == 1 and change.new.isr == (2, 1)
    assert change.new.leader_epoch == 4


def test_leader_step_down_rotates_to_the_next_live_isr_member_keeping_the_isr():
    from controller.core.decisions import step_down_elections

    ctx = make_ctx(
        brokers=(1, 2, 3),
        topics={"t": {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}},
        states={T0: (1, (1, 2, 3)), T1: (2, (2, 1)), T2: (3, (3,))},
    )
    changes = {c.tp: c for c in step_down_elections(ctx, 2, [T0, T1, T2])}
    assert set(changes) == {T1}  # broker 2 leads only T1; T2 has no other ISR member
    assert changes[T1].new.leader == 1 and changes[T1].new.isr == (2, 1)  # 3 is not in ISR
    (change,) = step_down_elections(ctx, 1, [T0])
    assert change.new.leader == 2 and change.new.isr == (1, 2, 3)
    assert step_down_elections(ctx, 3, [T2]) == []


def test_imbalance_and_auto_rebalance_candidates():
    topics = {"t": {p: (1, 2) for p in range(10)}}
    states = {TopicPartition("t", p): (1, (1, 2)) for p in range(10)}
    ctx = make_ctx(brokers=(1, 2), topics=topics, states=states)
    ctx.states[T0] = LeaderAndIsr(2, 4, (2, 1), 1, 8)
    imbalance = imbalance_by_broker(ctx)
    assert imbalance[1].preferred_count == 10 and imbalance[1].not_led == (T0,)
    assert ctx.preferred_replica_imbalance_count() == 1
    assert auto_rebalance_candidates(ctx, 10) == []  # 10% is not above 10%
    ctx.states[T1] = LeaderAndIsr(2, 4, (2,), 1, 8)  # preferred out of the ISR
    assert auto_rebalance_candidates(ctx, 10) == [T0]


# -- reassignment ----------------------------------------------------------------------------
def test_reassignment_phases():
    ctx = make_ctx(brokers=(1, 2, 3, 4), topics={"t": {0: (1, 2, 3)}}, states={T0: (1, (1, 2, 3))})
    moving = Reassignment.start((1, 2, 3), (4, 2, 3))
    assert (moving.adding, moving.removing, moving.full_replicas) == ((4,), (1,), (4, 2, 3, 1))
    assert Reassignment.start((1, 2), (1, 2)) is None
    ctx.reassignments[T0] = moving
    ctx.replicas[T0] = moving.full_replicas
    znode = ctx.topic_assignment("t")
    assert znode.partitions[0] == (4, 2, 3, 1) and znode.adding_replicas[0] == (4,)
    resumed = Reassignment.from_znode((4, 2, 3, 1), (4,), (1,))  # after a failover
    assert (resumed.target, resumed.adding, resumed.removing) == ((4, 2, 3), (4,), (1,))

    (bump,) = epoch_bumps(ctx, [T0], Reason.REASSIGNMENT)
    assert (bump.new.leader, bump.new.isr, bump.new.leader_epoch) == (1, (1, 2, 3), 4)
    write(ctx, [bump])
    assert not is_complete(moving, ctx.states[T0])
    assert reassignment_completion(ctx, T0) is None

    ctx.states[T0] = LeaderAndIsr(1, 4, (1, 2, 3, 4), 5, 9)  # the leader added 4
    done = reassignment_completion(ctx, T0)
    assert (done.new.leader, done.new.isr, done.new.leader_epoch) == (4, (2, 3, 4), 5)


# -- requests ----------------------------------------------------------------------------------
def test_requests_are_per_broker_and_carry_epochs_and_leaders():
    ctx = make_ctx(
        topics={"t": {0: (1, 2), 1: (2, 3)}, "gone": {0: (1, 3)}},
        states={T0: (1, (1, 2)), T1: (2, (2, 3))},
    )
    ctx.states[TopicPartition("gone", 0)] = LeaderAndIsr(3, 2, (3,), 1, 1)
    ctx.topics_to_delete.add("gone")
    ctx.remove_live_broker(3)
    batch = RequestBatch(ctx)
    batch.add_leader_and_isr_to_replicas([T0, T1])
    batch.add_update_metadata_to_all(ALL_PARTITIONS)
    batch.add_stop_replica(1, TopicPartition("gone", 0), delete=True)
    requests = batch.build()

    kinds = [(r.broker_id, type(r.request).__name__) for r in requests]
    assert kinds == [
        (1, "LeaderAndIsrRequest"),
        (1, "UpdateMetadataRequest"),
        (1, "StopReplicaRequest"),
        (2, "LeaderAndIsrRequest"),
        (2, "UpdateMetadataRequest"),
    ]  # broker 3 is not registered: nothing for it
    lair1 = requests[0].request
    assert [(s.topic, s.partition) for s in lair1.partition_states] == [("t", 0)]
    assert (lair1.controller_id, lair1.controller_epoch, lair1.broker_epoch) == (9, 5, 101)
    assert [b.broker_id for b in lair1.live_leaders] == [1]
    lair2 = requests[3].request
    assert {s.partition for s in lair2.partition_states} == {0, 1}
    assert lair2.broker_epoch == 102
    metadata = {(s.topic, s.partition): s for s in requests[1].request.partition_states}
    assert metadata[("gone", 0)].leader == LEADER_DURING_DELETE
    assert metadata[("t", 1)].offline_replicas == [3]
    assert [b.id for b in requests[1].request.live_brokers] == [1, 2]
    stop = requests[2].request.partitions[0]
    assert stop == m.StopReplicaPartition(
        topic="gone", partition=0, leader_epoch=-2, delete_partition=True
    )


# -- deletion bookkeeping ----------------------------------------------------------------------
def test_deletion_waits_for_every_replica():
    ctx = make_ctx(brokers=(1, 2), topics={"t": {0: (1, 2)}})
    deletions = TopicDeletions()
    assert deletions.enqueue(ctx, "t") and not deletions.enqueue(ctx, "t")
    assert not deletions.enqueue(ctx, "unknown")
    assert ctx.is_deleting("t") and deletions.take_unannounced() == ["t"]
    assert deletions.take_sendable({1}) == [(T0, 1)]  # broker 2 is down
    assert deletions.take_sendable({1}) == []  # in flight
    deletions.on_stop_replica_result(T0, 1, deleted=False)
    assert deletions.take_sendable({1}) == []  # failed: ineligible until resumed
    deletions.make_eligible([1])
    assert deletions.take_sendable({1, 2}) == [(T0, 1), (T0, 2)]
    deletions.on_broker_failure([2])
    deletions.on_stop_replica_result(T0, 1, deleted=True)
    assert deletions.completed_topics() == [] and deletions.waiting_on("t") == {2}
    assert deletions.take_sendable({1, 2}) == [(T0, 2)]
    deletions.on_stop_replica_result(T0, 2, deleted=True)
    assert deletions.completed_topics() == ["t"]
