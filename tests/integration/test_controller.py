"""The controller against real ZooKeeper and fake brokers (tiny Trio servers).

Each test runs controllers in-process (`ControllerServer.run` in the test's nursery) on a
ZooKeeper chroot of its own; recording brokers (`tests.support.recording_broker`) register
/brokers/ids/<id> and record what the controller sends them. Waiting is done by polling
ZooKeeper or the brokers' records against a deadline, never by fixed sleeps.
"""

from __future__ import annotations

import json

import pytest
import trio

from client.connection import open_connection
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.types import TopicPartition
from controller.config import ControllerConfig
from controller.server import ControllerServer
from server_common import zkdata
from server_common.zk_kazoo import KazooZooKeeper
from tests.support.recording_broker import RecordingBroker
from tests.support.zk_sessions import expire_session

pytestmark = pytest.mark.integration

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


# -- helpers ---------------------------------------------------------------------------------
def controller_config(zk_connect: str, tmp_path, controller_id: int, **extra: str):
    values = {
        "controller.id": str(controller_id),
        "zookeeper.connect": zk_connect,
        "zookeeper.session.timeout.ms": "6000",
        "log.dir": str(tmp_path / f"controller-{controller_id}"),
        "auto.leader.rebalance.enable": "false",
        **extra,
    }
    return ControllerConfig(values)


async def start_controller(nursery: trio.Nursery, config: ControllerConfig):
    """Run a controller in `nursery`; returns it and the scope that stops it."""
    server = ControllerServer(config)
    scope = trio.CancelScope()

    async def run(task_status=trio.TASK_STATUS_IGNORED):
        with scope:
            await server.run(task_status=task_status)

    await nursery.start(run)
    return server, scope


async def eventually(predicate, timeout_s: float = 10.0, what: str = "condition"):
    """Poll an (async or plain) predicate until it holds."""
    with trio.move_on_after(timeout_s):
        while True:
            value = predicate()
            if hasattr(value, "__await__"):
                value = await value
            if value:
                return value
            await trio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def start_brokers(nursery, zk: KazooZooKeeper, ids) -> dict[int, RecordingBroker]:
    brokers = {}
    for broker_id in ids:
        broker = RecordingBroker(broker_id, zk)
        await nursery.start(broker.run)
        await broker.register()
        brokers[broker_id] = broker
    return brokers


async def create_topic(
    zk: KazooZooKeeper, topic: str, assignment: dict[int, tuple[int, ...]], config=None
):
    await zk.create(
        zkdata.topic_config_path(topic), zkdata.encode_topic_config(config or {}), makepath=True
    )
    await zk.create(
        zkdata.topic_path(topic), zkdata.TopicAssignment(topic, assignment).encode(), makepath=True
    )


async def read_state(zk: KazooZooKeeper, tp: TopicPartition) -> zkdata.LeaderAndIsr | None:
    result = await zk.get_or_none(zkdata.partition_state_path(tp.topic, tp.partition))
    return None if result is None else zkdata.LeaderAndIsr.decode(result[0], result[1].version)


async def leader_changes_isr(zk: KazooZooKeeper, tp: TopicPartition, isr, *, notify: bool = True):
    """What a leader does: a conditional set of the ISR, then a change notification."""
    path = zkdata.partition_state_path(tp.topic, tp.partition)
    data, stat = await zk.get(path)
    state = zkdata.LeaderAndIsr.decode(data, stat.version)
    changed = zkdata.LeaderAndIsr(
        state.leader, state.leader_epoch, tuple(isr), state.controller_epoch
    )
    await zk.set(path, changed.encode(), version=stat.version)
    if notify:
        await zk.create(
            f"{zkdata.ISR_CHANGE_NOTIFICATION}/{zkdata.ISR_CHANGE_PREFIX}",
            zkdata.encode_isr_change([(tp.topic, tp.partition)]),
            sequence=True,
        )


async def controller_epoch(zk: KazooZooKeeper) -> int:
    data, _ = await zk.get(zkdata.CONTROLLER_EPOCH)
    return int(data)


