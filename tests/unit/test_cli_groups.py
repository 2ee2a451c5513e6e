"""`tributary groups ...` and `tributary consume --group`: the tables, the argument errors,
and the commands against an in-process cluster of real brokers (group coordinator
included) in a background thread (tests/support/cluster.py's ClusterThread).

The first half needs no broker: rows and tables are built from plain values shaped like
the admin client's results, and bad arguments must come out as one line and exit 2
before anything is sent. The second half runs the CLI's `main()` in the test's thread
against the real cluster: two `consume --group --max-messages 30` runs print 60 distinct
records with no gap, `groups describe` shows the committed offsets and lag (produced
minus consumed), `reset-offsets` changes nothing on a dry run and commits with
`--execute`, and `delete` removes an empty group.
"""

from __future__ import annotations

import io
import json
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import trio

from client.connection import open_connection_pool
from client.consumer import ConsumerBatch
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.types import TopicPartition
from client.sync import SyncConsumer
from server_common import zkdata
from tests.support.cluster import ClusterThread
from tools.cli import main
from tools.cluster.inspect import ClusterView
from tools.cluster.watch_view import (
    ClusterSnapshot,
    PartitionSnapshot,
    ReplicaOffsets,
    group_lag,
    render_to_string,
)
from tools.commands.consume import PrintedOffsets
from tools.commands.groups.delete import delete_message
from tools.commands.groups.report import (
    GroupReport,
    OffsetRow,
    format_assignment,
    format_table,
    member_rows,
    offset_rows,
    render_report,
    state_row,
)
from tools.commands.groups.reset import (
    clamp,
    inactive_error,
    parse_datetime_ms,
    parse_topic_spec,
    plan_reset,
)
from tools.commands.watch import SnapshotReader
from tools.errors import CliError

ROOT = Path(__file__).resolve().parents[2]

TP = TopicPartition


def member(member_id, partitions, *, client_id="tributary-console-consumer", host="/127.0.0.1",
           instance=None):  # fmt: skip
    return SimpleNamespace(
        member_id=member_id,
        group_instance_id=instance,
        client_id=client_id,
        host=host,
        assignment={TP(t, p) for t, p in partitions},
    )


def description(members=(), *, group="g", state="Stable", generation=3, coordinator=2,
                protocol="range"):  # fmt: skip
    return SimpleNamespace(
        group_id=group,
        state=state,
        protocol_type="consumer",
        protocol=protocol,
        generation=generation,
        coordinator_id=coordinator,
        members=list(members),
    )


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got: {err!r}"
    assert "Traceback" not in err and lines[0].startswith("error: ")
    return lines[0]


# --- tables ----------------------------------------------------------------------------------


def test_table_columns_are_left_aligned_one_space_apart_with_kafkas_minimum_widths():
    lines = format_table(("GROUP", "PARTITION", "X"), [["orders-app", 0, "-"]], {"PARTITION": 10})
    assert lines == [
        "GROUP      PARTITION  X",
        "orders-app 0          -",
    ]


def test_offset_rows_hold_assigned_partitions_and_committed_ones_nobody_holds():
    d = description([member("c-1", [("t", 0), ("t", 1)]), member("c-2", [("t", 2)])])
    committed = {TP("t", 0): 10, TP("t", 2): 5, TP("old", 0): 7, TP("t", 1): -1}
    log_end = {TP("t", 0): 14, TP("t", 1): 3, TP("t", 2): 5}
    rows = offset_rows(d, committed, log_end)
    assert [
        (r.topic, r.partition, r.current_offset, r.log_end_offset, r.lag, r.consumer_id)
        for r in rows
    ] == [  # fmt: skip
        ("old", 0, 7, None, None, None),  # committed, nobody holds it, topic gone
        ("t", 0, 10, 14, 4, "c-1"),
        ("t", 1, None, 3, None, "c-1"),  # held, nothing committed yet (-1)
        ("t", 2, 5, 5, 0, "c-2"),
    ]
    assert rows[0].cells()[3:] == ["7", "-", "-", "-", "-", "-"]


