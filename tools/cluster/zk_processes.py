"""The local cluster's ZooKeeper processes: one server, or an ensemble's members.

How it works: `zookeeper_infos` lays out the `ProcessInfo`s the launcher saves in
cluster.json (`zookeeper`, or `zookeeper-1`..N each with a client, quorum and election
port); `start_zookeeper` starts one of them from those saved ports (so a restarted
member rejoins the same ensemble) without waiting, since a member serves only within a
quorum; `wait_zookeeper` waits until ZooKeeper serves (a quorum is up), or until each
given server serves again after a restart.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from tools.cluster.ensemble import member, wait_quorum
from tools.cluster.state import ProcessInfo
from tools.cluster.zookeeper import PeerPorts, ZooKeeperError

# With a base port, the servers' client ports are 2181, 2182... (docker-compose's).
CLIENT_BASE_PORT = 2181


def ensemble_settings(zookeepers: int, zk_chroot: str | None) -> str:
    """The chroot to append to the connect string ("" for none), or a ValueError saying
    what is wrong with the arguments (`cluster up --zookeepers N --zk-chroot PATH`)."""
    if zookeepers < 1:
        raise ValueError(f"--zookeepers {zookeepers}: need at least one")
    if zk_chroot is None:
        return ""
    parts = zk_chroot.rstrip("/").split("/")
    if not zk_chroot.startswith("/") or any(p in ("", ".", "..") for p in parts[1:]):
        raise ValueError(f"--zk-chroot {zk_chroot!r}: expected a path like /tributary")
    return zk_chroot.rstrip("/")


def zookeeper_infos(
    directory: Path, count: int, pick: Callable[[int | None], int], base_ports: bool
) -> list[ProcessInfo]:
    """`count` servers' infos (a single one is `zookeeper`, id 0); `pick(preferred)`
    returns a free port, `preferred` if it can (given when `base_ports`)."""
    ids = [0] if count == 1 else list(range(1, count + 1))
    infos = []
    for sid in ids:
        port = pick(CLIENT_BASE_PORT + max(sid, 1) - 1 if base_ports else None)
        zk_dir = directory / ("zookeeper" if sid == 0 else f"zookeeper-{sid}")
        info = ProcessInfo("zookeeper", sid, None, port, str(zk_dir / "zookeeper.out"), str(zk_dir))
        if count > 1:
            info.quorum_port, info.election_port = pick(None), pick(None)
        infos.append(info)
    return infos


def start_zookeeper(info: ProcessInfo, servers: list[ProcessInfo]) -> int | None:
    """Start `info` (one of `servers`, the whole ensemble) in a session of its own; its
    pid. Readiness is `wait_zookeeper`'s."""
    peers = {
        max(z.id, 1): PeerPorts(z.port, z.quorum_port or 0, z.election_port or 0) for z in servers
    }
    server = member(Path(info.data_dir), max(info.id, 1), peers)
    server.start(detach=True, wait=False)
    return server.pid


def wait_zookeeper(servers: list[ProcessInfo], deadline: float, *, each: bool = False) -> None:
    """Until one of `servers` serves clients (a quorum is up), or with `each`, every one
    of them. Raises `ZooKeeperError` naming their logs past the deadline."""
    try:
        wait_quorum(
            [z.port for z in servers], max(0.0, deadline - time.monotonic()), all_serving=each
        )
    except ZooKeeperError as exc:
        logs = ", ".join(z.log_path for z in servers)
        raise ZooKeeperError(f"ZooKeeper did not come up ({exc}); see {logs}") from None