@pytest.fixture
async def zk(zk_connect):
    client = KazooZooKeeper(zk_connect, session_timeout_ms=6000, connection_timeout_ms=10_000)
    await client.start()
    try:
        yield client
    finally:
        await client.stop()


# -- tests -----------------------------------------------------------------------------------
async def test_new_topic_gets_state_znodes_and_brokers_are_told(zk, zk_connect, tmp_path, nursery):
    brokers = await start_brokers(nursery, zk, [1, 2, 3])
    controller, _ = await start_controller(nursery, controller_config(zk_connect, tmp_path, 1))
    await eventually(lambda: controller.is_active, what="controller elected")

    await create_topic(zk, "t", {0: (1, 2, 3), 1: (2, 3, 1)})

    state0 = await eventually(lambda: read_state(zk, TP0), what="state znode of t-0")
    assert (state0.leader, state0.leader_epoch, state0.isr) == (1, 0, (1, 2, 3))
    assert state0.controller_epoch == controller.context.epoch
    state1 = await eventually(lambda: read_state(zk, TP1), what="state znode of t-1")
    assert (state1.leader, state1.isr) == (2, (2, 3, 1))

    for broker in brokers.values():
        await broker.wait_for(lambda b=broker: b.leader_of(TP0) == 1 and TP1 in b.metadata)
        new_states = [
            s
            for r in broker.requests(m.LeaderAndIsrRequest)
            for s in r.partition_states
            if s.is_new
        ]
        assert {(s.topic, s.partition) for s in new_states} == {("t", 0), ("t", 1)}
    assert brokers[3].metadata[TP1].leader == 2
    events = [
        json.loads(line)
        for line in (tmp_path / "controller-1" / "controller-events.jsonl").read_text().splitlines()
    ]
    kinds = [e["event"] for e in events]
    assert "controller_elected" in kinds and "topic_created" in kinds
    assert any(e["event"] == "leader_change" and e["partition"] == 0 for e in events)


async def test_broker_death_elects_a_new_leader_with_a_conditional_set(
    zk, zk_connect, tmp_path, nursery
):
    brokers = await start_brokers(nursery, zk, [1, 2, 3])
    controller, _ = await start_controller(nursery, controller_config(zk_connect, tmp_path, 1))
    await create_topic(zk, "t", {0: (1, 2, 3), 1: (2, 3, 1)})
    before = await eventually(lambda: read_state(zk, TP0), what="t-0 initialized")
    await eventually(lambda: read_state(zk, TP1), what="t-1 initialized")

    await brokers[1].unregister()

    after = await eventually(
        lambda: _state_if(zk, TP0, lambda s: s.leader != 1), what="t-0 re-elected"
    )
    assert after.leader == 2 and after.isr == (2, 3)
    assert after.leader_epoch == before.leader_epoch + 1
    assert after.zk_version == before.zk_version + 1  # one conditional set, no blind write
    follower_side = await eventually(lambda: _state_if(zk, TP1, lambda s: 1 not in s.isr))
    assert (follower_side.leader, follower_side.isr) == (2, (2, 3))  # ISR removal: epoch bump
    assert follower_side.leader_epoch == 1
    for survivor in (brokers[2], brokers[3]):
        await survivor.wait_for(
            lambda b=survivor: b.leader_of(TP0) == 2 and b.metadata[TP0].offline_replicas == [1]
        )
    assert brokers[2].leaders[TP0].leader_epoch == after.leader_epoch
    assert controller.context.offline_partitions() == []


async def _state_if(zk, tp, predicate):
    state = await read_state(zk, tp)
    return state if state is not None and predicate(state) else None


