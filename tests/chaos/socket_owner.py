"""Which of a set of local processes holds the client end of a loopback TCP connection,
read from Linux's /proc: how the link proxy tells who is connecting when the first bytes
are a TLS handshake rather than a native request naming its client id.

How it works: the proxy accepted a connection from 127.0.0.1:`client_port` on its own
`server_port`; the client's socket is the /proc/net/tcp entry whose local port is
`client_port` and remote port `server_port` (its inode), and its owner is the process
among `pids` with a `socket:[inode]` entry in /proc/<pid>/fd.
"""

from __future__ import annotations

import os
from collections.abc import Iterable


def _port(address: str) -> int:
    """The port of a /proc/net/tcp address (`0100007F:1F90`)."""
    return int(address.rsplit(":", 1)[1], 16)


def socket_inode(client_port: int, server_port: int) -> int | None:
    """The inode of the client's socket of the connection client_port -> server_port."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10:
                continue
            if _port(fields[1]) == client_port and _port(fields[2]) == server_port:
                inode = int(fields[9])
                if inode:
                    return inode
    return None


def owner_of(inode: int, pids: Iterable[int]) -> int | None:
    """The pid among `pids` that has the socket `inode` open (None: none of them)."""
    wanted = f"socket:[{inode}]"
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"{fd_dir}/{fd}") == wanted:
                    return pid
            except OSError:
                continue
    return None


def connecting_process(client_port: int, server_port: int, pids: Iterable[int]) -> int | None:
    """The pid among `pids` whose socket is the client end of client_port -> server_port."""
    inode = socket_inode(client_port, server_port)
    return None if inode is None else owner_of(inode, pids)
