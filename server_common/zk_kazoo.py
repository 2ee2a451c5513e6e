"""`ZooKeeper` on kazoo: the one module that talks to kazoo.

How it works: kazoo runs its own connection thread and calls watch callbacks there.
Blocking kazoo calls (`get`, `set`, `create`...) run through `trio.to_thread.run_sync`;
callbacks (children/data watches, session state changes) are handed to Trio with
`trio_token.run_sync_soon(channel.send_nowait, item)` into unbounded memory channels
(watch events are few and coalescible: consumers can drain to the latest value).
Kazoo's exceptions, stats and states are translated into the seam's types
(`server_common.zk`) on the way out, results of multis and pipelined batches included.

A connect string may end in a chroot (`host:port,host:port/tributary`): every path is
then under it. `start()` creates the chroot znode first when it is absent (through a
short session without the chroot), as Kafka's `createChrootIfNecessary` does.

Batch reads (`get_many`) use kazoo's async API inside one worker thread: all requests
are written to the session before waiting for any answer, so reading thousands of
znodes takes one round trip's latency plus transfer, not thousands of round trips. The
controller depends on this to fail over in seconds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import trio
from kazoo import exceptions as kazoo_errors
from kazoo.client import KazooClient, KazooState
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.retry import KazooRetry

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

_TRANSLATED: tuple[tuple[type[BaseException], type[ZkError]], ...] = (
    (kazoo_errors.NoNodeError, NoNodeError),
    (kazoo_errors.NodeExistsError, NodeExistsError),
    (kazoo_errors.BadVersionError, BadVersionError),
    (kazoo_errors.NotEmptyError, NotEmptyError),
    (kazoo_errors.RolledBackError, RolledBackError),
    (kazoo_errors.RuntimeInconsistency, RolledBackError),
    (kazoo_errors.ConnectionLoss, ZkConnectionError),
    (kazoo_errors.SessionExpiredError, ZkConnectionError),
    (kazoo_errors.OperationTimeoutError, ZkConnectionError),
    (kazoo_errors.SessionMovedError, ZkConnectionError),
    (KazooTimeoutError, ZkConnectionError),
)


def _translate(exc: BaseException) -> BaseException:
    """Kazoo's exception as this module's (other exceptions pass unchanged)."""
    for kazoo_type, ours in _TRANSLATED:
        if isinstance(exc, kazoo_type):
            error = ours(str(exc) or type(exc).__name__)
            error.__cause__ = exc
            return error
    if isinstance(exc, kazoo_errors.KazooException):
        error = ZkError(f"{type(exc).__name__}: {exc}")
        error.__cause__ = exc
        return error
    return exc


def _stat(kazoo_stat: Any) -> ZnodeStat:
    return ZnodeStat(kazoo_stat.version, kazoo_stat.czxid, kazoo_stat.ephemeralOwner)


class KazooZooKeeper:
    """`ZooKeeper` on kazoo: real ZooKeeper servers at `hosts` (a connect string)."""

    def __init__(
        self,
        hosts: str,
        *,
        session_timeout_ms: int = 18_000,
        connection_timeout_ms: int = 18_000,
    ):
        self.hosts = hosts
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        self._kazoo = KazooClient(
            hosts=hosts,
            timeout=session_timeout_ms / 1000,
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
            command_retry=KazooRetry(max_tries=3, delay=0.05, max_delay=0.5),
        )
        self._token: trio.lowlevel.TrioToken | None = None
        self._session_send, self.session_events = trio.open_memory_channel[SessionEvent](math.inf)
        self._kazoo.add_listener(self._on_state)

    @property
    def connected(self) -> bool:
        return self._kazoo.connected

    @property
    def session_id(self) -> int | None:
        sid = self._kazoo.client_id
        return sid[0] if sid else None

    @property
    def session_credentials(self) -> tuple[int, bytes] | None:
        """(session id, password): another client given these shares the session (tests
        use it to expire a session on purpose)."""
        return self._kazoo.client_id

    # -- lifecycle -----------------------------------------------------------------
    async def start(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        timeout = self.connection_timeout_ms / 1000
        chroot = split_chroot(self.hosts)[1]
        if chroot:
            await self._run(_ensure_chroot, self.hosts, chroot, timeout)
        await self._run(self._kazoo.start, timeout=timeout)

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Close the session (its ephemeral znodes go at once). Bounded: with ZooKeeper
        gone, kazoo could otherwise wait a long time; the thread is then abandoned."""

        def close() -> None:
            try:
                self._kazoo.stop()
            finally:
                self._kazoo.close()

        with trio.CancelScope(shield=True), trio.move_on_after(timeout_s):
            await trio.to_thread.run_sync(close, abandon_on_cancel=True)

    def _hand_to_trio(self, send, item) -> None:
        token = self._token
        if token is None:
            return
        try:
            token.run_sync_soon(send.send_nowait, item)
        except (trio.RunFinishedError, trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    def _on_state(self, state: str) -> None:  # runs on a kazoo thread
        sid = self._kazoo.client_id
        name = {KazooState.LOST: "LOST", KazooState.CONNECTED: "CONNECTED"}.get(state, "SUSPENDED")
        self._hand_to_trio(self._session_send, SessionEvent(name, sid[0] if sid else None))

    # -- plain operations ------------------------------------------------------------
    async def _run(self, fn, *args, **kwargs):
        """`fn(*args, **kwargs)` in a worker thread, kazoo's errors translated."""

        def call():
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                raise _translate(exc) from None

        return await trio.to_thread.run_sync(call)

    async def get(self, path: str) -> tuple[bytes, ZnodeStat]:
        data, stat = await self._run(self._kazoo.get, path)
        return data, _stat(stat)

    async def get_or_none(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        try:
            return await self.get(path)
        except NoNodeError:
            return None

    async def get_children(self, path: str) -> list[str]:
        return await self._run(self._kazoo.get_children, path)

    async def get_children_or_empty(self, path: str) -> list[str]:
        try:
            return await self.get_children(path)
        except NoNodeError:
            return []

    async def exists(self, path: str) -> ZnodeStat | None:
        stat = await self._run(self._kazoo.exists, path)
        return None if stat is None else _stat(stat)

    async def create(
        self,
        path: str,
        value: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> str:
        return await self._run(
            self._kazoo.create,
            path,
            value,
            ephemeral=ephemeral,
            sequence=sequence,
            makepath=makepath,
        )

    async def create_with_stat(
        self, path: str, value: bytes = b"", *, ephemeral: bool = False, makepath: bool = False
    ) -> tuple[str, ZnodeStat]:
        created, stat = await self._run(
            self._kazoo.create,
            path,
            value,
            ephemeral=ephemeral,
            makepath=makepath,
            include_data=True,
        )
        return created, _stat(stat)

    async def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        return _stat(await self._run(self._kazoo.set, path, value, version=version))

    async def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        try:
            await self._run(self._kazoo.delete, path, version=version, recursive=recursive)
        except NoNodeError:
            pass

    async def ensure_path(self, path: str) -> None:
        await self._run(self._kazoo.ensure_path, path)

    async def ensure_paths(self, paths: Sequence[str]) -> None:
        def ensure_all() -> None:
            for path in paths:
                self._kazoo.ensure_path(path)

        await self._run(ensure_all)

    # -- pipelined batches -------------------------------------------------------------
    def _collect(self, pending: list, on_error: Callable[[BaseException], Any]) -> list:
        """Wait for kazoo async results in order; a failed one becomes `on_error(exc)`."""
        results = []
        for item in pending:
            try:
                results.append(item.get(timeout=self.session_timeout_ms / 1000))
            except Exception as exc:  # per item: NoNodeError, BadVersionError...
                results.append(on_error(_translate(exc)))
        return results

    async def _pipelined(self, start: Callable[[], list], on_error: Callable[[BaseException], Any]):
        return await self._run(lambda: self._collect(start(), on_error))

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        """Read many znodes pipelined; None where a znode does not exist."""
        results = await self._pipelined(
            lambda: [self._kazoo.get_async(p) for p in paths], _none_if_missing
        )
        return [None if r is None else (r[0], _stat(r[1])) for r in results]

    async def get_children_many(self, paths: Sequence[str]) -> list[list[str] | None]:
        return await self._pipelined(
            lambda: [self._kazoo.get_children_async(p) for p in paths], _none_if_missing
        )

    async def set_many(self, writes: Sequence[tuple[str, bytes, int]]) -> list[ZnodeStat | ZkError]:
        """Pipelined conditional sets: (path, value, version) -> new stat or the error."""
        results = await self._pipelined(
            lambda: [self._kazoo.set_async(p, v, version=ver) for p, v, ver in writes],
            lambda exc: exc,
        )
        return [r if isinstance(r, ZkError) else _stat(r) for r in results]

    async def create_many(self, creates: Sequence[tuple[str, bytes]]) -> list[str | ZkError]:
        return await self._pipelined(
            lambda: [self._kazoo.create_async(p, v) for p, v in creates], lambda exc: exc
        )

    # -- transactions ------------------------------------------------------------------
    async def commit_many(self, transactions: Sequence[Sequence[ZkOp]]) -> list:
        """Pipelined multis (ZooKeeper transactions), each atomic on its own.

        One result per transaction: the list of per-op results when the request was
        answered (per op: its value, a `ZnodeStat` for sets, when the multi committed;
        when it did not, the failing op's `ZkError`, e.g. BadVersionError, and
        RolledBackError for the others), or a single `ZkError` when the request itself
        failed (connection loss, session expiry).
        """

        def commit_all():
            pending = []
            for ops in transactions:
                tx = self._kazoo.transaction()
                for op in ops:
                    if op.kind == "check":
                        tx.check(op.path, op.version)
                    elif op.kind == "create":
                        tx.create(op.path, op.data, ephemeral=op.ephemeral)
                    elif op.kind == "set":
                        tx.set_data(op.path, op.data, op.version)
                    elif op.kind == "delete":
                        tx.delete(op.path, op.version)
                    else:
                        raise ValueError(f"unknown ZooKeeper op kind {op.kind!r}")
                pending.append(tx.commit_async())
            results: list[Any] = []
            for item in pending:
                try:
                    answer = item.get(timeout=self.session_timeout_ms / 1000)
                except Exception as exc:  # the whole multi failed (connection, session)
                    results.append(_translate(exc))
                    continue
                results.append([_op_result(r) for r in answer])
            return results

        return await self._run(commit_all)

    async def get_and_watch_once(
        self, path: str, send: trio.MemorySendChannel, item
    ) -> tuple[bytes, ZnodeStat] | None:
        """Read a znode (None if absent) and leave a one-shot ZooKeeper watch on it: its
        next change, creation or deletion sends `item` to `send`, once."""

        def on_change(_event) -> None:  # runs on a kazoo thread
            self._hand_to_trio(send, item)

        def read():
            try:
                return self._kazoo.get(path, watch=on_change)
            except kazoo_errors.NoNodeError:
                if self._kazoo.exists(path, watch=on_change) is None:
                    return None
                return self._kazoo.get(path)  # created in between; the watch is set

        result = await self._run(read)
        return None if result is None else (result[0], _stat(result[1]))

    # -- watches -----------------------------------------------------------------------
    async def watch_children(self, path: str) -> trio.MemoryReceiveChannel:
        """A channel receiving the full child list now and on every change.

        The watch survives session loss (kazoo re-registers it). If the znode is deleted
        the watch ends silently (nothing more arrives, even if it is created again): watch
        only znodes that live as long as the watcher (the controller's are permanent).
        """
        send, receive = trio.open_memory_channel(math.inf)

        def on_children(children):
            self._hand_to_trio(send, sorted(children or []))
            return True

        def register() -> None:
            self._kazoo.ensure_path(path)
            ChildrenWatch(self._kazoo, path, on_children, send_event=False)

        await self._run(register)
        return receive

    async def watch_data(self, path: str) -> trio.MemoryReceiveChannel:
        """A channel receiving (data, stat) now and on every change; (None, None) if absent."""
        send, receive = trio.open_memory_channel(math.inf)

        def on_data(data, stat, *_):
            self._hand_to_trio(send, (data, None if stat is None else _stat(stat)))
            return True

        await self._run(lambda: DataWatch(self._kazoo, path, on_data))
        return receive


def split_chroot(hosts: str) -> tuple[str, str]:
    """("host:port,host:port", "/chroot") of a connect string ("" when it has none; a
    trailing "/" alone is no chroot)."""
    servers, slash, chroot = hosts.partition("/")
    chroot = (slash + chroot).rstrip("/")
    return servers, chroot


def _ensure_chroot(hosts: str, chroot: str, timeout_s: float) -> None:
    """Create the chroot znode (and its parents) if absent, in a session without it."""
    root = KazooClient(hosts=split_chroot(hosts)[0], timeout=timeout_s)
    root.start(timeout=timeout_s)
    try:
        root.ensure_path(chroot)
    finally:
        root.stop()
        root.close()


def _op_result(result: Any) -> Any:
    """One op's result of a multi, in this module's types."""
    if isinstance(result, BaseException):
        return _translate(result)
    if hasattr(result, "czxid") and hasattr(result, "ephemeralOwner"):
        return _stat(result)
    return result


def _none_if_missing(exc: BaseException) -> None:
    if isinstance(exc, NoNodeError):
        return None
    raise exc
