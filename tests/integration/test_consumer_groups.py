"""Consumer groups with real processes: ZooKeeper, 3 brokers, 2 controllers, and group
members as separate processes running the real client (tests/support/group_member.py).

What a user relies on: within one generation no partition has two owners; when a member
is SIGKILLed the others take its partitions over (after its session times out) and go on
from the committed offsets; when the broker coordinating the group is SIGKILLed another
broker loads the group and its offsets and the members carry on. Across the run every
produced record is consumed, none skipped; duplicates after a crash are allowed, counted
and printed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import trio

from client.connection import open_connection
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.sync import SyncProducer
from tests.integration.helpers import create_topic, wait_until

ROOT = Path(__file__).resolve().parents[2]
SESSION_MS = 3000
TOPIC = "orders"
PARTITIONS = 6


class Member:
    """One group member process; its JSON lines are collected by a reader thread."""

    def __init__(self, bootstrap: str, group: str, name: str) -> None:
        self.name = name
        self.lines: list[dict] = []
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.group_member",
                bootstrap,
                group,
                TOPIC,
                name,
                str(SESSION_MS),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                self.lines.append(json.loads(line))
            except ValueError:
                pass

    def events(self, kind: str) -> list[dict]:
        return [line for line in list(self.lines) if line["event"] == kind]

    def kill(self, sig: signal.Signals = signal.SIGKILL) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, sig)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


@pytest.fixture
def members():
    started: list[Member] = []
    yield started
    for member in started:
        member.kill()


def produce(bootstrap: str, start: int, count: int) -> list[str]:
    values = [f"v-{i}" for i in range(start, start + count)]
    with SyncProducer(bootstrap, acks="all", linger_ms=5) as producer:
        handles = [
            producer.send(TOPIC, value.encode(), key=str(i).encode())
            for i, value in enumerate(values, start)
        ]
        producer.flush()
        for handle in handles:
            handle.get(timeout=60)
    return values


def consumed(group_members: list[Member]) -> list[str]:
    return [r["value"] for member in group_members for r in member.events("record")]


def assert_one_owner_per_generation(group_members: list[Member]) -> None:
    owners: dict[tuple[int, int], str] = {}
    for member in group_members:
        for event in member.events("assigned"):
            for partition in event["partitions"]:
                key = (event["generation"], partition)
                assert owners.setdefault(key, member.name) == member.name, (
                    f"partition {partition} owned by {owners[key]} and {member.name} "
                    f"in generation {event['generation']}"
                )


def coordinator_of(bootstrap: str, group: str) -> int:
    async def ask() -> int:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        async with open_connection(host, int(port)) as conn:
            answer = await conn.request(m.FindCoordinatorRequest(key=group), timeout_s=10)
        assert answer.error_code == ErrorCode.NONE
        return answer.node_id

    return trio.run(ask)


def test_a_group_shares_partitions_and_survives_a_member_and_a_coordinator_crash(
    start_cluster, members
):
    cluster = start_cluster(brokers=3, controllers=2)
    bootstrap = cluster.state.bootstrap_servers
    create_topic(cluster, TOPIC, PARTITIONS, 3, **{"min.insync.replicas": 2})
    produced = produce(bootstrap, 0, 300)

    members.extend(Member(bootstrap, "billing", f"member-{i}") for i in range(3))
    wait_until(lambda: set(produced) <= set(consumed(members)), 60)
    # Every member ended up with two of the six partitions.
    wait_until(
        lambda: all(
            m.events("assigned") and len(m.events("assigned")[-1]["partitions"]) == 2
            for m in members
        ),
        30,
    )
    assert_one_owner_per_generation(members)

    # SIGKILL one member: its partitions move to the others after its session timeout.
    victim = members[0]
    victim_partitions = set(victim.events("assigned")[-1]["partitions"])
    victim.kill(signal.SIGKILL)
    killed_at = time.monotonic()
    produced += produce(bootstrap, 300, 300)

    def taken_over() -> bool:
        latest = [set(m.events("assigned")[-1]["partitions"]) for m in members[1:]]
        return victim_partitions <= set().union(*latest)

    wait_until(taken_over, 60)
    takeover_s = time.monotonic() - killed_at
    wait_until(lambda: set(produced) <= set(consumed(members)), 60)
    assert_one_owner_per_generation(members)

    # SIGKILL the broker coordinating the group: another broker loads it.
    coordinator = coordinator_of(bootstrap, "billing")
    cluster.kill(f"broker-{coordinator}", signal.SIGKILL)
    survivors = ",".join(
        f"127.0.0.1:{b.port}" for b in cluster.state.brokers() if b.id != coordinator
    )
    produced += produce(survivors, 600, 300)
    wait_until(lambda: set(produced) <= set(consumed(members)), 90)
    assert coordinator_of(survivors, "billing") != coordinator
    assert_one_owner_per_generation(members)

    everything = consumed(members)
    duplicates = len(everything) - len(set(everything))
    print(
        f"\nconsumed {len(everything)} records for {len(produced)} produced "
        f"({duplicates} duplicates); takeover after SIGKILL of a member: {takeover_s:.1f} s "
        f"(session timeout {SESSION_MS / 1000:.0f} s)"
    )
    assert set(everything) == set(produced)
    # Resumed from committed offsets, not from the beginning of the partitions.
    assert duplicates < len(produced) // 3
