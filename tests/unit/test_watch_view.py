"""`tributary cluster watch`: what a person watching the cluster sees.

Synthetic snapshots are rendered to plain text and read like a user would: leaders, ISR,
HW/LEO per replica, the under-replicated and offline marks, and the event lines for the
changes that matter (ISR shrink/expand, leader change, a broker going down, a controller
change). One test at the end reads a real ZooKeeper and a real in-process broker through
the command's shell, and the CLI's error paths are checked as one-line errors.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import trio

from client.connection import open_connection, open_connection_pool
from client.protocol import messages as m
from client.protocol.records import Record, build_batch
from client.protocol.types import TopicPartition
from server_common import zkdata
from tools.cli import main
from tools.cluster.inspect import ClusterView, PartitionView, read_cluster
from tools.cluster.watch_view import (
    BROKER_DOWN,
    BROKER_NOT_ANSWERING,
    BROKER_UP,
    ClusterSnapshot,
    GroupSnapshot,
    PartitionSnapshot,
    ReplicaOffsets,
    WatchHistory,
    build_snapshot,
    diff_events,
    group_lag,
    group_snapshot,
    offsets_from_log_dirs,
    render_to_string,
    unavailable_snapshot,
)
from tools.commands.watch import SnapshotReader

T0 = 1_700_000_000_000
ZK = "127.0.0.1:2181"


def partition(
    p: int,
    leader: int,
    isr: tuple[int, ...],
    *,
    topic: str = "demo",
    replicas: tuple[int, ...] = (1, 2, 3),
    epoch: int = 0,
    offsets: dict[int, tuple[int, int]] | None = None,
) -> PartitionSnapshot:
    return PartitionSnapshot(
        topic=topic,
        partition=p,
        replicas=replicas,
        leader=leader,
        leader_epoch=epoch,
        isr=isr,
        offsets={
            b: ReplicaOffsets(hw, leo, is_leader=b == leader)
            for b, (hw, leo) in (offsets or {}).items()
        },
    )


def snapshot(
    partitions=(),
    *,
    brokers=None,
    controller: int | None = 1001,
    controller_epoch: int | None = 1,
    at: int = T0,
) -> ClusterSnapshot:
    return ClusterSnapshot(
        taken_at_ms=at,
        zookeeper=ZK,
        brokers=brokers if brokers is not None else {1: BROKER_UP, 2: BROKER_UP, 3: BROKER_UP},
        controller_id=controller,
        controller_epoch=controller_epoch,
        partitions=tuple(partitions),
    )


def row(text: str, topic: str, p: int) -> str:
    """The table line of one partition."""
    for line in text.splitlines():
        cells = line.split()
        if len(cells) > 2 and cells[0] == topic and cells[1] == str(p):
            return line
    raise AssertionError(f"no row for {topic}-{p} in:\n{text}")


def messages(events) -> list[str]:
    return [e.message for e in events]


HEALTHY = [
    partition(0, 1, (1, 2, 3), epoch=4, offsets={1: (42, 42), 2: (42, 42), 3: (40, 42)}),
    partition(1, 2, (2, 3, 1), replicas=(2, 3, 1), offsets={2: (7, 9), 3: (7, 9), 1: (7, 8)}),
]


# -- the table ----------------------------------------------------------------------------------
def test_rows_show_leader_epoch_replicas_isr_and_offsets_per_replica():
    text = render_to_string(snapshot(HEALTHY))
    line = row(text, "demo", 0)
    cells = line.split()
    assert cells[2:6] == ["1", "4", "1,2,3", "1,2,3"]  # leader, epoch, replicas, ISR
    assert "1*:42/42" in line and "2:42/42" in line and "3:40/42" in line  # HW/LEO per replica
    assert cells[-1] == "ok"
    line = row(text, "demo", 1)
    assert "2*:7/9" in line and "1:7/8" in line  # the * follows the leader
    assert "HW/LEO" in text


def test_header_shows_brokers_up_and_down_and_the_active_controller():
    brokers = {1: BROKER_UP, 2: BROKER_DOWN, 3: BROKER_NOT_ANSWERING}
    text = render_to_string(snapshot(HEALTHY, brokers=brokers, controller=1002, controller_epoch=7))
    assert "brokers up: 1 " in text
    assert "down: 2" in text
    assert "not answering: 3" in text
    assert "controller: 1002 (epoch 7)" in text


def test_no_active_controller_is_said_plainly():
    text = render_to_string(snapshot(HEALTHY, controller=None, controller_epoch=3))
    assert "controller: none" in text


def test_under_replicated_partition_is_marked():
    urp = partition(0, 1, (1, 2), offsets={1: (10, 12), 2: (10, 12), 3: (5, 5)})
    text = render_to_string(snapshot([urp]))
    assert row(text, "demo", 0).split()[-1] == "under-replicated"
    assert "under-replicated: 1" in text


def test_offline_partition_is_marked_and_its_down_replicas_shown():
    brokers = {1: BROKER_DOWN, 2: BROKER_DOWN, 3: BROKER_UP}
    offline = partition(0, -1, (1,), epoch=5, offsets={3: (3, 3)})
    text = render_to_string(snapshot([offline], brokers=brokers))
    line = row(text, "demo", 0)
    assert line.split()[2] == "none"  # no leader
    assert line.split()[-1] == "offline"
    assert "1:down" in line and "2:down" in line and "3:3/3" in line
    assert "offline: 1" in text


def test_leader_on_a_dead_broker_is_flagged_before_the_controller_moves_it():
    brokers = {1: BROKER_DOWN, 2: BROKER_UP, 3: BROKER_UP}
    stale = partition(0, 1, (1, 2, 3), offsets={2: (4, 4), 3: (4, 4)})
    assert "leader down" in row(render_to_string(snapshot([stale], brokers=brokers)), "demo", 0)


def test_status_marks_are_coloured_on_a_colour_terminal():
    from rich.console import Console

    from tools.cluster.watch_view import render

    urp = partition(0, 1, (1, 2), offsets={1: (1, 1)})
    offline = partition(1, -1, (3,))
    console = Console(width=120, color_system="standard", force_terminal=True, record=True)
    with console.capture() as capture:
        console.print(render(snapshot([urp, offline])))
    ansi = capture.get()
    urp_line = next(
        line for line in ansi.splitlines() if "under-replicated" in line and "demo" in line
    )
    offline_line = next(line for line in ansi.splitlines() if "offline" in line and "demo" in line)
    assert "\x1b[33m" in urp_line  # yellow
    assert "\x1b[31m" in offline_line  # red


def test_internal_topics_are_hidden_unless_asked_for():
    internal = [partition(i, 1, (1, 2, 3), topic="__consumer_offsets") for i in range(3)]
    text = render_to_string(snapshot(HEALTHY + internal))
    assert "__consumer_offsets" not in text
    assert "3 internal partitions hidden" in text
    assert "__consumer_offsets" in render_to_string(
        snapshot(HEALTHY + internal), show_internal=True
    )


def test_unreachable_zookeeper_is_the_whole_story():
    text = render_to_string(
        unavailable_snapshot("Connection time-out", taken_at_ms=T0, zookeeper=ZK)
    )
    assert "ZooKeeper unreachable: Connection time-out" in text
    assert "Topic" not in text


def test_empty_cluster_says_no_topics():
    assert "no topics yet" in render_to_string(snapshot([]))


# -- events ---------------------------------------------------------------------------------------
def test_isr_shrink_and_expand_events():
    before = snapshot([partition(0, 1, (1, 2, 3), epoch=2)])
    shrunk = snapshot([partition(0, 1, (1, 2), epoch=2)], at=T0 + 1000)
    events = diff_events(before, shrunk)
    assert messages(events) == ["demo-0: ISR shrink 1,2,3 -> 1,2 (3 out)"]
    assert events[0].kind == "isr_shrink" and events[0].at_ms == T0 + 1000
    expanded = snapshot([partition(0, 1, (1, 2, 3), epoch=2)], at=T0 + 2000)
    assert messages(diff_events(shrunk, expanded)) == ["demo-0: ISR expand 1,2 -> 1,2,3 (3 in)"]


def test_leader_change_event_carries_the_new_epoch():
    before = snapshot([partition(0, 1, (1, 2, 3), epoch=4)])
    after = snapshot([partition(0, 2, (2, 3), epoch=5)])
    assert messages(diff_events(before, after)) == [
        "demo-0: leader 1 -> 2 (epoch 5)",
        "demo-0: ISR shrink 1,2,3 -> 2,3 (1 out)",
    ]


def test_partition_going_offline_and_coming_back():
    before = snapshot([partition(0, 3, (3,), epoch=6)])
    offline = snapshot([partition(0, -1, (3,), epoch=7)])
    back = snapshot([partition(0, 3, (3,), epoch=8)])
    assert messages(diff_events(before, offline)) == ["demo-0: offline, no leader (was 3; epoch 7)"]
    assert messages(diff_events(offline, back)) == ["demo-0: back online, leader 3 (epoch 8)"]


def test_broker_going_down_and_up_again():
    up = snapshot(HEALTHY)
    silent = snapshot(HEALTHY, brokers={1: BROKER_UP, 2: BROKER_NOT_ANSWERING, 3: BROKER_UP})
    down = snapshot(HEALTHY, brokers={1: BROKER_UP, 2: BROKER_DOWN, 3: BROKER_UP})
    assert messages(diff_events(up, silent)) == ["broker 2 not answering (still registered)"]
    assert messages(diff_events(silent, down)) == ["broker 2 down"]
    assert diff_events(silent, down)[0].kind == "broker_down"
    assert messages(diff_events(down, up)) == ["broker 2 up"]


def test_controller_change_events():
    first = snapshot(HEALTHY, controller=1001, controller_epoch=1)
    none = snapshot(HEALTHY, controller=None, controller_epoch=1)
    second = snapshot(HEALTHY, controller=1002, controller_epoch=2)
    assert messages(diff_events(first, second)) == ["controller 1001 -> 1002 (epoch 2)"]
    assert messages(diff_events(first, none)) == ["no active controller (was 1001)"]
    assert messages(diff_events(none, second)) == ["controller 1002 elected (epoch 2)"]


def test_topics_created_and_deleted():
    before = snapshot(HEALTHY)
    other = [partition(i, 1, (1,), topic="orders", replicas=(1,)) for i in range(2)]
    after = snapshot(HEALTHY + other)
    assert messages(diff_events(before, after)) == ["topic orders created (2 partitions)"]
    assert messages(diff_events(after, before)) == ["topic orders deleted"]


def test_nothing_changed_means_no_events_and_the_first_frame_has_none():
    assert diff_events(snapshot(HEALTHY), snapshot(HEALTHY, at=T0 + 5000)) == []
    assert diff_events(None, snapshot(HEALTHY)) == []


def test_a_broker_dying_under_many_partitions_is_one_line_per_kind():
    before = snapshot([partition(i, 1 + i % 3, (1, 2, 3)) for i in range(12)])
    after = snapshot(
        [partition(i, 1 + i % 3, (1, 2)) for i in range(12)],
        brokers={1: BROKER_UP, 2: BROKER_UP, 3: BROKER_DOWN},
    )
    lines = messages(diff_events(before, after))
    assert lines[0] == "broker 3 down"
    assert lines[1].startswith("ISR shrink (3 out) on 12 partitions: demo-0, demo-1")
    assert lines[1].endswith("+8 more")
    assert len(lines) == 2


def test_event_lines_are_rendered_newest_last_and_only_the_last_eight():
    history = WatchHistory()
    current = snapshot([partition(0, 1, (1, 2, 3))])
    history.observe(current)
    for i in range(10):  # ten shrink/expand flips
        isr = (1, 2) if i % 2 == 0 else (1, 2, 3)
        current = snapshot([partition(0, 1, isr)], at=T0 + 1000 * (i + 1))
        history.observe(current)
    text = render_to_string(current, list(history.recent))
    event_lines = [line for line in text.splitlines() if "demo-0: ISR" in line]
    assert len(event_lines) == 8
    assert "ISR expand" in event_lines[-1]  # the tenth flip (i = 9) restored the ISR


def test_zookeeper_outage_and_what_changed_meanwhile():
    history = WatchHistory()
    history.observe(snapshot([partition(0, 1, (1, 2, 3))]))
    lost = history.observe(
        unavailable_snapshot("Connection loss", taken_at_ms=T0 + 1, zookeeper=ZK)
    )
    assert messages(lost) == ["ZooKeeper unreachable: Connection loss"]
    assert history.observe(unavailable_snapshot("again", taken_at_ms=T0 + 2, zookeeper=ZK)) == []
    back = history.observe(snapshot([partition(0, 2, (2, 3), epoch=1)], at=T0 + 3))
    assert messages(back) == [
        "ZooKeeper reachable again",
        "demo-0: leader 1 -> 2 (epoch 1)",
        "demo-0: ISR shrink 1,2,3 -> 2,3 (1 out)",
    ]


# -- consumer groups ------------------------------------------------------------------------------
def with_groups(partitions, groups, **kwargs) -> ClusterSnapshot:
    return dataclasses.replace(snapshot(partitions, **kwargs), groups=tuple(groups))


def group_row(text: str, group_id: str) -> list[str]:
    for line in text.splitlines():
        cells = line.split()
        if cells and cells[0] == group_id:
            return cells
    raise AssertionError(f"no row for group {group_id} in:\n{text}")


def test_groups_show_state_generation_members_and_total_lag_from_the_leaders_hw():
    # HEALTHY: demo-0's leader HW is 42, demo-1's is 7.
    app = GroupSnapshot("app", "Stable", 5, 2, 1, {("demo", 0): 40, ("demo", 1): 2})
    idle = GroupSnapshot("idle", "Empty", 6, 0, 2, {("demo", 0): 42})
    text = render_to_string(with_groups(HEALTHY, [idle, app]))
    assert ["Group", "State", "Generation", "Members", "Coordinator", "Lag"] == next(
        line.split() for line in text.splitlines() if line.split()[:1] == ["Group"]
    )
    assert group_row(text, "app") == ["app", "Stable", "5", "2", "1", "7"]  # 2 + 5
    assert group_row(text, "idle") == ["idle", "Empty", "6", "0", "2", "0"]


def test_unknown_group_facts_show_as_question_marks():
    silent_leader = partition(0, 1, (1, 2, 3), offsets={2: (9, 9)})  # leader 1 did not answer
    groups = [
        GroupSnapshot("no-offsets", "Stable", 1, 1, 1, None),
        GroupSnapshot("undescribed", "Stable", None, None, None, {}),
        GroupSnapshot("blind", "Stable", 2, 1, 1, {("demo", 0): 3}),
        GroupSnapshot("gone-topic", "Empty", 3, 0, 1, {("deleted", 0): 3}),
    ]
    snap = with_groups([silent_leader], groups)
    text = render_to_string(snap)
    assert group_row(text, "no-offsets")[-1] == "?"
    assert group_row(text, "undescribed") == ["undescribed", "Stable", "?", "?", "?", "0"]
    assert group_row(text, "blind")[-1] == "?"
    assert group_lag(snap, groups[3]) == 0  # a deleted topic's offsets do not count
    failed = dataclasses.replace(snapshot(HEALTHY), groups_error="NOT_COORDINATOR: busy")
    text = render_to_string(failed)
    assert "consumer groups: ? (NOT_COORDINATOR: busy)" in text
    assert "demo" in text  # the partitions are still there
    assert "no consumer groups" in render_to_string(with_groups(HEALTHY, []))
    assert "consumer groups" not in render_to_string(snapshot(HEALTHY))  # not asked


def test_group_snapshot_from_the_admin_clients_answers():
    from types import SimpleNamespace

    listing = SimpleNamespace(
        group_id="app", protocol_type="consumer", state="Stable", coordinator_id=2
    )
    description = SimpleNamespace(
        group_id="app", state="CompletingRebalance", generation=4, coordinator_id=3,
        members=[object(), object()],
    )  # fmt: skip
    committed = {TopicPartition("demo", 0): 5, TopicPartition("demo", 1): -1}
    assert group_snapshot(listing, description, committed) == GroupSnapshot(
        "app", "CompletingRebalance", 4, 2, 3, {("demo", 0): 5}
    )
    assert group_snapshot(listing) == GroupSnapshot("app", "Stable", None, None, 2, None)


def test_group_events_appear_rebalance_and_go():
    before = with_groups(HEALTHY, [GroupSnapshot("app", "Stable", 3, 2, 1, {})])
    after = with_groups(
        HEALTHY,
        [GroupSnapshot("app", "Stable", 4, 3, 1, {}), GroupSnapshot("new", "Stable", 1, 1, 2)],
    )
    assert messages(diff_events(before, after)) == [
        "group new appeared (Stable, 1 member)",
        "group app: generation 3 -> 4 (Stable, 3 members)",
    ]
    emptied = with_groups(HEALTHY, [GroupSnapshot("app", "Empty", 5, 0, 1, {})])
    event = diff_events(after, emptied)
    assert messages(event) == [
        "group new gone (deleted, or its coordinator is not answering)",
        "group app: generation 4 -> 5 (Empty, 0 members)",
    ]
    # No group events across a failed or missing group read.
    failed = dataclasses.replace(snapshot(HEALTHY), groups_error="timeout")
    assert diff_events(before, failed) == [] and diff_events(failed, after) == []
    assert diff_events(snapshot(HEALTHY), after) == []


# -- building snapshots from ZooKeeper's view and DescribeLogDirs ---------------------------------
def registration(broker_id: int) -> zkdata.BrokerRegistration:
    return zkdata.BrokerRegistration(broker_id=broker_id, host="127.0.0.1", port=9090 + broker_id)


def test_snapshot_combines_zookeeper_state_with_broker_answers():
    view = ClusterView(
        brokers={1: registration(1), 2: registration(2)},
        controller_id=1001,
        controller_epoch=3,
        partitions=[PartitionView("demo", 0, (1, 2, 3), 1, 2, (1, 2), 7)],
    )
    answer = m.DescribeLogDirsResponse(
        throttle_time_ms=0,
        results=[
            m.DescribeLogDirsResult(
                error_code=0,
                log_dir="/data",
                topics=[
                    m.DescribeLogDirsResponseTopic(
                        name="demo",
                        partitions=[
                            m.DescribeLogDirsResponsePartition(
                                partition_index=0,
                                partition_size=100,
                                offset_lag=0,
                                log_start_offset=0,
                                log_end_offset=12,
                                high_watermark=10,
                                is_leader=True,
                                leader_epoch=2,
                            )
                        ],
                    )
                ],
            )
        ],
    )
    snap = build_snapshot(
        view,
        {1: offsets_from_log_dirs(answer), 2: None},  # broker 2 is registered but silent
        taken_at_ms=T0,
        zookeeper=ZK,
        known_brokers=[1, 2, 3, 4],
    )
    assert snap.brokers == {
        1: BROKER_UP,
        2: BROKER_NOT_ANSWERING,
        3: BROKER_DOWN,
        4: BROKER_DOWN,
    }
    p = snap.partition("demo", 0)
    assert p.offsets == {1: ReplicaOffsets(10, 12, is_leader=True, leader_epoch=2)}
    assert (p.leader, p.leader_epoch, p.isr) == (1, 2, (1, 2))
    assert snap.controller_id == 1001 and snap.controller_epoch == 3


# -- the shell, against real ZooKeeper and a real in-process broker -------------------------------
@pytest.mark.integration
async def test_snapshot_reader_reads_zookeeper_and_the_brokers_offsets(zk_connect, kazoo_client):
    from tests.unit.broker_harness import TOPIC, running_broker

    async with running_broker(transport="tcp") as (broker, _):
        port = broker.port
        async with open_connection("127.0.0.1", port) as conn:
            batch = build_batch([Record(key=None, value=b"x", timestamp_ms=0)] * 3)
            await conn.request(
                m.ProduceRequest(
                    acks=1,
                    timeout_ms=5000,
                    topics=[
                        m.ProduceTopic(
                            name=TOPIC, partitions=[m.ProducePartition(partition=0, records=batch)]
                        )
                    ],
                )
            )
        # What a cluster with broker 1 alive and broker 2 dead looks like in ZooKeeper. The
        # registration's first address is unreachable (as broker-1:19092 is from the host
        # under docker-compose); the reader falls back to the next advertised endpoint.
        dead_port = _closed_port()
        reg = dataclasses.replace(
            registration(1),
            port=dead_port,
            endpoints=(("INTERNAL", "127.0.0.1", dead_port), ("EXTERNAL", "127.0.0.1", port)),
        )

        def populate() -> None:
            kazoo_client.create(zkdata.broker_path(1), reg.encode(), makepath=True)
            kazoo_client.create(
                zkdata.topic_path(TOPIC),
                json.dumps({"version": 2, "partitions": {"0": [1, 2]}}).encode(),
                makepath=True,
            )
            state = {
                "controller_epoch": 1,
                "leader": 1,
                "version": 1,
                "leader_epoch": 0,
                "isr": [1],
            }
            kazoo_client.create(
                zkdata.partition_state_path(TOPIC, 0), json.dumps(state).encode(), makepath=True
            )

        await trio.to_thread.run_sync(populate)
        async with open_connection_pool() as pool:
            reader = SnapshotReader(zk_connect, pool, broker_timeout_s=5, known_brokers=[1, 2])
            snap = await reader.take(T0)
        assert snap.error is None
        assert snap.brokers == {1: BROKER_UP, 2: BROKER_DOWN}
        text = render_to_string(snap)
        line = row(text, TOPIC, 0)
        assert "1*:3/3" in line and "2:down" in line
        assert line.split()[-1] == "under-replicated"


@pytest.mark.integration
async def test_read_cluster_answers_synchronous_callers_inside_a_trio_run(zk_connect, kazoo_client):
    """Benchmarks and chaos helpers call it from Trio tasks; it must not start a nested run."""
    kazoo_client.create(zkdata.broker_path(3), registration(3).encode(), makepath=True)
    view = read_cluster(zk_connect)
    assert list(view.brokers) == [3] and view.controller_id is None


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the command's one-line errors ----------------------------------------------------------
def test_watch_without_a_cluster_says_how_to_get_one(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TRIBUTARY_CLUSTER_DIR", raising=False)
    assert main(["cluster", "--dir", str(tmp_path), "watch", "--once"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no local cluster") and "--zookeeper" in err
    assert "\n" not in err


def test_watch_rejects_a_silly_interval(tmp_path, capsys):
    assert main(["cluster", "--dir", str(tmp_path), "watch", "--interval", "0"]) == 2
    assert "--interval" in capsys.readouterr().err


def test_watch_once_with_zookeeper_down_fails_in_one_line(tmp_path, capsys):
    port = _closed_port()
    args = [
        "cluster",
        "--dir",
        str(tmp_path),
        "watch",
        "--once",
        "--zookeeper",
        f"127.0.0.1:{port}",
    ]
    assert main(args) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: cannot read ZooKeeper at 127.0.0.1:{port}")
    assert "\n" not in err


def test_header_shows_each_registered_brokers_rack():
    view = ClusterView(
        brokers={
            1: zkdata.BrokerRegistration(1, "127.0.0.1", 9092, rack="a"),
            2: zkdata.BrokerRegistration(2, "127.0.0.1", 9093, rack="b"),
            3: zkdata.BrokerRegistration(3, "127.0.0.1", 9094),
        }
    )
    snap = build_snapshot(
        view, {1: {}, 2: None, 3: {}}, taken_at_ms=T0, zookeeper=ZK, known_brokers=[1, 2, 3, 4]
    )
    text = render_to_string(snap)
    assert "brokers up: 1(a),3 " in text
    assert "down: 4" in text
    assert "not answering: 2(b)" in text
