"""Becoming (and stopping being) the active controller, through ZooKeeper.

How it works (Kafka 2.x's registerControllerAndIncrementControllerEpoch): one multi
creates the ephemeral /controller znode (our id, host and port, so brokers can send us
ControlledShutdown) and sets /controller_epoch to epoch + 1, conditional on the version
we read. Both happen or neither: there is never a /controller whose epoch was not bumped.
If /controller exists, someone else is active: we lose and wait for its watch. If the
epoch moved under us, we read it again and retry. /controller_epoch is created (with 0,
so the first controller's epoch is 1) if absent.

The version of /controller_epoch we set is the fence: every later write of this term is
a multi that first checks it (`zk_store`).

`resign` deletes /controller only if this ZooKeeper session owns it, so that a controller
that lost its term never removes its successor's registration.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from server_common import zkdata
from server_common.zk import BadVersionError, NodeExistsError, NoNodeError, ZkOp, ZooKeeper

log = logging.getLogger(__name__)

# Attempts when other controllers keep bumping the epoch at the same moment.
MAX_ELECTION_ATTEMPTS = 10


@dataclass(frozen=True)
class Term:
    """A won election: our controller epoch and the /controller_epoch version fencing it."""

    epoch: int
    epoch_zk_version: int


def _parse_epoch(data: bytes) -> int:
    try:
        return int(data.decode().strip())
    except (UnicodeDecodeError, ValueError):
        log.warning("unreadable /controller_epoch %r: treating it as 0", data)
        return 0


async def try_to_become_controller(
    zk: ZooKeeper, controller_id: int, host: str, port: int, now_ms: int
) -> Term | None:
    """The new term if we won, None if another controller is active."""
    registration = zkdata.encode_controller(controller_id, now_ms, host, port)
    for _ in range(MAX_ELECTION_ATTEMPTS):
        current = await zk.get_or_none(zkdata.CONTROLLER_EPOCH)
        if current is None:
            try:
                await zk.create(zkdata.CONTROLLER_EPOCH, b"0", makepath=True)
            except NodeExistsError:
                pass
            continue
        data, stat = current
        epoch = _parse_epoch(data) + 1
        (result,) = await zk.commit_many(
            [
                [
                    ZkOp.create(zkdata.CONTROLLER, registration, ephemeral=True),
                    ZkOp.set(zkdata.CONTROLLER_EPOCH, str(epoch).encode(), stat.version),
                ]
            ]
        )
        if isinstance(result, Exception):
            raise result
        created, bumped = result
        if not isinstance(created, Exception) and not isinstance(bumped, Exception):
            return Term(epoch=epoch, epoch_zk_version=bumped.version)
        if isinstance(created, NodeExistsError):
            owner = await zk.exists(zkdata.CONTROLLER)
            if owner is not None and owner.ephemeral_owner == zk.session_id:
                # Left over from an earlier term of this very session: clear it, retry.
                await resign(zk)
                continue
            return None
        if isinstance(bumped, (BadVersionError, NoNodeError)):
            continue  # the epoch moved under us: read it again
        raise created if isinstance(created, Exception) else bumped
    log.warning("gave up competing for /controller after %d attempts", MAX_ELECTION_ATTEMPTS)
    return None


async def resign(zk: ZooKeeper) -> bool:
    """Delete /controller if this session owns it; True if it did."""
    stat = await zk.exists(zkdata.CONTROLLER)
    if stat is None or stat.ephemeral_owner != zk.session_id:
        return False
    await zk.delete(zkdata.CONTROLLER, version=stat.version)
    return True


async def active_controller_id(zk: ZooKeeper) -> int | None:
    """Who holds /controller now (None: nobody, or unreadable)."""
    result = await zk.get_or_none(zkdata.CONTROLLER)
    if result is None:
        return None
    try:
        return zkdata.ControllerRegistration.decode(result[0]).controller_id
    except zkdata.ZkDataError:
        return None
