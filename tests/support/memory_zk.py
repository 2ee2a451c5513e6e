"""An in-memory ZooKeeper: the `server_common.zk.ZooKeeper` seam without a ZooKeeper
server, so that whole clusters can run in one Trio process on a MockClock.

How it works: `MemoryZooKeeperServer` plays the ensemble: one znode tree, the zxid
counter and the live sessions. `server.client()` makes a `MemoryZooKeeper`, which
implements the `ZooKeeper` Protocol the way `KazooZooKeeper` does on kazoo; both pass the
same contract tests (tests/integration/test_zk_contract.py), which pin down the rules below.

Writes. Every write is a `_Transaction`: its ops are staged over the tree, each seeing the
ones before it, then committed together under one new zxid, or dropped together when one
fails (which is how a multi, `commit_many`, is atomic). A znode's `czxid` is the zxid that
created it, `version` counts its sets, and its `cversion` (bumped by each child creation,
not by deletions) numbers sequential children (`name0000000007`), as in ZooKeeper.
Ephemeral znodes belong to a session and cannot have children. `create(makepath=True)`,
`ensure_path` and recursive deletes write one znode per transaction, as kazoo does.

Watches, as kazoo's recipes deliver them. After each commit every connected client hears
which paths had their data or their child list changed. `watch_children` (kazoo's
ChildrenWatch) sends the sorted child list whenever it differs from the last one sent and
ends, silently, when the znode is deleted. `watch_data` (kazoo's DataWatch) sends
`(data, stat)`, or `(None, None)` while the znode is absent, whenever the znode's last
write differs from the one last sent. Both catch up when the client reconnects, so changes
made while it was cut off arrive then. `get_and_watch_once` leaves a one-shot watch that
fires on the znode's creation, next set or deletion, or when the connection drops (kazoo
fires its pending watches then, though not when the client stops). Items go out with
`send_nowait` into unbounded Trio memory channels, in commit order; items for a closed
receiver are dropped.

Sessions. `start()` opens one (`CONNECTED`); `stop()` closes it and its ephemerals go at
once (`LOST`). `disconnect()` cuts the connection (`SUSPENDED`; operations then raise
`ZkConnectionError`); the session lives on at the server for `session_timeout_ms` of Trio
time, then expires. `reconnect()` restores the connection: `CONNECTED` on the same session,
or, if it expired meanwhile, `LOST` and then `CONNECTED` on a new session. The server's
`expire_session(id)` expires a session at once; a connected client then reconnects at once
on a new session (`SUSPENDED`, `LOST`, `CONNECTED`, as kazoo reports it). `session_id` is
None whenever the client is not connected, and so are the ids in SUSPENDED/LOST events.

Every operation first passes a Trio checkpoint, so that, like I/O, it lets other tasks run
(and a cancelled operation did nothing) yet takes no virtual time. Everything iterates in
insertion or sorted order, so a seeded simulation replays exactly.

Deliberate differences, none of which a correct caller may rely on: child lists come
sorted (ZooKeeper's order is unspecified); operations while disconnected fail at once
with `ZkConnectionError` (kazoo holds them until it reconnects or learns the session
expired); every commit notifies its watches before the writing call returns, so no
intermediate value is skipped (kazoo's recipes re-read after a notification and may skip
values that change faster). There are no ACLs, no chroot and no size limit on data.
"""

from __future__ import annotations

import enum
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import trio

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
)

__all__ = ["MemoryZooKeeper", "MemoryZooKeeperServer"]

T = TypeVar("T")

# Session ids as a ZooKeeper server with myid 1 hands them out (the id in the top byte).
_FIRST_SESSION_ID = (1 << 56) + 1


# -- paths ---------------------------------------------------------------------------------
def _normalize(path: str, *, trailing: bool = False) -> str:
    """`path` as kazoo sends it: absolute, empty components dropped; a trailing "/" is kept
    when `trailing` (a sequential create of "/q/" makes "/q/0000000000")."""
    parts = [part for part in path.split("/") if part]
    if any(part in (".", "..") for part in parts):
        raise ValueError(f"relative paths not allowed: {path!r}")
    normal = "/" + "/".join(parts)
    if trailing and parts and path.endswith("/"):
        normal += "/"
    return normal


