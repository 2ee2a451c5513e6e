"""One contract, two ZooKeepers: `KazooZooKeeper` on a real ZooKeeper (a chroot of the
test's own, from the `zk_connect` fixture) and `MemoryZooKeeper` (tests/support/memory_zk.py).

Every contract test runs on both backends and asserts the same observable behaviour of the
`server_common.zk.ZooKeeper` seam: errors, stats, sequential names, ephemerals, multis,
watches and session expiry. Only the kazoo half needs ZooKeeper, so only it is marked
`integration`. Kazoo delivers watches from its own thread, so the tests wait for what they
expect with bounded waits (`receive`), and before asserting that nothing more arrived they
let deliveries settle (`Backend.settle`: a short real sleep for kazoo; for memory, until
every task is blocked). Tests make one change at a time and wait for its notification,
because kazoo's recipes coalesce changes that come faster than they re-read.

The last section covers what only the in-memory server can do on demand: cut a client's
connection, and time a session out on Trio's MockClock.
"""

from __future__ import annotations

import inspect
import math

import pytest
import trio
import trio.testing

from server_common.zk import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    SessionEvent,
    ZkConnectionError,
    ZkError,
    ZkOp,
    ZnodeStat,
    ZooKeeper,
)
from server_common.zk_kazoo import KazooZooKeeper
from tests.support.memory_zk import MemoryZooKeeper, MemoryZooKeeperServer
from tests.support.zk_sessions import expire_session

WAIT_S = 5.0  # the longest a real ZooKeeper may take to answer or notify
SETTLE_S = 0.2  # how long kazoo gets to deliver a notification we expect not to come


# -- the two backends ---------------------------------------------------------------------
class KazooBackend:
    """Started `KazooZooKeeper`s on the test's chroot of the real ZooKeeper."""

    def __init__(self, connect: str):
        self.connect = connect
        self.clients: list[KazooZooKeeper] = []

    async def client(self, session_timeout_ms: int = 10_000) -> KazooZooKeeper:
        zk = KazooZooKeeper(self.connect, session_timeout_ms=session_timeout_ms)
        self.clients.append(zk)
        await zk.start()
        return zk

    async def expire(self, zk: KazooZooKeeper) -> None:
        """Expire the session the way ZooKeeper's own tests do: a second handle on it
        takes over the connection and closes the session."""
        await trio.to_thread.run_sync(expire_session, self.connect, zk.session_credentials)

    async def settle(self) -> None:
        await trio.sleep(SETTLE_S)

    async def close(self) -> None:
        for zk in self.clients:
            await zk.stop()


class MemoryBackend:
    """Started `MemoryZooKeeper`s of one `MemoryZooKeeperServer`."""

    def __init__(self) -> None:
        self.server = MemoryZooKeeperServer()
        self.clients: list[MemoryZooKeeper] = []

    async def client(self, session_timeout_ms: int = 10_000) -> MemoryZooKeeper:
        zk = self.server.client(session_timeout_ms=session_timeout_ms)
        self.clients.append(zk)
        await zk.start()
        return zk

    async def expire(self, zk: MemoryZooKeeper) -> None:
        assert self.server.expire_session(zk.session_id)

    async def settle(self) -> None:
        await trio.testing.wait_all_tasks_blocked()

    async def close(self) -> None:
        for zk in self.clients:
            await zk.stop()


Backend = KazooBackend | MemoryBackend


@pytest.fixture(params=[pytest.param("kazoo", marks=pytest.mark.integration), "memory"])
def backend(request) -> Backend:
    if request.param == "kazoo":
        return KazooBackend(request.getfixturevalue("zk_connect"))
    return MemoryBackend()


@pytest.fixture
async def zk(backend: Backend):
    """A started client; every client the backend made is stopped at the end."""
    client = await backend.client()
    yield client
    await backend.close()


# -- helpers --------------------------------------------------------------------------------
async def receive(channel: trio.MemoryReceiveChannel):
    with trio.fail_after(WAIT_S):
        return await channel.receive()


async def assert_nothing_more(backend: Backend, channel: trio.MemoryReceiveChannel) -> None:
    await backend.settle()
    with pytest.raises(trio.WouldBlock):
        channel.receive_nowait()


