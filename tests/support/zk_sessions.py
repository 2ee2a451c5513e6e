"""Expire a real ZooKeeper session on demand, the way ZooKeeper's own tests do.

How it works: a second client connects with the session's id and password, which makes
the server drop the first client's connection and hand the session to the second; the
second then closes the session. The first client's reconnection can win the session
back before the close is sent (the second handle then sees ConnectionLoss): the helper
connects without the chroot (so no request precedes the close) and tries again.
"""

from __future__ import annotations

import time

ATTEMPTS = 5


def expire_session(connect: str, credentials: tuple[int, bytes], timeout_s: float = 10.0) -> None:
    """Close the ZooKeeper session `credentials` (a kazoo `client_id`); blocking."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import KazooException
    from kazoo.handlers.threading import KazooTimeoutError

    hosts = connect.split("/", 1)[0]  # no chroot: start() would send a request first
    for attempt in range(ATTEMPTS):
        other = KazooClient(hosts=hosts, client_id=credentials)
        try:
            other.start(timeout=timeout_s)
            other.stop()
            return
        except (KazooException, KazooTimeoutError):
            time.sleep(0.1 * (attempt + 1))
        finally:
            other.close()
    raise RuntimeError(f"could not expire session {credentials[0]:#x} in {ATTEMPTS} attempts")
