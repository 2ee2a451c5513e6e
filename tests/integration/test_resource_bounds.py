"""Hostile connections against real broker processes: the connection and memory bounds
of issue 13 (`max.connections`, `max.connections.per.ip(.overrides)`,
`connections.max.idle.ms`, `queued.max.request.bytes`).

The cluster: two brokers and a controller on a real ZooKeeper, with a dedicated
inter-broker listener (INTERNAL; clients use PLAINTEXT and KAFKA, which are bounded).
Every broker runs under an address-space cap (`RLIMIT_AS`, set with prlimit on its pid)
so a bound that failed would kill that broker, not the machine. After each hostile case
a normal produce (acks=all, so the follower's fetches on INTERNAL are needed) and fetch
go through the same broker, and its RSS before and after is printed (`-s` shows it).
No timed assertions: "answered at all" has a generous bound; latencies are printed.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
import urllib.request

import msgpack
import pytest
import trio

from client.connection import open_connection
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.protocol.framing import encode_frame
from client.protocol.records import Record, build_batch
from tests.integration.conftest import TEST_BROKER_SETTINGS, TEST_CONTROLLER_SETTINGS
from tests.integration.helpers import create_topic, partition_state, wait_until
from tests.support.hostile import (
    ANSWER_BOUND_S,
    MiB,
    cap_address_space,
    closed_by_peer,
    connect_raw,
    flood_huge_frames,
    fmt_ms,
    normal_requests,
    raise_own_open_files,
    rss_mib,
    still_open,
)
from tools.cluster.launcher import LocalCluster

POOL = 256 * MiB  # queued.max.request.bytes: the default
MAX_CONNECTIONS = 2100
IDLE_CONNECTIONS = 2000
PER_IP_LIMIT = 5
LIMITED_IP = "127.0.0.2"  # all of 127/8 is loopback: a second client address
TOPIC = "bounds"

pytestmark = pytest.mark.integration


def check_normal_traffic(cluster: LocalCluster, broker: int, label: str) -> dict[str, float]:
    timings = trio.run(normal_requests, cluster.process(f"broker-{broker}").port, TOPIC, label)
    print(f"[{label}] normal client after: " + fmt_ms(timings))
    return timings


# -- the cluster -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def bounded(tmp_path_factory):
    """(cluster, leader id, follower id): the leader of `bounds`-0 is the target."""
    if not raise_own_open_files(MAX_CONNECTIONS + 500):
        pytest.skip(f"needs {MAX_CONNECTIONS + 500} open files")
    cluster = LocalCluster(
        tmp_path_factory.mktemp("bounds"),
        brokers=2,
        controllers=1,
        base_port=None,
        internal_listener=True,
        broker_overrides={
            **TEST_BROKER_SETTINGS,
            "max.connections": MAX_CONNECTIONS,
            "max.connections.per.ip.overrides": f"{LIMITED_IP}:{PER_IP_LIMIT}",
            "queued.max.request.bytes": POOL,
        },
        controller_overrides=TEST_CONTROLLER_SETTINGS,
    )
    try:
        cluster.up(timeout_s=60)
        for broker in (1, 2):
            cap = cap_address_space(cluster.process(f"broker-{broker}").pid)
            print(f"broker-{broker}: address space capped at {cap / MiB:.0f} MiB")
        create_topic(cluster, TOPIC, 1, 2, **{"min.insync.replicas": 2})
        state = wait_until(
            lambda: (s := partition_state(cluster, TOPIC, 0)) and len(s.isr) == 2 and s, 30
        )
        leader = state.leader
        yield cluster, leader, 3 - leader
    finally:
        cluster.down(timeout_s=20)


@contextlib.contextmanager
def rss_report(pid: int, label: str):
    before = rss_mib(pid)
    yield
    print(f"[{label}] broker RSS before {before:.0f} MiB, after {rss_mib(pid):.0f} MiB")


# -- the cases -------------------------------------------------------------------------
def test_two_thousand_idle_connections_leave_the_broker_serving(bounded):
    cluster, leader, _ = bounded
    info = cluster.process(f"broker-{leader}")
    label = "2000 idle connections"
    with rss_report(info.pid, label):
        idle: list[socket.socket] = []
        try:
            started = time.perf_counter()
            for _ in range(IDLE_CONNECTIONS):
                idle.append(connect_raw(info.port))
            print(f"[{label}] opened in {time.perf_counter() - started:.2f} s")
            # The first client queues behind the burst of accepts; the second comes once
            # the broker has taken every connection in.
            timings = trio.run(normal_requests, info.port, TOPIC, label)
            print(f"[{label}] normal client right after the burst: " + fmt_ms(timings))
            timings = trio.run(normal_requests, info.port, TOPIC, label)
            print(f"[{label}] normal client while they are open: " + fmt_ms(timings))
            # Nobody was turned away or parked: every idle connection is still open.
            assert sum(still_open(sock) for sock in idle) == IDLE_CONNECTIONS
        finally:
            for sock in idle:
                sock.close()
    check_normal_traffic(cluster, leader, label)


def test_connections_past_max_connections_are_closed_at_once_and_replication_goes_on(
    bounded,
):
    cluster, leader, follower = bounded
    info = cluster.process(f"broker-{leader}")
    label = "max.connections reached"
    with rss_report(info.pid, label):

        async def scenario() -> None:
            async with open_connection("127.0.0.1", info.port) as client:
                held: list[socket.socket] = []
                try:
                    # Earlier tests' connections are gone: only the client above counts.
                    await _metric_reaches(info, "client_connections", lambda v: v <= 1)
                    # Fill every client slot (the client above holds one).
                    held.extend(connect_raw(info.port) for _ in range(MAX_CONNECTIONS - 1))
                    await _metric_reaches(
                        info, "client_connections", lambda v: v >= MAX_CONNECTIONS
                    )
                    extra = connect_raw(info.port)
                    held.append(extra)
                    # Closed at once rather than left silent (the bound is generous).
                    assert await trio.to_thread.run_sync(closed_by_peer, extra, ANSWER_BOUND_S)
                    # Replication and the controller use INTERNAL, which is not counted:
                    # an acks=all produce needs the follower's fetches, and a new topic
                    # needs the controller's LeaderAndIsr/UpdateMetadata on both brokers.
                    await _produce_acks_all(client)
                    await _create_topic_and_wait_for_leaders(client, "bounds-new")
                finally:
                    for sock in held:
                        sock.close()

        trio.run(scenario)
    assert (
        partition_state(cluster, TOPIC, 0).isr
        and follower in partition_state(cluster, TOPIC, 0).isr
    )
    wait_until(lambda: _accepts(info.port), ANSWER_BOUND_S)  # slots come back
    check_normal_traffic(cluster, leader, label)


async def _produce_acks_all(conn) -> None:
    batch = build_batch([Record(None, b"while-full", int(time.time() * 1000))])
    response = await conn.request(
        m.ProduceRequest(
            acks=-1,
            timeout_ms=20_000,
            topics=[
                m.ProduceTopic(
                    name=TOPIC, partitions=[m.ProducePartition(partition=0, records=batch)]
                )
            ],
        ),
        timeout_s=ANSWER_BOUND_S,
    )
    code = response.topics[0].partitions[0].error_code
    assert code == ErrorCode.NONE, ErrorCode.from_code(code)


def _accepts(port: int) -> bool:
    sock = connect_raw(port)
    try:
        return not closed_by_peer(sock, 0.5)
    finally:
        sock.close()


def test_per_ip_limit_closes_the_next_connection_at_once(bounded):
    cluster, leader, _ = bounded
    info = cluster.process(f"broker-{leader}")
    label = "per-ip limit"
    with rss_report(info.pid, label):
        allowed = [connect_raw(info.port, LIMITED_IP) for _ in range(PER_IP_LIMIT)]
        try:
            for sock in allowed:  # served: each gets an answer
                _api_versions_raw(sock)
            extra = connect_raw(info.port, LIMITED_IP)
            assert closed_by_peer(extra, ANSWER_BOUND_S), "connection N+1 was left silent"
            extra.close()
            # Other addresses are not affected.
            trio.run(normal_requests, info.port, TOPIC, label)
            # A slot freed is a slot usable again.
            allowed.pop().close()

            def reconnected() -> bool:
                sock = connect_raw(info.port, LIMITED_IP)
                try:
                    _api_versions_raw(sock)
                    return True
                except (OSError, AssertionError):
                    return False
                finally:
                    sock.close()

            wait_until(reconnected, ANSWER_BOUND_S, interval_s=0.2)
        finally:
            for sock in allowed:
                sock.close()
    check_normal_traffic(cluster, leader, label)


def _api_versions_raw(sock: socket.socket) -> None:
    api_key = 18  # ApiVersions
    sock.settimeout(ANSWER_BOUND_S)
    sock.sendall(encode_frame(msgpack.packb([api_key, 0, 1, "bounds", {}])))
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">I", data[:4])[0]:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError("closed instead of answering ApiVersions")
        data += chunk


def test_huge_frames_wait_for_the_pool_and_the_broker_stays_within_it(bounded):
    """50 connections (half native, half Kafka protocol) each announce a 100 MiB frame
    and send its body in small pieces; the pool admits two at a time, the others are
    not read. Meanwhile a normal client is served, and RSS stays within the pool."""
    cluster, leader, _ = bounded
    info = cluster.process(f"broker-{leader}")
    label = "50 x 100 MiB frames"
    baseline = rss_mib(info.pid)
    flood = trio.run(
        lambda: flood_huge_frames(
            [info.port, info.kafka_port],
            info.pid,
            during=lambda: normal_requests(info.port, TOPIC, label),
        )
    )
    peak = flood["peak_rss_mib"]
    print(
        f"[{label}] normal client during the flood: {fmt_ms(flood['during'])}; "
        f"offered {flood['sent_bytes'] / MiB:.0f} MiB; broker RSS before {baseline:.0f} MiB, "
        f"peak {peak:.0f} MiB, after {rss_mib(info.pid):.0f} MiB (pool {POOL / MiB:.0f} MiB)"
    )
    # Without the pool every connection would buffer what it was sent (GBs here).
    # The margin is for the broker's own memory and the copy made as a frame is decoded.
    assert peak < baseline + POOL / MiB + 256, (baseline, peak)
    check_normal_traffic(cluster, leader, label)


# ElectLeaders v0, one topic whose partitions array claims 1.8 billion int32s: 36 bytes
# that made kio's native reader ask for 14 GB and abort the whole (capped) broker.
HOSTILE_ARRAY_COUNT = bytes.fromhex(
    "00000020002b0000000000070004746573740000000100045dc282766a0000000000ea60"
)


def _kafka_api_versions_raw(sock: socket.socket, correlation_id: int) -> None:
    """ApiVersions v0 over the Kafka protocol; fails unless answered."""
    body = struct.pack(">hhih", 18, 0, correlation_id, -1)  # header v1, null client id
    sock.settimeout(ANSWER_BOUND_S)
    sock.sendall(struct.pack(">i", len(body)) + body)
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">I", data[:4])[0]:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError("closed instead of answering ApiVersions")
        data += chunk
    assert struct.unpack_from(">ih", data, 4) == (correlation_id, 0)


def test_a_hostile_array_count_on_the_kafka_listener_costs_only_its_connection(bounded):
    """Before any authentication, the frame above used to kill the broker; now it is an
    unreadable request: that connection is closed, and the broker serves on (a Kafka
    connection opened before it, native clients, replication)."""
    cluster, leader, _ = bounded
    info = cluster.process(f"broker-{leader}")
    label = "hostile array count"
    with rss_report(info.pid, label):
        bystander = connect_raw(info.kafka_port)
        try:
            _kafka_api_versions_raw(bystander, 1)
            for attempt in range(3):
                attacker = connect_raw(info.kafka_port)
                attacker.sendall(HOSTILE_ARRAY_COUNT)
                assert closed_by_peer(attacker, ANSWER_BOUND_S), f"attempt {attempt} not closed"
                attacker.close()
            _kafka_api_versions_raw(bystander, 2)
        finally:
            bystander.close()
    assert cluster.process(f"broker-{leader}").pid == info.pid
    check_normal_traffic(cluster, leader, label)


def _metric(info, name: str) -> float:
    url = f"http://127.0.0.1:{info.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(f"tributary_{name} "):
                return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


async def _metric_reaches(info, name: str, condition) -> None:
    with trio.fail_after(ANSWER_BOUND_S):
        while not condition(await trio.to_thread.run_sync(_metric, info, name)):
            await trio.sleep(0.1)


def test_replication_and_the_controller_go_on_while_clients_exhaust_the_pool(bounded):
    """Three stalled frames reserve the whole pool of the leader. A client request
    bigger than a small read waits; an acks=all produce (the follower's fetches) and a
    new topic (the controller's LeaderAndIsr and UpdateMetadata) go through INTERNAL."""
    cluster, leader, follower = bounded
    info = cluster.process(f"broker-{leader}")
    label = "pool exhausted"
    sizes = [100 * MiB, 100 * MiB, POOL - 200 * MiB - 12]  # 3 prefixes: exactly the pool

    async def scenario() -> None:
        async with open_connection("127.0.0.1", info.port) as client:
            stalled = []
            try:
                for size in sizes:
                    stream = await trio.open_tcp_stream("127.0.0.1", info.port)
                    stalled.append(stream)
                    await stream.send_all(struct.pack(">I", size) + bytes(64 * 1024))
                await _metric_reaches(info, "request_memory_pool_used_bytes", lambda v: v >= POOL)
                # A 200 KiB produce from a client must wait for memory...
                big = build_batch([Record(None, bytes(200 * 1024), int(time.time() * 1000))])
                waiting_result: list = []

                async def big_produce() -> None:
                    async with open_connection("127.0.0.1", info.port) as conn:
                        waiting_result.append(await _produce(conn, big))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(big_produce)
                    await _metric_reaches(info, "request_memory_pool_waiting", lambda v: v >= 1)
                    assert not waiting_result
                    # ...while replication and the controller go on (small requests from
                    # a client fit in one read and never wait either).
                    await _produce_acks_all(client)
                    await _create_topic_and_wait_for_leaders(client, "bounds-pool")
                    assert follower in partition_state(cluster, TOPIC, 0).isr
                    # Freed memory lets the waiting produce in.
                    for stream in stalled:
                        await stream.aclose()
                    stalled.clear()
                assert waiting_result == [ErrorCode.NONE]
            finally:
                for stream in stalled:
                    await stream.aclose()

    with rss_report(info.pid, label):
        trio.run(scenario)
    check_normal_traffic(cluster, leader, label)


async def _produce(conn, batch: bytes) -> ErrorCode:
    response = await conn.request(
        m.ProduceRequest(
            acks=-1,
            timeout_ms=20_000,
            topics=[
                m.ProduceTopic(
                    name=TOPIC, partitions=[m.ProducePartition(partition=0, records=batch)]
                )
            ],
        ),
        timeout_s=ANSWER_BOUND_S * 2,
    )
    return ErrorCode.from_code(response.topics[0].partitions[0].error_code)


async def _create_topic_and_wait_for_leaders(client, name: str) -> None:
    await client.request(
        m.CreateTopicsRequest(
            topics=[
                m.CreateTopicsTopic(name=name, num_partitions=2, replication_factor=2, configs=[])
            ],
            timeout_ms=20_000,
        ),
        timeout_s=ANSWER_BOUND_S,
    )
    with trio.fail_after(ANSWER_BOUND_S):
        while True:
            meta = await client.request(m.MetadataRequest(topics=[name]))
            parts = meta.topics[0].partitions if meta.topics else []
            if len(parts) == 2 and all(p.leader >= 0 for p in parts):
                return
            await trio.sleep(0.2)


def test_idle_connections_are_closed_and_a_shared_listener_is_bounded_too(tmp_path):
    idle_ms = 1500
    cluster = LocalCluster(
        tmp_path,
        brokers=1,
        controllers=1,
        base_port=None,
        broker_overrides={**TEST_BROKER_SETTINGS, "connections.max.idle.ms": idle_ms},
        controller_overrides=TEST_CONTROLLER_SETTINGS,
    )
    try:
        cluster.up(timeout_s=60)
        info = cluster.process("broker-1")
        cap_address_space(info.pid)
        create_topic(cluster, TOPIC, 1, 1)
        label = "idle timeout"
        with rss_report(info.pid, label):
            quiet = connect_raw(info.port)
            quiet_kafka = connect_raw(info.kafka_port)
            started = time.perf_counter()
            assert closed_by_peer(quiet, ANSWER_BOUND_S), "an idle connection stayed open"
            assert closed_by_peer(quiet_kafka, ANSWER_BOUND_S)
            print(
                f"[{label}] idle connections closed after {time.perf_counter() - started:.1f}"
                f" s (connections.max.idle.ms={idle_ms})"
            )
            quiet.close()
            quiet_kafka.close()

            # A connection waiting for a long-poll answer is not idle.
            async def long_poll() -> None:
                async with open_connection("127.0.0.1", info.port) as conn:
                    response = await conn.request(
                        m.FetchRequest(
                            replica_id=-1,
                            max_wait_ms=idle_ms * 2,
                            min_bytes=1 << 20,
                            max_bytes=1 << 20,
                            topics=[
                                m.FetchTopic(
                                    topic=TOPIC,
                                    partitions=[
                                        m.FetchPartition(
                                            partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                                        )
                                    ],
                                )
                            ],
                        ),
                        timeout_s=ANSWER_BOUND_S,
                    )
                    assert response.topics[0].partitions[0].error_code == ErrorCode.NONE

            trio.run(long_poll)
            timings = trio.run(normal_requests, info.port, TOPIC, label)
            print(f"[{label}] normal client after: " + fmt_ms(timings))

        # The launcher's default layout: PLAINTEXT is both the inter-broker listener and
        # the native clients' one. It has its own pool, which bounds those clients too.
        label = "huge frames on a shared PLAINTEXT"
        baseline = rss_mib(info.pid)
        flood = trio.run(
            lambda: flood_huge_frames(
                [info.port],
                info.pid,
                connections=10,
                duration_s=6.0,
                during=lambda: normal_requests(info.port, TOPIC, label),
            )
        )
        print(
            f"[{label}] normal client during: {fmt_ms(flood['during'])}; broker RSS before "
            f"{baseline:.0f} MiB, peak {flood['peak_rss_mib']:.0f} MiB"
        )
        assert flood["peak_rss_mib"] < baseline + 256 + 256
        timings = trio.run(normal_requests, info.port, TOPIC, label)
        print(f"[{label}] normal client after: " + fmt_ms(timings))
    finally:
        cluster.down(timeout_s=20)