def _split(path: str) -> tuple[str, str]:
    """(parent path, name) of a normalized path."""
    parent, _, name = path.rpartition("/")
    return parent or "/", name


def _join(parent: str, name: str) -> str:
    return parent.rstrip("/") + "/" + name


# -- the tree --------------------------------------------------------------------------------
@dataclass
class _Znode:
    data: bytes
    czxid: int  # the zxid that created it
    mzxid: int  # the zxid of its last write (creation or set)
    ephemeral_owner: int = 0  # the owning session; 0 for a persistent znode
    version: int = 0  # sets so far
    cversion: int = 0  # child creations so far: numbers sequential children
    children: set[str] = field(default_factory=set)

    def stat(self) -> ZnodeStat:
        return ZnodeStat(self.version, self.czxid, self.ephemeral_owner)

    def copy(self) -> _Znode:
        return replace(self, children=set(self.children))


@dataclass(frozen=True)
class _Changes:
    """What a committed transaction changed: the paths whose data changed (creation, set,
    deletion) and those whose child list changed (a deleted znode's too)."""

    data: frozenset[str]
    children: frozenset[str]


def _check_data(value: bytes) -> None:
    if not isinstance(value, bytes):
        raise TypeError("Invalid type for 'value' (must be a byte string)")


def _check_version(node: _Znode, version: int, path: str) -> None:
    if version != -1 and version != node.version:
        raise BadVersionError(f"{path} is at version {node.version}, not {version}")


class _Transaction:
    """Writes staged over the committed tree. Each op sees the ones staged before it and
    either stages its change or raises its `ZkError` having staged nothing; `commit`
    applies them all. Changed znodes are copied on first write, so dropping a transaction
    leaves the tree untouched."""

    def __init__(self, nodes: dict[str, _Znode], zxid: int, session_id: int):
        self._nodes = nodes
        self.zxid = zxid
        self._session_id = session_id
        self._staged: dict[str, _Znode | None] = {}  # None: deleted

    def _get(self, path: str) -> _Znode | None:
        return self._staged[path] if path in self._staged else self._nodes.get(path)

    def _existing(self, path: str) -> _Znode:
        node = self._get(path)
        if node is None:
            raise NoNodeError(path)
        return node

    def _writable(self, path: str) -> _Znode:
        """The existing znode at `path`, as this transaction's own copy to change."""
        node = self._existing(path)
        if self._staged.get(path) is not node:
            node = node.copy()
            self._staged[path] = node
        return node

    def check(self, path: str, version: int) -> None:
        _check_version(self._existing(path), version, path)

    def create(self, path: str, data: bytes, *, ephemeral: bool, sequence: bool = False) -> str:
        """Create a znode; returns its path (with the sequence number appended if
        `sequence`). Checked in ZooKeeper's order: parent, existence, ephemeral parent."""
        _check_data(data)
        parent_path, _ = _split(path)
        parent = self._existing(parent_path)
        if sequence:
            path += f"{parent.cversion:010d}"
        if self._get(path) is not None:
            raise NodeExistsError(path)
        if parent.ephemeral_owner:
            raise ZkError(f"NoChildrenForEphemeralsError: {parent_path} is ephemeral")
        parent = self._writable(parent_path)
        parent.children.add(_split(path)[1])
        parent.cversion += 1
        owner = self._session_id if ephemeral else 0
        self._staged[path] = _Znode(data, czxid=self.zxid, mzxid=self.zxid, ephemeral_owner=owner)
        return path

    def set(self, path: str, data: bytes, version: int) -> ZnodeStat:
        _check_data(data)
        _check_version(self._existing(path), version, path)
        node = self._writable(path)
        node.data = data
        node.version += 1
        node.mzxid = self.zxid
        return node.stat()

    def delete(self, path: str, version: int) -> None:
        """Checked in ZooKeeper's order: existence, version, children."""
        if path == "/":
            raise ZkError("BadArgumentsError: the root cannot be deleted")
        node = self._existing(path)
        _check_version(node, version, path)
        if node.children:
            raise NotEmptyError(path)
        parent_path, name = _split(path)
        parent = self._writable(parent_path)
        parent.children.discard(name)
        self._staged[path] = None

    def apply(self, op: ZkOp) -> Any:
        """One op of a multi; its result as kazoo reports it: True for a check or a delete,
        the path for a create, the new `ZnodeStat` for a set."""
        if op.kind == "check":
            self.check(op.path, op.version)
            return True
        if op.kind == "create":
            return self.create(op.path, op.data, ephemeral=op.ephemeral)
        if op.kind == "set":
            return self.set(op.path, op.data, op.version)
        if op.kind == "delete":
            self.delete(op.path, op.version)
            return True
        raise ValueError(f"unknown ZooKeeper op kind {op.kind!r}")

    def commit(self) -> _Changes:
        data: set[str] = set()
        children: set[str] = set()
        for path, after in self._staged.items():
            before = self._nodes.get(path)
            if after is None:
                self._nodes.pop(path, None)
                data.add(path)
                children.add(path)
                continue
            self._nodes[path] = after
            if before is None or after.mzxid != before.mzxid:
                data.add(path)
            if before is None or after.children != before.children:
                children.add(path)
        return _Changes(frozenset(data), frozenset(children))


