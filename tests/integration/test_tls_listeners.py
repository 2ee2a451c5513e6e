"""TLS listeners with mutual TLS, against real broker processes: every listener (native
PLAINTEXT and Kafka KAFKA for clients, INTERNAL for replication, the controller's) is SSL
with `ssl.client.auth=required`; brokers and the controller show their own certificate
to each other. Certificates come from a CA made here (trustme); another CA signs a
certificate that must be refused in the handshake. The authorizer is on: a connection's
principal is its certificate's subject (RFC 2253), the brokers' is a super user, alice's
has ACLs on the topic, bob's (same CA) has none.

The bounds of issue 13 keep working under TLS: `max.connections.per.ip` refuses a
connection before its handshake, a connection that never handshakes is closed after
`ssl.handshake.timeout.ms`, an established but silent one after
`connections.max.idle.ms`, and a frame bigger than the memory pool
(`queued.max.request.bytes`) closes its connection while normal traffic goes on.
No timed assertions: every wait has a generous bound.
"""

from __future__ import annotations

import contextlib
import pathlib
import socket
import ssl
import struct

import confluent_kafka
import pytest
import trio
import trustme
from cryptography import x509

from client.admin import NewTopic, open_admin
from client.admin.acls import Acl
from client.consumer.consumer import open_consumer
from client.producer.producer import open_producer
from client.protocol.acl_types import AclOperation, ResourceType
from client.protocol.errors import ErrorCode, TributaryError
from tests.integration.conftest import TEST_BROKER_SETTINGS, TEST_CONTROLLER_SETTINGS
from tests.integration.helpers import partition_state, wait_until
from tests.support.hostile import ANSWER_BOUND_S, closed_by_peer, connect_raw
from tools.cluster.launcher import LocalCluster

pytestmark = pytest.mark.integration

PER_IP = 6
POOL = 1024 * 1024
TOPIC = "tls"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(
        str(directory / "broker.pem")
    )
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    for user in ("alice", "bob"):
        issued = ca.issue_cert(f"{user}@example.com", common_name=user)
        issued.private_key_and_cert_chain_pem.write_to_path(str(directory / f"{user}.pem"))
    mallory = trustme.CA().issue_cert("mallory@example.com", common_name="mallory")
    mallory.private_key_and_cert_chain_pem.write_to_path(str(directory / "mallory.pem"))
    return directory


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory, pki):
    cluster = LocalCluster(
        tmp_path_factory.mktemp("tls"),
        brokers=2,
        controllers=1,
        base_port=None,
        internal_listener=True,
        broker_overrides={
            **TEST_BROKER_SETTINGS,
            "listener.security.protocol.map": "PLAINTEXT:SSL,KAFKA:SSL,INTERNAL:SSL",
            "ssl.keystore.location": str(pki / "broker.pem"),
            "ssl.truststore.location": str(pki / "ca.pem"),
            "ssl.client.auth": "required",
            "ssl.handshake.timeout.ms": 2000,
            "connections.max.idle.ms": 3000,
            "max.connections.per.ip": PER_IP,
            "queued.max.request.bytes": POOL,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": principal(pki / "broker.pem"),
        },
        controller_overrides={
            **TEST_CONTROLLER_SETTINGS,
            # To brokers and on its own listener: SSL with its certificate, both ways.
            "security.inter.broker.protocol": "SSL",
            "ssl.keystore.location": str(pki / "broker.pem"),
            "ssl.truststore.location": str(pki / "ca.pem"),
            "ssl.client.auth": "required",
        },
    )
    try:
        cluster.up(timeout_s=90)
        trio.run(_create_topic, cluster, pki)
        wait_until(lambda: len(partition_state(cluster, TOPIC, 0).isr) == 2, 60)
        yield cluster
    finally:
        cluster.down(timeout_s=20)


def principal(pem: pathlib.Path) -> str:
    """The certificate's subject as Kafka's default principal builder names it, computed
    by `cryptography` (RFC 4514, which is RFC 2253 for these attributes)."""
    certificate = x509.load_pem_x509_certificate(pem.read_bytes())
    return f"User:{certificate.subject.rfc4514_string()}"


def mtls(pki, certificate: str = "alice.pem") -> dict:
    return {
        "security_protocol": "SSL",
        "ssl_cafile": str(pki / "ca.pem"),
        "ssl_certfile": str(pki / certificate),
    }


async def _create_topic(cluster: LocalCluster, pki) -> None:
    """As the brokers' certificate (a super user): the topic, and alice's ACLs on it."""
    alice = principal(pki / "alice.pem")
    acls = [
        Acl(ResourceType.TOPIC, TOPIC, alice, op) for op in (AclOperation.WRITE, AclOperation.READ)
    ]
    async with open_admin(cluster.state.bootstrap_servers, **mtls(pki, "broker.pem")) as admin:
        assert await admin.create_topics([NewTopic(TOPIC, 1, 2)]) == {TOPIC: None}
        assert await admin.create_acls(acls) == [None, None]


def _port(cluster: LocalCluster) -> int:
    return cluster.state.brokers()[0].port


def _round_trip(cluster: LocalCluster, pki, label: str) -> None:
    """An acks=all produce (the follower fetches over INTERNAL, mTLS too) and a fetch."""
    values = [f"{label}-{i}".encode() for i in range(20)]

    async def scenario() -> set[bytes]:
        bootstrap = cluster.state.bootstrap_servers
        async with open_producer(bootstrap, acks=-1, **mtls(pki)) as producer:
            for value in values:
                await producer.send(TOPIC, value)
        got: set[bytes] = set()
        async with open_consumer(bootstrap, auto_offset_reset="earliest", **mtls(pki)) as c:
            c.assign([(TOPIC, 0)])
            with trio.fail_after(ANSWER_BOUND_S):
                while not set(values) <= got:
                    got.update(r.value for r in await c.poll(timeout_ms=1000))
        return got

    assert set(values) <= trio.run(scenario)