async def session_changes(zk: ZooKeeper) -> list[SessionEvent]:
    """Session events up to the next CONNECTED, without the SUSPENDED ones (how soon
    kazoo notices a dropped connection, and how often, is timing)."""
    events: list[SessionEvent] = []
    while not events or not events[-1].connected:
        event = await receive(zk.session_events)
        if event.state != "SUSPENDED":
            events.append(event)
    return events


def types(results: list) -> list[type]:
    return [type(result) for result in results]


def one_shot_channel():
    return trio.open_memory_channel(math.inf)


# -- sessions ---------------------------------------------------------------------------------
def test_both_implementations_offer_every_protocol_member_alike():
    members = {name for name in vars(ZooKeeper) if not name.startswith("_")}
    members |= set(ZooKeeper.__annotations__)
    for implementation in (KazooZooKeeper, MemoryZooKeeper):
        for name in sorted(members):
            expected = vars(ZooKeeper).get(name)
            if isinstance(expected, property):
                assert isinstance(getattr(implementation, name), property), name
            elif callable(expected):
                actual = getattr(implementation, name)
                assert inspect.iscoroutinefunction(actual) == inspect.iscoroutinefunction(
                    expected
                ), name
                assert [
                    (p.name, p.kind, p.default)
                    for p in inspect.signature(actual).parameters.values()
                ] == [
                    (p.name, p.kind, p.default)
                    for p in inspect.signature(expected).parameters.values()
                ], name


async def test_start_connects_and_stop_closes_the_session(backend, zk):
    assert zk.connected
    assert zk.session_timeout_ms == 10_000 and isinstance(zk.hosts, str)
    session_id = zk.session_id
    assert isinstance(session_id, int) and session_id > 0
    assert await receive(zk.session_events) == SessionEvent("CONNECTED", session_id)
    send, fired = one_shot_channel()
    await zk.get_and_watch_once("/pending", send, "fired")

    await zk.stop()

    assert not zk.connected and zk.session_id is None
    assert await receive(zk.session_events) == SessionEvent("LOST", None)
    await assert_nothing_more(backend, fired)  # pending one-shot watches never fire
    with pytest.raises(ZkConnectionError):
        await zk.get("/")
    with pytest.raises(ZkConnectionError):
        await zk.get_many(["/"])
    # pipelined writes report the failure per item instead of raising
    assert types(await zk.commit_many([[ZkOp.check("/", -1)]])) == [ZkConnectionError]
    assert types(await zk.set_many([("/", b"", -1)])) == [ZkConnectionError]
    assert types(await zk.create_many([("/x", b"")])) == [ZkConnectionError]


async def test_ephemerals_belong_to_their_session_and_go_with_it(backend, zk):
    owner = await backend.client()
    await owner.create("/live", b"", ephemeral=True)
    await zk.create("/kept", b"")

    stat = await zk.exists("/live")
    assert stat.ephemeral_owner == owner.session_id != zk.session_id
    assert (await zk.exists("/kept")).ephemeral_owner == 0
    with pytest.raises(ZkError) as refused:
        await owner.create("/live/child")
    assert type(refused.value) is ZkError  # NoChildrenForEphemerals has no type of its own

    await owner.stop()
    assert await zk.exists("/live") is None
    assert await zk.exists("/kept") is not None


async def test_session_expiry_drops_ephemerals_and_the_client_comes_back_on_a_new_session(
    backend, zk
):
    owner = await backend.client(session_timeout_ms=2000)
    assert (await receive(owner.session_events)).connected
    old_session = owner.session_id
    await owner.create("/brokers/1", b"", ephemeral=True, makepath=True)
    ids = await zk.watch_children("/brokers")
    assert await receive(ids) == ["1"]
    topics = await owner.watch_children("/topics")
    assert await receive(topics) == []
    config = await owner.watch_data("/config")
    assert await receive(config) == (None, None)
    send, reset = one_shot_channel()
    await owner.get_and_watch_once("/config", send, "reset")

    await backend.expire(owner)

    assert await receive(ids) == []  # others see the ephemeral go
    lost, connected = await session_changes(owner)
    assert lost == SessionEvent("LOST", None)
    assert connected.session_id not in (None, old_session)
    assert owner.connected and owner.session_id == connected.session_id
    assert await receive(reset) == "reset"  # pending one-shot watches fire on the loss
    # the client's watches survive the session (kazoo re-registers them)
    await zk.create("/topics/t", b"")
    assert await receive(topics) == ["t"]
    await zk.create("/config", b"c")
    data, stat = await receive(config)
    assert data == b"c" and stat.version == 0
    # and it can register again, under its new session
    await owner.create("/brokers/1", b"", ephemeral=True)
    assert await receive(ids) == ["1"]
    assert (await zk.exists("/brokers/1")).ephemeral_owner == connected.session_id


