"""The chaos cluster: the real launcher's cluster (ZooKeeper, controllers, brokers as
processes) with every broker-to-broker link running through a `LinkProxy`, plus the
queries and restorations the chaos tests share.

How it works: `ChaosCluster` is a `LocalCluster` whose broker configs get a third
listener, `REPLICATION` on a port of its own, made the inter-broker listener and
advertised at the proxy's port for that broker (`LinkProxy.add_route`). Followers and the
controller find brokers through their registration, so they go through the proxy;
clients bootstrap from PLAINTEXT and are answered with PLAINTEXT endpoints, so they do
not. Ports stay the same across restarts (a restarted broker gets the same config).

`ChaosCluster(..., secure=True)` makes every listener SASL_SSL, REPLICATION included
(the proxy relays TCP, so TLS and SASL pass through it unchanged; it listens on
127.0.0.1, a name the cluster's certificate carries; it tells the links apart by the
connecting process, `socket_owner.py`). The chaos clients then log in as the cluster's
`admin` user: `command_config` is its properties file for the verifiable tools (the
library's clients get theirs from tests/integration/helpers.py's `admin_security`).

`restore()` brings the cluster back to full health between faults: heals every link,
resumes paused processes, starts stopped ones (ZooKeeper servers first), waits until
every partition has a leader and a full ISR. `replica_logs()` reads each replica's
segment files from disk (for the divergence check).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from client.protocol.records import RecordError, decode_records, iter_batches, validate_batch
from tests.chaos.link_proxy import CONTROLLER, LinkProxy
from tests.chaos.socket_owner import connecting_process
from tests.integration.helpers import admin_properties
from tools.cluster.inspect import read_cluster
from tools.cluster.launcher import LocalCluster, _pid_state
from tools.cluster.state import ProcessInfo, process_alive
from tools.cluster.zookeeper import free_port

# Timeouts small enough that a fault and its recovery take seconds.
CHAOS_BROKER_SETTINGS = {
    "zookeeper.session.timeout.ms": 4000,
    "replica.lag.time.max.ms": 3000,
    "replica.socket.timeout.ms": 3000,
    "isr.change.propagation.blackout.ms": 200,
    "isr.change.propagation.interval.ms": 1000,
    "controlled.shutdown.retry.backoff.ms": 500,
    "replica.fetch.backoff.ms": 200,
    "offsets.topic.num.partitions": 3,
    "group.initial.rebalance.delay.ms": 200,
    "group.min.session.timeout.ms": 1000,
    "replica.high.watermark.checkpoint.interval.ms": 500,
}
CHAOS_CONTROLLER_SETTINGS = {
    "zookeeper.session.timeout.ms": 4000,
    "controller.socket.timeout.ms": 3000,
}
SESSION_TIMEOUT_S = CHAOS_BROKER_SETTINGS["zookeeper.session.timeout.ms"] / 1000


class ChaosCluster(LocalCluster):
    def __init__(self, directory: str | Path, proxy: LinkProxy, *, brokers=3, controllers=2, **kw):
        super().__init__(
            directory,
            brokers=brokers,
            controllers=controllers,
            base_port=None,
            broker_overrides={**CHAOS_BROKER_SETTINGS, **kw.pop("broker_overrides", {})},
            controller_overrides={
                **CHAOS_CONTROLLER_SETTINGS,
                **kw.pop("controller_overrides", {}),
            },
            metrics=False,
            **kw,
        )
        self.proxy = proxy
        self.replication_ports: dict[int, tuple[int, int]] = {}  # id -> (listener, proxy)
        self.env: dict[str, str] = {}  # extra environment for broker processes
        if self.secure:  # TLS hides the client ids the proxy reads: look the process up
            proxy.identify = self._source_of_connection

    def _write_config(self, info: ProcessInfo) -> None:
        if info.role != "broker":
            super()._write_config(info)
            return
        if info.id not in self.replication_ports:
            port = self._free_replication_port()
            self.replication_ports[info.id] = (port, self.proxy.add_route(info.id, port))
        port, proxy_port = self.replication_ports[info.id]
        saved = self.broker_overrides
        self.broker_overrides = {
            **saved,
            "listeners": f"PLAINTEXT://127.0.0.1:{info.port},KAFKA://127.0.0.1:{info.kafka_port},"
            f"REPLICATION://127.0.0.1:{port}",
            "advertised.listeners": f"REPLICATION://127.0.0.1:{proxy_port}",
            "inter.broker.listener.name": "REPLICATION",
            "listener.wire.protocol.map": "KAFKA:kafka",
        }
        if self.secure:
            self.broker_overrides["listener.security.protocol.map"] = (
                "PLAINTEXT:SASL_SSL,KAFKA:SASL_SSL,REPLICATION:SASL_SSL"
            )
        try:
            super()._write_config(info)
        finally:
            self.broker_overrides = saved

    def _free_replication_port(self) -> int:
        """A free port no process of the cluster was given (a broker whose config was
        just written may not listen on its ports yet, so free_port alone could repeat)."""
        assert self.state is not None
        given = {p for _, pair in self.replication_ports.items() for p in pair}
        for info in self.state.processes:
            given.update(p for p in (info.port, info.kafka_port, info.metrics_port) if p)
        while (port := free_port()) in given:
            pass
        return port

    def _start_process(self, info: ProcessInfo) -> None:
        if info.role != "broker" or not self.env:
            super()._start_process(info)
            return
        saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)  # inherited by the broker process only while it starts
        try:
            super()._start_process(info)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def _source_of_connection(self, client_port: int, proxy_port: int) -> int | str | None:
        """The broker id (or "controller") whose process opened this proxied connection."""
        if self.state is None:
            return None
        owners = {p.pid: p for p in self.state.processes if p.pid and p.role != "zookeeper"}
        pid = connecting_process(client_port, proxy_port, owners)
        if pid is None:
            return None
        info = owners[pid]
        return info.id if info.role == "broker" else CONTROLLER

    # -- clients ---------------------------------------------------------------------
    @property
    def command_config(self) -> str | None:
        """`--command-config` for the tools: the admin's properties (None: plaintext)."""
        return admin_properties(self)

    # -- queries ---------------------------------------------------------------------
    def view(self):
        return read_cluster(self.state.zookeeper_connect)

    def partition(self, topic: str, partition: int):
        return self.view().partition(topic, partition)

    def broker_ids(self) -> list[int]:
        return [b.id for b in self.state.brokers()]

    def pid_state(self, name: str) -> str:
        return _pid_state(self.process(name).pid)

    def healthy(self, topics: list[str]) -> bool:
        try:
            view = self.view()
        except Exception:  # noqa: BLE001 - ZooKeeper unreachable: not healthy yet
            return False
        if view.controller_id is None or len(view.brokers) != self.broker_count:
            return False
        parts = [p for p in view.partitions if p.topic in topics]
        return bool(parts) and all(p.leader >= 0 and set(p.isr) == set(p.replicas) for p in parts)

    # -- restoration -----------------------------------------------------------------
    def restore(self, topics: list[str], timeout_s: float = 60.0) -> None:
        """Heal links, resume and start everything, wait for full ISRs."""
        self.proxy.heal_all()
        for info in self.state.processes:
            if process_alive(info.pid) and _pid_state(info.pid) == "paused":
                os.kill(info.pid, signal.SIGCONT)
        for role in ("zookeeper", "controller", "broker"):  # ZooKeeper's quorum first
            for info in self.state.processes:
                if info.role == role and not process_alive(info.pid):
                    self.start(info.name)
        deadline = time.monotonic() + timeout_s
        while not self.healthy(topics):
            if time.monotonic() > deadline:
                raise AssertionError(f"cluster not healthy within {timeout_s}s: {self.status()}")
            time.sleep(0.25)

    # -- replicas on disk --------------------------------------------------------------
    def replica_logs(self, topic: str, partition: int) -> dict[int, dict[int, bytes | None]]:
        """Broker id -> {offset: value} of its replica, read from its segment files."""
        out: dict[int, dict[int, bytes | None]] = {}
        for info in self.state.brokers():
            directory = Path(info.data_dir) / f"{topic}-{partition}"
            if directory.is_dir():
                out[info.id] = read_segments(directory)
        return out


def read_segments(directory: Path) -> dict[int, bytes | None]:
    """{offset: value} of every valid batch in a partition directory's segments (a torn
    or corrupt tail ends a segment, as recovery would truncate it)."""
    records: dict[int, bytes | None] = {}
    for path in sorted(directory.glob("*.log")):
        data = path.read_bytes()
        try:
            for position, header in iter_batches(data):
                chunk = data[position : position + header.size]
                validate_batch(chunk, 0, strict=False)
                for record in decode_records(chunk):
                    records[record.offset] = record.value
        except RecordError:
            continue
    return records