# -- watches ---------------------------------------------------------------------------------
def _deliver(send: trio.MemorySendChannel, item: Any) -> bool:
    """Send without blocking; False if the receiver is gone (the item is dropped)."""
    try:
        send.send_nowait(item)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return False
    return True


class _ChildrenWatch:
    """kazoo's ChildrenWatch, as `watch_children` uses it: the sorted child list whenever
    it differs from the last one sent; it ends, sending nothing, when the znode is deleted."""

    def __init__(self, path: str):
        self.path = path
        self._send, self.receive = trio.open_memory_channel[list[str]](math.inf)
        self._last: list[str] | None = None
        self.ended = False

    def wants(self, changes: _Changes) -> bool:
        return self.path in changes.children

    def refresh(self, node: _Znode | None) -> None:
        if self.ended:
            return
        if node is None:
            self.ended = True
            return
        children = sorted(node.children)
        if children != self._last:
            self._last = children
            self.ended = not _deliver(self._send, children)


_NOTHING_SENT = object()


class _DataWatch:
    """kazoo's DataWatch, as `watch_data` uses it: `(data, stat)`, or `(None, None)` while
    the znode is absent, whenever the znode's last write differs from the one last sent."""

    def __init__(self, path: str):
        self.path = path
        self._send, self.receive = trio.open_memory_channel[tuple](math.inf)
        self._last_write: object = _NOTHING_SENT  # the mzxid last sent; None: absence
        self.ended = False

    def wants(self, changes: _Changes) -> bool:
        return self.path in changes.data

    def refresh(self, node: _Znode | None) -> None:
        last_write = None if node is None else node.mzxid
        if self.ended or last_write == self._last_write:
            return
        self._last_write = last_write
        item = (None, None) if node is None else (node.data, node.stat())
        self.ended = not _deliver(self._send, item)


@dataclass(frozen=True)
class _OneShotWatch:
    """`get_and_watch_once`'s watch: sends `item` once, on the znode's next data change
    (creation, set, deletion) or when the connection drops."""

    path: str
    send: trio.MemorySendChannel
    item: Any

    def fire(self) -> None:
        _deliver(self.send, self.item)


