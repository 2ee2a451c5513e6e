"""docker-compose.yml runs the same cluster as `tributary cluster up`, and
docker-compose.secure.yml the same one as `tributary cluster up --secure`.

No Docker engine is needed (or used): `docker-compose config -q` validates the file
offline, and `docker-compose config` prints it normalized (anchors merged, defaults
filled in), which is then parsed as YAML. Compose v1 has no JSON output; PyYAML is not a
project dependency, but docker-compose v1 is itself a Python program built on PyYAML,
so the interpreter that runs it can always parse its output. Skipped, with the reason,
when docker-compose is not installed.

Checked against the launcher (tools/cluster/launcher.py): the broker and controller
counts and ids, one volume per broker for its log dir, a ZooKeeper ensemble of three
(`--zookeepers 3`: ZOO_MY_ID, ZOO_SERVERS, healthy only within a quorum, a volume each),
every server waiting for all three and connecting to all three, the brokers' published
ports, the small timeouts
(LOCAL_BROKER_SETTINGS / LOCAL_CONTROLLER_SETTINGS), and that every server's command
line is one `tributary` accepts (parsed by the real CLI and config classes). Those
checks run on both files; the secure file's servers are loaded with the files its `pki`
service writes, made here for real by that service's own command (`tributary cluster
pki`, against a real ZooKeeper): every listener SASL_SSL with complete TLS and SASL
settings, the authorizer on, the certificate valid for every service name, the admin's
SCRAM credential in ZooKeeper, the security volume mounted where the commands read it.
"""

from __future__ import annotations

import copy
import functools
import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from broker.config import BrokerConfig
from controller.config import ControllerConfig
from server_common.properties import parse_overrides
from server_common.security.credential_cache import ScramCredentialCache
from tools.cli import build_parser
from tools.cluster.launcher import (
    CONTROLLER_ID_BASE,
    KAFKA_BASE_PORT,
    LOCAL_BROKER_SETTINGS,
    LOCAL_CONTROLLER_SETTINGS,
)

pytestmark = pytest.mark.integration  # runs docker-compose (no engine)

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
SECURE_COMPOSE_FILE = ROOT / "docker-compose.secure.yml"
SECURITY_DIR = "/var/lib/tributary/security"  # the secure file's `security` volume
TO_JSON = "import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)"


def _compose_command(file: Path = COMPOSE_FILE) -> list[str]:
    exe = shutil.which("docker-compose")
    if exe is None:
        pytest.skip("docker-compose is not installed (make setup installs Debian's package)")
    return [exe, "-f", str(file)]


def _yaml_parser() -> list[str]:
    """An interpreter that can `import yaml`: ours if it can, else docker-compose's own."""
    candidates = [[sys.executable]]
    exe = shutil.which("docker-compose")
    with open(exe, "rb") as f:
        first = f.readline().decode(errors="replace").strip()
    if first.startswith("#!"):
        candidates.append(first[2:].split())
    for interpreter in candidates:
        probe = subprocess.run([*interpreter, "-c", "import yaml"], capture_output=True)
        if probe.returncode == 0:
            return interpreter
    pytest.skip("no interpreter with PyYAML to read docker-compose's output")