async def test_partition_without_candidates_goes_offline_and_returns_with_its_last_isr_member(
    zk, zk_connect, tmp_path, nursery
):
    brokers = await start_brokers(nursery, zk, [1, 2])
    controller, _ = await start_controller(nursery, controller_config(zk_connect, tmp_path, 1))
    await create_topic(zk, "t", {0: (1, 2)})
    await eventually(lambda: read_state(zk, TP0))

    await brokers[2].unregister()
    await eventually(lambda: _state_if(zk, TP0, lambda s: s.isr == (1,)), what="2 out of ISR")
    await brokers[1].unregister()
    offline = await eventually(lambda: _state_if(zk, TP0, lambda s: s.leader == -1))
    assert offline.isr == (1,)  # the last member stays
    await eventually(lambda: controller.context.offline_partitions() == [TP0])

    await brokers[2].register()  # not in the ISR and unclean election is off: stays offline
    await brokers[2].wait_for(lambda: TP0 in brokers[2].leaders)
    assert (await read_state(zk, TP0)).leader == -1

    await brokers[1].register()
    back = await eventually(lambda: _state_if(zk, TP0, lambda s: s.leader == 1))
    assert back.isr == (1,) and back.leader_epoch == offline.leader_epoch + 1
    assert controller.stats.unclean_leader_elections == 0


async def test_unclean_election_when_the_topic_allows_it(zk, zk_connect, tmp_path, nursery):
    brokers = await start_brokers(nursery, zk, [1, 2])
    controller, _ = await start_controller(nursery, controller_config(zk_connect, tmp_path, 1))
    await create_topic(zk, "t", {0: (1, 2)}, {"unclean.leader.election.enable": "true"})
    await eventually(lambda: read_state(zk, TP0))
    await brokers[2].unregister()
    await eventually(lambda: _state_if(zk, TP0, lambda s: s.isr == (1,)))
    await brokers[1].unregister()
    await eventually(lambda: _state_if(zk, TP0, lambda s: s.leader == -1))

    await brokers[2].register()

    state = await eventually(lambda: _state_if(zk, TP0, lambda s: s.leader == 2))
    assert state.isr == (2,)
    await eventually(lambda: controller.stats.unclean_leader_elections == 1, what="counted")


async def test_standby_takes_over_bumps_the_epoch_and_resends_state(
    zk, zk_connect, tmp_path, nursery
):
    brokers = await start_brokers(nursery, zk, [1, 2])
    first, first_scope = await start_controller(nursery, controller_config(zk_connect, tmp_path, 1))
    await eventually(lambda: first.is_active)
    second, _ = await start_controller(nursery, controller_config(zk_connect, tmp_path, 2))
    await create_topic(zk, "t", {0: (1, 2), 1: (2, 1)})
    await brokers[1].wait_for(lambda: TP1 in brokers[1].metadata)
    assert not second.is_active
    assert await controller_epoch(zk) == 1

    first_scope.cancel()  # its ZooKeeper session closes: /controller goes away

    await eventually(lambda: second.is_active, what="the standby takes over")
    assert await controller_epoch(zk) == 2
    registration = zkdata.ControllerRegistration.decode((await zk.get(zkdata.CONTROLLER))[0])
    assert (registration.controller_id, registration.port) == (2, second.port)
    for broker in brokers.values():
        await broker.wait_for(
            lambda b=broker: any(
                r.controller_epoch == 2 and len(r.partition_states) == 2
                for r in b.requests(m.UpdateMetadataRequest)
            )
        )
        resent = [r for r in broker.requests(m.LeaderAndIsrRequest) if r.controller_epoch == 2]
        assert {(s.topic, s.partition) for r in resent for s in r.partition_states} == {
            ("t", 0),
            ("t", 1),
        }
        assert all(r.controller_id == 2 for r in resent)
        old = broker.requests(m.LeaderAndIsrRequest)[0]
        assert (old.controller_id, old.controller_epoch) == (1, 1)
    # nothing was re-elected: same leaders, same leader epochs
    assert (await read_state(zk, TP0)).leader_epoch == 0


