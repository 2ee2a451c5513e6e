"""The local cluster launcher: ZooKeeper, controllers and brokers as background processes.

How it works: `LocalCluster.up()` lays out a cluster directory (one sub-directory per
process with its properties file, data and log file), starts ZooKeeper (one server
`zookeeper`, or an ensemble `zookeeper-1`..`zookeeper-N` with `zookeepers=N`, waiting
for its quorum; with `zk_chroot` every server's connect string ends in it), then the
controllers and brokers with `python -m controller|broker --config FILE` in new
sessions (they outlive the CLI), waits until every broker is registered in
/brokers/ids and a controller holds /controller, and writes `cluster.json` with every
pid and port. Every later command (`status`, `kill`, `pause`, `stop`, `down`...) loads
that file and acts on exactly those pids: never by name, never on anything else.

The local cluster uses small timeouts (6 s ZooKeeper sessions, 4 s replica lag) so
failures show within seconds; production defaults stay Kafka's.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from server_common.properties import write_properties
from tools.cluster import secure
from tools.cluster.pki import CA_FILE
from tools.cluster.secure import SecureFiles
from tools.cluster.state import ClusterState, ProcessInfo, process_alive
from tools.cluster.zk_processes import (
    ensemble_settings,
    start_zookeeper,
    wait_zookeeper,
    zookeeper_infos,
)
from tools.cluster.zookeeper import ZooKeeperError, free_port, serving_mode

# Small values for a cluster on one machine: failures are visible within seconds.
LOCAL_BROKER_SETTINGS = {
    "zookeeper.session.timeout.ms": 6000,
    "zookeeper.connection.timeout.ms": 10000,
    "replica.lag.time.max.ms": 4000,
    "replica.fetch.wait.max.ms": 200,
    "replica.fetch.backoff.ms": 200,
    "replica.socket.timeout.ms": 5000,
    "isr.change.propagation.blackout.ms": 500,
    "isr.change.propagation.interval.ms": 5000,
    "replica.high.watermark.checkpoint.interval.ms": 1000,
    "controlled.shutdown.retry.backoff.ms": 1000,
    "metrics.snapshot.interval.ms": 2000,
    "log.segment.bytes": 16 * 1024 * 1024,
    "log.retention.check.interval.ms": 60000,
    # Consumer groups: a small offsets topic, a short wait for the first rebalance, and
    # sessions as short as 2 s allowed (Kafka: 50 partitions, 3 s, 6 s).
    "offsets.topic.num.partitions": 6,
    "offsets.topic.segment.bytes": 4 * 1024 * 1024,
    "group.initial.rebalance.delay.ms": 500,
    "group.min.session.timeout.ms": 2000,
    "log.cleaner.backoff.ms": 5000,
}
LOCAL_CONTROLLER_SETTINGS = {
    "zookeeper.session.timeout.ms": 6000,
    "zookeeper.connection.timeout.ms": 10000,
    "leader.imbalance.check.interval.seconds": 30,
    "controller.socket.timeout.ms": 5000,
}
CONTROLLER_ID_BASE = 1000
STOP_TIMEOUT_S = 30.0
# How long a restart waits for the process's ports to be released (see _wait_ports_free).
PORTS_FREE_TIMEOUT_S = 10.0
# With --base-port, broker N's Kafka-protocol listener is 29092 + N - 1 (as docker-compose).
KAFKA_BASE_PORT = 29092


def _broker_listeners(info: ProcessInfo, internal: bool = False) -> dict:
    """A broker's listeners: PLAINTEXT speaks Tributary's protocol (clients, replication,
    the controller); KAFKA speaks Kafka's, for kcat and Kafka clients. With `internal`,
    brokers and the controller use a listener of their own, INTERNAL (on any free port,
    as registered in ZooKeeper), and PLAINTEXT is for clients only, so client limits
    (max.connections, queued.max.request.bytes...) never apply to replication."""
    listeners = f"PLAINTEXT://127.0.0.1:{info.port}"
    inter_broker = "PLAINTEXT"
    if internal:
        listeners += ",INTERNAL://127.0.0.1:0"
        inter_broker = "INTERNAL"
    if not info.kafka_port:  # a cluster.json from before Kafka listeners existed
        if internal:
            return {"listeners": listeners, "inter.broker.listener.name": inter_broker}
        return {"listeners": listeners}
    return {
        "listeners": f"{listeners},KAFKA://127.0.0.1:{info.kafka_port}",
        "inter.broker.listener.name": inter_broker,
        "listener.wire.protocol.map": "KAFKA:kafka",
    }


class LauncherError(RuntimeError):
    """Something the user should hear about in one line."""


@dataclass
class ProcessStatus:
    name: str
    role: str
    id: int
    pid: int | None
    port: int
    state: str  # running | paused | stopped
    registered: bool | None = None
    rack: str | None = None  # a broker's broker.rack
    zookeeper_mode: str | None = None  # standalone, leader, follower; None: not serving


def _pid_state(pid: int | None) -> str:
    if not process_alive(pid):
        return "stopped"
    try:
        with open(f"/proc/{pid}/stat") as f:
            code = f.read().split(")")[-1].split()[0]
    except OSError:
        return "running"
    return "paused" if code in ("T", "t") else "running"


def _port_free(port: int) -> bool:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _wait_ports_free(info: ProcessInfo, timeout_s: float) -> None:
    """Wait (bounded) until the ports of `info` can be bound again. A process just killed
    can hold its listening sockets a moment after it looks dead: its main thread is a
    zombie while another thread is still leaving (in an fsync on a busy disk, say), and
    the sockets close with the last thread; restarting it at once then failed with
    "Address already in use". Past the bound it is started anyway (and says so itself)."""
    ports = [p for p in (info.port, info.kafka_port, info.metrics_port) if p]
    deadline = time.monotonic() + timeout_s
    while not all(_port_free(port) for port in ports) and time.monotonic() < deadline:
        time.sleep(0.05)


def _pick_port(preferred: int | None, taken: set[int]) -> int:
    if preferred and preferred not in taken and _port_free(preferred):
        return preferred
    while True:
        port = free_port()
        if port not in taken:
            return port


class LocalCluster:
    def __init__(
        self,
        directory: str | Path,
        *,
        brokers: int = 3,
        controllers: int = 2,
        base_port: int | None = 9092,
        broker_overrides: dict | None = None,
        controller_overrides: dict | None = None,
        metrics: bool = True,
        internal_listener: bool | None = None,
        secure: bool = False,
        racks: list[str] | None = None,
        zookeepers: int = 1,
        zk_chroot: str | None = None,
    ):
        """`internal_listener`: brokers talk among themselves (and the controller to
        them) on a listener of their own (see `_broker_listeners`). `secure`: every
        listener SASL_SSL and the authorizer on (`secure.py`), for a new cluster.
        `racks`: broker i's `broker.rack` is racks[(i - 1) % len(racks)] (a new cluster
        keeps them in its state, so restarted brokers keep their rack). `zookeepers`:
        how many ZooKeeper servers (1, or an ensemble of 3 or 5); `zk_chroot`: the
        servers' `zookeeper.connect` ends in this path (created by the first to start).
        An existing cluster keeps what it was made with: overrides and the internal
        listener not given here are read from its state (`start` rewrites a process's
        properties file from them)."""
        try:
            self.zk_chroot = ensemble_settings(zookeepers, zk_chroot)
        except ValueError as exc:
            raise LauncherError(str(exc)) from None
        self.zookeeper_count = zookeepers
        self.directory = Path(directory).resolve()
        self.state: ClusterState | None = ClusterState.load(self.directory)
        saved = self.state.settings if self.state is not None else {}
        self.secure = secure
        if internal_listener is None:
            internal_listener = bool(saved.get("internal_listener", False))
        self.internal_listener = internal_listener
        self.broker_count = brokers
        self.controller_count = controllers
        self.base_port = base_port
        if broker_overrides is None:
            broker_overrides = saved.get("broker_overrides")
        if controller_overrides is None:
            controller_overrides = saved.get("controller_overrides")
        self.broker_overrides = dict(broker_overrides or {})
        self.controller_overrides = dict(controller_overrides or {})
        self.metrics = metrics
        self.racks = list(racks or [])

    # -- queries -------------------------------------------------------------------
    def running(self) -> bool:
        return self.state is not None and any(process_alive(p.pid) for p in self.state.processes)

    def process(self, name: str) -> ProcessInfo:
        """`broker-2`, `2` (a broker), `controller-1001` or `zookeeper`."""
        state = self._require_state()
        name = name.strip().lower()
        if name in ("zookeeper", "zk"):
            found = state.zookeeper()
            if len(state.zookeepers()) > 1:
                raise LauncherError(
                    f"the cluster runs {len(state.zookeepers())} ZooKeeper servers: "
                    "name one, e.g. zookeeper-1"
                )
        else:
            name = name.replace("zk-", "zookeeper-", 1) if name.startswith("zk-") else name
            role, _, number = name.rpartition("-")
            if not number.isdigit():
                raise LauncherError(
                    f"unknown process {name!r}: use e.g. 2, broker-2, controller-1001, "
                    "zookeeper (zookeeper-1 in an ensemble)"
                )
            role = role or ("controller" if int(number) >= CONTROLLER_ID_BASE else "broker")
            found = state.find(role, int(number))
        if found is None:
            raise LauncherError(f"no process {name!r} in the cluster at {self.directory}")
        return found

    def _require_state(self) -> ClusterState:
        if self.state is None:
            raise LauncherError(
                f"no local cluster at {self.directory} (run `tributary cluster up`)"
            )
        return self.state

    # -- up ------------------------------------------------------------------------
    def up(self, timeout_s: float = 60.0) -> ClusterState:
        if self.state is not None and self.secure and not self.state.settings.get("secure"):
            raise LauncherError(
                f"the cluster at {self.directory} is not a secure one: "
                "`tributary cluster down --delete-data` it first, or use another --dir"
            )
        if (
            self.state is not None
            and self.racks
            and self.racks != (self.state.settings.get("racks") or [])
        ):
            raise LauncherError(
                f"the cluster at {self.directory} has racks "
                f"{self.state.settings.get('racks') or 'none'}: racks are given when a cluster "
                "is made (`tributary cluster down --delete-data` it first, or use another --dir)"
            )
        if self.state is not None and all(process_alive(p.pid) for p in self.state.processes):
            return self.state
        if self.state is not None:
            # Some processes are gone: start exactly those again, with the same ports.
            restarted = [p for p in self.state.processes if not process_alive(p.pid)]
            zk_restarted = [p for p in restarted if p.role == "zookeeper"]
            for info in restarted:
                self._start_process(info)
                if zk_restarted and info is zk_restarted[-1]:  # servers first need a quorum
                    self.state.save()
                    self._wait_zookeeper(time.monotonic() + timeout_s)
            self.state.save()
            self.wait_ready(timeout_s, started=restarted)
            return self.state
        self.directory.mkdir(parents=True, exist_ok=True)
        taken: set[int] = set()

        def pick(preferred: int | None) -> int:
            port = _pick_port(preferred, taken)
            taken.add(port)
            return port

        zk_infos = zookeeper_infos(
            self.directory, self.zookeeper_count, pick, base_ports=bool(self.base_port)
        )
        state = ClusterState(
            directory=str(self.directory),
            zookeeper_connect=",".join(f"127.0.0.1:{z.port}" for z in zk_infos) + self.zk_chroot,
            settings={
                "brokers": self.broker_count,
                "controllers": self.controller_count,
                "secure": self.secure,
                "racks": self.racks,
                "zookeepers": self.zookeeper_count,
                "zk_chroot": self.zk_chroot,
                # What `start` writes each process's properties from again.
                "broker_overrides": self.broker_overrides,
                "controller_overrides": self.controller_overrides,
                "internal_listener": self.internal_listener,
            },
        )
        self.state = state
        state.processes.extend(zk_infos)
        for i in range(1, self.controller_count + 1):
            cid = CONTROLLER_ID_BASE + i
            port = _pick_port(None, taken)
            taken.add(port)
            metrics_port = _pick_port(None, taken) if self.metrics else None
            if metrics_port:
                taken.add(metrics_port)
            pdir = self.directory / f"controller-{cid}"
            state.processes.append(
                ProcessInfo(
                    "controller",
                    cid,
                    None,
                    port,
                    str(pdir / "controller.log"),
                    str(pdir / "data"),
                    metrics_port,
                    str(pdir / "controller.properties"),
                )
            )
        for b in range(1, self.broker_count + 1):
            preferred = self.base_port + b - 1 if self.base_port else None
            port = _pick_port(preferred, taken)
            taken.add(port)
            metrics_port = None
            if self.metrics:
                metrics_port = _pick_port(9191 + b if self.base_port else None, taken)
                taken.add(metrics_port)
            kafka_port = _pick_port(KAFKA_BASE_PORT + b - 1 if self.base_port else None, taken)
            taken.add(kafka_port)
            pdir = self.directory / f"broker-{b}"
            state.processes.append(
                ProcessInfo(
                    "broker",
                    b,
                    None,
                    port,
                    str(pdir / "broker.log"),
                    str(pdir / "data"),
                    metrics_port,
                    str(pdir / "server.properties"),
                    kafka_port,
                )
            )
        try:
            for info in state.processes:
                self._write_config(info)
                self._start_process(info)
                state.save()
                if info is zk_infos[-1]:  # the whole ensemble started: wait for its quorum
                    self._wait_zookeeper(time.monotonic() + timeout_s)
                    if self.secure:
                        self._write_admin_credential(timeout_s)
            self.wait_ready(timeout_s)
        except BaseException:
            self.down()
            raise
        return state

    def _secure_files(self) -> SecureFiles | None:
        """The cluster's CA, keystore, passwords and admin.properties, if it is secure."""
        if not self._require_state().settings.get("secure"):
            return None
        return secure.prepare(self.directory)

    def _wait_zookeeper(self, deadline: float, only: list[ProcessInfo] | None = None) -> None:
        """Until ZooKeeper serves (a quorum is up); with `only`, each of those servers."""
        try:
            wait_zookeeper(only or self._require_state().zookeepers(), deadline, each=bool(only))
        except ZooKeeperError as exc:
            raise LauncherError(str(exc)) from None

    def _write_admin_credential(self, timeout_s: float) -> None:
        files = self._secure_files()
        assert files is not None
        self._wait_zookeeper(time.monotonic() + timeout_s)
        from tools.cluster.inspect import run_blocking

        connect = self._require_state().zookeeper_connect
        password = files.passwords[secure.ADMIN_USER]
        run_blocking(lambda: secure.write_admin_credential(connect, password))

    def rack_of(self, broker_id: int) -> str | None:
        """The rack broker `broker_id` is given (None: the cluster has no racks)."""
        racks = self._require_state().settings.get("racks") or []
        return racks[(broker_id - 1) % len(racks)] if racks else None

    def _write_config(self, info: ProcessInfo) -> None:
        if info.role == "zookeeper" or info.config_path is None:
            return
        Path(info.data_dir).mkdir(parents=True, exist_ok=True)
        zk = self._require_state().zookeeper_connect
        files = self._secure_files()
        if info.role == "broker":
            values = _broker_properties(
                info, zk, files, self.internal_listener, self.rack_of(info.id)
            )
            values.update(self.broker_overrides)
        else:
            values = _controller_properties(info, zk, files)
            values.update(self.controller_overrides)
        write_properties(info.config_path, values)

    def _start_process(self, info: ProcessInfo) -> None:
        if info.role == "zookeeper":
            info.pid = start_zookeeper(info, self._require_state().zookeepers())
            return
        if info.config_path is None:
            raise LauncherError(f"{info.name} has no config file in the cluster state")
        log_path = Path(info.log_path)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        module = "broker" if info.role == "broker" else "controller"
        with open(log_path, "ab") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", module, "--config", info.config_path],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=str(self.directory),
                start_new_session=True,
            )
        info.pid = process.pid

    # -- readiness -----------------------------------------------------------------
    def wait_ready(
        self,
        timeout_s: float = 60.0,
        *,
        require_controller: bool = True,
        started: list[ProcessInfo] | None = None,
    ) -> None:
        """Until every running broker is registered and (if any run) a controller is active.

        A process in `started` (default: all) that dies meanwhile is reported with the
        last line of its log; others may be down on purpose (a test killed them).
        """
        state = self._require_state()
        watched = list(state.processes if started is None else started)
        deadline = time.monotonic() + timeout_s
        started_zk = [z for z in watched if z.role == "zookeeper"]
        self._wait_zookeeper(deadline, started_zk if started is not None and started_zk else None)
        import trio  # the ZooKeeper session only here: `tributary` starts faster without

        from tools.cluster.inspect import read_cluster_view, run_blocking, zookeeper_session

        async def poll() -> None:
            async with zookeeper_session(state.zookeeper_connect, 10.0) as zk:
                while True:
                    self._raise_if_died(watched)
                    problem = self._readiness_problem(
                        await read_cluster_view(zk), require_controller
                    )
                    if problem is None:
                        return
                    if time.monotonic() > deadline:
                        raise LauncherError(f"cluster not ready after {timeout_s:.0f}s: {problem}")
                    await trio.sleep(0.2)

        run_blocking(poll)

    def _raise_if_died(self, watched: list[ProcessInfo]) -> None:
        for info in watched:
            if info.role != "zookeeper" and info.pid is not None and not process_alive(info.pid):
                raise LauncherError(
                    f"{info.name} exited; see {info.log_path}: {self._last_line(info)}"
                )

    def _readiness_problem(self, view, require_controller: bool) -> str | None:
        state = self._require_state()
        for broker in state.brokers():
            if _pid_state(broker.pid) != "stopped" and broker.id not in view.brokers:
                return f"broker {broker.id} not registered (log: {broker.log_path})"
        controllers = [c for c in state.controllers() if _pid_state(c.pid) != "stopped"]
        if require_controller and controllers and view.controller_id is None:
            return "no active controller yet"
        return None

    @staticmethod
    def _last_line(info: ProcessInfo) -> str:
        try:
            lines = Path(info.log_path).read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return lines[-1] if lines else "(empty log)"

    # -- process control -----------------------------------------------------------
    def send_signal(self, name: str, sig: signal.Signals) -> ProcessInfo:
        info = self.process(name)
        if not process_alive(info.pid):
            raise LauncherError(f"{info.name} is not running")
        if sig in (signal.SIGTERM, signal.SIGKILL) and _pid_state(info.pid) == "paused":
            os.kill(info.pid, signal.SIGCONT)  # a stopped process cannot handle SIGTERM
        os.kill(info.pid, sig)
        return info

    def kill(
        self, name: str, sig: signal.Signals = signal.SIGKILL, *, wait_s: float = 10.0
    ) -> ProcessInfo:
        info = self.send_signal(name, sig)
        if sig == signal.SIGKILL:
            self._wait_exit(info, wait_s)
        return info

    def pause(self, name: str) -> ProcessInfo:
        return self.send_signal(name, signal.SIGSTOP)

    def resume(self, name: str) -> ProcessInfo:
        return self.send_signal(name, signal.SIGCONT)

    def stop(self, name: str, timeout_s: float = STOP_TIMEOUT_S) -> ProcessInfo:
        """SIGTERM (a broker's controlled shutdown) and wait; SIGKILL if it hangs."""
        info = self.send_signal(name, signal.SIGTERM)
        self._wait_or_kill(info, timeout_s)
        return info

    def start(self, name: str, timeout_s: float = 60.0) -> ProcessInfo:
        info = self.process(name)
        if process_alive(info.pid):
            raise LauncherError(f"{info.name} is already running (pid {info.pid})")
        self._write_config(info)
        _wait_ports_free(info, PORTS_FREE_TIMEOUT_S)
        self._start_process(info)
        self._require_state().save()
        self.wait_ready(timeout_s, require_controller=False, started=[info])
        return info

    def restart(self, name: str, timeout_s: float = 60.0) -> ProcessInfo:
        """`stop` (if it runs), then `start`: same ports, same data."""
        if process_alive(self.process(name).pid):
            self.stop(name)
        return self.start(name, timeout_s)

    def _wait_exit(self, info: ProcessInfo, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while process_alive(info.pid):
            _reap(info.pid)
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def down(self, timeout_s: float = STOP_TIMEOUT_S) -> list[str]:
        """Stop everything by pid: brokers (controlled shutdown, all at once, while the
        controller and ZooKeeper they need are still up), then controllers, then
        ZooKeeper. Whatever does not exit in time is killed."""
        if self.state is None:
            return []
        stopped: list[str] = []
        for group in (self.state.brokers(), self.state.controllers(), self.state.zookeepers()):
            running = [(p, p.pid) for p in group if p is not None and process_alive(p.pid)]
            for info, pid in running:
                if _pid_state(pid) == "paused":
                    os.kill(pid, signal.SIGCONT)  # a stopped process cannot exit
                os.kill(pid, signal.SIGTERM)
                stopped.append(info.name)
            deadline = time.monotonic() + timeout_s
            for info, _ in running:
                self._wait_or_kill(info, max(0.0, deadline - time.monotonic()))
        for info in self.state.processes:
            info.pid = None
        self.state.save()
        return stopped

    def _wait_or_kill(self, info: ProcessInfo, timeout_s: float) -> None:
        if not self._wait_exit(info, timeout_s) and process_alive(info.pid):
            os.kill(info.pid, signal.SIGKILL)
            self._wait_exit(info, 5)

    def destroy(self) -> None:
        """down, then delete the cluster directory (data included)."""
        self.down()
        shutil.rmtree(self.directory, ignore_errors=True)
        self.state = None

    # -- status --------------------------------------------------------------------
    def secure_status(self) -> dict:
        """`client_properties` and `ca_file` of a secure cluster (none otherwise)."""
        if not self._require_state().settings.get("secure"):
            return {"secure": False}
        return {
            "secure": True,
            "client_properties": str(self.directory / secure.CLIENT_PROPERTIES),
            "ca_file": str(self.directory / CA_FILE),
        }

    def status(self) -> dict:
        state = self._require_state()
        processes = [
            ProcessStatus(
                p.name,
                p.role,
                p.id,
                p.pid,
                p.port,
                _pid_state(p.pid),
                rack=self.rack_of(p.id) if p.role == "broker" else None,
                zookeeper_mode=serving_mode("127.0.0.1", p.port) if p.role == "zookeeper" else None,
            )
            for p in state.processes
        ]
        result: dict = {
            "directory": state.directory,
            "zookeeper": state.zookeeper_connect,
            "bootstrap_servers": state.bootstrap_servers,
            "kafka_bootstrap_servers": state.kafka_bootstrap_servers,
            "processes": [vars(p) for p in processes],
            **self.secure_status(),
            "active_controller": None,
            "registered_brokers": [],
            "partitions": 0,
            "under_replicated_partitions": [],
            "offline_partitions": [],
            "leaders": {},
        }
        if not any(p.zookeeper_mode for p in processes):
            result["zookeeper_state"] = "down"
            return result
        result["zookeeper_state"] = "up"
        from tools.cluster.inspect import read_cluster

        view = read_cluster(state.zookeeper_connect)
        registered = set(view.brokers)
        for p in result["processes"]:
            if p["role"] == "broker":
                p["registered"] = p["id"] in registered
                if p["registered"]:  # the rack it registered with
                    p["rack"] = view.brokers[p["id"]].rack
        result["active_controller"] = view.controller_id
        result["controller_epoch"] = view.controller_epoch
        result["registered_brokers"] = sorted(registered)
        result["partitions"] = len(view.partitions)
        for part in view.partitions:
            name = f"{part.topic}-{part.partition}"
            if part.leader < 0:
                result["offline_partitions"].append(name)
            elif len(part.isr) < len(part.replicas):
                result["under_replicated_partitions"].append(name)
            if part.leader >= 0:
                result["leaders"].setdefault(str(part.leader), []).append(name)
        result["partition_states"] = [
            {
                "topic": p.topic,
                "partition": p.partition,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
            }
            for p in view.partitions
        ]
        return result


def _broker_properties(
    info: ProcessInfo,
    zookeeper_connect: str,
    files: SecureFiles | None,
    internal_listener: bool,
    rack: str | None,
) -> dict:
    """A local broker's properties, before the cluster's overrides."""
    return {
        "broker.id": info.id,
        **_broker_listeners(info, internal_listener),
        "log.dirs": info.data_dir,
        "zookeeper.connect": zookeeper_connect,
        "metrics.port": info.metrics_port if info.metrics_port else -1,
        **LOCAL_BROKER_SETTINGS,
        **(secure.broker_settings(files, internal_listener) if files else {}),
        **({"broker.rack": rack} if rack else {}),
    }


def _controller_properties(
    info: ProcessInfo, zookeeper_connect: str, files: SecureFiles | None
) -> dict:
    """A local controller's properties, before the cluster's overrides."""
    return {
        "controller.id": info.id,
        "listeners": f"PLAINTEXT://127.0.0.1:{info.port}",
        "zookeeper.connect": zookeeper_connect,
        "log.dir": info.data_dir,
        "metrics.port": info.metrics_port if info.metrics_port else -1,
        **LOCAL_CONTROLLER_SETTINGS,
        **(secure.controller_settings(files) if files else {}),
    }


def _reap(pid: int | None) -> None:
    """Reap our own child if it exited (tests start clusters from the same process)."""
    if not pid:
        return
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