# -- the server ------------------------------------------------------------------------------
class MemoryZooKeeperServer:
    """The shared state of a ZooKeeper ensemble: the znode tree, the zxid counter and the
    live sessions. Clients come from `client()`; tests inject faults with
    `expire_session()` and the clients' `disconnect()`/`reconnect()`."""

    def __init__(self) -> None:
        self._nodes: dict[str, _Znode] = {"/": _Znode(b"", czxid=0, mzxid=0)}
        self._zxid = 0
        self._session_ids = itertools.count(_FIRST_SESSION_ID)
        self._sessions: dict[int, MemoryZooKeeper] = {}  # live session id -> its client

    def client(self, *, session_timeout_ms: int = 18_000, hosts: str = "memory") -> MemoryZooKeeper:
        """A new, unstarted client of this server."""
        return MemoryZooKeeper(self, hosts=hosts, session_timeout_ms=session_timeout_ms)

    def expire_session(self, session_id: int | None) -> bool:
        """Expire a session now, as the ensemble does when it stops hearing from a client:
        its ephemeral znodes go and the watches on them fire. Its client, if connected,
        sees the connection drop and reconnects at once on a new session; if disconnected,
        it learns of the expiry when it reconnects. False if no such session is alive."""
        client = self._sessions.get(session_id) if session_id is not None else None
        if client is None:
            return False
        connected = client.connected
        if connected:
            client._suspend()
        self._close_session(session_id)
        if connected:
            client._resume()
        return True

    # -- used by the clients -----------------------------------------------------------
    def _node(self, path: str) -> _Znode | None:
        return self._nodes.get(path)

    def _alive(self, session_id: int | None) -> bool:
        return session_id in self._sessions

    def _open_session(self, client: MemoryZooKeeper) -> int:
        session_id = next(self._session_ids)
        self._sessions[session_id] = client
        return session_id

    def _close_session(self, session_id: int) -> None:
        """End a session and delete its ephemeral znodes (one transaction)."""
        del self._sessions[session_id]
        tx = self._begin(session_id)
        for path, node in list(self._nodes.items()):
            if node.ephemeral_owner == session_id:
                tx.delete(path, -1)
        self._commit(tx)

    def _begin(self, session_id: int) -> _Transaction:
        return _Transaction(self._nodes, self._zxid + 1, session_id)

    def _commit(self, tx: _Transaction) -> None:
        changes = tx.commit()
        self._zxid = tx.zxid
        for client in list(self._sessions.values()):
            client._on_commit(changes)


# -- the client ------------------------------------------------------------------------------
class _State(enum.Enum):
    NEW = "new"
    CONNECTED = "connected"
    SUSPENDED = "suspended"  # the connection is down; the session may still be alive
    CLOSED = "closed"


def _outcome(write: Callable[..., T], *args: Any, **kwargs: Any) -> T | ZkError:
    """`write(...)`, or the ZkError it raised (a pipelined batch reports per item)."""
    try:
        return write(*args, **kwargs)
    except ZkError as exc:
        return exc