def test_describe_prints_kafkas_offsets_table():
    d = description([member("c-1", [("t", 0)], host="/10.0.0.1")])
    report = GroupReport(d, {TP("t", 0): 10, TP("t", 1): 2}, {TP("t", 0): 14, TP("t", 1): 2})
    lines = render_report(report, "offsets")
    assert lines[0].split() == [
        "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
        "HOST", "CLIENT-ID",
    ]  # fmt: skip
    assert lines[1].split() == ["g", "t", "0", "10", "14", "4", "c-1", "/10.0.0.1",
                                "tributary-console-consumer"]  # fmt: skip
    assert lines[2].split() == ["g", "t", "1", "2", "2", "0", "-", "-", "-"]
    # Columns line up: every value starts where its header does.
    assert lines[1].index("14") == lines[0].index("LOG-END-OFFSET")


def test_a_group_without_members_says_so_then_prints_its_offsets():
    d = description(state="Empty", generation=4)
    lines = render_report(GroupReport(d, {TP("t", 0): 3}, {TP("t", 0): 9}), "offsets")
    assert lines[0] == "Consumer group 'g' has no active members."
    assert lines[2].split() == ["g", "t", "0", "3", "9", "6", "-", "-", "-"]
    assert render_report(GroupReport(d, {}, {}), "offsets") == [
        "Consumer group 'g' has no active members."
    ]
    assert render_report(GroupReport(d, {}, {}), "members") == [
        "Consumer group 'g' has no active members."
    ]


def test_a_rebalancing_group_is_flagged():
    d = description([member("c-1", [])], state="PreparingRebalance")
    assert render_report(GroupReport(d, {}, {}), "offsets")[0] == (
        "Warning: Consumer group 'g' is rebalancing."
    )


def test_members_table_with_assignment():
    d = description(
        [
            member("c-1", [("t", 0)], client_id="a"),
            member("c-2", [("t", 2), ("t", 1), ("u", 0)], client_id="b", instance="i-2"),
            member("c-3", [], client_id="c"),
        ]
    )
    lines = render_report(GroupReport(d, {}, {}), "members")
    assert lines[0].split() == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST",
                                "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]  # fmt: skip
    assert [line.split() for line in lines[1:]] == [
        ["g", "c-2", "i-2", "/127.0.0.1", "b", "3", "t(1,2),u(0)"],  # most partitions first
        ["g", "c-1", "-", "/127.0.0.1", "a", "1", "t(0)"],
        ["g", "c-3", "-", "/127.0.0.1", "c", "0", "-"],
    ]
    assert member_rows(description())[:1] == []
    assert format_assignment([]) == "-"


def test_state_table_names_the_coordinator_assignor_generation_and_members():
    d = description([member("c-1", [("t", 0)])], generation=7)
    lines = render_report(GroupReport(d, {}, {}, ("127.0.0.1", 9093)), "state")
    assert lines[0].split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE",
                                "GENERATION", "#MEMBERS"]  # fmt: skip
    assert lines[1].split() == ["g", "127.0.0.1:9093", "(2)", "range", "Stable", "7", "1"]
    assert state_row(description(coordinator=-1, generation=-1, protocol=""), None) == [
        "g", "-", "-", "Stable", "-", "0",
    ]  # fmt: skip


def test_json_report_has_everything():
    d = description([member("c-1", [("t", 0)])])
    doc = GroupReport(d, {TP("t", 0): 1}, {TP("t", 0): 5}, ("h", 1)).as_json()
    assert doc["group"] == "g" and doc["state"] == "Stable" and doc["generation"] == 3
    assert doc["coordinator"] == {"id": 2, "host": "h", "port": 1}
    assert doc["assignment_strategy"] == "range"
    assert doc["members"][0]["assignment"] == [{"topic": "t", "partition": 0}]
    assert doc["offsets"] == [
        {"topic": "t", "partition": 0, "current_offset": 1, "log_end_offset": 5, "lag": 4,
         "consumer_id": "c-1", "host": "/127.0.0.1", "client_id": "tributary-console-consumer"}
    ]  # fmt: skip
    json.dumps(doc)


def test_lag_is_unknown_without_both_offsets():
    assert OffsetRow("g", "t", 0, None, 5).lag is None
    assert OffsetRow("g", "t", 0, 5, None).lag is None
    assert OffsetRow("g", "t", 0, 5, 5).lag == 0


# --- reset-offsets: the plan -------------------------------------------------------------------

EARLIEST = {TP("t", 0): 10, TP("t", 1): 0}
LATEST = {TP("t", 0): 50, TP("t", 1): 20}


