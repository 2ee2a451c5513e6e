"""Memory comes back after a burst (issue 29): a broker that took a burst of large
requests returns to within 20 MB of its pre-burst RSS within a minute.

One broker process (and a controller, on a real ZooKeeper) under an address-space cap
(`RLIMIT_AS` through prlimit, tests/support/hostile.py). Its idle RSS is measured after
a warm-up that runs every kind of request of the burst once at a small size (so code
loaded lazily on first use is not counted as kept memory); then the burst
(tests/support/memory_burst.py): 100 MiB garbage frames on the native and the Kafka
listener (each answered by a closed connection), native produce requests of 16 MiB and
fetches of what they wrote (two connections at once), and ~1 MiB records through
librdkafka's producer and consumer. The broker must have answered all of it, and its RSS
(VmRSS, polled for up to 60 s) must come back within 20 MB of the idle figure; the test
fails with the figures if not (`-s` prints them). No timed assertion: the minute is the
bound of the wait, as the issue states it. With server_common/malloc_tuning.py's
settings and trims switched off this test fails (measured: idle 67 MiB, 133 MiB still
after 60 s); with them the broker is back at or under its idle figure by the first trim
(5 s).
"""

from __future__ import annotations

import time

import pytest

from broker.tasks.background import MEMORY_RELEASE_S
from tests.integration.conftest import TEST_BROKER_SETTINGS, TEST_CONTROLLER_SETTINGS
from tests.integration.helpers import create_topic, wait_until
from tests.support.hostile import MiB, cap_address_space, rss_mib
from tests.support.memory_burst import burst, settle_rss, wait_for_rss
from tools.cluster.launcher import LocalCluster
from tools.cluster.state import process_alive

pytestmark = pytest.mark.integration

TOPIC = "burst"
PARTITIONS = 16  # 16 MiB produce requests and fetch responses
GARBAGE_FRAMES = 3  # per listener
ROUNDS = 3
RETURN_WITHIN_MB = 20  # decimal MB, as the issue states it
RETURN_WITHIN_MIB = RETURN_WITHIN_MB * 1_000_000 / MiB
RETURN_BOUND_S = 60.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    cluster = LocalCluster(
        tmp_path_factory.mktemp("memory"),
        brokers=1,
        controllers=1,
        base_port=None,
        broker_overrides={**TEST_BROKER_SETTINGS, "offsets.topic.replication.factor": 1},
        controller_overrides=TEST_CONTROLLER_SETTINGS,
    )
    try:
        cluster.up(timeout_s=60)
        info = cluster.process("broker-1")
        assert info.pid is not None and info.kafka_port is not None
        cap = cap_address_space(info.pid)
        print(f"broker-1: address space capped at {cap / MiB:.0f} MiB")
        create_topic(cluster, TOPIC, PARTITIONS, 1)
        wait_until(lambda: process_alive(info.pid), 5)
        yield info
    finally:
        cluster.down(timeout_s=20)


def test_rss_returns_after_a_burst_of_large_requests_on_both_listeners(broker):
    pid = broker.pid
    # Warm-up: every request kind once, small (lazy imports, first-use caches).
    burst(pid, broker.port, broker.kafka_port, TOPIC, garbage_frames=0, rounds=1)
    time.sleep(MEMORY_RELEASE_S + 1)  # what the warm-up freed is returned: a true idle
    idle = settle_rss(pid)

    result = burst(
        pid,
        broker.port,
        broker.kafka_port,
        TOPIC,
        garbage_frames=GARBAGE_FRAMES,
        rounds=ROUNDS,
        partitions=PARTITIONS,
    )
    after, waited = wait_for_rss(pid, idle + RETURN_WITHIN_MIB, RETURN_BOUND_S)
    figures = (
        f"RSS idle {idle:.1f} MiB, peak {result.peak_rss_mib:.1f} MiB during the burst, "
        f"{after:.1f} MiB after {waited:.1f} s (bound: idle + {RETURN_WITHIN_MB} MB); "
        f"burst: {result.garbage_closed} garbage frames of 100 MiB closed, "
        f"{result.produced_bytes / MiB:.0f} MiB produced and {result.fetched_bytes / MiB:.0f} "
        f"MiB fetched natively, {result.kafka_produced} + {result.kafka_consumed} "
        f"~1 MiB records produced + consumed by librdkafka"
    )
    print(figures)

    assert process_alive(pid), "the broker died"
    assert result.garbage_closed == 2 * GARBAGE_FRAMES, figures
    assert result.produced_bytes >= 2 * ROUNDS * PARTITIONS * MiB * 0.9, figures
    assert result.fetched_bytes >= result.produced_bytes, figures
    assert result.kafka_produced == ROUNDS * PARTITIONS, figures
    assert result.kafka_consumed >= ROUNDS * PARTITIONS, figures
    assert result.peak_rss_mib > idle + 50, f"the burst took no memory: {figures}"
    assert after <= idle + RETURN_WITHIN_MIB, f"memory did not come back: {figures}"
    assert rss_mib(pid) <= idle + RETURN_WITHIN_MIB, figures
