"""`cluster up --secure`'s files and settings, without processes: the CA and certificate
a TLS handshake accepts for 127.0.0.1 (and the extra host names `cluster pki` asks for,
no others), private files, stable secrets across restarts, the servers' properties
files (`cluster pki`) loading as secure configs, and admin.properties chosen by the CLI
only for a secure cluster directory."""

from __future__ import annotations

import socket
import ssl
import stat
import threading

import pytest

from broker.config import BrokerConfig
from controller.config import ControllerConfig
from server_common.properties import read_properties
from tools.cluster import secure
from tools.cluster.state import ClusterState
from tools.commands.common import security_options


def handshake(files: secure.SecureFiles, server_hostname: str) -> str:
    """A real TLS handshake to a server with the keystore, checking `server_hostname`."""
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(files.keystore)
    client_context = ssl.create_default_context(cafile=str(files.ca_file))
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        connection, _ = listener.accept()
        try:
            with server_context.wrap_socket(connection, server_side=True) as tls:
                tls.recv(1)
        except ssl.SSLError:  # the client refused the certificate
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with socket.create_connection(("127.0.0.1", port)) as raw:
            with client_context.wrap_socket(raw, server_hostname=server_hostname) as tls:
                version = tls.version() or ""
                tls.sendall(b"x")
    finally:
        thread.join(10)
        listener.close()
    return version


def test_the_certificate_passes_a_real_tls_handshake_for_127_0_0_1(tmp_path):
    files = secure.prepare(tmp_path)
    assert handshake(files, "127.0.0.1") in ("TLSv1.2", "TLSv1.3")


def test_extra_hostnames_pass_the_handshake_others_do_not(tmp_path):
    """`cluster pki --hostname broker-2`: the compose services' names."""
    files = secure.prepare(tmp_path, ["broker-2", "controller-1"])
    assert handshake(files, "broker-2") in ("TLSv1.2", "TLSv1.3")
    assert handshake(files, "localhost") in ("TLSv1.2", "TLSv1.3")
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(files, "broker-9")


def test_server_properties_files_load_as_secure_broker_and_controller_configs(tmp_path):
    files = secure.prepare(tmp_path)
    broker_file, controller_file = secure.write_server_properties(files)
    for path in (broker_file, controller_file):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600  # they hold the PLAIN passwords
    broker = BrokerConfig.load(
        broker_file,
        {  # as docker-compose.secure.yml's command lines: the listeners and their map
            "broker.id": "1",
            "listeners": "INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "INTERNAL:SASL_SSL",
        },
    )
    assert broker.security["INTERNAL"].protocol == "SASL_SSL"
    assert broker.inter_broker_listener == "INTERNAL"
    assert broker["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"
    controller = ControllerConfig.load(controller_file, {"controller.id": "1001"})
    assert controller.listener_security().protocol == "SASL_SSL"


def test_secrets_and_keys_are_private_and_kept_across_prepares(tmp_path):
    first = secure.prepare(tmp_path)
    again = secure.prepare(tmp_path)
    assert again.passwords == first.passwords
    assert len(set(first.passwords.values())) == 3
    for path in (first.keystore, first.client_properties, tmp_path / secure.SECRETS_FILE):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    properties = read_properties(first.client_properties)
    assert properties["sasl.mechanism"] == "SCRAM-SHA-512"
    assert first.passwords["admin"] in properties["sasl.jaas.config"]


def test_brokers_and_controller_are_super_users_with_every_listener_sasl_ssl(tmp_path):
    files = secure.prepare(tmp_path)
    broker = secure.broker_settings(files)
    assert broker["listener.security.protocol.map"] == "PLAINTEXT:SASL_SSL,KAFKA:SASL_SSL"
    assert broker["allow.everyone.if.no.acl.found"] == "false"
    assert broker["super.users"] == "User:broker;User:controller;User:admin"
    assert f'user_controller="{files.passwords["controller"]}"' in broker["sasl.jaas.config"]
    controller = secure.controller_settings(files)
    assert controller["security.inter.broker.protocol"] == "SASL_SSL"
    assert f'user_broker="{files.passwords["broker"]}"' in controller["sasl.jaas.config"]


def test_the_cli_uses_admin_properties_only_for_a_secure_cluster(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIBUTARY_CLUSTER_DIR", str(tmp_path))
    secure.prepare(tmp_path)
    ClusterState(str(tmp_path), "127.0.0.1:1", settings={"secure": False}).save()
    assert security_options(None) == {}
    ClusterState(str(tmp_path), "127.0.0.1:1", settings={"secure": True}).save()
    options = security_options(None)
    assert options["security_protocol"] == "SASL_SSL"
    assert options["sasl_plain_username"] == "admin"
    other = tmp_path / "plaintext.properties"
    other.write_text("security.protocol=PLAINTEXT\n")
    assert security_options(str(other)) == {}


def test_server_properties_files_are_owner_only(tmp_path):
    """The launcher's broker and controller properties hold the PLAIN passwords of a
    secure cluster: written 0600, also over a file that existed with a wider mode."""
    from server_common.properties import write_properties

    path = tmp_path / "server.properties"
    path.write_text("old=1\n")
    path.chmod(0o644)
    write_properties(path, {"sasl.jaas.config": 'x password="secret";'})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_properties(path)["sasl.jaas.config"] == 'x password="secret";'