# -- reads and writes -------------------------------------------------------------------------
async def test_create_get_exists_and_their_errors(zk):
    assert await zk.create("/a", b"1") == "/a"
    data, stat = await zk.get("/a")
    assert data == b"1"
    assert stat.version == 0 and stat.ephemeral_owner == 0 and stat.czxid > 0
    assert await zk.exists("/a") == stat
    assert await zk.get_or_none("/a") == (b"1", stat)

    with pytest.raises(NoNodeError):
        await zk.get("/missing")
    assert await zk.get_or_none("/missing") is None
    assert await zk.exists("/missing") is None
    with pytest.raises(NodeExistsError):
        await zk.create("/a", b"2")
    with pytest.raises(NoNodeError):
        await zk.create("/x/y", b"")
    with pytest.raises(TypeError):
        await zk.create("/text", "not bytes")

    assert await zk.create("/x/y/z", b"deep", makepath=True) == "/x/y/z"
    assert (await zk.get("/x"))[0] == b"" and (await zk.get("/x/y"))[0] == b""
    assert await zk.get("//x//y/z/") == await zk.get("/x/y/z")  # paths are normalized


async def test_create_with_stat_returns_the_new_znodes_stat(zk):
    created, stat = await zk.create_with_stat("/p/r", b"v", makepath=True)
    assert created == "/p/r"
    assert stat == await zk.exists("/p/r")
    assert stat.version == 0 and stat.ephemeral_owner == 0
    _, ephemeral = await zk.create_with_stat("/p/e", b"", ephemeral=True)
    assert ephemeral.ephemeral_owner == zk.session_id
    assert ephemeral.czxid > stat.czxid
    with pytest.raises(NodeExistsError):
        await zk.create_with_stat("/p/r", b"")


async def test_get_children(zk):
    await zk.create("/c/b", b"", makepath=True)
    await zk.create("/c/a", b"")
    await zk.create("/c/a/deeper", b"")
    assert sorted(await zk.get_children("/c")) == ["a", "b"]
    assert await zk.get_children("/c/b") == []
    assert sorted(await zk.get_children("/")) == ["c"]
    with pytest.raises(NoNodeError):
        await zk.get_children("/missing")
    assert await zk.get_children_or_empty("/missing") == []
    assert sorted(await zk.get_children_or_empty("/c")) == ["a", "b"]


async def test_set_bumps_the_version_and_keeps_the_czxid(zk):
    await zk.create("/n", b"0")
    _, created = await zk.get("/n")

    first = await zk.set("/n", b"1")
    assert first == ZnodeStat(1, created.czxid, 0)
    assert await zk.set("/n", b"2", version=1) == ZnodeStat(2, created.czxid, 0)
    with pytest.raises(BadVersionError):
        await zk.set("/n", b"stale", version=1)
    assert await zk.get("/n") == (b"2", ZnodeStat(2, created.czxid, 0))
    with pytest.raises(NoNodeError):
        await zk.set("/missing", b"")
    with pytest.raises(NoNodeError):
        await zk.set("/missing", b"", version=0)

    await zk.delete("/n")
    await zk.create("/n", b"again")
    _, recreated = await zk.get("/n")
    assert recreated.version == 0 and recreated.czxid > created.czxid


async def test_delete_checks_version_then_children_and_ignores_missing_znodes(zk):
    await zk.delete("/missing")
    await zk.delete("/missing", version=3)
    await zk.create("/d/c", b"", makepath=True)
    with pytest.raises(BadVersionError):  # the version is checked before the children
        await zk.delete("/d", version=5)
    with pytest.raises(NotEmptyError):
        await zk.delete("/d")
    await zk.delete("/d/c", version=0)
    await zk.set("/d", b"x")
    with pytest.raises(BadVersionError):
        await zk.delete("/d", version=0)
    await zk.delete("/d", version=1)
    assert await zk.exists("/d") is None

    await zk.create("/t/a/b", b"", makepath=True)
    await zk.create("/t/c", b"")
    await zk.delete("/t", recursive=True)
    assert await zk.exists("/t") is None
    await zk.delete("/t", recursive=True)


