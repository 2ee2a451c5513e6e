"""ACLs in ZooKeeper as Kafka 2.8's AclAuthorizer keeps them, and this broker's copy.

How it works: `AclStore` feeds an `AclAuthorizer` (server_common/security/acls.py) from
the znodes of `server_common.zkdata_acls`. `watch()` first watches the two change
paths (/kafka-acl-changes, /kafka-acl-extended-changes), then reads every ACL znode
(`load_all`, the state at start; the notifications present then are already reflected
in it), and from then on re-reads the resource each new `acl_changes_<seq>`
notification names, so an ACL written through any broker applies on every broker as
soon as ZooKeeper delivers the watch (well within a second). Notifications are deleted
once this broker has known them for `change_expiration_ms` (15 minutes, Kafka's
ZkNodeChangeNotificationListener), by whichever broker gets there first.

Writes (`update`, for CreateAcls and DeleteAcls) are read-modify-write loops with
conditional sets, creates and deletes on the znode's version (AclAuthorizer
.updateResourceAcls), so two admins adding ACLs to one resource at once both keep
theirs; each successful write adds its change notification and updates the local copy
at once.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import trio

from server_common import zkdata_acls as zka
from server_common.security.acls import (
    AccessControlEntry,
    AclAuthorizer,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from server_common.zk import BadVersionError, NodeExistsError, NoNodeError, ZkError, ZooKeeper
from server_common.zkdata import ZkDataError

log = logging.getLogger(__name__)

CHANGE_EXPIRATION_MS = 15 * 60 * 1000
MAX_WRITE_ATTEMPTS = 50

Entries = frozenset[AccessControlEntry]


class AclWriteConflict(ZkError):
    """Other writers kept changing the resource's ACLs: no write after many attempts."""


