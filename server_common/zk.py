"""The ZooKeeper seam: what the servers and tools may ask of ZooKeeper.

How it works: `ZooKeeper` is the interface every caller codes against (brokers through
`broker.zookeeper.gateway`, the controller through `controller.zk_store`/`leadership`, the
tools' cluster inspector). `server_common.zk_kazoo.KazooZooKeeper` implements it on
kazoo, the only module that imports kazoo; an in-memory implementation for in-process
test clusters lives in `tests/support/memory_zk.py` and passes the same contract tests
(`tests/integration/test_zk_contract.py`). Nothing of kazoo crosses the seam: failures
are this module's `ZkError`s, znode metadata is this module's `ZnodeStat`, session
changes are `SessionEvent`s and multi operations are `ZkOp`s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import trio

__all__ = [
    "BadVersionError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "RolledBackError",
    "SessionEvent",
    "ZkConnectionError",
    "ZkError",
    "ZkOp",
    "ZnodeStat",
    "ZooKeeper",
]


# -- errors ----------------------------------------------------------------------------
class ZkError(Exception):
    """A ZooKeeper operation failed."""


class NoNodeError(ZkError):
    """The znode does not exist."""


class NodeExistsError(ZkError):
    """A create found the znode already there."""


class BadVersionError(ZkError):
    """A conditional set/delete/check found another version."""


class NotEmptyError(ZkError):
    """A delete found children under the znode."""


class RolledBackError(ZkError):
    """An op of a multi that did not take effect because another op of it failed."""


class ZkConnectionError(ZkError):
    """No answer: connection lost, session expired or a time-out. The outcome of a write
    is unknown."""


# -- values ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ZnodeStat:
    """What callers use of a znode's metadata."""

    version: int  # data version: the `version` of a conditional set
    czxid: int  # the transaction that created it (a broker registration's epoch)
    ephemeral_owner: int  # the owning session id; 0 for a persistent znode


@dataclass(frozen=True)
class SessionEvent:
    state: str  # "CONNECTED", "SUSPENDED" or "LOST"
    session_id: int | None

    @property
    def lost(self) -> bool:
        return self.state == "LOST"

    @property
    def connected(self) -> bool:
        return self.state == "CONNECTED"


@dataclass(frozen=True)
class ZkOp:
    """One operation of a ZooKeeper multi (`ZooKeeper.commit_many`).

    `kind` is "check", "create", "set" or "delete"; `version` is the expected znode version
    for check/set/delete (-1: any); `ephemeral` is for creates.
    """

    kind: str
    path: str
    data: bytes = b""
    version: int = -1
    ephemeral: bool = False

    @classmethod
    def check(cls, path: str, version: int) -> ZkOp:
        return cls("check", path, version=version)

    @classmethod
    def create(cls, path: str, data: bytes = b"", *, ephemeral: bool = False) -> ZkOp:
        return cls("create", path, data, ephemeral=ephemeral)

    @classmethod
    def set(cls, path: str, data: bytes, version: int = -1) -> ZkOp:
        return cls("set", path, data, version)

    @classmethod
    def delete(cls, path: str, version: int = -1) -> ZkOp:
        return cls("delete", path, version=version)


# -- the interface -----------------------------------------------------------------------
class ZooKeeper(Protocol):
    """The ZooKeeper operations Tributary uses. Every method raises `ZkError`s only."""

    hosts: str
    session_timeout_ms: int
    session_events: trio.MemoryReceiveChannel[SessionEvent]

    @property
    def connected(self) -> bool: ...

    @property
    def session_id(self) -> int | None: ...

    async def start(self) -> None: ...

    async def stop(self, timeout_s: float = 5.0) -> None: ...

    async def get(self, path: str) -> tuple[bytes, ZnodeStat]: ...

    async def get_or_none(self, path: str) -> tuple[bytes, ZnodeStat] | None: ...

    async def get_children(self, path: str) -> list[str]: ...

    async def get_children_or_empty(self, path: str) -> list[str]: ...

    async def exists(self, path: str) -> ZnodeStat | None: ...

    async def create(
        self,
        path: str,
        value: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> str: ...

    async def create_with_stat(
        self, path: str, value: bytes = b"", *, ephemeral: bool = False, makepath: bool = False
    ) -> tuple[str, ZnodeStat]: ...

    async def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat: ...

    async def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None: ...

    async def ensure_path(self, path: str) -> None: ...

    async def ensure_paths(self, paths: Sequence[str]) -> None: ...

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, ZnodeStat] | None]: ...

    async def get_children_many(self, paths: Sequence[str]) -> list[list[str] | None]: ...

    async def set_many(
        self, writes: Sequence[tuple[str, bytes, int]]
    ) -> list[ZnodeStat | ZkError]: ...

    async def create_many(self, creates: Sequence[tuple[str, bytes]]) -> list[str | ZkError]: ...

    async def commit_many(self, transactions: Sequence[Sequence[ZkOp]]) -> list: ...

    async def get_and_watch_once(
        self, path: str, send: trio.MemorySendChannel, item: Any
    ) -> tuple[bytes, ZnodeStat] | None: ...

    async def watch_children(self, path: str) -> trio.MemoryReceiveChannel: ...

    async def watch_data(self, path: str) -> trio.MemoryReceiveChannel: ...
