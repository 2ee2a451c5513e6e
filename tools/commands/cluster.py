"""`tributary cluster ...`: run and poke a local cluster of real processes.

up / status / down / kill / pause / resume / start / stop / restart / logs (and watch). Every
command acts on the pids recorded in the cluster directory's `cluster.json`. `pki`
writes a secure cluster's files for servers the launcher does not start (compose).
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

from server_common.properties import ConfigError, parse_overrides
from tools.cluster.launcher import LauncherError, LocalCluster
from tools.cluster.state import cluster_dir
from tools.commands.watch_args import register_watch
from tools.errors import CliError


def register(subparsers) -> None:
    cluster = subparsers.add_parser("cluster", help="run a local cluster of real processes")
    cluster.add_argument(
        "--dir",
        default=None,
        help="cluster directory (default $TRIBUTARY_CLUSTER_DIR or ./.tributary)",
    )
    sub = cluster.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)

    up = sub.add_parser("up", help="start ZooKeeper, controllers and brokers")
    up.add_argument("--brokers", type=int, default=3)
    up.add_argument("--controllers", type=int, default=2)
    up.add_argument(
        "--base-port", type=int, default=9092, help="first broker port (0: any free ports)"
    )
    up.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker property for every broker (repeatable)",
    )
    up.add_argument(
        "--secure",
        action="store_true",
        help="every listener SASL_SSL (a CA of its own), the authorizer on, an admin user "
        "whose client properties are <dir>/admin.properties",
    )
    up.add_argument(
        "--racks",
        default=None,
        metavar="A,B,C",
        help="broker i's broker.rack is the ((i-1) mod n)-th of these (a new cluster)",
    )
    up.add_argument(
        "--zookeepers",
        type=int,
        default=1,
        help="ZooKeeper servers: 1, or an ensemble (3, 5) named zookeeper-1..N",
    )
    up.add_argument(
        "--zk-chroot",
        default=None,
        metavar="PATH",
        help="every server's zookeeper.connect ends in this chroot, e.g. /tributary",
    )
    up.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for readiness")
    up.set_defaults(handler=_up)

    status = sub.add_parser("status", help="processes, registration, controller, partitions")
    status.add_argument("--json", action="store_true")
    status.set_defaults(handler=_status)

    down = sub.add_parser("down", help="stop every process of the cluster (by pid)")
    down.add_argument(
        "--delete-data", action="store_true", help="also remove the cluster directory"
    )
    down.set_defaults(handler=_down)

    for name, help_text, done in (
        (
            "pause",
            "SIGSTOP a process (it stops answering; its ZooKeeper session expires)",
            "paused {name} (pid {pid})",
        ),
        ("resume", "SIGCONT a paused process", "resumed {name} (pid {pid})"),
        ("start", "start a stopped process again", "started {name} (pid {pid}, port {port})"),
        ("stop", "stop a process cleanly (a broker does a controlled shutdown)", "stopped {name}"),
        (
            "restart",
            "stop a process (if running) and start it again",
            "restarted {name} (pid {pid}, port {port})",
        ),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("id", help="2, broker-2, controller-1001, zookeeper or zookeeper-2")
        p.set_defaults(handler=_process_action(name, done))

    kill = sub.add_parser("kill", help="send a signal to a process (default KILL)")
    kill.add_argument("id", help="2, broker-2, controller-1001, zookeeper or zookeeper-2")
    kill.add_argument("--signal", choices=["KILL", "TERM"], default="KILL")
    kill.set_defaults(handler=_kill)

    logs = sub.add_parser("logs", help="show a process's log")
    logs.add_argument("id", help="2, broker-2, controller-1001 or zookeeper")
    logs.add_argument("--lines", "-n", type=int, default=40)
    logs.add_argument("--follow", "-f", action="store_true")
    logs.set_defaults(handler=_logs)

    pki = sub.add_parser(
        "pki",
        help="write a secure cluster's CA, certificate, passwords and properties files "
        "into a directory (docker-compose.secure.yml)",
    )
    pki.add_argument("--out", required=True, metavar="DIR", help="where to write them")
    pki.add_argument(
        "--hostname",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name the certificate is also for, besides localhost (repeatable)",
    )
    pki.add_argument(
        "--zookeeper",
        metavar="HOST:PORT",
        help="also store the admin user's SCRAM-SHA-512 credential in this ZooKeeper",
    )
    pki.set_defaults(handler=_pki)

    register_watch(sub)


def _cluster(args, **kwargs) -> LocalCluster:
    return LocalCluster(cluster_dir(args.dir), **kwargs)


def _guard(fn):
    def wrapper(args) -> int:
        try:
            return fn(args)
        except (LauncherError, ConfigError) as exc:
            raise CliError(str(exc)) from None

    wrapper.__name__ = fn.__name__
    return wrapper


@_guard
def _up(args) -> int:
    if args.brokers < 1 or args.controllers < 0:
        raise CliError("need at least one broker and zero or more controllers", 2)
    racks = [r.strip() for r in args.racks.split(",")] if args.racks is not None else []
    if args.racks is not None and not all(racks):
        raise CliError(f"--racks: give rack names separated by commas, got {args.racks!r}", 2)
    cluster = _cluster(
        args,
        brokers=args.brokers,
        controllers=args.controllers,
        base_port=args.base_port or None,
        broker_overrides=parse_overrides(args.override),
        secure=args.secure,
        racks=racks,
        zookeepers=args.zookeepers,
        zk_chroot=args.zk_chroot,
    )
    was_running = cluster.running()
    state = cluster.up(timeout_s=args.timeout)
    verb = "already running" if was_running else "up"
    print(
        f"cluster {verb}: {len(state.brokers())} broker(s), "
        f"{len(state.controllers())} controller(s)"
    )
    print(f"  directory:  {state.directory}")
    print(f"  zookeeper:  {state.zookeeper_connect}")
    for info in state.processes:
        extra = f", metrics :{info.metrics_port}" if info.metrics_port else ""
        if info.role == "broker" and (rack := cluster.rack_of(info.id)):
            extra += f", rack {rack}"
        print(f"  {info.name:<16} pid {info.pid}, port {info.port}{extra}, log {info.log_path}")
    print(f"bootstrap servers: {state.bootstrap_servers}")
    if state.kafka_bootstrap_servers:
        print(f"kafka bootstrap servers: {state.kafka_bootstrap_servers} (kcat, Kafka clients)")
    secure = cluster.secure_status()
    if secure["secure"]:
        print(f"client properties: {secure['client_properties']} (SASL_SSL, user admin)")
        print(f"CA certificate: {secure['ca_file']}")
    return 0


def _pki(args) -> int:
    """The files of `cluster up --secure` (kept if there), plus the servers' properties;
    with --zookeeper, the admin's credential. Prints paths, never a password."""
    from tools.cluster import secure
    from tools.cluster.inspect import run_blocking

    files = secure.prepare(Path(args.out).resolve(), args.hostname)
    broker, controller = secure.write_server_properties(files)
    for path in (files.ca_file, files.keystore, files.client_properties, broker, controller):
        print(f"wrote {path}")
    if args.zookeeper:
        password = files.passwords[secure.ADMIN_USER]
        try:
            run_blocking(lambda: secure.write_admin_credential(args.zookeeper, password))
        except (OSError, TimeoutError) as exc:
            raise CliError(
                f"cannot store the admin's credential in {args.zookeeper}: {exc}"
            ) from None
        print(
            f"stored the SCRAM-SHA-512 credential of user {secure.ADMIN_USER} in {args.zookeeper}"
        )
    return 0