async def test_a_fenced_out_controller_writes_nothing_and_resigns(
    zk, zk_connect, tmp_path, nursery
):
    brokers = await start_brokers(nursery, zk, [1, 2])
    controller, _ = await start_controller(nursery, controller_config(zk_connect, tmp_path, 1))
    await create_topic(zk, "t", {0: (1, 2)})
    before = await eventually(lambda: read_state(zk, TP0))
    await brokers[2].wait_for(lambda: TP0 in brokers[2].leaders)

    # Other controllers were elected meanwhile (as after a network partition) while this
    # one still holds what it believes is its term: /controller_epoch moved on to 5.
    await zk.set(zkdata.CONTROLLER_EPOCH, b"5")

    await brokers[1].unregister()  # this controller decides to elect broker 2...

    # ...its fenced write fails, it resigns, competes again and wins epoch 6, and only
    # then is the partition re-elected: exactly one new leader epoch, written at epoch 6.
    after = await eventually(lambda: _state_if(zk, TP0, lambda s: s.leader == 2))
    assert (after.controller_epoch, after.leader_epoch) == (6, before.leader_epoch + 1)
    assert after.zk_version == before.zk_version + 1
    events = [
        json.loads(line)
        for line in (tmp_path / "controller-1" / "controller-events.jsonl").read_text().splitlines()
    ]
    assert {"event": "controller_resigned", "reason": "controller moved"}.items() <= next(
        e for e in events if e["event"] == "controller_resigned"
    ).items()
    await brokers[2].wait_for(lambda: brokers[2].leader_of(TP0) == 2)
    epochs = [r.controller_epoch for r in brokers[2].requests(m.LeaderAndIsrRequest)]
    assert epochs[0] == 1 and epochs[-1] == 6 and set(epochs) == {1, 6}
    assert controller.context.epoch == 6


async def test_a_controller_that_lost_its_znode_steps_down_without_removing_the_successor(
    zk, zk_connect, tmp_path, nursery
):
    brokers = await start_brokers(nursery, zk, [1, 2])
    zombie, _ = await start_controller(nursery, controller_config(zk_connect, tmp_path, 1))
    await create_topic(zk, "t", {0: (1, 2)})
    before = await eventually(lambda: read_state(zk, TP0))

    await zk.delete(zkdata.CONTROLLER)
    await zk.create(zkdata.CONTROLLER, zkdata.encode_controller(99, 0, "127.0.0.1", 1))
    await zk.set(zkdata.CONTROLLER_EPOCH, b"5")
    await brokers[1].unregister()

    await eventually(lambda: zombie.active is None, what="the old controller steps down")
    await trio.sleep(0.3)  # give a (wrong) write a chance to show up
    assert await read_state(zk, TP0) == before
    registration = zkdata.ControllerRegistration.decode((await zk.get(zkdata.CONTROLLER))[0])
    assert registration.controller_id == 99
    assert all(r.controller_epoch == 1 for r in brokers[2].requests(m.LeaderAndIsrRequest))


async def test_controlled_shutdown_moves_leaderships_away(zk, zk_connect, tmp_path, nursery):
    brokers = await start_brokers(nursery, zk, [1, 2, 3])
    controller, _ = await start_controller(nursery, controller_config(zk_connect, tmp_path, 1))
    await create_topic(zk, "t", {0: (1, 2, 3), 1: (2, 1, 3)})
    await create_topic(zk, "solo", {0: (1,)})
    await eventually(lambda: read_state(zk, TopicPartition("solo", 0)))
    await eventually(lambda: read_state(zk, TP1))

    async with open_connection("127.0.0.1", controller.port) as connection:
        stale = await connection.request(
            m.ControlledShutdownRequest(broker_id=1, broker_epoch=brokers[1].broker_epoch - 1)
        )
        assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
        unknown = await connection.request(m.ControlledShutdownRequest(broker_id=7))
        assert unknown.error_code == ErrorCode.BROKER_NOT_AVAILABLE
        response = await connection.request(
            m.ControlledShutdownRequest(broker_id=1, broker_epoch=brokers[1].broker_epoch)
        )

    assert response.error_code == ErrorCode.NONE
    assert response.remaining_partitions == []  # a single-replica partition cannot move
    moved = await read_state(zk, TP0)
    assert (moved.leader, moved.isr, moved.leader_epoch) == (2, (2, 3), 1)
    followed = await read_state(zk, TP1)
    assert (followed.leader, followed.isr, followed.leader_epoch) == (2, (2, 3), 1)
    # broker 1 becomes a follower of t-0 and stops (no delete) the partition it followed
    await brokers[1].wait_for(
        lambda: brokers[1].leader_of(TP0) == 2 and brokers[1].requests(m.StopReplicaRequest)
    )
    stops = brokers[1].requests(m.StopReplicaRequest)
    assert [(p.topic, p.partition, p.delete_partition) for r in stops for p in r.partitions] == [
        ("t", 1, False)
    ]
    await brokers[3].wait_for(lambda: brokers[3].leaders[TP1].leader_epoch == 1)
    assert brokers[3].leaders[TP1].isr == [2, 3]
    assert controller.context.shutting_down == {1}