@pytest.mark.parametrize(
    "scenario, kwargs, expected",
    [
        ("to-earliest", {}, {TP("t", 0): 10, TP("t", 1): 0}),
        ("to-latest", {}, {TP("t", 0): 50, TP("t", 1): 20}),
        ("to-offset", {"value": 15}, {TP("t", 0): 15, TP("t", 1): 15}),
        ("to-offset", {"value": 0}, {TP("t", 0): 10, TP("t", 1): 0}),  # below start: start
        ("to-offset", {"value": 99}, {TP("t", 0): 50, TP("t", 1): 20}),  # past end: end
        ("shift-by", {"value": -5, "committed": {TP("t", 0): 12, TP("t", 1): 19}},
         {TP("t", 0): 10, TP("t", 1): 14}),
        ("shift-by", {"value": 5, "committed": {TP("t", 0): 12, TP("t", 1): 19}},
         {TP("t", 0): 17, TP("t", 1): 20}),
        ("to-datetime", {"at_time": {TP("t", 0): 30, TP("t", 1): None}},
         {TP("t", 0): 30, TP("t", 1): 20}),  # no record that late: the log end
    ],
)  # fmt: skip
def test_reset_plans_clamp_to_the_log_as_kafka_does(scenario, kwargs, expected):
    plan = plan_reset(scenario, list(EARLIEST), earliest=EARLIEST, latest=LATEST, **kwargs)
    assert plan == expected


def test_shift_by_needs_a_committed_offset():
    with pytest.raises(CliError, match="no committed offset there"):
        plan_reset("shift-by", [TP("t", 1)], earliest=EARLIEST, latest=LATEST, value=1,
                   committed={TP("t", 0): 3})  # fmt: skip
    with pytest.raises(CliError, match="cannot look up the offsets of t-9"):
        plan_reset("to-latest", [TP("t", 9)], earliest=EARLIEST, latest=LATEST)
    assert clamp(5, None, None) == 5


def test_topic_specs_and_times():
    assert parse_topic_spec("orders") == ("orders", None)
    assert parse_topic_spec("orders:2,0,2") == ("orders", [0, 2])
    for bad in ("orders:x", ":1", "orders:", "orders:-1"):
        with pytest.raises(CliError) as info:
            parse_topic_spec(bad)
        assert info.value.exit_code == 2
    assert parse_datetime_ms("2024-05-01T12:00:00Z") == 1714564800000
    assert parse_datetime_ms("2024-05-01T14:00:00.000+02:00") == 1714564800000
    with pytest.raises(CliError, match="ISO time"):
        parse_datetime_ms("yesterday")


def test_messages_for_deletion_and_refused_resets():
    assert delete_message("g", None) == "Deletion of consumer group 'g' was successful."
    busy = delete_message("g", TributaryError(ErrorCode.NON_EMPTY_GROUP))
    assert busy == "consumer group 'g' could not be deleted: it has active members " \
                   "(stop its consumers first)"  # fmt: skip
    missing = delete_message("g", TributaryError(ErrorCode.GROUP_ID_NOT_FOUND))
    assert missing.endswith("it does not exist")
    assert str(inactive_error("g", "Stable")) == (
        "Assignments can only be reset if the group 'g' is inactive, but the current state "
        "is Stable."
    )


# --- consume --group: what gets committed ---------------------------------------------------------


def batch(topic, partition, *offsets):
    printed = ConsumerBatch(topic, partition)
    printed.offsets = list(offsets)
    return printed


def test_printed_offsets_commit_the_record_after_the_last_one_printed():
    offsets = PrintedOffsets()
    offsets.printed([batch("t", 0, 4, 5), batch("t", 1, 0)])
    assert offsets.pending() == {TP("t", 0): 6, TP("t", 1): 1}
    offsets.mark_committed({TP("t", 0): 6})
    assert offsets.pending() == {TP("t", 1): 1}
    assert offsets.pending([TP("t", 0)]) == {}
    offsets.printed([batch("t", 0, 6)])
    assert offsets.pending([TP("t", 0)]) == {TP("t", 0): 7}
    offsets.forget([TP("t", 0)])
    assert offsets.pending() == {TP("t", 1): 1}


# --- argument errors: one line, exit 2, nothing sent -------------------------------------------

DEAD_BROKER = "127.0.0.1:1"


