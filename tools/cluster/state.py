"""The local cluster's state file: what `tributary cluster up` started, and where.

How it works: the launcher writes `<cluster dir>/cluster.json` (pids, ports, log paths,
data dirs, the ZooKeeper connect string: every server of the ensemble, and the chroot if
any; in `settings`, what the cluster was made with: counts, secure, racks, the broker and
controller overrides, from which `cluster start` writes a process's properties again);
every other CLI command reads it to find the running cluster without flags. The cluster
dir is `--dir`, else `$TRIBUTARY_CLUSTER_DIR`, else `./.tributary`.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypeGuard

STATE_FILE = "cluster.json"
DEFAULT_DIR = ".tributary"
DEFAULT_BOOTSTRAP = "localhost:9092"


@dataclass
class ProcessInfo:
    role: str  # "zookeeper", "controller" or "broker"
    id: int
    pid: int | None
    port: int
    log_path: str
    data_dir: str
    metrics_port: int | None = None
    config_path: str | None = None
    kafka_port: int | None = None  # a broker's Kafka-protocol listener
    # A member of a ZooKeeper ensemble (id >= 1): its quorum and leader-election ports.
    quorum_port: int | None = None
    election_port: int | None = None

    @property
    def name(self) -> str:
        """`broker-2`, `controller-1001`, `zookeeper` (a single server) or `zookeeper-2`."""
        return self.role if self.role == "zookeeper" and not self.id else f"{self.role}-{self.id}"


@dataclass
class ClusterState:
    directory: str
    zookeeper_connect: str
    processes: list[ProcessInfo] = field(default_factory=list)
    settings: dict = field(default_factory=dict)

    def brokers(self) -> list[ProcessInfo]:
        return [p for p in self.processes if p.role == "broker"]

    def controllers(self) -> list[ProcessInfo]:
        return [p for p in self.processes if p.role == "controller"]

    def zookeeper(self) -> ProcessInfo | None:
        return next((p for p in self.processes if p.role == "zookeeper"), None)

    def zookeepers(self) -> list[ProcessInfo]:
        """The single server, or every member of the ensemble."""
        return [p for p in self.processes if p.role == "zookeeper"]

    def find(self, role: str, id_: int) -> ProcessInfo | None:
        return next((p for p in self.processes if p.role == role and p.id == id_), None)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{b.port}" for b in self.brokers())

    @property
    def kafka_bootstrap_servers(self) -> str:
        """The brokers' Kafka-protocol listeners, for kcat and Kafka clients."""
        return ",".join(f"127.0.0.1:{b.kafka_port}" for b in self.brokers() if b.kafka_port)

    def save(self) -> None:
        path = Path(self.directory) / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        os.replace(tmp, path)

    @classmethod
    def load(cls, directory: str | Path) -> ClusterState | None:
        path = Path(directory) / STATE_FILE
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        try:
            processes = [ProcessInfo(**p) for p in raw.get("processes", [])]
            return cls(
                directory=raw["directory"],
                zookeeper_connect=raw["zookeeper_connect"],
                processes=processes,
                settings=raw.get("settings", {}),
            )
        except (KeyError, TypeError):
            return None


def cluster_dir(explicit: str | None = None) -> Path:
    return Path(explicit or os.environ.get("TRIBUTARY_CLUSTER_DIR") or DEFAULT_DIR).resolve()


def process_alive(pid: int | None) -> TypeGuard[int]:
    """Whether `pid` is a live process (so True also says it is a pid, not None)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) is not alive for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def process_paused(pid: int | None) -> bool:
    """Stopped by a signal (`cluster pause`: SIGSTOP): alive, but it answers nobody."""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] in ("T", "t")
    except (OSError, IndexError):
        return False


def default_bootstrap(explicit: str | None = None, directory: str | None = None) -> str:
    """--bootstrap-server if given, else the running local cluster's brokers (leaving out
    those the launcher knows are stopped or paused, unless that leaves none), else
    localhost:9092 (Kafka's tools' default)."""
    if explicit:
        return explicit
    state = ClusterState.load(cluster_dir(directory))
    if state is not None:
        live = [b for b in state.brokers() if process_alive(b.pid)]
        answering = [b for b in live if not process_paused(b.pid)]
        chosen = answering or live
        if chosen:
            return ",".join(f"127.0.0.1:{b.port}" for b in chosen)
    return DEFAULT_BOOTSTRAP


def default_zookeeper(explicit: str | None = None, directory: str | None = None) -> str | None:
    if explicit:
        return explicit
    state = ClusterState.load(cluster_dir(directory))
    return state.zookeeper_connect if state is not None else None