async def test_standby_answers_not_controller(zk, zk_connect, tmp_path, nursery):
    await start_brokers(nursery, zk, [1])
    active, _ = await start_controller(nursery, controller_config(zk_connect, tmp_path, 1))
    await eventually(lambda: active.is_active)
    standby, _ = await start_controller(nursery, controller_config(zk_connect, tmp_path, 2))
    async with open_connection("127.0.0.1", standby.port) as connection:
        response = await connection.request(m.ControlledShutdownRequest(broker_id=1))
    assert response.error_code == ErrorCode.NOT_CONTROLLER


async def test_bounced_broker_is_handled_as_failure_then_startup(zk, zk_connect, tmp_path, nursery):
    brokers = await start_brokers(nursery, zk, [1, 2])
    controller, _ = await start_controller(nursery, controller_config(zk_connect, tmp_path, 1))
    await create_topic(zk, "t", {0: (1, 2)})
    await eventually(lambda: read_state(zk, TP0))
    old_epoch = brokers[1].broker_epoch
    before = len(brokers[1].requests(m.UpdateMetadataRequest))

    # Delete and register again in one multi-free burst: the controller may see only the
    # new registration, with a new broker epoch (czxid).
    await brokers[1].unregister()
    await brokers[1].register()

    moved = await eventually(lambda: _state_if(zk, TP0, lambda s: s.leader == 2))
    assert moved.isr == (2,)
    await eventually(lambda: controller.context.broker_epoch(1) == brokers[1].broker_epoch)
    assert brokers[1].broker_epoch != old_epoch
    await brokers[1].wait_for(
        lambda: (
            len(brokers[1].requests(m.UpdateMetadataRequest)) > before
            and brokers[1].leader_of(TP0) == 2
        )
    )
    last = brokers[1].requests(m.LeaderAndIsrRequest)[-1]
    assert last.broker_epoch == brokers[1].broker_epoch


async def test_topic_deletion(zk, zk_connect, tmp_path, nursery):
    brokers = await start_brokers(nursery, zk, [1, 2])
    controller, _ = await start_controller(nursery, controller_config(zk_connect, tmp_path, 1))
    await create_topic(zk, "t", {0: (1, 2), 1: (2, 1)})
    await create_topic(zk, "keep", {0: (1, 2)})
    await brokers[2].wait_for(lambda: TP1 in brokers[2].metadata)
    await brokers[2].unregister()  # deletion must wait for it

    await zk.create(zkdata.delete_topic_path("t"), b"", makepath=True)

    await brokers[1].wait_for(lambda: {TP0, TP1} <= brokers[1].deleted)
    assert TP0 not in brokers[1].metadata  # told leader -2: dropped
    assert await zk.exists(zkdata.topic_path("t")) is not None  # broker 2 still has replicas
    await brokers[2].register()
    await eventually(
        lambda: _absent(zk, zkdata.topic_path("t"), zkdata.topic_config_path("t")),
        what="topic znodes deleted",
    )
    assert await zk.exists(zkdata.delete_topic_path("t")) is None
    assert {TP0, TP1} <= brokers[2].deleted
    await eventually(lambda: not controller.context.has_topic("t"))
    assert controller.context.has_topic("keep")


async def _absent(zk, *paths):
    for path in paths:
        if await zk.exists(path) is not None:
            return False
    return True