async def test_ensure_path_creates_missing_parents_and_leaves_existing_ones(zk):
    await zk.ensure_path("/e1/e2/e3")
    assert await zk.get_children("/e1") == ["e2"]
    assert (await zk.get("/e1/e2/e3"))[0] == b""
    await zk.set("/e1", b"keep")
    await zk.ensure_path("/e1/e2")
    assert (await zk.get("/e1"))[0] == b"keep"

    await zk.ensure_paths(["/m/1", "/m/2", "/m/1"])
    assert sorted(await zk.get_children("/m")) == ["1", "2"]


async def test_sequential_names_count_the_parents_child_changes(zk):
    await zk.ensure_path("/q")
    assert await zk.create("/q/n-", b"", sequence=True) == "/q/n-0000000000"
    await zk.create("/q/plain", b"")
    assert await zk.create("/q/n-", b"", sequence=True) == "/q/n-0000000002"
    await zk.delete("/q/plain")
    assert await zk.create("/q/n-", b"", sequence=True) == "/q/n-0000000003"
    assert await zk.create("/q/", b"", sequence=True) == "/q/0000000004"
    ephemeral = await zk.create("/q/e-", b"", ephemeral=True, sequence=True)
    assert ephemeral == "/q/e-0000000005"
    assert (await zk.exists(ephemeral)).ephemeral_owner == zk.session_id
    assert await zk.create("/new/s-", b"", sequence=True, makepath=True) == "/new/s-0000000000"


# -- batches ------------------------------------------------------------------------------------
async def test_get_many_and_get_children_many(zk):
    await zk.create("/g/a", b"A", makepath=True)
    await zk.create("/g/b", b"B")
    a, b = await zk.exists("/g/a"), await zk.exists("/g/b")
    assert await zk.get_many(["/g/a", "/g/missing", "/g/b"]) == [(b"A", a), None, (b"B", b)]
    assert await zk.get_many([]) == []
    listed = await zk.get_children_many(["/g", "/g/a", "/missing"])
    assert [sorted(listed[0]), listed[1], listed[2]] == [["a", "b"], [], None]


async def test_set_many_and_create_many_report_per_item(zk):
    await zk.create("/s/a", b"", makepath=True)
    await zk.create("/s/b", b"")
    czxid = (await zk.exists("/s/a")).czxid

    results = await zk.set_many(
        [("/s/a", b"1", 0), ("/s/b", b"1", 7), ("/s/none", b"1", -1), ("/s/a", b"2", 1)]
    )
    assert results[0] == ZnodeStat(1, czxid, 0)
    assert types(results[1:3]) == [BadVersionError, NoNodeError]
    assert results[3] == ZnodeStat(2, czxid, 0)  # in order: it saw the first set

    created = await zk.create_many([("/s/c", b"C"), ("/s/a", b""), ("/nope/x", b""), ("/s/d", b"")])
    assert created[0] == "/s/c" and created[3] == "/s/d"
    assert types(created[1:3]) == [NodeExistsError, NoNodeError]
    assert (await zk.get("/s/c"))[0] == b"C"


async def test_commit_many_results_per_op(zk):
    await zk.create("/c", b"0")
    c = await zk.exists("/c")

    results = await zk.commit_many(
        [
            [ZkOp.check("/c", 0), ZkOp.create("/c/x", b"x"), ZkOp.set("/c", b"1", 0)],
            [ZkOp.create("/c/y", b"y"), ZkOp.create("/c/y/z", b"z"), ZkOp.delete("/c/x")],
            [ZkOp.create("/c/eph", ephemeral=True)],
        ]
    )

    assert results == [
        [True, "/c/x", ZnodeStat(1, c.czxid, 0)],
        ["/c/y", "/c/y/z", True],
        ["/c/eph"],
    ]
    assert await zk.get("/c") == (b"1", ZnodeStat(1, c.czxid, 0))
    assert await zk.exists("/c/x") is None
    y, z = await zk.exists("/c/y"), await zk.exists("/c/y/z")
    assert y.czxid == z.czxid > c.czxid  # a multi is one transaction
    assert (await zk.exists("/c/eph")).ephemeral_owner == zk.session_id
    assert await zk.commit_many([]) == []
    assert await zk.commit_many([[]]) == [[]]