@_guard
def _status(args) -> int:
    status = _cluster(args).status()
    if args.json:
        print(json.dumps(status, indent=2))
        return 0
    print(
        f"cluster {status['directory']} "
        f"(zookeeper {status['zookeeper']}: {status['zookeeper_state']})"
    )
    for p in status["processes"]:
        registered = p.get("registered")
        reg = "" if registered is None else ("  registered" if registered else "  NOT registered")
        marker = (
            "*" if p["role"] == "controller" and p["id"] == status["active_controller"] else " "
        )
        print(
            f" {marker}{p['name']:<16} {p['state']:<8} pid {p['pid'] or '-':<8} "
            f"port {p['port']}{reg}"
            + (f"  rack {p['rack']}" if p.get("rack") else "")
            + (f"  {p['zookeeper_mode']}" if p.get("zookeeper_mode") else "")
        )
    print(f"bootstrap servers: {status['bootstrap_servers']}")
    if status.get("kafka_bootstrap_servers"):
        print(f"kafka bootstrap servers: {status['kafka_bootstrap_servers']}")
    print(
        f"active controller: {status['active_controller']} (epoch {status.get('controller_epoch')})"
    )
    print(
        f"partitions: {status['partitions']}, "
        f"under-replicated: {len(status['under_replicated_partitions'])}, "
        f"offline: {len(status['offline_partitions'])}"
    )
    for name in status["under_replicated_partitions"]:
        print(f"  under-replicated: {name}")
    for name in status["offline_partitions"]:
        print(f"  offline: {name}")
    for broker, names in sorted(status["leaders"].items(), key=lambda kv: int(kv[0])):
        print(f"  broker {broker} leads {len(names)}")
    return 0


@_guard
def _down(args) -> int:
    cluster = _cluster(args)
    if cluster.state is None:
        print(f"no local cluster at {cluster.directory}")
        return 0
    stopped = cluster.down()
    print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    if args.delete_data:
        cluster.destroy()
        print(f"deleted {cluster.directory}")
    return 0


@_guard
def _kill(args) -> int:
    sig = signal.SIGKILL if args.signal == "KILL" else signal.SIGTERM
    info = _cluster(args).kill(args.id, sig)
    print(f"sent SIG{args.signal} to {info.name} (pid {info.pid})")
    return 0


def _process_action(method: str, done: str):
    """A handler calling LocalCluster.<method>(id) and printing `done` about the process."""

    @_guard
    def handler(args) -> int:
        info = getattr(_cluster(args), method)(args.id)
        print(done.format(name=info.name, pid=info.pid, port=info.port))
        return 0

    return handler


@_guard
def _logs(args) -> int:
    info = _cluster(args).process(args.id)
    path = Path(info.log_path)
    if not path.exists():
        raise CliError(f"no log yet at {path}")
    with open(path, errors="replace") as f:
        lines = f.readlines()
        sys.stdout.writelines(lines[-args.lines :] if args.lines > 0 else lines)
        if not args.follow:
            return 0
        sys.stdout.flush()
        while True:
            line = f.readline()
            if line:
                sys.stdout.write(line)
                sys.stdout.flush()
            else:
                time.sleep(0.2)