async def test_preferred_replica_election(zk, zk_connect, tmp_path, nursery):
    brokers = await start_brokers(nursery, zk, [1, 2])
    await start_controller(nursery, controller_config(zk_connect, tmp_path, 1))
    await create_topic(zk, "t", {0: (1, 2)})
    await eventually(lambda: read_state(zk, TP0))
    await brokers[1].unregister()
    await eventually(lambda: _state_if(zk, TP0, lambda s: s.leader == 2))
    await brokers[1].register()
    # the leader (2) adds 1 back to the ISR; its notification has not gone out yet
    await leader_changes_isr(zk, TP0, (2, 1), notify=False)
    state = await read_state(zk, TP0)

    await zk.create(
        zkdata.ADMIN_PREFERRED_REPLICA_ELECTION,
        zkdata.encode_partition_list([("t", 0)]),
        makepath=True,
    )

    elected = await eventually(lambda: _state_if(zk, TP0, lambda s: s.leader == 1))
    assert elected.isr == (2, 1) and elected.leader_epoch == state.leader_epoch + 1
    await eventually(lambda: _absent(zk, zkdata.ADMIN_PREFERRED_REPLICA_ELECTION))
    await brokers[2].wait_for(lambda: brokers[2].leader_of(TP0) == 1)


async def test_auto_rebalance_moves_leaders_back(zk, zk_connect, tmp_path, nursery):
    brokers = await start_brokers(nursery, zk, [1, 2])
    config = controller_config(
        zk_connect,
        tmp_path,
        1,
        **{
            "auto.leader.rebalance.enable": "true",
            "leader.imbalance.check.interval.seconds": "1",
        },
    )
    await start_controller(nursery, config)
    await create_topic(zk, "t", {0: (1, 2)})
    await eventually(lambda: read_state(zk, TP0))
    await brokers[1].unregister()
    await eventually(lambda: _state_if(zk, TP0, lambda s: s.leader == 2))
    await brokers[1].register()
    await leader_changes_isr(zk, TP0, (2, 1))

    back = await eventually(lambda: _state_if(zk, TP0, lambda s: s.leader == 1), timeout_s=10)
    assert back.isr == (2, 1)


async def test_isr_change_notification_updates_metadata_and_is_deleted(
    zk, zk_connect, tmp_path, nursery
):
    brokers = await start_brokers(nursery, zk, [1, 2])
    await start_controller(nursery, controller_config(zk_connect, tmp_path, 1))
    await create_topic(zk, "t", {0: (1, 2)})
    state = await eventually(lambda: read_state(zk, TP0))
    await brokers[2].wait_for(lambda: TP0 in brokers[2].metadata)

    await leader_changes_isr(zk, TP0, (1,))

    await brokers[2].wait_for(lambda: brokers[2].metadata[TP0].isr == [1])
    assert brokers[2].metadata[TP0].zk_version == state.zk_version + 1
    await eventually(
        lambda: _no_children(zk, zkdata.ISR_CHANGE_NOTIFICATION), what="notification deleted"
    )


async def _no_children(zk, path):
    return await zk.get_children(path) == []


async def test_reassignment_moves_a_partition_to_new_replicas(zk, zk_connect, tmp_path, nursery):
    brokers = await start_brokers(nursery, zk, [1, 2, 3])
    controller, _ = await start_controller(nursery, controller_config(zk_connect, tmp_path, 1))
    await create_topic(zk, "t", {0: (1, 2)})
    state = await eventually(lambda: read_state(zk, TP0))

    await zk.create(
        zkdata.ADMIN_REASSIGN_PARTITIONS,
        zkdata.encode_reassignment({("t", 0): (3, 2)}),
        makepath=True,
    )

    # Phase A: RS = target + removed, new replicas told to follow, epoch bumped
    await brokers[3].wait_for(lambda: TP0 in brokers[3].leaders)
    assert brokers[3].leaders[TP0].replicas == [3, 2, 1]
    assert brokers[3].leaders[TP0].adding_replicas == [3]
    assert brokers[3].leaders[TP0].removing_replicas == [1]
    raw = zkdata.TopicAssignment.decode("t", (await zk.get(zkdata.topic_path("t")))[0])
    assert raw.partitions[0] == (3, 2, 1) and raw.adding_replicas[0] == (3,)
    bumped = await read_state(zk, TP0)
    assert (bumped.leader, bumped.leader_epoch) == (1, state.leader_epoch + 1)

    # the leader adds broker 3 to the ISR; no notification: the controller watches the
    # state znodes of partitions being reassigned
    await leader_changes_isr(zk, TP0, (1, 2, 3), notify=False)

    # Phase B: leader 1 is not in the target: elect 3; 1 leaves ISR and replicas
    done = await eventually(lambda: _state_if(zk, TP0, lambda s: s.leader == 3))
    assert done.isr == (2, 3) and done.leader_epoch == bumped.leader_epoch + 1
    await eventually(lambda: _absent(zk, zkdata.ADMIN_REASSIGN_PARTITIONS))
    final = zkdata.TopicAssignment.decode("t", (await zk.get(zkdata.topic_path("t")))[0])
    assert final.partitions[0] == (3, 2) and not final.adding_replicas.get(0)
    await brokers[1].wait_for(lambda: TP0 in brokers[1].deleted)
    await brokers[2].wait_for(lambda: brokers[2].leader_of(TP0) == 3)
    assert brokers[2].leaders[TP0].replicas == [3, 2]
    assert controller.context.reassignments == {}


