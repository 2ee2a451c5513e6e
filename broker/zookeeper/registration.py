"""Who this broker is in the cluster, and keeping it registered.

How it works: `BrokerIdentity` holds the broker id, the cluster id (from /cluster/id) and
the broker epoch: the czxid of our ephemeral /brokers/ids/<id> znode, which changes every
time we register (KIP-380). Controller requests carry the epoch they were meant for, and
the handlers fence stale ones with it. `Registration.register()` creates the znode (the
gateway waits out a previous incarnation's session); `keep_registered()` watches the
ZooKeeper session and, after it was lost and a new one is connected, registers again, so
the controller sees the broker come back with a new epoch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from broker.zookeeper.gateway import BrokerZkGateway
from server_common import zkdata

log = logging.getLogger(__name__)

# Beyond the session timeout, how long to wait for an old registration of ours to go.
REGISTRATION_GRACE_S = 5.0


@dataclass
class BrokerIdentity:
    broker_id: int
    broker_epoch: int = -1
    cluster_id: str | None = None


class Registration:
    def __init__(
        self,
        gateway: BrokerZkGateway,
        identity: BrokerIdentity,
        make_registration: Callable[[], zkdata.BrokerRegistration],
        events: Callable[[str, dict], None],
    ):
        self.gateway = gateway
        self.identity = identity
        self._make_registration = make_registration
        self._events = events

    async def register(self) -> None:
        patience = self.gateway.session_timeout_s + REGISTRATION_GRACE_S
        epoch = await self.gateway.register(self._make_registration(), patience)
        self.identity.broker_epoch = epoch
        log.info("registered as broker %d (broker epoch %d)", self.identity.broker_id, epoch)

    async def keep_registered(self) -> None:
        lost = False
        async for event in self.gateway.session_events:
            if event.lost:
                lost = True
                log.warning("ZooKeeper session lost: the controller will treat us as dead")
                self._events("session_lost", {})
            elif event.connected and lost:
                lost = False
                log.info("ZooKeeper session re-established; registering again")
                try:
                    await self.register()
                    self._events(
                        "session_reestablished", {"broker_epoch": self.identity.broker_epoch}
                    )
                except Exception:  # ZooKeeper trouble, or our old registration lingering
                    log.exception("re-registration failed")
                    lost = True
