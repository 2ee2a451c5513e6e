"""`tributary cluster up --secure`: the settings, secrets and client properties of a
local cluster whose every listener is SASL_SSL with the authorizer on.

How it works: `prepare(directory)` (idempotent) makes the cluster's CA and certificate
(`pki.py`), random passwords for the brokers' and controller's PLAIN logins and the
`admin` user (`secrets.json`, 0600), and `admin.properties` (0600): Kafka client
properties logging in as `admin` with SCRAM-SHA-512 over SASL_SSL, trusting the CA.
`broker_settings` / `controller_settings` are the properties the launcher writes into
every broker's and controller's file: native and Kafka listeners SASL_SSL with
SCRAM-SHA-512/256 and PLAIN, brokers and controller logging in to each other with PLAIN
from their JAAS configs (as tests/integration/test_secure_listeners.py does), Kafka's
AclAuthorizer with `allow.everyone.if.no.acl.found=false` and `User:broker`,
`User:controller` and `User:admin` as super users. `write_admin_credential` stores the
admin's SCRAM-SHA-512 credential in /config/users before any broker starts.
`default_command_config` is the properties file every `tributary` command uses by
itself against a secure cluster directory. `write_server_properties` writes the brokers'
and controllers' settings as files, for servers not started by the launcher
(`tributary cluster pki`, docker-compose.secure.yml).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from server_common.properties import write_properties
from tools.cluster.pki import write_local_pki, write_private_file
from tools.cluster.state import ClusterState, cluster_dir

SECRETS_FILE = "secrets.json"
CLIENT_PROPERTIES = "admin.properties"
BROKER_PROPERTIES = "broker.properties"
CONTROLLER_PROPERTIES = "controller.properties"
ADMIN_USER = "admin"
BROKER_USER = "broker"
CONTROLLER_USER = "controller"
PLAIN_JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule required"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required"
MECHANISMS = "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN"
ADMIN_ITERATIONS = 4096


@dataclass(frozen=True)
class SecureFiles:
    ca_file: Path
    keystore: Path
    client_properties: Path
    passwords: dict[str, str]  # user -> password (broker, controller, admin)


def _load_or_make_passwords(path: Path) -> dict[str, str]:
    try:
        passwords = json.loads(path.read_text())
        if all(
            isinstance(passwords.get(u), str) for u in (ADMIN_USER, BROKER_USER, CONTROLLER_USER)
        ):
            return passwords
    except (OSError, ValueError, AttributeError):
        pass
    passwords = {u: secrets.token_urlsafe(18) for u in (ADMIN_USER, BROKER_USER, CONTROLLER_USER)}
    write_private_file(path, (json.dumps(passwords, indent=2) + "\n").encode())
    return passwords


def prepare(directory: Path, hostnames: Sequence[str] = ()) -> SecureFiles:
    """The CA, certificate (also for `hostnames`), passwords and admin.properties in
    `directory` (kept if there)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_file, keystore = write_local_pki(directory, hostnames)
    passwords = _load_or_make_passwords(directory / SECRETS_FILE)
    properties = directory / CLIENT_PROPERTIES
    write_private_file(
        properties,
        (
            "security.protocol=SASL_SSL\n"
            "sasl.mechanism=SCRAM-SHA-512\n"
            f'sasl.jaas.config={SCRAM_JAAS} username="{ADMIN_USER}" '
            f'password="{passwords[ADMIN_USER]}";\n'
            f"ssl.truststore.location={ca_file}\n"
            "ssl.truststore.type=PEM\n"
        ).encode(),
    )
    return SecureFiles(ca_file, keystore, properties, passwords)


def super_users() -> str:
    return ";".join(f"User:{u}" for u in (BROKER_USER, CONTROLLER_USER, ADMIN_USER))


def broker_settings(files: SecureFiles, internal: bool = False) -> dict[str, str]:
    """Every broker listener SASL_SSL: the native one (also the inter-broker one unless
    `internal`: then INTERNAL), the Kafka one."""
    p = files.passwords
    protocols = "PLAINTEXT:SASL_SSL,KAFKA:SASL_SSL" + (",INTERNAL:SASL_SSL" if internal else "")
    return {
        "listener.security.protocol.map": protocols,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(files.keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(files.ca_file),
        "sasl.enabled.mechanisms": MECHANISMS,
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.jaas.config": f'{PLAIN_JAAS} username="{BROKER_USER}" '
        f'password="{p[BROKER_USER]}" user_{BROKER_USER}="{p[BROKER_USER]}" '
        f'user_{CONTROLLER_USER}="{p[CONTROLLER_USER]}";',
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": super_users(),
    }


def controller_settings(files: SecureFiles) -> dict[str, str]:
    """The controller logs in to the brokers as `controller`; its own listener
    (ControlledShutdown) is SASL_SSL with PLAIN, the brokers logging in as `broker`."""
    p = files.passwords
    return {
        "security.inter.broker.protocol": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.jaas.config": f'{PLAIN_JAAS} username="{CONTROLLER_USER}" '
        f'password="{p[CONTROLLER_USER]}" user_{BROKER_USER}="{p[BROKER_USER]}";',
        "ssl.truststore.location": str(files.ca_file),
        "ssl.keystore.location": str(files.keystore),
        "sasl.enabled.mechanisms": "PLAIN",
    }


def write_server_properties(files: SecureFiles) -> tuple[Path, Path]:
    """`broker.properties` and `controller.properties` (0600) beside the CA: the secure
    settings of `broker_settings(files, internal=True)` and `controller_settings`, for
    servers started with `--config` on them (docker-compose.secure.yml), whose own
    `--override`s give their listeners and the protocol map for them (the file's map
    names the launcher's listeners)."""
    directory = files.ca_file.parent
    broker, controller = directory / BROKER_PROPERTIES, directory / CONTROLLER_PROPERTIES
    write_properties(broker, broker_settings(files, internal=True))
    write_properties(controller, controller_settings(files))
    return broker, controller


async def write_admin_credential(zookeeper_connect: str, password: str) -> None:
    """The admin's SCRAM-SHA-512 credential in /config/users/admin (announced, as
    `configs alter --entity-type users` does)."""
    from broker.zookeeper.gateway import BrokerZkGateway
    from server_common.security import scram
    from tools.cluster.inspect import zookeeper_session

    credential = scram.from_password(
        "SCRAM-SHA-512", password, secrets.token_bytes(32), ADMIN_ITERATIONS
    )
    async with zookeeper_session(zookeeper_connect, 10.0) as zk:
        await BrokerZkGateway(zk).set_user_config(
            ADMIN_USER, {"SCRAM-SHA-512": scram.credential_to_string(credential)}
        )


def default_command_config(directory: str | None = None) -> str | None:
    """`<cluster dir>/admin.properties` when the local cluster there is a secure one."""
    path = cluster_dir(directory)
    state = ClusterState.load(path)
    if state is None or not state.settings.get("secure"):
        return None
    properties = path / CLIENT_PROPERTIES
    return str(properties) if properties.exists() else None
