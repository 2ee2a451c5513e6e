"""Issue 13 (resource bounds, first half) against a real broker process under a memory cap:
CreateTopics asking for 2^31-1 partitions, or a replication factor far above the broker
count, through the native listener and the Kafka listener, with and without
validate_only, and CreatePartitions growing a topic to 2^31-1 partitions. Each is answered
with an error (INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR) before any assignment is
built: the broker's resident memory does not grow, and a normal produce and fetch through
the same broker work afterwards.

Before the limits such a request made a broker build the whole assignment and grow past
20 GB. Here the broker's address space is capped (`prlimit`), so a regression fails the
request with MemoryError (or kills the broker) instead of taking the machine down.
"""

from __future__ import annotations

import io
import resource
import struct
import time

import pytest
import trio
from kio.index import load_response_from_request
from kio.schema.create_topics.v4 import request as create_topics_v4
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from broker.kafka.translation import build
from client.connection import open_connection
from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from tests.integration.conftest import TEST_BROKER_SETTINGS, TEST_CONTROLLER_SETTINGS
from tests.integration.helpers import create_topic, produce
from tools.cluster.launcher import LocalCluster

pytestmark = pytest.mark.integration

HUGE = 2**31 - 1
# Headroom over what the broker has mapped when the cap is set: a broker needs no more to
# answer these requests and serve a produce and a fetch; 20 GB would need far more.
HEADROOM_BYTES = 512 * 1024 * 1024
# Allowed RSS growth over all the hostile requests (allocator noise, one more connection).
MAX_RSS_GROWTH_BYTES = 20 * 1024 * 1024


def _status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} for pid {pid}")


def rss_bytes(pid: int) -> int:
    return _status_kib(pid, "VmRSS") * 1024


@pytest.fixture(scope="module")
def capped(tmp_path_factory):
    """One broker (and a controller) with its address space capped at what it has mapped
    now plus HEADROOM_BYTES; yields (cluster, broker pid, the cap in bytes)."""
    cluster = LocalCluster(
        tmp_path_factory.mktemp("limits"),
        brokers=1,
        controllers=1,
        base_port=None,
        broker_overrides=dict(TEST_BROKER_SETTINGS),
        controller_overrides=TEST_CONTROLLER_SETTINGS,
    )
    try:
        cluster.up(timeout_s=60)
        pid = cluster.process("broker-1").pid
        cap = _status_kib(pid, "VmSize") * 1024 + HEADROOM_BYTES
        resource.prlimit(pid, resource.RLIMIT_AS, (cap, cap))
        yield cluster, pid, cap
    finally:
        cluster.down(timeout_s=20)  # by pid, also when up() failed half way


async def native_create(port: int, topic: m.CreateTopicsTopic, validate_only: bool):
    async with open_connection("127.0.0.1", port) as conn:
        response = await conn.request(
            m.CreateTopicsRequest(topics=[topic], timeout_ms=5_000, validate_only=validate_only),
            timeout_s=30,
        )
    (result,) = response.topics
    return ErrorCode.from_code(result.error_code), result.error_message


async def native_create_partitions(port: int, name: str, count: int):
    async with open_connection("127.0.0.1", port) as conn:
        response = await conn.request(
            m.CreatePartitionsRequest(
                topics=[m.CreatePartitionsTopic(name=name, count=count)], timeout_ms=5_000
            ),
            timeout_s=30,
        )
    (result,) = response.results
    return ErrorCode.from_code(result.error_code), result.error_message


async def kafka_create(port: int, partitions: int, rf: int, validate_only: bool):
    """CreateTopics v4 over Kafka's wire protocol (kio-encoded, a raw socket)."""
    request = build(
        create_topics_v4.CreateTopicsRequest,
        topics=[
            {
                "name": "kafka-huge",
                "num_partitions": partitions,
                "replication_factor": rf,
                "assignments": [],
                "configs": [],
            }
        ],
        timeout=5_000,
        validate_only=validate_only,
    )
    out = io.BytesIO()
    header_cls = request.__header_schema__
    entity_writer(header_cls)(
        out,
        header_cls(
            request_api_key=request.__api_key__,
            request_api_version=request.__version__,
            correlation_id=i32(1),
            client_id="limits-test",
        ),
    )
    entity_writer(type(request))(out, request)
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(struct.pack(">i", out.tell()) + out.getvalue())
        buffer = b""
        with trio.fail_after(30):
            while len(buffer) < 4 or len(buffer) < 4 + struct.unpack_from(">i", buffer)[0]:
                data = await stream.receive_some(65536)
                assert data, "the broker closed the connection"
                buffer += data
    response_cls = load_response_from_request(type(request))
    frame = buffer[4:]
    _, used = entity_reader(response_cls.__header_schema__)(frame, 0)
    response, _ = entity_reader(response_cls)(frame, used)
    (result,) = response.topics
    return int(result.error_code), result.error_message


def test_huge_requests_are_refused_without_growth(capped):
    cluster, pid, cap = capped
    info = cluster.process("broker-1")
    port, kafka_port = info.port, info.kafka_port
    create_topic(cluster, "existing", 1, 1)
    before = rss_bytes(pid)
    answers = []
    started = time.monotonic()
    for validate_only in (False, True):
        answers.append(
            trio.run(
                native_create,
                port,
                m.CreateTopicsTopic(name="huge", num_partitions=HUGE, replication_factor=1),
                validate_only,
            )
        )
        answers.append(
            trio.run(
                native_create,
                port,
                m.CreateTopicsTopic(name="huge-rf", num_partitions=1, replication_factor=HUGE),
                validate_only,
            )
        )
        answers.append(trio.run(kafka_create, kafka_port, HUGE, 1, validate_only))
        answers.append(trio.run(kafka_create, kafka_port, 1, 2**15 - 1, validate_only))
    answers.append(trio.run(native_create_partitions, port, "existing", HUGE))
    elapsed = time.monotonic() - started
    after = rss_bytes(pid)
    print(
        f"broker RSS {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB over "
        f"{len(answers)} hostile requests in {elapsed:.2f} s (address space cap "
        f"{cap / 2**20:.0f} MiB)"
    )
    codes = [int(code) for code, _ in answers]
    invalid_p, invalid_rf = (
        int(ErrorCode.INVALID_PARTITIONS),
        int(ErrorCode.INVALID_REPLICATION_FACTOR),
    )
    assert codes == [invalid_p, invalid_rf] * 4 + [invalid_p], answers
    assert "max.partitions.per.request" in answers[0][1]
    assert "larger than the 1 live broker" in answers[1][1]
    assert after - before < MAX_RSS_GROWTH_BYTES, (before, after)
    # The same broker still serves a normal produce and fetch.
    code, base = produce(cluster, 1, "existing", 0, [b"still", b"serving"])
    assert code is ErrorCode.NONE

    async def fetch():
        async with open_connection("127.0.0.1", port) as conn:
            response = await conn.request(
                m.FetchRequest(
                    replica_id=-1,
                    max_wait_ms=0,
                    min_bytes=0,
                    max_bytes=1 << 20,
                    topics=[
                        m.FetchTopic(
                            topic="existing",
                            partitions=[
                                m.FetchPartition(
                                    partition=0, fetch_offset=base, partition_max_bytes=1 << 20
                                )
                            ],
                        )
                    ],
                ),
                timeout_s=30,
            )
        return response.topics[0].partitions[0]

    part = trio.run(fetch)
    assert part.error_code == 0 and part.high_watermark == base + 2 and part.records
