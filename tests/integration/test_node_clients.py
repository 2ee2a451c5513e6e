"""Node.js Kafka clients against a real 3-broker Tributary cluster's Kafka listeners.

The scripts live in tests/node (their packages pinned in tests/node/package-lock.json,
installed by `make setup`); each runs one scenario and prints one JSON line, which the
test checks. kafkajs: an admin creates a topic (RF 3, min.insync.replicas=2) and reads
its metadata and configs, an idempotent gzip producer writes keyed records with acks=all,
a consumer-group member reads every one back intact, and the admin deletes the topic.
@platformatic/kafka (1.x, which speaks only recent versions: CreateTopics 7, DeleteTopics
6, Metadata 9-12, Produce 7+, FindCoordinator 4, OffsetFetch 8, JoinGroup 9, Fetch 13+
naming topics by id): an admin creates a topic, a producer writes to it with acks=all,
three consumers in one group read every record back, the admin deletes it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.integration.conftest import running_cluster

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(
    NODE is None
    or not (NODE_DIR / "node_modules" / "kafkajs").is_dir()
    or not (NODE_DIR / "node_modules" / "@platformatic" / "kafka").is_dir(),
    reason="node or the Node.js Kafka clients are not installed (make setup installs them)",
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("node-clients")) as cluster:
        yield cluster


def run_node(script: str, *args: str, timeout: float = 120) -> dict:
    """Run a tests/node script; its last stdout line, parsed as JSON."""
    done = subprocess.run(
        [NODE, str(NODE_DIR / script), *args],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_kafkajs_admin_idempotent_gzip_producer_and_group_consumer(cluster):
    bootstrap = cluster.state.kafka_bootstrap_servers
    result = run_node("kafkajs_roundtrip.mjs", bootstrap, "kafkajs-roundtrip", "2000")
    assert result["created"] is True
    assert [p["partition"] for p in result["partitions"]] == [0, 1, 2]
    assert all(p["replicas"] == 3 and p["leader"] in (1, 2, 3) for p in result["partitions"])
    assert result["minIsr"] == "2"
    assert result["acked"] == 3  # one answer per partition the records went to
    assert result["consumed"] == 2000 and result["intact"] is True
    assert result["deleted"] is True


def test_platformatic_admin_producer_and_a_three_member_consumer_group(cluster):
    bootstrap = cluster.state.kafka_bootstrap_servers
    result = run_node("platformatic_roundtrip.mjs", bootstrap, "platformatic-rt", "500", "3")
    assert "failed" not in result, result
    assert result["created"] == [{"name": "platformatic-rt", "partitions": 3}]
    assert result["partitions"] == 3 and result["produced"] == 500
    assert result["consumed"] == 500 and result["intact"] is True
    assert result["deleted"] is True