@pytest.mark.parametrize(
    "argv, says",
    [
        (["groups"], "ACTION"),
        (["groups", "describe"], "name at least one GROUP"),
        (["groups", "describe", "g", "--all-groups"], "not both"),
        (["groups", "describe", "g", "--members", "--state"], "not allowed with"),
        (["groups", "reset-offsets", "g", "--topic", "t"], "required"),
        (["groups", "reset-offsets", "g", "--to-earliest"], "required"),
        (["groups", "reset-offsets", "g", "--all-topics", "--to-earliest", "--to-latest"],
         "not allowed with"),
        (["groups", "reset-offsets", "g", "--all-topics", "--to-earliest", "--execute",
          "--dry-run"], "not allowed with"),
        (["groups", "reset-offsets", "g", "--topic", "t:x", "--to-earliest"], "--topic"),
        (["groups", "reset-offsets", "g", "--all-topics", "--to-offset", "-3"], "--to-offset"),
        (["groups", "reset-offsets", "g", "--all-topics", "--to-offset", "ten"], "invalid int"),
        (["groups", "reset-offsets", "g", "--all-topics", "--to-datetime", "soon"], "ISO"),
        (["groups", "delete"], "required"),
        (["consume", "t", "--group", "g", "--partition", "0"], "--group cannot be used"),
        (["consume", "t", "--group", "g", "--commit-interval-ms", "0"], "commit-interval"),
    ],
)  # fmt: skip
def test_bad_arguments_are_one_line_and_exit_2(argv, says, capsys):
    assert main([*argv, "--bootstrap-server", DEAD_BROKER]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert says in line, line


def test_unreachable_cluster_is_one_line(capsys):
    for argv in (
        ["groups", "list"],
        ["groups", "describe", "g"],
        ["groups", "delete", "g"],
        ["groups", "reset-offsets", "g", "--all-topics", "--to-earliest"],
        ["consume", "t", "--group", "g"],
    ):
        assert main([*argv, "--bootstrap-server", DEAD_BROKER]) == 1
        line = one_error_line(capsys.readouterr().err)
        assert line.startswith("error: cannot reach any broker at 127.0.0.1:1"), line


# --- against a real cluster ---------------------------------------------------------------

GROUP_SETTINGS = {
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
}


@pytest.fixture(scope="module")
def runner():
    runner = ClusterThread(3, broker_settings=GROUP_SETTINGS)
    with runner:
        yield runner


@pytest.fixture
def run(runner, capsys, monkeypatch):
    """run(*argv, stdin="") -> (exit code, stdout, stderr), bootstrap filled in."""

    def run(*argv: str, stdin: str = ""):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
        code = main([*argv, "--bootstrap-server", runner.cluster.bootstrap])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def offsets_table(out: str) -> dict[tuple[str, int], list[str]]:
    """(topic, partition) -> the row's cells, from `groups describe` output."""
    rows = {}
    for line in out.splitlines():
        cells = line.split()
        if len(cells) >= 6 and cells[0] != "GROUP" and cells[2].isdigit():
            rows[(cells[1], int(cells[2]))] = cells
    return rows


def test_two_group_runs_print_consecutive_records_and_describe_shows_the_lag(run, runner):
    runner.call(runner.cluster.create_topic, "events", 3, 3)
    values = [f"r{i:03d}" for i in range(100)]
    code, _, err = run("produce", "events", "--acks", "all", stdin="\n".join(values) + "\n")
    assert code == 0, err

    first = run("consume", "events", "--group", "g1", "--from-beginning", "--max-messages",
                "30", "--timeout-ms", "10000")  # fmt: skip
    assert first[0] == 0 and first[2].strip() == "Processed a total of 30 messages", first
    second = run("consume", "events", "--group", "g1", "--max-messages", "30",
                 "--timeout-ms", "10000")  # fmt: skip
    assert second[0] == 0 and second[2].strip() == "Processed a total of 30 messages", second
    printed = first[1].split() + second[1].split()
    assert len(printed) == 60 and len(set(printed)) == 60  # no overlap

    code, out, err = run("groups", "describe", "g1")
    assert code == 0, err
    assert out.splitlines()[0] == "Consumer group 'g1' has no active members."
    rows = offsets_table(out)
    assert sorted(rows) == [("events", 0), ("events", 1), ("events", 2)]
    committed = {tp: int(cells[3]) for tp, cells in rows.items()}
    assert sum(committed.values()) == 60
    assert sum(int(cells[5]) for cells in rows.values()) == 40  # produced minus consumed
    # No gap: per partition, what was printed is exactly the records below the commit.
    for (topic, p), offset in committed.items():
        log = [v.decode() for v in runner.call(runner.cluster.values, TP(topic, p))]
        assert int(rows[(topic, p)][4]) == len(log)  # LOG-END-OFFSET
        assert set(log[:offset]) <= set(printed) and not set(log[offset:]) & set(printed)

    doc = json.loads(run("groups", "describe", "g1", "--json")[1])
    assert doc[0]["state"] == "Empty" and doc[0]["members"] == []
    assert sum(o["lag"] for o in doc[0]["offsets"]) == 40

    listing = run("groups", "list")[1].splitlines()
    assert listing[0].split() == ["GROUP", "STATE", "PROTOCOL-TYPE", "COORDINATOR"]
    assert ["g1", "Empty", "consumer"] in [line.split()[:3] for line in listing[1:]]
    state = run("groups", "describe", "g1", "--state")[1].splitlines()
    cells = state[1].split()  # g1 HOST:PORT (ID) STRATEGY STATE GENERATION #MEMBERS
    assert (cells[0], cells[3], cells[4], cells[6]) == ("g1", "-", "Empty", "0")

    # reset-offsets: a dry run changes nothing, --execute does.
    code, out, err = run("groups", "reset-offsets", "g1", "--topic", "events", "--to-earliest")
    assert code == 0 and "--execute option is missing" in err
    assert [line.split() for line in out.splitlines()] == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
        *(["g1", "events", str(p), "0"] for p in range(3)),
    ]
    after = offsets_table(run("groups", "describe", "g1")[1])
    assert {tp: int(cells[3]) for tp, cells in after.items()} == committed
    code, out, _ = run("groups", "reset-offsets", "g1", "--topic", "events:0", "--to-earliest",
                       "--execute")  # fmt: skip
    assert code == 0 and out.splitlines()[1].split() == ["g1", "events", "0", "0"]
    after = offsets_table(run("groups", "describe", "g1")[1])
    assert int(after[("events", 0)][3]) == 0
    assert int(after[("events", 1)][3]) == committed[("events", 1)]  # untouched
    code, out, _ = run("groups", "reset-offsets", "g1", "--all-topics", "--shift-by", "1000",
                       "--execute")  # fmt: skip
    ends = {(topic, p): int(cells[4]) for (topic, p), cells in after.items()}
    assert {(c[1], int(c[2])): int(c[3]) for c in map(str.split, out.splitlines()[1:])} == ends

    # delete: an empty group goes; then it is unknown.
    assert run("groups", "delete", "g1")[:2] == (
        0,
        "Deletion of consumer group 'g1' was successful.\n",
    )
    code, _, err = run("groups", "describe", "g1")
    assert code == 1 and one_error_line(err) == "error: consumer group 'g1' does not exist"
    code, _, err = run("groups", "delete", "g1")
    assert code == 1 and "g1" in one_error_line(err)


