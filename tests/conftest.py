"""Shared fixtures, and how `make test` spreads the suite over parallel workers.

`zookeeper` starts Debian's ZooKeeper once per test process (about a second) and kills
that pid at the end. `zk_connect` gives each test its own chroot under it, so tests never
see each other's znodes; `kazoo_client` is a started KazooClient on that chroot.

Parallel runs (pytest-xdist, `-n N --dist loadscope`, as `make test` runs them): a
scheduler of our own (`ModuleScheduling`) hands out whole groups, and a group runs on
one worker, so what a module shares (a module-scoped real cluster) is built once. The
group is the test's module, except that the Spark tests (tests/spark/) are one group:
one Spark JVM per run, not one per worker. Groups go out longest first (the
`EXPECTED_SECONDS` of a module, measured on 2 cores; a module not listed counts as
short), so the long real-cluster modules start at once and the many short unit modules
fill the gaps at the end instead of a long module starting last. Each worker picks
its servers' ports in a range of its own (TRIBUTARY_LISTEN_PORTS), and SIGINT is
restored to its default if pytest was started with it ignored. (xdist's own
`loadgroup` would do the grouping from `xdist_group` marks, but it renames node ids in a
way pytest 9 no longer sees.)
"""

from __future__ import annotations

import os
import signal
import uuid

import pytest

from tools.cluster.zookeeper import LISTEN_PORTS_ENV, ZooKeeperServer, listen_port_range


def pytest_configure(config):
    # Parallel workers each start real clusters and kill and restart their brokers: each
    # picks listening ports in a range of its own, so none takes a port another worker's
    # stopped broker will bind again.
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is not None and LISTEN_PORTS_ENV not in os.environ:
        count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        ports = listen_port_range()
        size = len(ports) // count
        low = ports.start + int(worker.removeprefix("gw")) * size
        os.environ[LISTEN_PORTS_ENV] = f"{low}-{low + size}"
    # A non-interactive shell starts a background job (`make test &`) with SIGINT
    # ignored, and every process started from it inherits that: the tests that Ctrl-C a
    # command would then wait for a command that cannot hear them. Tests start their
    # commands as a terminal would, with SIGINT at its default.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zk_connect(zookeeper) -> str:
    """A connect string with a chroot of this test's own (created, so it exists)."""
    from kazoo.client import KazooClient

    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    root = KazooClient(hosts=zookeeper.connect_string)
    root.start(timeout=10)
    try:
        root.ensure_path(chroot)
    finally:
        root.stop()
        root.close()
    return zookeeper.connect_string + chroot


@pytest.fixture
def kazoo_client(zk_connect):
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zk_connect)
    client.start(timeout=10)
    try:
        yield client
    finally:
        client.stop()
        client.close()


# Seconds each group took in a fresh-clone `make test` (4 workers on 2 cores, so about
# twice what it takes alone; modules under 8 s are left out and count as 0): only the
# order in which groups start depends on these, never a result. Refresh them from
# `--durations=0` when modules are added or change much.
EXPECTED_SECONDS = {
    "spark": 426,
    "tests/integration/test_client_resilience_cli.py": 159,
    "tests/integration/test_operator_admin.py": 120,
    "tests/integration/test_racks.py": 96,
    "tests/chaos/test_failover.py": 90,
    "tests/chaos/test_secure_replication.py": 90,
    "tests/chaos/test_planted_bug.py": 75,
    "tests/chaos/test_replication_matrix.py": 73,
    "tests/chaos/test_randomized.py": 68,
    "tests/integration/test_kafka_clients.py": 63,
    "tests/integration/test_secure_listeners.py": 61,
    "tests/integration/test_secure_local_cluster.py": 51,
    "tests/integration/test_kafka_idempotence.py": 50,
    "tests/integration/test_idempotent_producer.py": 50,
    "tests/integration/test_make_run_secure.py": 46,
    "tests/integration/test_resource_bounds.py": 46,
    "tests/integration/test_zk_ensemble.py": 44,
    "tests/integration/test_configs_clients.py": 41,
    "tests/integration/test_make_run.py": 40,
    "tests/integration/test_local_cluster_cli.py": 39,
    "tests/integration/test_security_hostile.py": 37,
    "tests/integration/test_transactional_log.py": 37,
    "tests/unit/test_protocol_roundtrip.py": 34,
    "tests/chaos/test_disk_faults.py": 31,
    "tests/chaos/test_transactions.py": 31,
    "tests/integration/test_client_quotas.py": 40,
    "tests/integration/test_txn_acls.py": 25,
    "tests/integration/test_end_to_end.py": 31,
    "tests/integration/test_groups_cli.py": 30,
    "tests/integration/test_perf_tools.py": 29,
    "tests/integration/test_txn_clients.py": 26,
    "tests/unit/test_assignors.py": 26,
    "tests/integration/test_node_clients.py": 26,
    "tests/integration/test_memory_returns.py": 25,
    "tests/integration/test_scram_logins.py": 25,
    "tests/integration/test_txn_producer.py": 24,
    "tests/integration/test_group_liveness.py": 24,
    "tests/integration/test_tls_listeners.py": 23,
    "tests/unit/test_producer.py": 23,
    "tests/integration/test_txn_coordinator.py": 22,
    "tests/unit/test_kafka_bounds.py": 20,
    "tests/chaos/test_txn_planted_bug.py": 19,
    "tests/integration/test_consumer_groups.py": 18,
    "tests/integration/test_kafka_fetch_sessions.py": 18,
    "tests/integration/test_compose.py": 17,
    "tests/unit/test_log_cleaner.py": 16,
    "tests/unit/test_cli_data.py": 16,
    "tests/integration/test_isr_replication.py": 16,
    "tests/integration/test_acls.py": 15,
    "tests/integration/test_scrub_repair.py": 15,
    "tests/unit/test_cli_groups.py": 15,
    "tests/unit/test_protocol_framing.py": 15,
    "tests/integration/test_topic_ids.py": 14,
    "tests/unit/test_producer_send_many.py": 14,
    "tests/integration/test_scram_users.py": 14,
    "tests/integration/test_controller.py": 13,
    "tests/integration/test_kafka_admin.py": 12,
    "tests/integration/test_consumer_batches.py": 12,
    "tests/unit/test_producer_idempotence.py": 12,
    "tests/integration/test_send_many.py": 12,
    "tests/sim/test_replication_properties.py": 11,
    "tests/unit/test_log_stateful.py": 11,
    "tests/unit/test_kafka_listener.py": 11,
    "tests/unit/test_fetch_sessions_stateful.py": 9,
    "tests/unit/test_protocol_fuzz.py": 9,
    "tests/unit/test_kafka_wire.py": 8,
}


def group_of(nodeid: str) -> str:
    """The group a test runs in: its module, or "spark" for every Spark test."""
    path = nodeid.split("::", 1)[0]
    return "spark" if path.startswith("tests/spark/") else path


def pytest_collection_modifyitems(config, items):
    # Stable: within a group, and among groups of equal weight, collection order stays.
    items.sort(key=lambda item: -EXPECTED_SECONDS.get(group_of(item.nodeid), 0))


def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    config.option.loadscopereorder = False  # keep the longest-first collection order
    return ModuleScheduling(config, log)