@functools.cache
def _normalized(file: Path) -> str:
    """`docker-compose -f FILE config` as JSON (after `config -q` accepted the file)."""
    command = _compose_command(file)
    check = subprocess.run(
        [*command, "config", "-q"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0, f"{file.name} is invalid:\n{check.stderr}"
    normalized = subprocess.run(
        [*command, "config"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    parsed = subprocess.run(
        [*_yaml_parser(), "-c", TO_JSON],
        input=normalized,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return parsed.stdout


def _load(file: Path) -> dict:
    return json.loads(_normalized(file))


@pytest.fixture(scope="module")
def pki_dir(tmp_path_factory) -> Path:
    """What the secure file's `pki` service writes, made by its own command line (the
    container path replaced by a temporary directory), against a real ZooKeeper."""
    from tools.cluster.zookeeper import ZooKeeperServer

    service = _load(SECURE_COMPOSE_FILE)["services"]["pki"]
    out = tmp_path_factory.mktemp("pki") / "security"
    zookeeper = ZooKeeperServer(out.parent / "zookeeper")
    with zookeeper:
        args = [
            arg.replace(SECURITY_DIR, str(out)).replace(ZOOKEEPER_CONNECT, zookeeper.connect_string)
            for arg in service["command"]
        ]
        written = []
        for _run in ("first start", "restart"):  # a restart keeps every file
            result = subprocess.run(
                [sys.executable, "-m", "tools", *args],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert result.returncode == 0, result.stdout + result.stderr
            written.append({p.name: p.read_bytes() for p in out.iterdir()})
        assert written[0] == written[1]
        (out / "admin-credential").write_text(json.dumps(_admin_config(zookeeper.connect_string)))
    return out


def _admin_config(connect: str) -> dict[str, str]:
    from broker.zookeeper.gateway import BrokerZkGateway
    from tools.cluster.inspect import run_blocking, zookeeper_session

    async def read() -> dict[str, str]:
        async with zookeeper_session(connect, 10.0) as zk:
            return (await BrokerZkGateway(zk).user_configs(["admin"]))["admin"]

    return run_blocking(read)


@pytest.fixture(scope="module")
def secure_servers_here(pki_dir) -> dict:
    """The secure file, its servers reading the files `pki_dir` holds."""
    loaded = copy.deepcopy(_load(SECURE_COMPOSE_FILE))
    for service in loaded["services"].values():
        if service.get("command", [None])[0] in ("broker", "controller"):
            service["command"] = [a.replace(SECURITY_DIR, str(pki_dir)) for a in service["command"]]
    return loaded


@pytest.fixture(scope="module", params=["plain", "secure"])
def compose(request) -> dict:
    """Each file, normalized (the secure one as `secure_servers_here`)."""
    if request.param == "plain":
        return _load(COMPOSE_FILE)
    return request.getfixturevalue("secure_servers_here")


@pytest.fixture(scope="module")
def plain_compose() -> dict:
    return _load(COMPOSE_FILE)


@pytest.fixture(scope="module")
def secure_compose(pki_dir) -> dict:
    """The secure file as written (container paths)."""
    return _load(SECURE_COMPOSE_FILE)


def _launcher_defaults():
    """What `tributary cluster up` (and so `make run`) starts by default."""
    return build_parser().parse_args(["cluster", "up"])


def _servers(compose: dict, role: str) -> dict[str, dict]:
    return {
        name: service
        for name, service in compose["services"].items()
        if service.get("command", [None])[0] == role
    }


def _parsed_command(service: dict):
    """The service's command as `tributary` parses it (the image's entrypoint)."""
    return build_parser().parse_args(service["command"])


def _broker_config(service: dict) -> BrokerConfig:
    args = _parsed_command(service)
    # Every setting with --override; the secure file's secrets with --config (pki's file).
    return BrokerConfig.load(args.config, parse_overrides(args.override))


def _controller_config(service: dict) -> ControllerConfig:
    args = _parsed_command(service)
    return ControllerConfig.load(args.config, parse_overrides(args.override))


def _published(service: dict) -> dict[int, int]:
    """container port -> host port."""
    ports = {}
    for entry in service.get("ports", []):
        if isinstance(entry, dict):
            ports[int(entry["target"])] = int(entry["published"])
        else:  # "HOST:CONTAINER"
            host, _, container = str(entry).rpartition(":")
            ports[int(container)] = int(host.rpartition(":")[2])
    return ports


# -- shape --------------------------------------------------------------------------------
def test_same_brokers_and_controllers_as_the_launcher(compose):
    defaults = _launcher_defaults()
    brokers = _servers(compose, "broker")
    controllers = _servers(compose, "controller")
    assert len(brokers) == defaults.brokers == 3
    assert len(controllers) == defaults.controllers == 2
    broker_ids = {name: _broker_config(s).broker_id for name, s in brokers.items()}
    assert broker_ids == {f"broker-{b}": b for b in range(1, defaults.brokers + 1)}
    controller_ids = sorted(
        _controller_config(s).values["controller.id"] for s in controllers.values()
    )
    assert controller_ids == [CONTROLLER_ID_BASE + i for i in range(1, defaults.controllers + 1)]


ZOOKEEPERS = ["zookeeper-1", "zookeeper-2", "zookeeper-3"]
ZOOKEEPER_CONNECT = ",".join(f"{name}:2181" for name in ZOOKEEPERS)


def _zookeepers(compose: dict) -> dict[str, dict]:
    return {n: s for n, s in compose["services"].items() if s.get("image", "").startswith("zoo")}


def test_zookeeper_is_an_ensemble_of_three_official_images_healthy_with_a_quorum(compose):
    zookeepers = _zookeepers(compose)
    assert sorted(zookeepers) == ZOOKEEPERS
    expected_servers = {f"server.{i}=zookeeper-{i}:2888:3888;2181" for i in (1, 2, 3)}
    for i, name in enumerate(ZOOKEEPERS, start=1):
        zk = zookeepers[name]
        assert zk["image"].startswith("zookeeper:3.8")
        assert zk["hostname"] == name
        env = zk["environment"]
        assert str(env["ZOO_MY_ID"]) == str(i)
        assert set(env["ZOO_SERVERS"].split()) == expected_servers
        assert "srvr" in env["ZOO_4LW_COMMANDS_WHITELIST"].split(",")
        # Healthy only when serving, i.e. within a quorum (ruok answers without one).
        assert "srvr" in " ".join(zk["healthcheck"]["test"])
        volumes = {v.split(":")[1]: v.split(":")[0] for v in zk["volumes"]}
        assert volumes == {"/data": f"{name}-data", "/datalog": f"{name}-datalog"}
        if "pki" in compose["services"]:
            assert _published(zk) == {}  # secure: ZooKeeper (not secured) stays inside
        else:  # `cluster watch --zookeeper localhost:2181,localhost:2182,localhost:2183`
            assert _published(zk) == {2181: 2180 + i}


def test_every_server_waits_for_a_healthy_zookeeper_and_has_a_healthcheck(compose):
    servers = {**_servers(compose, "broker"), **_servers(compose, "controller")}
    for name, service in servers.items():
        for zk_name in ZOOKEEPERS:
            assert service["depends_on"][zk_name]["condition"] == "service_healthy", name
        assert service["healthcheck"]["test"], name
        assert service["build"]["target"] == "runtime", name
        zk = (_broker_config if name.startswith("broker") else _controller_config)(service)
        assert zk.values["zookeeper.connect"] == ZOOKEEPER_CONNECT, name


def test_each_broker_keeps_its_log_in_its_own_volume(compose):
    volumes_seen = set()
    for name, service in _servers(compose, "broker").items():
        log_dir = str(_broker_config(service).log_dir)
        mounts = [v for v in service["volumes"] if v.split(":")[1] == log_dir]
        assert len(mounts) == 1, f"{name} has no volume at its log dir {log_dir}"
        volume = mounts[0].split(":")[0]
        assert volume in compose["volumes"], f"{name}: {volume} is not a named volume"
        assert volume not in volumes_seen, f"{name} shares {volume}"
        volumes_seen.add(volume)


def test_brokers_advertise_internal_and_external_listeners_with_published_ports(compose):
    base_port = _launcher_defaults().base_port
    for name, service in _servers(compose, "broker").items():
        config = _broker_config(service)
        b = config.broker_id
        assert config.inter_broker_listener == "INTERNAL"
        assert config.advertised["INTERNAL"][0] == name  # in-network clients and brokers
        external_host, external_port = config.advertised["EXTERNAL"]
        assert (external_host, external_port) == ("localhost", base_port + b - 1)
        published = _published(service)
        bound_external = config.listeners["EXTERNAL"][1]
        # The host port leads to the EXTERNAL listener, and is the port advertised for it.
        assert published[bound_external] == external_port
        assert config.listeners["INTERNAL"][1] not in published  # inter-broker stays inside
        # Metrics as the launcher numbers them (9191 + broker id).
        assert published[config["metrics.port"]] == 9191 + b
        # The Kafka-protocol listener, published and advertised as the launcher numbers it.
        assert "KAFKA:kafka" in config["listener.wire.protocol.map"]
        kafka_host, kafka_port = config.advertised["KAFKA"]
        assert (kafka_host, kafka_port) == ("localhost", KAFKA_BASE_PORT + b - 1)
        assert published[config.listeners["KAFKA"][1]] == kafka_port


def test_broker_settings_are_the_launchers_small_timeouts(compose):
    for name, service in _servers(compose, "broker").items():
        config = _broker_config(service)
        for key, expected in LOCAL_BROKER_SETTINGS.items():
            assert config[key] == expected, f"{name}: {key}={config[key]}, launcher: {expected}"


def test_controller_settings_are_the_launchers(compose):
    for name, service in _servers(compose, "controller").items():
        config = _controller_config(service)
        for key, expected in LOCAL_CONTROLLER_SETTINGS.items():
            assert config.values[key] == expected, f"{name}: {key}"
        assert config.advertised_host == name


# -- the secure variant ---------------------------------------------------------------
def test_secure_every_listener_is_sasl_ssl_and_the_authorizer_is_on(secure_servers_here):
    from tools.cluster import secure

    compose = secure_servers_here
    for name, service in _servers(compose, "broker").items():
        config = _broker_config(service)
        assert set(config.listeners) == {"INTERNAL", "EXTERNAL", "KAFKA"}, name
        for listener, security in config.security.items():
            assert security.protocol == "SASL_SSL", f"{name}: {listener}"
            assert security.tls is not None, f"{name}: {listener} has no TLS settings"
            assert "SCRAM-SHA-512" in security.sasl_mechanisms, f"{name}: {listener}"
        assert config["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"
        assert config["allow.everyone.if.no.acl.found"] is False
        assert config["super.users"] == secure.super_users()
        assert config["sasl.mechanism.inter.broker.protocol"] == "PLAIN"
        assert f'username="{secure.BROKER_USER}"' in config["sasl.jaas.config"]
    for name, service in _servers(compose, "controller").items():
        controller = _controller_config(service)
        security = controller.listener_security()
        assert security.protocol == "SASL_SSL" and security.tls is not None, name
        assert controller.sasl_factory(ScramCredentialCache()) is not None, (
            name
        )  # the brokers' PLAIN logins


def test_secure_servers_read_the_security_volume_pki_fills_first(secure_compose):
    services = secure_compose["services"]
    assert "security" in secure_compose["volumes"]
    pki = services["pki"]
    assert _volume_at(pki, SECURITY_DIR) == "security"
    assert f"--out={SECURITY_DIR}" in pki["command"]
    for zk_name in ZOOKEEPERS:
        assert pki["depends_on"][zk_name]["condition"] == "service_healthy"
    assert f"--zookeeper={ZOOKEEPER_CONNECT}" in pki["command"]
    servers = {**_servers(secure_compose, "broker"), **_servers(secure_compose, "controller")}
    assert len(servers) == 5
    for name, service in servers.items():
        assert service["depends_on"]["pki"]["condition"] == "service_completed_successfully"
        mounts = [v for v in service["volumes"] if v.startswith("security:")]
        assert mounts == [f"security:{SECURITY_DIR}:ro"], name
        config = _parsed_command(service).config
        role = "broker" if name.startswith("broker") else "controller"
        assert config == f"{SECURITY_DIR}/{role}.properties", name
    admin = services["admin"]
    assert admin["profiles"] == ["tools"]
    assert f"--command-config={SECURITY_DIR}/admin.properties" in admin["entrypoint"]
    assert _volume_at(admin, SECURITY_DIR) == "security"


def test_secure_pki_writes_private_files_a_certificate_for_every_service_and_the_admin(
    secure_compose, pki_dir
):
    from cryptography import x509

    from server_common.security import scram
    from tools.cluster import secure

    for name in ("broker.pem", "secrets.json", "admin.properties", "broker.properties"):
        assert stat.S_IMODE((pki_dir / name).stat().st_mode) == 0o600, name
    chain = (pki_dir / "broker.pem").read_bytes()
    leaf = x509.load_pem_x509_certificates(chain[chain.index(b"-----BEGIN CERTIFICATE") :])[0]
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    hostnames = set(names.get_values_for_type(x509.DNSName))
    servers = {**_servers(secure_compose, "broker"), **_servers(secure_compose, "controller")}
    assert {"localhost", *servers} <= hostnames  # EXTERNAL/KAFKA from the host, the rest inside
    admin = dict(
        line.split("=", 1) for line in (pki_dir / "admin.properties").read_text().splitlines()
    )
    assert admin["security.protocol"] == "SASL_SSL"
    assert admin["ssl.truststore.location"] == str(pki_dir / "ca.pem")
    # The admin's credential in ZooKeeper matches the password the properties hold.
    password = json.loads((pki_dir / "secrets.json").read_text())[secure.ADMIN_USER]
    assert f'password="{password}"' in admin["sasl.jaas.config"]
    stored = json.loads((pki_dir / "admin-credential").read_text())
    credential = scram.credential_from_string(stored["SCRAM-SHA-512"])
    expected = scram.from_password(
        "SCRAM-SHA-512", password, credential.salt, credential.iterations
    )
    assert credential == expected


def _volume_at(service: dict, path: str) -> str | None:
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if target == path:
            return source
    return None


def test_analytics_is_opt_in_and_reads_every_servers_volume_read_only(plain_compose):
    compose = plain_compose
    analytics = compose["services"]["analytics"]
    assert analytics["profiles"] == ["analytics"]
    assert analytics["command"][:1] == ["analytics"]
    assert analytics["build"]["target"] == "analytics"
    args = analytics["command"]
    data_dir = args[args.index("--data") + 1]
    # The brokers' logs and the controllers' events, where the launcher lays them out
    # (<cluster dir>/broker-N/data, <cluster dir>/controller-100N/data).
    expected = {}
    for service in _servers(compose, "broker").values():
        config = _broker_config(service)
        volume = _volume_at(service, str(config.log_dir))
        expected[volume] = f"{data_dir}/broker-{config.broker_id}/data"
    for name, service in _servers(compose, "controller").items():
        config = _controller_config(service)
        volume = _volume_at(service, config.values["log.dir"])
        assert volume is not None, f"{name} keeps its events in no volume"
        expected[volume] = f"{data_dir}/controller-{config.values['controller.id']}/data"
    mounted = {v.split(":")[0]: v.split(":")[1:] for v in analytics["volumes"]}
    for volume, path in expected.items():
        assert mounted.get(volume) == [path, "ro"], f"{volume} should be at {path}, read-only"


# -- the image ----------------------------------------------------------------------------
def test_dockerfile_installs_every_package_and_runs_tributary_unprivileged():
    text = (ROOT / "Dockerfile").read_text()
    lines = [line.strip() for line in text.splitlines()]
    first_stage = next(line for line in lines if line.startswith("FROM "))
    assert first_stage.startswith("FROM python:3.11-slim")
    assert 'ENTRYPOINT ["tributary"]' in lines
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and users[-1] != "root"
    # Every top-level package setuptools installs is copied into the image.
    import tomllib

    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = include["packages"]["find"]["include"]
    packages = [p.rstrip("*") for p in patterns]
    for package in packages:
        assert f"COPY {package} ./{package}" in lines, f"the Dockerfile does not copy {package}/"
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".tributary" in ignored and ".git" in ignored