def test_topics_list_hides_the_offsets_topic_unless_asked(run, runner):
    runner.call(runner.cluster.create_topic, "visible", 1)
    run("consume", "visible", "--group", "g-list", "--timeout-ms", "200")  # creates it
    assert "__consumer_offsets" not in run("topics", "list")[1].split()
    assert "__consumer_offsets" in run("topics", "list", "--all")[1].split()
    assert "__consumer_offsets" in run("topics", "list", "--include-internal")[1].split()
    code, out, _ = run("topics", "describe", "__consumer_offsets")
    # The offsets topic has a topic id, like any other.
    assert code == 0 and re.match(
        r"Topic: __consumer_offsets\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 3\t", out
    )


def test_unknown_group_and_unknown_topic_are_one_line(run, runner):
    code, _, err = run("groups", "describe", "never-seen")
    assert code == 1 and one_error_line(err) == "error: consumer group 'never-seen' does not exist"
    code, _, err = run("consume", "nope", "--group", "g")
    assert code == 1 and one_error_line(err) == "error: topic 'nope' does not exist"
    code, _, err = run("groups", "reset-offsets", "g", "--topic", "nope", "--to-latest")
    assert code == 1 and one_error_line(err) == "error: topic 'nope' does not exist"


def test_an_active_group_shows_its_members_and_refuses_reset_and_delete(run, runner):
    runner.call(runner.cluster.create_topic, "live", 2, 3)
    # Two records in each partition: an empty partition's position might not be known
    # yet when the member commits (the sticky partitioner may put all four in one).
    run("produce", "live", "--acks", "all", "--partition", "0", stdin="a\nb\n")
    run("produce", "live", "--acks", "all", "--partition", "1", stdin="c\nd\n")
    member = SyncConsumer(runner.cluster.bootstrap, group_id="active", client_id="app-1",
                          auto_offset_reset="earliest", session_timeout_ms=6000)  # fmt: skip
    try:
        member.subscribe("live")
        got = []
        while len(got) < 4:
            got += member.poll(1000)
        member.commit()

        code, out, err = run("groups", "describe", "active")
        assert code == 0, err
        rows = offsets_table(out)
        assert sorted(rows) == [("live", 0), ("live", 1)]
        assert {cells[3] for cells in rows.values()} == {cells[4] for cells in rows.values()}
        assert {cells[5] for cells in rows.values()} == {"0"}  # all consumed and committed
        assert {cells[-1] for cells in rows.values()} == {"app-1"}  # CLIENT-ID
        consumer_id = rows[("live", 0)][6]
        assert consumer_id.startswith("app-1")

        members = run("groups", "describe", "active", "--members")[1].splitlines()
        assert members[1].split()[1:3] == [consumer_id, "-"]
        assert members[1].split()[-2:] == ["2", "live(0,1)"]
        state = run("groups", "describe", "active", "--state")[1].splitlines()[1].split()
        assert state[0] == "active" and state[3:] == ["range", "Stable", state[5], "1"]
        listing = run("groups", "list", "--json")[1]
        assert {"group": "active", "state": "Stable", "protocol_type": "consumer"}.items() <= (
            next(g for g in json.loads(listing) if g["group"] == "active").items()
        )

        code, _, err = run("groups", "reset-offsets", "active", "--all-topics", "--to-earliest",
                           "--execute")  # fmt: skip
        assert code == 1 and one_error_line(err) == (
            "error: Assignments can only be reset if the group 'active' is inactive, but the "
            "current state is Stable."
        )
        code, out, err = run("groups", "delete", "active")
        assert code == 1 and out == ""
        assert one_error_line(err) == (
            "error: consumer group 'active' could not be deleted: it has active members "
            "(stop its consumers first)"
        )
    finally:
        member.close()
    code, out, _ = run("groups", "describe", "active")  # it left: Empty, offsets kept
    assert code == 0 and out.splitlines()[0] == "Consumer group 'active' has no active members."
    assert run("groups", "delete", "active")[0] == 0


