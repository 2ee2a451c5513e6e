"""Real-process clusters for integration tests, started through the same launcher users
run (`LocalCluster`), on free ports, each in its own temp dir, and always stopped by pid.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tools.cluster.launcher import LocalCluster

# Faster than the local cluster's defaults: tests wait for these to elapse.
TEST_BROKER_SETTINGS = {
    "zookeeper.session.timeout.ms": 4000,
    "replica.lag.time.max.ms": 3000,
    "isr.change.propagation.blackout.ms": 200,
    "isr.change.propagation.interval.ms": 2000,
    "controlled.shutdown.retry.backoff.ms": 500,
    "replica.fetch.backoff.ms": 200,
    "offsets.topic.num.partitions": 3,
    "group.initial.rebalance.delay.ms": 200,
    "group.min.session.timeout.ms": 1000,
}
TEST_CONTROLLER_SETTINGS = {
    "zookeeper.session.timeout.ms": 4000,
}


@contextmanager
def running_cluster(
    directory: Path,
    brokers: int = 3,
    controllers: int = 1,
    *,
    zookeepers: int = 1,
    zk_chroot: str | None = None,
    **broker_overrides,
) -> Iterator[LocalCluster]:
    """A cluster with the test settings (and `broker_overrides`), up for the block and
    stopped by pid at its end, also when it failed to come up half way (for the
    module-scoped `cluster` fixtures: `with running_cluster(tmp.mktemp("x")) as c`).
    `zookeepers`, `zk_chroot`: as `tributary cluster up --zookeepers N --zk-chroot P`."""
    cluster = LocalCluster(
        directory,
        brokers=brokers,
        controllers=controllers,
        base_port=None,
        zookeepers=zookeepers,
        zk_chroot=zk_chroot,
        broker_overrides={**TEST_BROKER_SETTINGS, **broker_overrides},
        controller_overrides=dict(TEST_CONTROLLER_SETTINGS),
    )
    try:
        cluster.up(timeout_s=60)
        yield cluster
    finally:
        cluster.down(timeout_s=20)


@pytest.fixture
def start_cluster(tmp_path_factory):
    """`start_cluster(brokers=3, controllers=1, **broker_overrides) -> LocalCluster`."""
    started: list[LocalCluster] = []

    def start(brokers: int = 3, controllers: int = 1, controller_overrides=None, **overrides):
        cluster = LocalCluster(
            tmp_path_factory.mktemp("cluster"),
            brokers=brokers,
            controllers=controllers,
            base_port=None,
            broker_overrides={**TEST_BROKER_SETTINGS, **overrides},
            controller_overrides={**TEST_CONTROLLER_SETTINGS, **(controller_overrides or {})},
        )
        started.append(cluster)
        cluster.up(timeout_s=60)
        return cluster

    yield start
    for cluster in started:
        cluster.down(timeout_s=20)
