"""The spine users touch (issue: First end-to-end path), with real processes: ZooKeeper,
a controller and three brokers started by the launcher, driven through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import defaultdict

import pytest
import trio

from client.connection import open_connection
from client.protocol import messages as m
from tests.integration.helpers import partition_state, produce

pytestmark = pytest.mark.integration

RECORDS = 10_000
KEYS = 97


def cli(cluster, *args: str, stdin: str | None = None, timeout: float = 120):
    env = {**os.environ, "TRIBUTARY_CLUSTER_DIR": str(cluster.directory)}
    return subprocess.run(
        [sys.executable, "-c", "import sys; from tools.cli import main; sys.exit(main())", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def test_cli_produces_and_consumes_ten_thousand_keyed_records(start_cluster):
    cluster = start_cluster(brokers=3, controllers=1)
    created = cli(
        cluster, "topics", "create", "events", "--partitions", "6", "--replication-factor", "1"
    )
    assert created.returncode == 0, created.stderr

    lines = "".join(f"key-{i % KEYS}:value-{i}\n" for i in range(RECORDS))
    produced = cli(
        cluster,
        "produce",
        "events",
        "--key-separator",
        ":",
        "--acks",
        "1",
        "--linger-ms",
        "5",
        stdin=lines,
    )
    assert produced.returncode == 0, produced.stderr

    consumed = cli(
        cluster,
        "consume",
        "events",
        "--from-beginning",
        "--max-messages",
        str(RECORDS),
        "--timeout-ms",
        "15000",
        "--format",
        "json",
    )
    assert consumed.returncode == 0, consumed.stderr
    records = [json.loads(line) for line in consumed.stdout.splitlines()]
    assert len(records) == RECORDS

    partitions_of_key = defaultdict(set)
    values_by_key = defaultdict(list)
    offsets_by_partition = defaultdict(list)
    for r in records:
        partitions_of_key[r["key"]].add(r["partition"])
        offsets_by_partition[r["partition"]].append(r["offset"])
        values_by_key[r["key"]].append(int(r["value"].removeprefix("value-")))
    assert all(len(p) == 1 for p in partitions_of_key.values())  # same key, same partition
    for offsets in offsets_by_partition.values():  # in order, nothing missing
        assert offsets == list(range(len(offsets)))
    for values in values_by_key.values():  # per key, in the order they were produced
        assert values == sorted(values)
    assert sorted(v for vs in values_by_key.values() for v in vs) == list(range(RECORDS))

    described = cli(cluster, "topics", "describe", "events", "--json")
    assert described.returncode == 0, described.stderr
    topics = json.loads(described.stdout)
    leaders = {p["leader"] for t in topics for p in t["partitions"]}
    assert leaders == {1, 2, 3}  # leadership spread over the brokers


def test_long_poll_returns_when_a_record_arrives_not_at_the_deadline(start_cluster):
    cluster = start_cluster(brokers=1, controllers=1)
    assert (
        cli(
            cluster, "topics", "create", "polls", "--partitions", "1", "--replication-factor", "1"
        ).returncode
        == 0
    )
    port = cluster.process("broker-1").port
    max_wait_ms = 8_000

    async def fetch_and_produce():
        async with open_connection("127.0.0.1", port) as conn:
            waited = {}

            async def long_poll():
                started = time.monotonic()
                response = await conn.request(
                    m.FetchRequest(
                        replica_id=-1,
                        max_wait_ms=max_wait_ms,
                        min_bytes=1,
                        max_bytes=1 << 20,
                        topics=[
                            m.FetchTopic(
                                topic="polls",
                                partitions=[
                                    m.FetchPartition(
                                        partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                                    )
                                ],
                            )
                        ],
                    ),
                    timeout_s=30,
                )
                waited["s"] = time.monotonic() - started
                waited["records"] = response.topics[0].partitions[0].records

            async with trio.open_nursery() as nursery:
                nursery.start_soon(long_poll)
                await trio.sleep(0.5)
                await trio.to_thread.run_sync(
                    lambda: produce(cluster, 1, "polls", 0, [b"wake up"], acks=1)
                )
            return waited

    waited = trio.run(fetch_and_produce)
    assert waited["records"]
    # Woken by the append (~0.5 s), far from the 8 s deadline even on a loaded machine.
    assert waited["s"] < max_wait_ms / 1000 / 2


def test_cli_errors_are_one_line_without_traceback(start_cluster):
    cluster = start_cluster(brokers=1, controllers=1)
    for args in (
        ("consume", "no-such-topic", "--timeout-ms", "1000"),
        ("topics", "create", "bad name!", "--partitions", "1", "--replication-factor", "1"),
        ("topics", "create", "too-many", "--partitions", "1", "--replication-factor", "3"),
        ("produce", "events", "--acks", "7"),
    ):
        result = cli(cluster, *args, stdin="x\n")
        assert result.returncode != 0, args
        assert "Traceback" not in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, (args, result.stderr)
    state = partition_state(cluster, "too-many", 0)
    assert state is None