class MemoryZooKeeper:
    """`ZooKeeper` on a `MemoryZooKeeperServer`: make one with `server.client()`; it starts
    once and stops once, like `KazooZooKeeper`."""

    def __init__(self, server: MemoryZooKeeperServer, *, hosts: str, session_timeout_ms: int):
        self.hosts = hosts
        self.session_timeout_ms = session_timeout_ms
        self._server = server
        self._state = _State.NEW
        self._session: int | None = None  # held, though maybe expired while SUSPENDED
        self._session_send, self.session_events = trio.open_memory_channel[SessionEvent](math.inf)
        self._watches: list[_ChildrenWatch | _DataWatch] = []
        self._one_shots: list[_OneShotWatch] = []
        self._session_timer = trio.CancelScope()  # the session timeout while disconnected

    @property
    def connected(self) -> bool:
        return self._state is _State.CONNECTED

    @property
    def session_id(self) -> int | None:
        return self._session if self.connected else None

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        await trio.lowlevel.checkpoint()
        if self._state is not _State.NEW:
            raise RuntimeError("a MemoryZooKeeper starts once")
        self._session = self._server._open_session(self)
        self._state = _State.CONNECTED
        self._emit("CONNECTED")

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Close the session: its ephemerals go at once. Stopped while disconnected, the
        session cannot be closed and expires at its timeout. (`timeout_s` is unused:
        nothing here can hang.)"""
        if self._state in (_State.CONNECTED, _State.SUSPENDED):
            was_connected = self.connected
            self._state = _State.CLOSED
            self._one_shots.clear()  # kazoo's callbacks have stopped: they never fire
            self._watches.clear()
            self._emit("LOST")
            if was_connected:
                self._server._close_session(self._session)
            self._session = None
        await trio.lowlevel.cancel_shielded_checkpoint()

    # -- fault injection ---------------------------------------------------------------------
    def disconnect(self) -> None:
        """Lose the connection: SUSPENDED, pending one-shot watches fire, operations raise
        `ZkConnectionError`. Unless `reconnect()` comes first, the session expires
        `session_timeout_ms` later (Trio time) and its ephemerals go."""
        if self._state is not _State.CONNECTED:
            return
        self._suspend()
        self._session_timer = trio.CancelScope()
        trio.lowlevel.spawn_system_task(
            self._expire_at_timeout, self._session, self._session_timer, name="zk session timer"
        )

    def reconnect(self) -> None:
        """Restore the connection: CONNECTED on the same session if it is still alive,
        else LOST then CONNECTED on a new session; watches catch up."""
        if self._state is not _State.SUSPENDED:
            return
        self._session_timer.cancel()
        self._resume()

    async def _expire_at_timeout(self, session_id: int, timer: trio.CancelScope) -> None:
        with timer:
            await trio.sleep(self.session_timeout_ms / 1000)
        if not timer.cancel_called:  # a reconnect at the very deadline still wins
            self._server.expire_session(session_id)

    # -- connection state --------------------------------------------------------------------
    def _emit(self, state: str) -> None:
        self._session_send.send_nowait(SessionEvent(state, self.session_id))

    def _fire_one_shots(self) -> None:
        fired, self._one_shots = self._one_shots, []
        for watch in fired:
            watch.fire()

    def _suspend(self) -> None:
        """The connection drops: pending one-shot watches fire (kazoo resets them)."""
        self._state = _State.SUSPENDED
        self._fire_one_shots()
        self._emit("SUSPENDED")

    def _resume(self) -> None:
        """The connection is back, on a new session if ours expired meanwhile."""
        if not self._server._alive(self._session):
            self._emit("LOST")
            self._session = self._server._open_session(self)
        self._state = _State.CONNECTED
        self._emit("CONNECTED")
        for watch in self._watches:
            watch.refresh(self._server._node(watch.path))
        self._drop_ended_watches()

    def _on_commit(self, changes: _Changes) -> None:
        """A transaction committed: fire the watches it concerns (none while disconnected:
        those catch up on reconnection)."""
        if not self.connected:
            return
        fired = [w for w in self._one_shots if w.path in changes.data]
        self._one_shots = [w for w in self._one_shots if w.path not in changes.data]
        for watch in fired:
            watch.fire()
        for watch in self._watches:
            if watch.wants(changes):
                watch.refresh(self._server._node(watch.path))
        self._drop_ended_watches()

    def _drop_ended_watches(self) -> None:
        self._watches = [w for w in self._watches if not w.ended]

    async def _ready(self) -> None:
        """Every operation's start: a checkpoint, then the connection must be up."""
        await trio.lowlevel.checkpoint()
        if self._state is _State.SUSPENDED:
            raise ZkConnectionError("connection lost")
        if self._state is not _State.CONNECTED:
            raise ZkConnectionError(f"not connected: the client is {self._state.value}")

    # -- reads -----------------------------------------------------------------------------
    def _read(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        node = self._server._node(_normalize(path))
        return None if node is None else (node.data, node.stat())

    def _children(self, path: str) -> list[str] | None:
        node = self._server._node(_normalize(path))
        return None if node is None else sorted(node.children)

    async def get(self, path: str) -> tuple[bytes, ZnodeStat]:
        await self._ready()
        result = self._read(path)
        if result is None:
            raise NoNodeError(path)
        return result

    async def get_or_none(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        await self._ready()
        return self._read(path)

    async def get_children(self, path: str) -> list[str]:
        await self._ready()
        children = self._children(path)
        if children is None:
            raise NoNodeError(path)
        return children

    async def get_children_or_empty(self, path: str) -> list[str]:
        await self._ready()
        return self._children(path) or []

    async def exists(self, path: str) -> ZnodeStat | None:
        await self._ready()
        node = self._server._node(_normalize(path))
        return None if node is None else node.stat()

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        await self._ready()
        return [self._read(path) for path in paths]

    async def get_children_many(self, paths: Sequence[str]) -> list[list[str] | None]:
        await self._ready()
        return [self._children(path) for path in paths]

    # -- writes ----------------------------------------------------------------------------
    def _write(self, op: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`op(tx, ...)`, a `_Transaction` method, as a transaction of its own: committed if
        it returns, dropped if it raises."""
        tx = self._server._begin(self._session)
        result = op(tx, *args, **kwargs)
        self._server._commit(tx)
        return result

    def _ensure(self, path: str) -> None:
        """Create `path` and its missing ancestors, empty, one transaction each."""
        missing = []
        while self._server._node(path) is None:
            missing.append(path)
            path = _split(path)[0]
        for each in reversed(missing):
            self._write(_Transaction.create, each, b"", ephemeral=False)

    def _create(
        self, path: str, value: bytes, *, ephemeral: bool, sequence: bool, makepath: bool
    ) -> str:
        path = _normalize(path, trailing=sequence)
        if makepath:
            self._ensure(_split(path)[0])
        return self._write(_Transaction.create, path, value, ephemeral=ephemeral, sequence=sequence)

    def _set(self, path: str, value: bytes, version: int) -> ZnodeStat:
        return self._write(_Transaction.set, _normalize(path), value, version)

    def _multi(self, ops: Sequence[ZkOp]) -> list:
        """One multi's per-op results; if an op fails, nothing is applied and the results
        are its error and RolledBackError for every other op."""
        tx = self._server._begin(self._session)
        results = []
        for index, op in enumerate(ops):
            try:
                results.append(tx.apply(replace(op, path=_normalize(op.path))))
            except ZkError as exc:
                return [
                    exc if i == index else RolledBackError("another op of the multi failed")
                    for i in range(len(ops))
                ]
        self._server._commit(tx)
        return results

    async def create(
        self,
        path: str,
        value: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> str:
        await self._ready()
        return self._create(path, value, ephemeral=ephemeral, sequence=sequence, makepath=makepath)

    async def create_with_stat(
        self, path: str, value: bytes = b"", *, ephemeral: bool = False, makepath: bool = False
    ) -> tuple[str, ZnodeStat]:
        await self._ready()
        created = self._create(path, value, ephemeral=ephemeral, sequence=False, makepath=makepath)
        return created, self._server._node(created).stat()

    async def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        await self._ready()
        return self._set(path, value, version)

    async def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        """Delete a znode; a missing one is fine. `recursive` deletes its subtree, children
        first, one transaction each, ignoring `version` (as kazoo does)."""
        await self._ready()
        path = _normalize(path)
        if recursive:
            self._delete_tree(path)
            return
        try:
            self._write(_Transaction.delete, path, version)
        except NoNodeError:
            pass

    def _delete_tree(self, path: str) -> None:
        node = self._server._node(path)
        if node is None:
            return
        for name in sorted(node.children):
            self._delete_tree(_join(path, name))
        self._write(_Transaction.delete, path, -1)

    async def ensure_path(self, path: str) -> None:
        await self._ready()
        self._ensure(_normalize(path))

    async def ensure_paths(self, paths: Sequence[str]) -> None:
        await self._ready()
        for path in paths:
            self._ensure(_normalize(path))

    # A lost connection fails each item of a pipelined write batch, as in KazooZooKeeper,
    # rather than raising.
    async def set_many(self, writes: Sequence[tuple[str, bytes, int]]) -> list[ZnodeStat | ZkError]:
        try:
            await self._ready()
        except ZkConnectionError as exc:
            return [exc] * len(writes)
        return [_outcome(self._set, path, value, version) for path, value, version in writes]

    async def create_many(self, creates: Sequence[tuple[str, bytes]]) -> list[str | ZkError]:
        try:
            await self._ready()
        except ZkConnectionError as exc:
            return [exc] * len(creates)
        return [
            _outcome(self._create, path, value, ephemeral=False, sequence=False, makepath=False)
            for path, value in creates
        ]

    async def commit_many(self, transactions: Sequence[Sequence[ZkOp]]) -> list:
        """Each transaction atomic on its own; see `KazooZooKeeper.commit_many`."""
        try:
            await self._ready()
        except ZkConnectionError as exc:
            return [exc] * len(transactions)
        return [self._multi(ops) for ops in transactions]

    # -- watches ---------------------------------------------------------------------------
    async def get_and_watch_once(
        self, path: str, send: trio.MemorySendChannel, item: Any
    ) -> tuple[bytes, ZnodeStat] | None:
        await self._ready()
        self._one_shots.append(_OneShotWatch(_normalize(path), send, item))
        return self._read(path)

    async def watch_children(self, path: str) -> trio.MemoryReceiveChannel:
        await self._ready()
        path = _normalize(path)
        self._ensure(path)
        return self._watch(_ChildrenWatch(path))

    async def watch_data(self, path: str) -> trio.MemoryReceiveChannel:
        await self._ready()
        return self._watch(_DataWatch(_normalize(path)))

    def _watch(self, watch: _ChildrenWatch | _DataWatch) -> trio.MemoryReceiveChannel:
        self._watches.append(watch)
        watch.refresh(self._server._node(watch.path))
        return watch.receive