async def test_metrics_endpoint(zk, zk_connect, tmp_path, nursery):
    await start_brokers(nursery, zk, [1])
    config = controller_config(zk_connect, tmp_path, 1, **{"metrics.port": "0"})
    controller, _ = await start_controller(nursery, config)
    await create_topic(zk, "t", {0: (1,), 1: (1,)})
    await eventually(lambda: read_state(zk, TP1))
    stream = await trio.open_tcp_stream("127.0.0.1", controller.metrics_port)
    await stream.send_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    body = b""
    while chunk := await stream.receive_some(65536):
        body += chunk
    text = body.decode()
    assert "tributary_active_controller_count 1" in text
    assert "tributary_global_partition_count 2" in text
    assert "tributary_offline_partitions_count 0" in text
    assert "tributary_controller_epoch 1" in text
    assert "tributary_unclean_leader_elections_total 0" in text
    assert "tributary_controller_event_queue_time_seconds_count" in text


async def test_session_expiry_ends_the_term_and_the_controller_competes_again(
    zk, zk_connect, tmp_path, nursery
):
    brokers = await start_brokers(nursery, zk, [1])
    first, _ = await start_controller(nursery, controller_config(zk_connect, tmp_path, 1))
    await eventually(lambda: first.is_active)
    second, _ = await start_controller(nursery, controller_config(zk_connect, tmp_path, 2))
    await create_topic(zk, "t", {0: (1,)})
    await brokers[1].wait_for(lambda: TP0 in brokers[1].metadata)

    await trio.to_thread.run_sync(expire_session, zk_connect, first.zk.session_credentials)

    await eventually(lambda: second.is_active, what="the standby takes over")
    assert await controller_epoch(zk) == 2
    # The old controller learns of the expiry only when its client reconnects (until
    # then it is a zombie whose writes the epoch check would refuse); then it steps down.
    await eventually(lambda: not first.is_active, what="the old controller steps down")
    # the old controller reconnects with a new session and stands by
    await eventually(lambda: first.zk.connected, what="reconnected")
    await brokers[1].wait_for(
        lambda: any(r.controller_epoch == 2 for r in brokers[1].requests(m.UpdateMetadataRequest))
    )
    assert not first.is_active and second.is_active


async def test_the_controller_runs_as_a_process(zk, zk_connect, tmp_path):
    import signal
    import subprocess
    import sys

    process = await trio.lowlevel.open_process(
        [
            sys.executable,
            "-m",
            "controller",
            "--override",
            "controller.id=3",
            "--override",
            f"zookeeper.connect={zk_connect}",
            "--override",
            f"log.dir={tmp_path}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        registration = await eventually(
            lambda: zk.get_or_none(zkdata.CONTROLLER), timeout_s=20, what="/controller"
        )
        controller = zkdata.ControllerRegistration.decode(registration[0])
        assert controller.controller_id == 3 and controller.port > 0
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(15):
            assert await process.wait() == 0
        assert await zk.exists(zkdata.CONTROLLER) is None
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