async def test_a_failing_op_rolls_back_its_whole_multi_and_only_that_one(zk):
    await zk.create("/f", b"0")

    results = await zk.commit_many(
        [
            [
                ZkOp.create("/f/new", b""),
                ZkOp.set("/f", b"1", 0),
                ZkOp.check("/f", 5),
                ZkOp.delete("/f/new"),
            ],
            [ZkOp.check("/f", 9), ZkOp.set("/f", b"fenced", -1)],
            [ZkOp.set("/f", b"2", 0)],
            [ZkOp.create("/f/dup"), ZkOp.create("/f/dup")],
            [ZkOp.delete("/f/missing"), ZkOp.create("/f/other")],
        ]
    )

    assert [types(result) for result in results] == [
        [RolledBackError, RolledBackError, BadVersionError, RolledBackError],
        [BadVersionError, RolledBackError],
        [ZnodeStat],
        [RolledBackError, NodeExistsError],
        [NoNodeError, RolledBackError],
    ]
    assert results[2] == [ZnodeStat(1, (await zk.exists("/f")).czxid, 0)]
    assert await zk.get_children("/f") == []
    assert (await zk.get("/f"))[0] == b"2"
    with pytest.raises(ValueError):
        await zk.commit_many([[ZkOp("rename", "/f")]])


# -- watches ---------------------------------------------------------------------------------
async def test_watch_children_sends_every_new_child_list_until_the_znode_goes(backend, zk):
    writer = await backend.client()
    kids = await zk.watch_children("/w/kids")
    assert await receive(kids) == []
    assert await zk.exists("/w/kids") is not None  # the path is ensured first

    await writer.create("/w/kids/a", b"")
    assert await receive(kids) == ["a"]
    await writer.create("/w/kids/b", b"", ephemeral=True)
    assert await receive(kids) == ["a", "b"]
    await writer.set("/w/kids/a", b"data")
    await writer.create("/w/kids/a/grandchild", b"")
    await writer.set("/w/kids", b"own data")
    await assert_nothing_more(backend, kids)  # only the child list counts
    await writer.delete("/w/kids/a", recursive=True)
    assert await receive(kids) == ["b"]
    await writer.stop()  # its ephemeral goes
    assert await receive(kids) == []

    await zk.delete("/w/kids")  # the watch ends, sending nothing
    await zk.create("/w/kids/again", b"", makepath=True)
    await assert_nothing_more(backend, kids)


async def test_watch_data_sends_every_write_and_absence(backend, zk):
    writer = await backend.client()
    data = await zk.watch_data("/wd")
    assert await receive(data) == (None, None)

    await writer.create("/wd", b"1")
    value, created = await receive(data)
    assert value == b"1" and created == await zk.exists("/wd") and created.version == 0
    await writer.set("/wd", b"1")  # the same bytes again still count
    assert await receive(data) == (b"1", ZnodeStat(1, created.czxid, 0))
    await writer.create("/wd/child", b"")
    await assert_nothing_more(backend, data)  # children are not data
    await writer.delete("/wd", recursive=True)
    assert await receive(data) == (None, None)
    await writer.create("/wd", b"again", ephemeral=True)
    value, recreated = await receive(data)
    assert value == b"again" and recreated.ephemeral_owner == writer.session_id


async def test_get_and_watch_once_fires_once(backend, zk):
    writer = await backend.client()
    await zk.create("/o", b"0")
    send, fired = one_shot_channel()

    assert await zk.get_and_watch_once("/o", send, "changed") == await zk.get("/o")
    await writer.create("/o/child", b"")
    await assert_nothing_more(backend, fired)  # children are not the znode's data
    await writer.set("/o", b"1")
    assert await receive(fired) == "changed"
    await writer.set("/o", b"2")
    await assert_nothing_more(backend, fired)

    assert await zk.get_and_watch_once("/later", send, "created") is None
    await writer.create("/later", b"")
    assert await receive(fired) == "created"

    assert (await zk.get_and_watch_once("/o", send, "deleted"))[0] == b"2"
    await writer.delete("/o", recursive=True)
    assert await receive(fired) == "deleted"
    await writer.create("/o", b"")
    await assert_nothing_more(backend, fired)


# -- memory only: connection loss and session timeouts -------------------------------------------
async def started(server: MemoryZooKeeperServer, session_timeout_ms: int = 6000):
    zk = server.client(session_timeout_ms=session_timeout_ms)
    await zk.start()
    assert (await zk.session_events.receive()).connected
    return zk