def _tls(sock: socket.socket, pki, certificate: str | None = "alice.pem") -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    if certificate:
        context.load_cert_chain(str(pki / certificate))
    return context.wrap_socket(sock, server_hostname="127.0.0.1")


def _closed(sock: ssl.SSLSocket) -> bool:
    """True once the broker has closed the TLS connection (with or without close_notify)."""
    sock.settimeout(ANSWER_BOUND_S)
    try:
        return sock.recv(1) == b""
    except (ssl.SSLEOFError, ConnectionResetError):
        return True


def test_mtls_clients_produce_and_consume(tls_cluster, pki):
    _round_trip(tls_cluster, pki, "mtls")


def test_controlled_shutdown_and_restart_over_mtls(tls_cluster, pki):
    """The broker shows its certificate to the controller's SSL listener for
    ControlledShutdown; back up, its follower catches up over INTERNAL (mTLS)."""
    leader = partition_state(tls_cluster, TOPIC, 0).leader
    info = tls_cluster.stop(f"broker-{leader}")
    with open(info.log_path) as log_file:
        assert "controlled shutdown succeeded" in log_file.read()
    tls_cluster.start(f"broker-{leader}")
    wait_until(lambda: len(partition_state(tls_cluster, TOPIC, 0).isr) == 2, 90)
    _round_trip(tls_cluster, pki, "after-restart")


def test_confluent_kafka_with_a_client_certificate(tls_cluster, pki):
    settings = {
        "bootstrap.servers": tls_cluster.state.kafka_bootstrap_servers,
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki / "ca.pem"),
        "ssl.certificate.location": str(pki / "alice.pem"),
        "ssl.key.location": str(pki / "alice.pem"),
    }
    producer = confluent_kafka.Producer({**settings, "acks": "all"})
    failed: list[str] = []
    for i in range(10):
        producer.produce(
            TOPIC, f"confluent-mtls-{i}".encode(), on_delivery=lambda e, m: e and failed.append(e)
        )
    assert producer.flush(60) == 0 and not failed


def test_acls_match_the_certificates_principal(tls_cluster, pki):
    """Alice's certificate may write (her ACLs name its subject); bob's, from the same
    CA, authenticates but is refused TOPIC_AUTHORIZATION_FAILED and sees no topic."""
    _round_trip(tls_cluster, pki, "alice-acl")

    async def as_bob() -> tuple[TributaryError, list[str]]:
        bootstrap = tls_cluster.state.bootstrap_servers
        async with open_producer(bootstrap, **mtls(pki, "bob.pem")) as producer:
            with pytest.raises(TributaryError) as refused:
                await (await producer.send(TOPIC, b"bob")).wait()
        async with open_admin(bootstrap, **mtls(pki, "bob.pem")) as admin:
            topics = await admin.list_topics()
        return refused.value, list(topics)

    refused, topics = trio.run(as_bob)
    assert refused.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert TOPIC not in topics


@pytest.mark.parametrize("certificate", ["mallory.pem", None])
def test_a_certificate_from_another_ca_or_none_is_refused_in_the_handshake(
    tls_cluster, pki, certificate
):
    with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
        with _tls(connect_raw(_port(tls_cluster)), pki, certificate) as sock:
            # TLS 1.3 reports a refused client certificate on the first read.
            sock.sendall(b"\x00\x00\x00\x00")
            if sock.recv(1) == b"":
                raise ConnectionResetError("closed")

    async def library() -> None:
        async with open_admin(tls_cluster.state.bootstrap_servers, **mtls(pki, certificate or "")):
            pass

    if certificate is not None:
        with pytest.raises(TributaryError):
            trio.run(library)
    _round_trip(tls_cluster, pki, f"after-{certificate}")


def test_garbage_instead_of_a_client_hello_is_closed(tls_cluster, pki):
    with connect_raw(_port(tls_cluster)) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert closed_by_peer(sock, ANSWER_BOUND_S)
    _round_trip(tls_cluster, pki, "after-garbage")


def test_a_connection_that_never_handshakes_is_closed(tls_cluster):
    with connect_raw(_port(tls_cluster)) as sock:
        assert closed_by_peer(sock, ANSWER_BOUND_S)  # ssl.handshake.timeout.ms: 2 s


def test_an_idle_tls_connection_is_closed(tls_cluster, pki):
    with _tls(connect_raw(_port(tls_cluster)), pki) as sock:
        assert _closed(sock)  # connections.max.idle.ms: 3 s


def test_the_per_ip_limit_refuses_before_the_handshake(tls_cluster, pki):
    held = [_tls(connect_raw(_port(tls_cluster)), pki) for _ in range(PER_IP)]
    try:
        with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError, OSError)):
            with _tls(connect_raw(_port(tls_cluster)), pki) as extra:
                extra.sendall(b"\x00\x00\x00\x00")
                if extra.recv(1) == b"":
                    raise ConnectionResetError("closed")
    finally:
        for sock in held:
            sock.close()


def test_a_frame_bigger_than_the_memory_pool_closes_only_its_connection(tls_cluster, pki):
    with _tls(connect_raw(_port(tls_cluster)), pki) as sock:
        # The broker may close on the 4-byte prefix before the rest is sent.
        with contextlib.suppress(ssl.SSLEOFError, BrokenPipeError, ConnectionResetError):
            sock.sendall(struct.pack(">i", 4 * POOL) + b"\x00" * 1024)
        assert _closed(sock)
    _round_trip(tls_cluster, pki, "after-huge-frame")
