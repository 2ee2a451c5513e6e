"""A real ZooKeeper ensemble (3 or 5 servers, one JVM each) on loopback ports.

How it works: every member has a client, a quorum and an election port (`PeerPorts`,
picked in TRIBUTARY_LISTEN_PORTS by the launcher); `member` is one server of them, whose
zoo.cfg names every `server.N=host:quorum:election` and whose `myid` is its id (a lone
server stays a standalone one); `wait_quorum` waits until the ensemble serves, which a
member only does within a quorum (`srvr` answers with a `Mode:`). The launcher
(`zk_processes.py`) starts the members from ports it saved, so a restarted member
rejoins the same ensemble.
"""

from __future__ import annotations

import time
from pathlib import Path

from tools.cluster.zookeeper import (
    PeerPorts,
    ZooKeeperError,
    ZooKeeperServer,
    serving_mode,
)


def member(data_dir: Path, server_id: int, peers: dict[int, PeerPorts]) -> ZooKeeperServer:
    """Member `server_id` of the ensemble `peers` (a single server when there is one)."""
    if len(peers) == 1:
        return ZooKeeperServer(data_dir, port=peers[server_id].client)
    return ZooKeeperServer(
        data_dir, port=peers[server_id].client, server_id=server_id, peers=dict(peers)
    )


def wait_quorum(ports: list[int], timeout_s: float, *, all_serving: bool = False) -> None:
    """Until one of these servers serves clients (so a quorum is up), or, with
    `all_serving`, every one of them does. Raises `ZooKeeperError` past the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        serving = [p for p in ports if serving_mode("127.0.0.1", p, timeout=0.5) is not None]
        if serving and (not all_serving or len(serving) == len(ports)):
            return
        if time.monotonic() > deadline:
            raise ZooKeeperError(
                f"no ZooKeeper quorum within {timeout_s:.0f}s "
                f"({len(serving)} of {len(ports)} servers serving)"
            )
        time.sleep(0.1)
