"""Fixtures of the chaos suite: real-process clusters (the integration suite's
`start_cluster`, and `chaos_cluster`: brokers linked through a `LinkProxy`), each stopped
by pid on every exit path, and the summary tables printed at the end of the session."""

from __future__ import annotations

import os

import pytest

from tests.chaos.checker import Summary
from tests.chaos.cluster import ChaosCluster
from tests.chaos.link_proxy import LinkProxy
from tests.integration.conftest import start_cluster  # noqa: F401  (the same fixture)

# `make chaos` sets these for the long seeded form; `make test` runs the short one.
CHAOS_SEED = int(os.environ.get("CHAOS_SEED", "20261123"))
CHAOS_MINUTES = float(os.environ.get("CHAOS_MINUTES", "0"))  # 0: the short form (~60 s)

_summaries: list[Summary] = []


def record_summary(summary: Summary) -> None:
    """Printed in pytest's terminal summary (whatever the capture mode)."""
    _summaries.append(summary)


def pytest_terminal_summary(terminalreporter):
    for summary in _summaries:
        terminalreporter.write_line("")
        for line in summary.table().splitlines():
            terminalreporter.write_line(line)


def _start(tmp_path_factory, **kwargs) -> tuple[LinkProxy, ChaosCluster]:
    proxy = LinkProxy().start()
    env = kwargs.pop("env", None)
    cluster = ChaosCluster(tmp_path_factory.mktemp("chaos"), proxy, **kwargs)
    if env:
        cluster.env.update(env)
    try:
        cluster.up(timeout_s=90)
    except BaseException:
        cluster.down(timeout_s=20)
        proxy.close()
        raise
    return proxy, cluster


@pytest.fixture(scope="module")
def shared_chaos_cluster(tmp_path_factory):
    """One 3-broker, 2-controller cluster for a whole module (tests restore it)."""
    proxy, cluster = _start(tmp_path_factory)
    try:
        yield cluster
    finally:
        cluster.down(timeout_s=20)
        proxy.close()


@pytest.fixture
def chaos_cluster(tmp_path_factory):
    """`chaos_cluster(env={...}, brokers=3, controllers=2) -> ChaosCluster`, per test."""
    started: list[tuple[LinkProxy, ChaosCluster]] = []

    def start(**kwargs) -> ChaosCluster:
        started.append(_start(tmp_path_factory, **kwargs))
        return started[-1][1]

    try:
        yield start
    finally:
        for proxy, cluster in started:
            cluster.down(timeout_s=20)
            proxy.close()
