"""Silent corruption with real processes (issue 17): one bit of a record value is
flipped in a closed segment of a follower and of the leader, as a disk fault would. The
consumer reading from the damaged leader raises CorruptRecordError (never the wrong
value); the scrubbers find both damaged batches within one scan interval and repair
them (the leader hands its leadership over first); afterwards every replica's batches
are byte-identical below the high watermark, the consumer reads every acknowledged
value at its acknowledged offset, and `tributary log-dirs verify` reports nothing left."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import trio

from client.admin import open_admin
from client.consumer import CorruptBatchError, open_consumer
from client.protocol.errors import ErrorCode
from client.protocol.records import iter_batches
from client.protocol.types import TopicPartition
from tests.integration.helpers import create_topic, partition_state, produce, wait_until
from tools import cli

pytestmark = pytest.mark.integration

TOPIC = "scrubbed"
TP = TopicPartition(TOPIC, 0)
SCAN_INTERVAL_MS = 6_000  # a new full pass this often (a week by default)
REPAIR_BACKOFF_MS = 1_000  # a leader steps down after leading 2 x this with damage
SETTLE_S = 3.0  # process scheduling, a controller round trip, on a loaded 2-core box


def _segments(cluster, broker: int) -> list[Path]:
    info = cluster.process(f"broker-{broker}")
    return sorted((Path(info.data_dir) / f"{TOPIC}-0").glob("*.log"))


def _flip_value(cluster, broker: int, value: bytes) -> int:
    """Flip one bit of `value` in the broker's first (closed) segment; its offset."""
    path = _segments(cluster, broker)[0]
    data = path.read_bytes()
    position = data.index(value)
    with open(path, "r+b") as f:
        f.seek(position)
        f.write(bytes([data[position] ^ 0x01]))
    for pos, header in iter_batches(memoryview(data)):
        if pos <= position < pos + header.size:
            return header.base_offset
    raise AssertionError("value not inside a batch")


def _batches_below(cluster, broker: int, hw: int) -> list[bytes]:
    data = b"".join(p.read_bytes() for p in _segments(cluster, broker))
    view = memoryview(data)
    return [bytes(view[pos : pos + h.size]) for pos, h in iter_batches(view) if h.last_offset < hw]


def _events(cluster, broker: int, kind: str) -> list[dict]:
    path = Path(cluster.process(f"broker-{broker}").data_dir) / "events.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [e for e in map(json.loads, lines) if e.get("event") == kind]


def _consume_all(bootstrap: str, until: int) -> dict[int, bytes]:
    async def go():
        got: dict[int, bytes] = {}
        async with open_consumer(bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([TP])
            consumer.seek(TP, 0)
            with trio.fail_after(20):
                while len(got) < until:
                    for r in await consumer.poll(500):
                        got[r.offset] = r.value
        return got

    return trio.run(go)


def test_scrubbers_find_and_repair_damage_on_a_follower_and_the_leader(start_cluster):
    cluster = start_cluster(
        brokers=3,
        controllers=1,
        **{
            "log.scrub.interval.ms": SCAN_INTERVAL_MS,
            "log.scrub.repair.backoff.ms": REPAIR_BACKOFF_MS,
        },
        controller_overrides={"auto.leader.rebalance.enable": "false"},
    )
    create_topic(cluster, TOPIC, 1, 3, **{"min.insync.replicas": 2, "segment.bytes": 4096})
    state = partition_state(cluster, TOPIC, 0)
    leader = state.leader
    follower = next(r for r in state.replicas if r != leader)
    acked: dict[int, bytes] = {}
    for i in range(40):
        values = [f"d-{i:03d}-{j}-".encode().ljust(40, b"x") for j in range(10)]
        code, base = produce(cluster, leader, TOPIC, 0, values)
        assert code == ErrorCode.NONE
        acked.update({base + j: v for j, v in enumerate(values)})
    bootstrap = f"127.0.0.1:{cluster.process(f'broker-{leader}').port}"
    wait_until(lambda: all(len(_segments(cluster, b)) >= 3 for b in state.replicas), 15)
    assert _consume_all(bootstrap, len(acked)) == acked

    # Disk faults on a running cluster, in closed segments the scrubbers have checked.
    bad_on_leader = _flip_value(cluster, leader, b"d-003-3-")
    bad_on_follower = _flip_value(cluster, follower, b"d-001-7-")
    flipped_at = time.monotonic()

    async def read_from_leader():
        async with open_consumer(bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([TP])
            consumer.seek(TP, 0)
            seen: dict[int, bytes] = {}
            with trio.fail_after(10):
                while True:
                    try:
                        records = await consumer.poll(500)
                    except CorruptBatchError as exc:
                        return seen, exc
                    seen.update((r.offset, r.value) for r in records)

    seen, error = trio.run(read_from_leader)
    assert error.broker == leader and (error.topic, error.partition) == (TOPIC, 0)
    assert error.first_offset == bad_on_leader
    assert all(acked[offset] == value for offset, value in seen.items())  # never a wrong value
    assert max(seen) < bad_on_leader

    # Both found within a scan interval (plus the scan), both repaired.
    deadline = SCAN_INTERVAL_MS / 1000 + 2 * REPAIR_BACKOFF_MS / 1000 + SETTLE_S + 10
    for broker, offset in ((follower, bad_on_follower), (leader, bad_on_leader)):
        wait_until(
            lambda b=broker, o=offset: any(
                e["first_offset"] <= o <= e["last_offset"]
                for e in _events(cluster, b, "corrupt_batch_repaired")
            ),
            deadline,
        )
        found = [e for e in _events(cluster, broker, "corrupt_batch")]
        assert any(e["first_offset"] <= offset <= e["last_offset"] for e in found)
    took = time.monotonic() - flipped_at
    assert _events(cluster, leader, "leader_step_down_requested")
    assert partition_state(cluster, TOPIC, 0).leader != leader

    async def high_watermark():
        async with open_admin(bootstrap) as admin:
            dirs = await admin.describe_log_dirs()
        return min(
            info.high_watermark
            for described in dirs.values()
            for d in described
            for tp, info in d.partitions.items()
            if tp == TP
        )

    hw = trio.run(high_watermark)
    assert hw >= len(acked)
    copies = [_batches_below(cluster, b, hw) for b in state.replicas]
    assert copies[0] == copies[1] == copies[2] and copies[0]
    new_leader = partition_state(cluster, TOPIC, 0).leader
    bootstrap = f"127.0.0.1:{cluster.process(f'broker-{new_leader}').port}"
    assert _consume_all(bootstrap, len(acked)) == acked
    assert cli.main(["log-dirs", "verify", "--topic", TOPIC, "--bootstrap-server", bootstrap]) == 0
    print(f"flip -> both repaired in {took:.1f}s")
