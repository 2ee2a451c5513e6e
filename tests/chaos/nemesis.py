"""The randomized fault schedule: one seeded `random.Random` picks fault after fault
until the time is up, each injected, held and undone, and the cluster restored to full
health before the next (so every fault is a single fault and its ack latency counts).

Fault kinds (all on real processes, by pid):
- `kill_broker`: SIGKILL the leader of a random partition, restart it 1-4 s later;
- `pause_long`: SIGSTOP a leader past the ZooKeeper session timeout, then SIGCONT (it
  comes back as a zombie leader, finds its session gone and is fenced);
- `pause_short`: SIGSTOP a leader for less than the session timeout (a GC pause);
- `controlled_stop`: SIGTERM a leader (controlled shutdown), start it 1-3 s later;
- `kill_controller`: SIGKILL the active controller, start it again 1-3 s later;
- `pause_zookeeper`: SIGSTOP ZooKeeper past the session timeout, then SIGCONT (every
  session expires: brokers register again, a controller is elected again);
- `cut_link`: cut the link between two brokers (the link proxy holds their connections
  silent) for 2-6 s, then heal it.
Broker faults mark the `FaultWindow` (ack latency during single-broker faults) from the
fault until every partition has a live leader again.
"""

from __future__ import annotations

import random
import signal
import time
from collections import Counter

from tests.chaos.cluster import SESSION_TIMEOUT_S, ChaosCluster
from tests.chaos.scenario import FaultWindow, wait_for_leaders

KINDS = (
    "kill_broker",
    "pause_long",
    "pause_short",
    "controlled_stop",
    "kill_controller",
    "pause_zookeeper",
    "cut_link",
)


class Nemesis:
    kinds: tuple[str, ...] = KINDS

    def __init__(self, cluster: ChaosCluster, topic: str, seed: int, duration_s: float):
        self.cluster = cluster
        self.topic = topic
        self.rng = random.Random(seed)
        self.duration_s = duration_s
        self.counts: Counter = Counter()
        self.log: list[str] = []

    def __call__(self, window: FaultWindow) -> None:
        deadline = time.monotonic() + self.duration_s
        kinds = list(self.kinds)
        self.rng.shuffle(kinds)  # the first round covers every kind once
        while time.monotonic() < deadline:
            kind = kinds.pop() if kinds else self.rng.choice(self.kinds)
            started = time.monotonic()
            getattr(self, kind)(window)
            window.end()
            self.counts[kind] += 1
            self.cluster.restore([self.topic], timeout_s=90)
            self.log.append(f"{kind} ({time.monotonic() - started:.1f} s)")
            time.sleep(self.rng.uniform(0.5, 1.5))

    # -- helpers ---------------------------------------------------------------------
    def _leader(self) -> str:
        partitions = [p for p in self.cluster.view().partitions if p.topic == self.topic]
        part = self.rng.choice(partitions)
        return f"broker-{part.leader}"

    def _hold(self, low: float, high: float) -> None:
        time.sleep(self.rng.uniform(low, high))

    # -- fault kinds -----------------------------------------------------------------
    def kill_broker(self, window: FaultWindow) -> None:
        name = self._leader()
        window.begin()
        self.cluster.kill(name, signal.SIGKILL)
        self._hold(1, 4)
        self.cluster.start(name)
        wait_for_leaders(self.cluster, self.topic)  # the outage is over

    def pause_long(self, window: FaultWindow) -> None:
        name = self._leader()
        window.begin()
        self.cluster.pause(name)
        self._hold(SESSION_TIMEOUT_S + 1, SESSION_TIMEOUT_S + 3)
        self.cluster.resume(name)
        wait_for_leaders(self.cluster, self.topic)  # the outage is over

    def pause_short(self, window: FaultWindow) -> None:
        name = self._leader()
        window.begin()
        self.cluster.pause(name)
        self._hold(0.5, SESSION_TIMEOUT_S * 0.6)
        self.cluster.resume(name)
        wait_for_leaders(self.cluster, self.topic)  # the outage is over

    def controlled_stop(self, window: FaultWindow) -> None:
        name = self._leader()
        window.begin()
        self.cluster.stop(name)
        self._hold(1, 3)
        self.cluster.start(name)
        wait_for_leaders(self.cluster, self.topic)  # the outage is over

    def kill_controller(self, window: FaultWindow) -> None:
        active = self.cluster.view().controller_id
        if active is None:
            return
        name = f"controller-{active}"
        self.cluster.kill(name, signal.SIGKILL)
        self._hold(1, 3)
        self.cluster.start(name)

    def pause_zookeeper(self, window: FaultWindow) -> None:
        servers = [z.name for z in self.cluster.state.zookeepers()]  # all of an ensemble
        for name in servers:
            self.cluster.pause(name)
        self._hold(SESSION_TIMEOUT_S + 1, SESSION_TIMEOUT_S + 2)
        for name in servers:
            self.cluster.resume(name)

    def cut_link(self, window: FaultWindow) -> None:
        a, b = self.rng.sample(self.cluster.broker_ids(), 2)
        self.cluster.proxy.cut(a, b)
        self._hold(2, 6)
        self.cluster.proxy.heal(a, b)
