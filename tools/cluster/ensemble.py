"""A real ZooKeeper ensemble (3 or 5 servers, one JVM each) on loopback ports.

How it works: `ZooKeeperEnsemble.start()` gives every member a client, quorum and
election port (`free_port`, so inside TRIBUTARY_LISTEN_PORTS), writes each one's zoo.cfg
with every `server.N=host:quorum:election` line and its `myid`, starts all of them
(`ZooKeeperServer.start(wait=False)`: no member serves before a quorum forms) and waits
until `wait_quorum` sees them serve. Members are killed, paused and restarted one by
one (`members[i]`); `connect_string` is the whole `host:port,host:port,...` string (plus
a chroot if asked). `stop()` kills exactly the members' pids. The launcher builds the
same configs from its saved ports (`member`), so both run the same ensemble.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from tools.cluster.zookeeper import (
    PeerPorts,
    ZooKeeperError,
    ZooKeeperServer,
    free_port,
    serving_mode,
)


def allocate_peers(count: int, taken: set[int] | None = None) -> dict[int, PeerPorts]:
    """Server ids 1..count with three distinct free ports each (added to `taken`)."""
    taken = taken if taken is not None else set()

    def pick() -> int:
        while (port := free_port()) in taken:
            pass
        taken.add(port)
        return port

    return {sid: PeerPorts(pick(), pick(), pick()) for sid in range(1, count + 1)}


def member(data_dir: Path, server_id: int, peers: dict[int, PeerPorts]) -> ZooKeeperServer:
    """Member `server_id` of the ensemble `peers` (a single server when there is one)."""
    if len(peers) == 1:
        return ZooKeeperServer(data_dir, port=peers[server_id].client)
    return ZooKeeperServer(
        data_dir, port=peers[server_id].client, server_id=server_id, peers=dict(peers)
    )


def connect_string(peers: dict[int, PeerPorts], chroot: str = "", host: str = "127.0.0.1") -> str:
    return ",".join(f"{host}:{p.client}" for _, p in sorted(peers.items())) + chroot


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


@dataclass
class ZooKeeperEnsemble:
    directory: Path
    size: int = 3
    members: list[ZooKeeperServer] = field(default_factory=list)

    def connect_string(self, chroot: str = "") -> str:
        return ",".join(m.connect_string for m in self.members) + chroot

    def start(self, timeout_s: float = 60.0) -> ZooKeeperEnsemble:
        peers = allocate_peers(self.size)
        self.members = [
            member(self.directory / f"zookeeper-{sid}", sid, peers) for sid in sorted(peers)
        ]
        try:
            for server in self.members:
                server.start(wait=False)
            wait_quorum([m.port for m in self.members], timeout_s, all_serving=True)
        except BaseException:
            self.stop()
            raise
        return self

    def restart(self, index: int, timeout_s: float = 60.0) -> None:
        """Start member `index` again (same ports and data) and wait until it serves."""
        server = self.members[index]
        server.stop()
        server.start(wait=False)
        wait_quorum([server.port], timeout_s)

    def stop(self) -> None:
        for server in self.members:
            server.stop()

    def __enter__(self) -> ZooKeeperEnsemble:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
