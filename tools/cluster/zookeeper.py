"""Run a real ZooKeeper server (Debian's jar) as a child process, alone or as one
member of an ensemble.

`ZooKeeperServer.start()` writes a zoo.cfg into its data directory, launches
`java ... QuorumPeerMain zoo.cfg` on a free loopback port, and waits until the
four-letter command `srvr` says it serves (standalone, or leader/follower of a quorum).
A member of an ensemble (`server_id` >= 1 and `peers`: every member's client, quorum
and election ports) also gets the `server.N=...` lines and its `myid` file; its
`start(wait=False)` returns at once, since no member serves before a quorum is up
(the launcher starts them all, then waits: `zk_processes.py`). `stop()` kills exactly
that pid. Used by the test fixtures and by the local cluster launcher alike.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_JAR = "/usr/share/java/zookeeper.jar"
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


class ZooKeeperError(RuntimeError):
    """ZooKeeper could not be found or started."""


def zookeeper_jar() -> Path:
    jar = Path(os.environ.get("TRIBUTARY_ZOOKEEPER_JAR", DEFAULT_JAR))
    if not jar.is_file():
        raise ZooKeeperError(
            f"ZooKeeper jar not found at {jar}: run `make setup` (installs Debian's "
            "zookeeper package) or set TRIBUTARY_ZOOKEEPER_JAR"
        )
    return jar


# Listening ports are picked below the kernel's ephemeral range (where outgoing
# connections get their local ports), from this port up: a port picked there cannot be
# taken by some client's connection between the pick and the server's bind, nor while a
# killed broker is down before it binds the same port again. Launchers that run side by
# side (parallel test workers) keep apart by each setting its own range in
# TRIBUTARY_LISTEN_PORTS ("LOW-HIGH", HIGH excluded).
LISTEN_PORTS_FROM = 10000
LISTEN_PORTS_ENV = "TRIBUTARY_LISTEN_PORTS"


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
            return low, high
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def listen_port_range() -> range:
    """Where `free_port` picks: TRIBUTARY_LISTEN_PORTS, else below the ephemeral range."""
    given = os.environ.get(LISTEN_PORTS_ENV)
    if given:
        low, _, high = given.partition("-")
        try:
            return range(int(low), int(high))
        except ValueError:
            raise ZooKeeperError(f"{LISTEN_PORTS_ENV}={given!r}: expected LOW-HIGH") from None
    return range(LISTEN_PORTS_FROM, _ephemeral_range()[0])


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago, chosen at random in `listen_port_range()`
    (falling back to one the kernel picks when that range leaves no room)."""
    ports = listen_port_range()
    if len(ports) >= 100:
        for _ in range(200):
            port = random.choice(ports)
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def four_letter_word(host: str, port: int, word: str, timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command and return the whole answer ('' on failure)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


def serving_mode(host: str, port: int, timeout: float = 0.5) -> str | None:
    """The server's `Mode:` (standalone, leader, follower) when it serves clients, else
    None (down, paused, or a member of an ensemble without a quorum)."""
    for line in four_letter_word(host, port, "srvr", timeout=timeout).splitlines():
        if line.startswith("Mode:"):
            return line.partition(":")[2].strip()
    return None


@dataclass(frozen=True)
class PeerPorts:
    """One member of an ensemble: its client port and its quorum and election ports."""

    client: int
    quorum: int
    election: int


@dataclass
class ZooKeeperServer:
    data_dir: Path
    port: int = 0
    host: str = "127.0.0.1"
    tick_time_ms: int = 500
    max_session_timeout_ms: int = 60_000
    server_id: int = 0  # >= 1: a member of the ensemble `peers` (by server id)
    peers: dict[int, PeerPorts] = field(default_factory=dict)
    process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def log_path(self) -> Path:
        return self.data_dir / "zookeeper.out"

    def _ensemble_lines(self) -> list[str]:
        if not self.peers:
            return []
        data = self.data_dir.resolve() / "data"
        data.mkdir(parents=True, exist_ok=True)
        (data / "myid").write_text(f"{self.server_id}\n")
        return [
            # Ticks: a follower has 10 s to join and 2.5 s of silence before the leader
            # (or it) gives up on the other, so a paused member loses the quorum quickly.
            "initLimit=20",
            "syncLimit=5",
            *(
                f"server.{sid}={self.host}:{p.quorum}:{p.election}"
                for sid, p in sorted(self.peers.items())
            ),
        ]

    def write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "zoo.cfg"
        cfg.write_text(
            "\n".join(
                [
                    f"dataDir={self.data_dir.resolve() / 'data'}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.host}",
                    f"tickTime={self.tick_time_ms}",
                    f"minSessionTimeout={2 * self.tick_time_ms}",
                    f"maxSessionTimeout={self.max_session_timeout_ms}",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,stat,mntr",
                    "maxClientCnxns=0",
                    "autopurge.purgeInterval=0",
                    *self._ensemble_lines(),
                    "",
                ]
            )
        )
        return cfg

    def command(self) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise ZooKeeperError("java not found on PATH: run `make setup`")
        return [
            java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp",
            str(zookeeper_jar()),
            MAIN_CLASS,
            str(self.write_config()),
        ]

    def start(
        self, timeout: float = 30.0, *, detach: bool = False, wait: bool = True
    ) -> ZooKeeperServer:
        if self.port == 0:
            self.port = free_port(self.host)
        cmd = self.command()
        out = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        try:
            self.process = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=detach,
            )
        finally:
            out.close()
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise ZooKeeperError(
                    f"ZooKeeper exited with {self.process.returncode}; see {self.log_path}"
                )
            if serving_mode(self.host, self.port) is not None:
                return
            time.sleep(0.05)
        self.stop()
        raise ZooKeeperError(f"ZooKeeper did not serve within {timeout}s; see {self.log_path}")

    def pause(self) -> None:
        """SIGSTOP: clients' sessions expire once it stays stopped past their timeout."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        """Kill exactly our pid and reap it."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.kill(proc.pid, signal.SIGCONT)  # a paused JVM cannot die of SIGTERM
            proc.terminate()
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        except ProcessLookupError:
            pass

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
