"""Connection and memory bounds under hostile clients (issue 13), on real processes.

Two broker processes and a controller (brokers on a dedicated INTERNAL listener,
clients on PLAINTEXT and KAFKA), each broker under an address-space cap:
1. a normal client's Metadata, acks=all Produce and Fetch with no other connection,
   then with 2,000 idle connections open (the time to open them, the first request
   queued behind their accepts, and once they are all in);
2. 50 connections announcing 100 MiB frames and sending their bodies in 256 KiB pieces
   for 12 s: the broker's peak RSS against `queued.max.request.bytes`, and a normal
   client's latency meanwhile;
3. how long a connection past `max.connections.per.ip` waits before it is closed.
Prints figures only. The cluster lives in a temp dir and is stopped by pid at the end.
"""

from __future__ import annotations

import logging
import tempfile
import time

import trio

from tests.integration.conftest import TEST_BROKER_SETTINGS, TEST_CONTROLLER_SETTINGS
from tests.integration.helpers import create_topic, partition_state
from tests.support.hostile import (
    MiB,
    cap_address_space,
    closed_by_peer,
    connect_raw,
    flood_huge_frames,
    fmt_ms,
    normal_requests,
    raise_own_open_files,
    rss_mib,
)
from tools.cluster.launcher import LocalCluster

POOL = 256 * MiB
IDLE = 2000
TOPIC = "bench-bounds"
LIMITED_IP = "127.0.0.2"


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    if not raise_own_open_files(IDLE + 500):
        print(f"skipped: needs {IDLE + 500} open files")
        return
    with tempfile.TemporaryDirectory(prefix="bench-bounds-") as directory:
        cluster = LocalCluster(
            directory,
            brokers=2,
            controllers=1,
            base_port=None,
            internal_listener=True,
            broker_overrides={
                **TEST_BROKER_SETTINGS,
                "queued.max.request.bytes": POOL,
                "max.connections.per.ip.overrides": f"{LIMITED_IP}:5",
            },
            controller_overrides=TEST_CONTROLLER_SETTINGS,
        )
        try:
            cluster.up(timeout_s=60)
            for broker in (1, 2):
                cap_address_space(cluster.process(f"broker-{broker}").pid)
            create_topic(cluster, TOPIC, 1, 2, **{"min.insync.replicas": 2})
            run(cluster)
        finally:
            cluster.down(timeout_s=20)


def run(cluster: LocalCluster) -> None:
    leader = partition_state(cluster, TOPIC, 0).leader
    info = cluster.process(f"broker-{leader}")
    trio.run(normal_requests, info.port, TOPIC, "warm-up")
    quiet = trio.run(normal_requests, info.port, TOPIC, "quiet")
    print(f"normal client, no other connection:      {fmt_ms(quiet)}")
    print(f"broker RSS at rest: {rss_mib(info.pid):.0f} MiB")

    idle = []
    try:
        started = time.perf_counter()
        idle = [connect_raw(info.port) for _ in range(IDLE)]
        opened = time.perf_counter() - started
        first = trio.run(normal_requests, info.port, TOPIC, "burst")
        settled = trio.run(normal_requests, info.port, TOPIC, "idle")
        print(f"{IDLE} idle connections opened in {opened:.2f} s")
        print(f"normal client right after them (queued behind their accepts): {fmt_ms(first)}")
        print(f"normal client with {IDLE} idle connections open: {fmt_ms(settled)}")
        print(f"broker RSS with them: {rss_mib(info.pid):.0f} MiB")
    finally:
        for sock in idle:
            sock.close()
    time.sleep(2)

    baseline = rss_mib(info.pid)
    flood = trio.run(
        lambda: flood_huge_frames(
            [info.port, info.kafka_port],
            info.pid,
            during=lambda: normal_requests(info.port, TOPIC, "flood"),
        )
    )
    print(
        f"50 x 100 MiB frames for 12 s ({flood['sent_bytes'] / MiB:.0f} MiB accepted from "
        f"them): broker RSS {baseline:.0f} MiB before, peak {flood['peak_rss_mib']:.0f} MiB "
        f"(pool {POOL / MiB:.0f} MiB), {rss_mib(info.pid):.0f} MiB after"
    )
    print(f"normal client during the flood: {fmt_ms(flood['during'])}")

    held = [connect_raw(info.port, LIMITED_IP) for _ in range(5)]
    try:
        extra = connect_raw(info.port, LIMITED_IP)
        started = time.perf_counter()
        closed = closed_by_peer(extra, 30)
        waited = time.perf_counter() - started
        extra.close()
        print(
            f"connection 6 from {LIMITED_IP} (max 5): "
            f"{'closed' if closed else 'NOT closed'} after {waited * 1000:.1f} ms"
        )
    finally:
        for sock in held:
            sock.close()
