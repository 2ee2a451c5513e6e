"""The ACL store (broker/zookeeper/acls.py) over the in-memory ZooKeeper: concurrent
admins adding to one resource lose nothing (conditional writes), a watching broker
applies every change, and the znodes' encodings (server_common/zkdata_acls.py) are
Kafka 2.8's and refuse garbage with a clear error."""

from __future__ import annotations

import json

import pytest
import trio

from broker.zookeeper.acls import AclStore
from server_common import zkdata_acls as zka
from server_common.security.acls import (
    AccessControlEntry,
    AclAuthorizer,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from server_common.zkdata import ZkDataError
from tests.support.memory_zk import MemoryZooKeeperServer

ORDERS = ResourcePattern(ResourceType.TOPIC, "orders")
PREFIX = ResourcePattern(ResourceType.GROUP, "app-", PatternType.PREFIXED)


def read_for(user: str) -> AccessControlEntry:
    return AccessControlEntry(user, "*", AclOperation.READ, PermissionType.ALLOW)


async def started_store(server: MemoryZooKeeperServer) -> AclStore:
    zk = server.client()
    await zk.start()
    return AclStore(zk, AclAuthorizer())


async def test_concurrent_admins_keep_every_acl(autojump_clock):
    server = MemoryZooKeeperServer()
    stores = [await started_store(server) for _ in range(3)]
    users = [f"User:u{i}" for i in range(30)]

    async with trio.open_nursery() as nursery:
        for i, user in enumerate(users):
            store = stores[i % 3]
            nursery.start_soon(store.update, ORDERS, lambda old, e=read_for(user): old | {e})
    got = await stores[0].zk.get(zka.acl_path(ORDERS))
    assert zka.decode_acls("x", got[0]) == {read_for(u) for u in users}
    changes = await stores[0].zk.get_children("/kafka-acl-changes")
    assert len(changes) == 30


async def test_a_watching_broker_loads_at_start_and_applies_changes(autojump_clock):
    server = MemoryZooKeeperServer()
    admin = await started_store(server)
    await admin.update(ORDERS, lambda old: old | {read_for("User:bob")})
    broker = await started_store(server)
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.watch)
        assert broker.authorizer.acls_of(ORDERS) == {read_for("User:bob")}  # loaded at start

        await admin.update(PREFIX, lambda old: old | {read_for("User:carol")})
        await admin.update(ORDERS, lambda old: frozenset())
        with trio.fail_after(5):
            while broker.authorizer.acls_of(PREFIX) != {read_for("User:carol")} or (
                broker.authorizer.acls_of(ORDERS)
            ):
                await trio.sleep(0.01)
        assert await admin.zk.exists(zka.acl_path(ORDERS)) is None  # emptied: deleted
        assert broker.authorizer.authorize(
            "User:carol", "h", AclOperation.READ, ResourceType.GROUP, "app-1"
        )
        nursery.cancel_scope.cancel()


async def test_old_notifications_are_purged(autojump_clock):
    server = MemoryZooKeeperServer()
    admin = await started_store(server)
    broker = await started_store(server)
    broker.change_expiration_ms = 1000
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.watch)
        await admin.update(ORDERS, lambda old: old | {read_for("User:bob")})
        await trio.sleep(5)
        assert await admin.zk.get_children("/kafka-acl-changes") == []
        nursery.cancel_scope.cancel()


def test_znodes_are_kafkas():
    entries = {
        AccessControlEntry("User:bob", "*", AclOperation.READ, PermissionType.ALLOW),
        AccessControlEntry(
            "User:*", "10.0.0.1", AclOperation.IDEMPOTENT_WRITE, PermissionType.DENY
        ),
    }
    data = zka.encode_acls(entries)
    assert json.loads(data) == {
        "version": 1,
        "acls": [
            {"principal": "User:*", "permissionType": "Deny", "operation": "IdempotentWrite",
             "host": "10.0.0.1"},
            {"principal": "User:bob", "permissionType": "Allow", "operation": "Read",
             "host": "*"},
        ],
    }  # fmt: skip
    assert zka.decode_acls("p", data) == entries
    assert zka.acl_path(ORDERS) == "/kafka-acl/Topic/orders"
    assert zka.acl_path(PREFIX) == "/kafka-acl-extended/prefixed/Group/app-"
    assert zka.acl_path(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx")) == (
        "/kafka-acl/TransactionalId/tx"
    )
    assert zka.encode_acl_change(ORDERS) == ("/kafka-acl-changes/acl_changes_", b"TOPIC:orders")
    path, event = zka.encode_acl_change(PREFIX)
    assert path == "/kafka-acl-extended-changes/acl_changes_"
    assert json.loads(event) == {
        "version": 1, "resourceType": "GROUP", "name": "app-", "patternType": "PREFIXED"
    }  # fmt: skip
    assert zka.decode_acl_change("p", event, literal=False) == PREFIX
    # Older Kafkas wrote "Topic:name"; any case reads back.
    assert zka.decode_acl_change("p", b"Topic:orders", literal=True) == ORDERS


@pytest.mark.parametrize(
    "data", [b"", b"{", b'{"acls": [{"principal": 1}]}', b'{"acls": [{"principal": "User:a", '
    b'"host": "*", "operation": "Fly", "permissionType": "Allow"}]}', b"\xff"],
)  # fmt: skip
def test_unreadable_acls_are_a_clear_error(data):
    if not data:
        assert zka.decode_acls("p", data) == frozenset()
        return
    with pytest.raises(ZkDataError, match="p: not an ACL list"):
        zka.decode_acls("p", data)


@pytest.mark.parametrize("data", [b"", b"TOPIC", b"Planet:x", b"\xff"])
def test_unreadable_changes_are_a_clear_error(data):
    with pytest.raises(ZkDataError, match="not an ACL change"):
        zka.decode_acl_change("p", data, literal=True)