class AclStore:
    def __init__(
        self,
        zk: ZooKeeper,
        authorizer: AclAuthorizer,
        *,
        change_expiration_ms: int = CHANGE_EXPIRATION_MS,
    ) -> None:
        self.zk = zk
        self.authorizer = authorizer
        self.change_expiration_ms = change_expiration_ms

    # -- reading -------------------------------------------------------------------
    async def load_all(self) -> None:
        """Read every ACL znode into the authorizer (replacing what it held)."""
        found: dict[ResourcePattern, Entries] = {}
        for pattern_type, root in zka.ACL_ROOTS.items():
            for type_name in await self.zk.get_children_or_empty(root):
                try:
                    rtype = ResourceType.parse(type_name)
                except ValueError:
                    log.warning("ignoring ACLs of unknown resource type %s/%s", root, type_name)
                    continue
                names = await self.zk.get_children_or_empty(f"{root}/{type_name}")
                patterns = [ResourcePattern(rtype, name, pattern_type) for name in names]
                datas = await self.zk.get_many([zka.acl_path(p) for p in patterns])
                for pattern, got in zip(patterns, datas, strict=True):
                    if got is not None:
                        found[pattern] = self._decode(pattern, got[0])
        for binding_pattern in {b.pattern for b in self.authorizer.bindings()} - set(found):
            self.authorizer.set_acls(binding_pattern, ())
        for pattern, entries in found.items():
            self.authorizer.set_acls(pattern, entries)
        log.info("loaded the ACLs of %d resource pattern(s)", len(found))

    async def reload(self, pattern: ResourcePattern) -> None:
        got = await self.zk.get_or_none(zka.acl_path(pattern))
        self.authorizer.set_acls(pattern, self._decode(pattern, got[0]) if got else frozenset())

    @staticmethod
    def _decode(pattern: ResourcePattern, data: bytes) -> Entries:
        try:
            return zka.decode_acls(zka.acl_path(pattern), data)
        except ZkDataError as exc:
            log.error("ignoring unreadable ACLs: %s", exc)
            return frozenset()

    # -- writing -------------------------------------------------------------------
    async def update(
        self, pattern: ResourcePattern, change: Callable[[Entries], Entries]
    ) -> tuple[Entries, Entries]:
        """Apply `change` to the stored ACLs of `pattern` with a conditional write;
        returns (before, after). Raises `ZkError`s (AclWriteConflict after many losses)."""
        path = zka.acl_path(pattern)
        for _ in range(MAX_WRITE_ATTEMPTS):
            got = await self.zk.get_or_none(path)
            before = self._decode(pattern, got[0]) if got else frozenset()
            after = frozenset(change(before))
            if after == before:
                self.authorizer.set_acls(pattern, after)
                return before, after
            try:
                if got is None:
                    await self.zk.create(path, zka.encode_acls(after), makepath=True)
                elif after:
                    await self.zk.set(path, zka.encode_acls(after), got[1].version)
                else:
                    await self.zk.delete(path, got[1].version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # someone else wrote it meanwhile: read again
            self.authorizer.set_acls(pattern, after)
            await self._announce(pattern)
            return before, after
        raise AclWriteConflict(f"{path}: kept changing under {MAX_WRITE_ATTEMPTS} writes")

    async def _announce(self, pattern: ResourcePattern) -> None:
        prefix, data = zka.encode_acl_change(pattern)
        await self.zk.create(prefix, data, sequence=True, makepath=True)

    # -- watching ------------------------------------------------------------------
    async def watch(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Load every ACL, then apply each announced change (runs until cancelled)."""
        await self.zk.ensure_paths(zka.ACL_PATHS)
        channels = {
            pattern_type: await self.zk.watch_children(root)
            for pattern_type, root in zka.CHANGE_ROOTS.items()
        }
        firsts = {pattern_type: await ch.receive() for pattern_type, ch in channels.items()}
        await self.load_all()
        async with trio.open_nursery() as nursery:
            for pattern_type, channel in channels.items():
                nursery.start_soon(self._follow, pattern_type, channel, firsts[pattern_type])
            task_status.started()

    async def _follow(
        self,
        pattern_type: PatternType,
        changes: trio.MemoryReceiveChannel,
        children: list[str],
    ) -> None:
        root = zka.CHANGE_ROOTS[pattern_type]
        literal = pattern_type == PatternType.LITERAL
        last_seen = max(_sequences(children), default=-1)  # reflected in load_all
        expiry_s = self.change_expiration_ms / 1000
        first_listed: dict[str, float] = dict.fromkeys(children, trio.current_time())
        while True:
            oldest = min(first_listed.values(), default=None)
            wait_s = math.inf if oldest is None else oldest + expiry_s - trio.current_time()
            with trio.move_on_after(max(wait_s, 0)):
                try:
                    children = await changes.receive()
                except trio.EndOfChannel:
                    return
            now = trio.current_time()
            first_listed = {n: first_listed.get(n, now) for n in children}
            sequences = _sequences(children)
            for seq in sorted(s for s in sequences if s > last_seen):
                name = sequences[seq]
                try:
                    got = await self.zk.get_or_none(f"{root}/{name}")
                    if got is not None:
                        pattern = zka.decode_acl_change(f"{root}/{name}", got[0], literal)
                        await self.reload(pattern)
                        log.info("ACLs of %s changed", pattern)
                except ZkDataError as exc:
                    log.warning("ignoring an ACL change notification: %s", exc)
                except ZkError as exc:
                    log.warning("cannot apply ACL change %s (%s); reloading all", name, exc)
                    await self._reload_all_quietly()
                last_seen = max(last_seen, seq)
            expired = sorted(n for n, t in first_listed.items() if now - t >= expiry_s)
            for name in expired:
                first_listed.pop(name, None)
                try:
                    await self.zk.delete(f"{root}/{name}")
                except NoNodeError:
                    pass
                except ZkError as exc:
                    log.warning("cannot delete expired ACL change %s: %s", name, exc)

    async def _reload_all_quietly(self) -> None:
        try:
            await self.load_all()
        except ZkError as exc:
            log.warning("cannot reload the ACLs: %s", exc)


def _sequences(children: list[str]) -> dict[int, str]:
    return {seq: name for name in children if (seq := zka.acl_change_sequence(name)) is not None}