def test_the_watch_reads_groups_from_real_brokers(run, runner):
    """The watch's group round (tools/commands/watch.py) against real coordinators, with
    a ZooKeeper view made up of the test brokers' registrations."""
    runner.call(runner.cluster.create_topic, "watched", 1, 3)
    run("produce", "watched", "--acks", "all", stdin="1\n2\n3\n4\n5\n")
    assert run("consume", "watched", "--group", "watchers", "--from-beginning",
               "--max-messages", "2", "--timeout-ms", "10000")[0] == 0  # fmt: skip
    view = ClusterView(
        brokers={
            b.id: zkdata.BrokerRegistration(broker_id=b.id, host=b.host, port=b.port)
            for b in runner.cluster.brokers.values()
        }
    )

    async def read():
        async with open_connection_pool() as pool:
            reader = SnapshotReader("memory", pool, broker_timeout_s=5)
            return await reader._read_groups(view)

    groups, error = trio.run(read)
    assert error is None
    (watchers,) = [g for g in groups if g.group_id == "watchers"]
    assert (watchers.state, watchers.members, watchers.committed) == (
        "Empty",
        0,
        {("watched", 0): 2},
    )
    assert watchers.generation is not None and watchers.generation >= 1
    # With the partition's HW in the snapshot, the lag is produced minus consumed.
    hw = PartitionSnapshot("watched", 0, (1, 2, 3), 1, 0, (1, 2, 3), {1: ReplicaOffsets(5, 5)})
    snap = ClusterSnapshot(0, "memory", {1: "up"}, partitions=(hw,), groups=tuple(groups))
    assert group_lag(snap, watchers) == 3
    assert "watchers" in render_to_string(snap)

    async def read_dead():
        async with open_connection_pool() as pool:
            dead = ClusterView(brokers={9: zkdata.BrokerRegistration(9, "127.0.0.1", 1)})
            reader = SnapshotReader("memory", pool, broker_timeout_s=0.5)
            return await reader._read_groups(dead)

    groups, error = trio.run(read_dead)
    assert groups is None and error  # fails soft, with a reason


