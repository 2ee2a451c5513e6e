"""Shared fixtures: a real ZooKeeper per test session, a fresh chroot per test.

`zookeeper` starts Debian's ZooKeeper once for the whole run (about a second) and kills
that pid at the end. `zk_connect` gives each test its own chroot under it, so tests never
see each other's znodes; `kazoo_client` is a started KazooClient on that chroot.
"""

from __future__ import annotations

import uuid

import pytest

from tools.cluster.zookeeper import ZooKeeperServer


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
