"""ZooKeeper faults on a cluster whose ZooKeeper is a three-server ensemble: the seeded
schedule of `nemesis.Nemesis` (one fault at a time, each undone and the cluster restored
to full health before the next), with fault kinds of its own.

Fault kinds (all on real processes, by pid):
- `kill_zookeeper`: SIGKILL one server for 2-6 s (a quorum stays: nothing changes);
- `kill_zookeeper_leader`: SIGKILL the ensemble's leader (the other two elect one and
  every session moves over), start it again 2-6 s later;
- `kill_zookeeper_then_broker`: one server down, then SIGKILL a partition leader: the
  failover still works on the remaining quorum; both come back;
- `pause_zookeeper_majority`: SIGSTOP two servers of three past the session timeout (no
  quorum: produce and fetch go on with the leaders and ISRs the brokers have; ISR
  changes and elections wait), then SIGCONT;
- `restart_zookeepers`: a rolling restart, each server stopped (SIGTERM) and started
  again once the one before serves again.
Broker faults mark the `FaultWindow` from the fault until every partition has a live
leader again.
"""

from __future__ import annotations

import signal

from tests.chaos.cluster import SESSION_TIMEOUT_S
from tests.chaos.nemesis import Nemesis
from tests.chaos.scenario import FaultWindow, wait_for_leaders
from tools.cluster.zookeeper import serving_mode

ZK_KINDS = (
    "kill_zookeeper",
    "kill_zookeeper_leader",
    "kill_zookeeper_then_broker",
    "pause_zookeeper_majority",
    "restart_zookeepers",
)


class ZooKeeperNemesis(Nemesis):
    kinds = ZK_KINDS

    def _zookeepers(self) -> list[str]:
        names = [z.name for z in self.cluster.state.zookeepers()]
        assert len(names) >= 3, "ZooKeeper faults need an ensemble (zookeepers=3)"
        return names

    def kill_zookeeper(self, window: FaultWindow) -> None:
        name = self.rng.choice(self._zookeepers())
        self.cluster.kill(name, signal.SIGKILL)
        self._hold(2, 6)
        self.cluster.start(name)

    def kill_zookeeper_leader(self, window: FaultWindow) -> None:
        servers = self.cluster.state.zookeepers()
        leader = next(
            (z.name for z in servers if serving_mode("127.0.0.1", z.port) == "leader"),
            self.rng.choice(self._zookeepers()),
        )
        self.cluster.kill(leader, signal.SIGKILL)
        self._hold(2, 6)
        self.cluster.start(leader)

    def kill_zookeeper_then_broker(self, window: FaultWindow) -> None:
        zk = self.rng.choice(self._zookeepers())
        self.cluster.kill(zk, signal.SIGKILL)
        self._hold(0.5, 2)
        broker = self._leader()
        window.begin()
        self.cluster.kill(broker, signal.SIGKILL)
        wait_for_leaders(self.cluster, self.topic)  # elected on the remaining quorum
        window.end()
        self.cluster.start(broker)
        self.cluster.start(zk)

    def pause_zookeeper_majority(self, window: FaultWindow) -> None:
        paused = self.rng.sample(self._zookeepers(), 2)
        for name in paused:
            self.cluster.pause(name)
        self._hold(SESSION_TIMEOUT_S + 1, SESSION_TIMEOUT_S + 3)
        for name in paused:
            self.cluster.resume(name)

    def restart_zookeepers(self, window: FaultWindow) -> None:
        for name in self._zookeepers():
            self.cluster.restart(name)  # returns once it serves again
