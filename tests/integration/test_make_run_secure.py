"""`make run-secure` (scripts/demo_secure.sh): `make run`'s demo on a cluster whose every
listener is SASL_SSL, run once through make.

A real secure local cluster (ZooKeeper, 2 controllers, 3 brokers) is started in a
temporary directory through `$TRIBUTARY_CLUSTER_DIR`; admin creates the topic, the user
alice with her ACLs, alice produces and consumes with her own properties and is refused
on a topic she has no ACL for. The cluster is stopped at the end by the pids recorded in
it (`tributary cluster down`). Idempotence is `make run`'s (test_make_run.py): the same
shared steps (scripts/demo_lib.sh); here the secure steps' reuse is not run twice, to
keep the suite short.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tools.cluster.state import ClusterState, process_alive

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def read_properties(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


# One run on a fresh cluster: 25 s to 45 s on a busy 2-core machine (most of it the ~15 CLI
# processes' start-up).
@pytest.mark.timeout(600)
def test_make_run_secure_round_trips_as_alice_and_refuses_her_elsewhere(tmp_path):
    directory = tmp_path / "cluster"
    env = {**os.environ, "TRIBUTARY_CLUSTER_DIR": str(directory)}
    env.pop("MAKEFLAGS", None)
    try:
        result = subprocess.run(
            ["make", "--no-print-directory", "run-secure"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        out = result.stdout
        state = ClusterState.load(directory)
        assert state is not None and state.settings.get("secure") is True
        assert "cluster up: 3 broker(s), 2 controller(s)" in out
        assert "(SASL_SSL, user admin)" in out
        assert re.search(
            r"Topic: demo\s+TopicId: \S+\s+PartitionCount: 6\s+ReplicationFactor: 3", out
        )
        # alice: her credential, her private properties, her ACLs.
        assert "Completed updating config for user alice." in out
        alice = directory / "alice.properties"
        assert stat.S_IMODE(alice.stat().st_mode) == 0o600
        properties = read_properties(alice)
        assert properties["security.protocol"] == "SASL_SSL"
        assert properties["sasl.mechanism"] == "SCRAM-SHA-512"
        assert 'username="alice"' in properties["sasl.jaas.config"]
        assert properties["ssl.truststore.location"] == str(directory.resolve() / "ca.pem")
        password = re.search(r'password="([^"]+)"', properties["sasl.jaas.config"])
        assert password is not None and password[1] not in out + result.stderr
        for operation in ("WRITE", "READ"):
            acl = f"(principal=User:alice, host=*, operation={operation}, permissionType=ALLOW)"
            assert acl in out
        assert "resourceType=GROUP, name=demo-group" in out
        # Her round trip: every record she produced came back, keyed to one partition each.
        assert "as alice (--command-config" in out
        consumed = re.findall(r"partition (\d) +offset +\d+ +(user-\d)", out)
        assert len(consumed) == 8
        partitions_of: dict[str, set[str]] = {}
        for partition, key in consumed:
            partitions_of.setdefault(key, set()).add(partition)
        assert all(len(p) == 1 for p in partitions_of.values())
        # Refused where she has no ACL, shown as such (and the demo still passed).
        assert re.search(r"refused, as it should be: .*TOPIC_AUTHORIZATION_FAILED.*payroll", out)
        assert "tributary cluster down" in out
    finally:
        subprocess.run(
            [sys.executable, "-m", "tools", "cluster", "down"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            timeout=120,
        )
    state = ClusterState.load(directory)
    assert state is not None and not any(process_alive(p.pid) for p in state.processes)
