"""The ZooKeeper fixture is real: conditional sets, chroot isolation, clean kill."""

import pytest
from kazoo.exceptions import BadVersionError

pytestmark = pytest.mark.integration


def test_conditional_set_rejects_a_stale_version(kazoo_client):
    path = "/brokers/topics/t/partitions/0/state"
    kazoo_client.create(path, b'{"isr":[1,2,3]}', makepath=True)
    _, stat = kazoo_client.get(path)

    kazoo_client.set(path, b'{"isr":[1,2]}', version=stat.version)
    with pytest.raises(BadVersionError):
        kazoo_client.set(path, b'{"isr":[1]}', version=stat.version)

    data, stat2 = kazoo_client.get(path)
    assert data == b'{"isr":[1,2]}'
    assert stat2.version == stat.version + 1


def test_each_test_gets_its_own_chroot(kazoo_client, zookeeper):
    assert kazoo_client.get_children("/") == []
    assert zookeeper.process.poll() is None
