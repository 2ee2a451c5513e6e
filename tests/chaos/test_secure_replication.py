"""Replication, failover and the replication matrix with every listener SASL_SSL (issue
27): one secure chaos cluster (3 brokers, 2 controllers; native, Kafka and REPLICATION
listeners all SASL_SSL, the authorizer on, brokers and controllers logging in to each
other with PLAIN, the chaos clients as `admin` with SCRAM-SHA-512), the replication link
between brokers running through the link proxy with TLS end to end.

The cells are the plaintext ones, called on this cluster (not copies): one of each
failure mode of the matrix (test_replication_matrix.py's `OVER_SASL_SSL`, which the
plaintext module leaves to this one in `make test`), the leader <-> follower link cut,
and the SIGKILL failover of the active controller (test_failover.py; a leader's SIGKILL
is the hard_bounce x leader cell here, and test_secure_listeners.py's failover). Each
asserts what the plaintext one does: no acknowledged record lost, none read at another
offset, the replicas identical; the cells' summary table is this module's own.
"""

from __future__ import annotations

import pytest

from tests.chaos import test_failover as failover
from tests.chaos import test_replication_matrix as matrix
from tests.chaos.checker import Summary
from tests.chaos.conftest import _start, record_summary
from tests.integration.helpers import create_topic

pytestmark = pytest.mark.integration


SUMMARY = Summary("replication matrix over SASL_SSL (acks=all, RF 3, min ISR 2)")


@pytest.fixture(scope="module", autouse=True)
def _own_summary():
    """The matrix cells record their rows in this module's table, not the plaintext one."""
    saved, matrix.SUMMARY = matrix.SUMMARY, SUMMARY
    try:
        yield
    finally:
        matrix.SUMMARY = saved
        if SUMMARY.rows:
            record_summary(SUMMARY)


@pytest.fixture(scope="module")
def secure_cluster(tmp_path_factory):
    proxy, cluster = _start(tmp_path_factory, secure=True)
    try:
        yield cluster
    finally:
        cluster.down(timeout_s=20)
        proxy.close()


def test_every_listener_is_sasl_ssl_and_replication_goes_through_the_proxy(secure_cluster):
    cluster = secure_cluster
    for broker in cluster.state.brokers():
        config = open(broker.config_path).read()
        assert "PLAINTEXT:SASL_SSL,KAFKA:SASL_SSL,REPLICATION:SASL_SSL" in config
    topic = matrix.make_topic(cluster, "secure-proxied")
    assert cluster.proxy.connections > 0  # followers and the controller came through it
    assert cluster.partition(topic, 0).isr


@pytest.mark.parametrize(("mode", "target"), matrix.OVER_SASL_SSL)
def test_matrix_cell_over_sasl_ssl(secure_cluster, mode, target):
    matrix.test_replication_matrix_cell(secure_cluster, mode, target)


def test_cut_link_over_sasl_ssl(secure_cluster):
    matrix.test_cut_link_drops_the_follower_from_the_isr_until_healed(secure_cluster)


@pytest.fixture
def failover_cluster(secure_cluster):
    """The secure cluster with test_failover's topic (created once), at full health."""
    cluster = secure_cluster
    if cluster.view().partition(failover.TOPIC, 0) is None:
        create_topic(cluster, failover.TOPIC, failover.PARTITIONS, 3, **{"min.insync.replicas": 2})
    cluster.restore([failover.TOPIC])
    return cluster


def test_controller_sigkill_failover_over_sasl_ssl(failover_cluster):
    failover.test_sigkill_of_the_active_controller(failover_cluster, after_s=3.0)


def test_no_inter_broker_login_was_refused(secure_cluster):
    """Through every fault above, the brokers' fetchers and the controllers logged in
    each time they (re)connected: no login of theirs was refused, and no broker warned
    that brokers do not authenticate."""
    for info in secure_cluster.state.processes:
        if info.role == "zookeeper":
            continue
        log = open(info.log_path, errors="replace").read()
        assert "SASL_AUTHENTICATION_FAILED" not in log, info.log_path
        assert "do not authenticate" not in log, info.log_path