async def test_memory_disconnect_keeps_the_session_and_watches_catch_up_on_reconnect():
    server = MemoryZooKeeperServer()
    zk, writer = await started(server), await started(server)
    session_id = zk.session_id
    await zk.create("/eph", b"", ephemeral=True)
    kids = await zk.watch_children("/w")
    data = await zk.watch_data("/d")
    assert kids.receive_nowait() == [] and data.receive_nowait() == (None, None)
    send, fired = one_shot_channel()
    await zk.get_and_watch_once("/d", send, "reset")

    zk.disconnect()

    assert not zk.connected and zk.session_id is None
    assert zk.session_events.receive_nowait() == SessionEvent("SUSPENDED", None)
    assert fired.receive_nowait() == "reset"
    with pytest.raises(ZkConnectionError):
        await zk.exists("/eph")
    assert types(await zk.commit_many([[ZkOp.create("/x")]])) == [ZkConnectionError]
    await writer.create("/w/x", b"")
    await writer.create("/d", b"1")
    await writer.set("/d", b"2")
    with pytest.raises(trio.WouldBlock):  # nothing reaches a disconnected client
        kids.receive_nowait()
    assert (await writer.exists("/eph")).ephemeral_owner == session_id

    zk.reconnect()

    assert zk.session_events.receive_nowait() == SessionEvent("CONNECTED", session_id)
    assert kids.receive_nowait() == ["x"]
    assert data.receive_nowait() == (b"2", await zk.exists("/d"))
    with pytest.raises(trio.WouldBlock):  # caught up in one step
        data.receive_nowait()


async def test_memory_session_expires_after_its_timeout_while_disconnected(autojump_clock):
    server = MemoryZooKeeperServer()
    zk, observer = await started(server, session_timeout_ms=6000), await started(server)
    old_session = zk.session_id
    await zk.create("/brokers/1", b"", ephemeral=True, makepath=True)
    ids = await observer.watch_children("/brokers")
    assert await ids.receive() == ["1"]

    zk.disconnect()
    await trio.sleep(5.9)
    assert await observer.exists("/brokers/1") is not None
    await trio.sleep(0.2)
    assert await ids.receive() == []
    assert zk.session_events.receive_nowait().state == "SUSPENDED"
    with pytest.raises(trio.WouldBlock):  # it learns of the expiry only on reconnecting
        zk.session_events.receive_nowait()

    zk.reconnect()
    lost, connected = await session_changes(zk)
    assert lost == SessionEvent("LOST", None)
    assert connected.session_id not in (None, old_session)

    # reconnecting within the timeout keeps the session (and cancels its expiry)
    await zk.create("/brokers/1", b"", ephemeral=True)
    zk.disconnect()
    await trio.sleep(5.0)
    zk.reconnect()
    await trio.sleep(60)
    assert zk.session_id == connected.session_id
    assert (await observer.exists("/brokers/1")).ephemeral_owner == connected.session_id


async def test_memory_expiring_a_disconnected_session_and_stopping_a_disconnected_client(
    autojump_clock,
):
    server = MemoryZooKeeperServer()
    zk, observer = await started(server), await started(server)
    old_session = zk.session_id
    await zk.create("/a", b"", ephemeral=True)
    zk.disconnect()
    assert server.expire_session(old_session)
    assert await observer.exists("/a") is None
    assert not server.expire_session(old_session)
    assert not server.expire_session(None)
    zk.reconnect()
    assert zk.session_events.receive_nowait().state == "SUSPENDED"
    lost, connected = await session_changes(zk)
    assert lost.lost and connected.session_id != old_session

    # a client stopped while cut off cannot close its session: it times out
    await zk.create("/b", b"", ephemeral=True)
    zk.disconnect()
    await zk.stop()
    assert await observer.exists("/b") is not None
    await trio.sleep(6.1)
    assert await observer.exists("/b") is None


async def test_memory_operations_checkpoint_without_taking_time(autojump_clock):
    zk = await started(MemoryZooKeeperServer())
    before = trio.current_time()
    with trio.testing.assert_checkpoints():
        await zk.create("/a", b"")
    with trio.testing.assert_checkpoints():
        await zk.get_many(["/a"])
    with trio.CancelScope() as scope:
        scope.cancel()
        await zk.create("/cancelled", b"")
    assert await zk.exists("/cancelled") is None  # a cancelled operation did nothing
    assert trio.current_time() == before