def test_ctrl_c_commits_what_was_printed_and_exits_130(run, runner):
    """The real entry point in a subprocess: it prints 10 records, waits for more, gets
    SIGINT, commits the 10 (no periodic commit in between) and exits 130."""
    runner.call(runner.cluster.create_topic, "stream", 2, 3)
    run("produce", "stream", "--acks", "all", stdin="".join(f"s{i}\n" for i in range(10)))
    process = subprocess.Popen(
        [sys.executable, "-c", "import sys; from tools.cli import main; sys.exit(main())",
         "consume", "stream", "--group", "interrupted", "--from-beginning",
         "--commit-interval-ms", "600000", "--bootstrap-server", runner.cluster.bootstrap],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        printed = [process.stdout.readline().strip() for _ in range(10)]
        assert sorted(printed) == sorted(f"s{i}" for i in range(10))
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 130, err
    assert err.strip() == "Processed a total of 10 messages"
    rows = offsets_table(run("groups", "describe", "interrupted")[1])
    assert sum(int(cells[3]) for cells in rows.values()) == 10
    assert {cells[5] for cells in rows.values()} == {"0"}


def test_two_console_consumers_in_one_group_share_the_records(run, runner):
    """Two `consume --group` processes: the first prints the first 50 records, the second
    joins (a rebalance: the first commits what it printed before giving partitions away),
    50 more are produced and split between them; then Ctrl-C to both. Every record is
    printed exactly once, and the group's lag is 0."""
    runner.call(runner.cluster.create_topic, "shared", 3, 3)
    values = [f"x{i:03d}" for i in range(100)]
    argv = [sys.executable, "-c", "import sys; from tools.cli import main; sys.exit(main())",
            "consume", "shared", "--group", "pair", "--from-beginning",
            "--bootstrap-server", runner.cluster.bootstrap]  # fmt: skip
    printed: list[list[str]] = [[], []]
    lock = threading.Lock()
    processes = []

    def start(i: int) -> None:
        process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)  # fmt: skip

        def read() -> None:
            for line in process.stdout:
                with lock:
                    printed[i].append(line.strip())

        threading.Thread(target=read, daemon=True).start()
        processes.append(process)

    def count() -> int:
        with lock:
            return len(printed[0]) + len(printed[1])

    def wait_for(condition, what: str) -> None:
        deadline = time.monotonic() + 30
        while not condition():
            assert time.monotonic() < deadline, what
            time.sleep(0.02)

    def members() -> int:
        state = run("groups", "describe", "pair", "--state")[1].splitlines()
        cells = state[1].split() if len(state) > 1 else []
        return int(cells[-1]) if cells and cells[4] == "Stable" else 0

    try:
        run("produce", "shared", "--acks", "all", stdin="".join(f"{v}\n" for v in values[:50]))
        start(0)
        wait_for(lambda: count() == 50, "the first consumer prints the first 50")
        start(1)
        wait_for(lambda: members() == 2, "both consumers are members")
        # Keyed, so the 50 spread over the partitions: a key-less burst goes to one
        # partition (the sticky partitioner), which may be the first consumer's alone.
        keyed = "".join(f"k{i}:{v}\n" for i, v in enumerate(values[50:]))
        run("produce", "shared", "--acks", "all", "--key-separator", ":", stdin=keyed)
        wait_for(lambda: count() >= 100, "the other 50 are printed")
        for process in processes:
            process.send_signal(signal.SIGINT)
        errors = [process.communicate(timeout=30)[1] for process in processes]
    finally:
        for process in processes:
            process.kill()
            process.wait()
    assert [p.returncode for p in processes] == [130, 130], errors
    assert sorted(printed[0] + printed[1]) == values  # each exactly once
    assert printed[1], "the second consumer got partitions"
    rows = offsets_table(run("groups", "describe", "pair")[1])
    assert sum(int(cells[3]) for cells in rows.values()) == 100
    assert sum(int(cells[5]) for cells in rows.values()) == 0
