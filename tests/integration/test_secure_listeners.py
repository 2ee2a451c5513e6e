"""Every listener SASL_SSL, with real processes over real sockets: three brokers and a
controller whose listeners (native and Kafka) all use TLS with certificates from a CA
made here (trustme) and SASL (SCRAM-SHA-512/256 and PLAIN); the brokers replicate to
each other and the controller talks to them over that same SASL_SSL listener, logged in
with PLAIN from their JAAS configs. The authorizer is on, as on a `cluster up --secure`
cluster (brokers and controller super users, nothing allowed without an ACL): alice
(SCRAM) and carol (PLAIN) may write, read and describe the topic and read groups
`confluent-*` and `cli`, and nothing else.

The clients: Tributary's own library and CLI (--command-config), confluent-kafka, kcat,
kafka-python and aiokafka, each with SCRAM-SHA-512 and PLAIN, and what a user without an
ACL gets (TOPIC_AUTHORIZATION_FAILED, a Metadata without the topic,
GROUP_AUTHORIZATION_FAILED), a wrong password, a client trusting another CA; replication,
failover and ControlledShutdown over SASL_SSL. Hostile clients (a request before
authentication, unknown mechanisms, huge tokens, not TLS, 1,000 failed logins) are
test_security_hostile.py's.
"""

from __future__ import annotations

import asyncio
import pathlib
import shutil
import subprocess
import sys
import time

import confluent_kafka
import pytest
import trio
import trustme

from client.admin import NewTopic, open_admin
from client.admin.acls import Acl
from client.admin.users import UserScramCredentialUpsertion
from client.consumer.consumer import open_consumer
from client.producer.producer import open_producer
from client.protocol.acl_types import AclOperation, PatternType, ResourceType
from client.protocol.errors import ErrorCode, TributaryError
from tests.integration.conftest import TEST_BROKER_SETTINGS, TEST_CONTROLLER_SETTINGS
from tests.integration.helpers import partition_state, wait_until
from tools.cluster.launcher import LocalCluster

pytestmark = pytest.mark.integration

PLAIN_JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule required"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required"
USERS = {"broker": "broker-secret", "controller": "controller-secret", "carol": "carol-plain"}
ALICE_SCRAM = "alice-scram-secret"
TOPIC = "secure"
DESCRIBED_ONLY = "secure-describe-only"  # alice and carol may see it, not write it
HIDDEN = "secure-hidden"  # no ACL at all
WRONG = "nope-password-7f3a"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(
        str(directory / "broker.pem")
    )
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    other = trustme.CA()
    other.cert_pem.write_to_path(str(directory / "other-ca.pem"))
    return directory


@pytest.fixture(scope="module")
def secure(tmp_path_factory, pki):
    users = " ".join(f'user_{name}="{password}"' for name, password in USERS.items())
    cluster = LocalCluster(
        tmp_path_factory.mktemp("secure"),
        brokers=3,
        controllers=1,
        base_port=None,
        broker_overrides={
            **TEST_BROKER_SETTINGS,
            "listener.security.protocol.map": "PLAINTEXT:SASL_SSL,KAFKA:SASL_SSL",
            "ssl.keystore.location": str(pki / "broker.pem"),
            "ssl.truststore.location": str(pki / "ca.pem"),
            "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.jaas.config": f'{PLAIN_JAAS} username="broker" password="broker-secret" {users};',
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:broker;User:controller",
        },
        controller_overrides={
            **TEST_CONTROLLER_SETTINGS,
            "security.inter.broker.protocol": "SASL_SSL",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.jaas.config": f'{PLAIN_JAAS} username="controller" '
            'password="controller-secret" user_broker="broker-secret";',
            "ssl.truststore.location": str(pki / "ca.pem"),
            # Its own listener (ControlledShutdown) is SASL_SSL too; SCRAM logins are
            # checked against /config/users, as on the brokers.
            "ssl.keystore.location": str(pki / "broker.pem"),
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        },
    )
    try:
        cluster.up(timeout_s=90)
        trio.run(_create_users_topics_and_acls, cluster, pki)
        wait_until(lambda: (s := partition_state(cluster, TOPIC, 0)) and len(s.isr) == 3, 60)
        yield cluster
    finally:
        cluster.down(timeout_s=20)


def plain_options(pki, user: str = "carol", password: str = USERS["carol"]) -> dict:
    return {
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(pki / "ca.pem"),
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }


def scram_options(pki, password: str = ALICE_SCRAM) -> dict:
    return {
        **plain_options(pki, "alice", password),
        "sasl_mechanism": "SCRAM-SHA-512",
    }


async def _create_users_topics_and_acls(cluster: LocalCluster, pki) -> None:
    """As the super user `broker`: alice's SCRAM credentials, the topics, the ACLs."""
    allowed = []
    for user in ("User:alice", "User:carol"):
        for operation in (AclOperation.WRITE, AclOperation.READ):
            allowed.append(Acl(ResourceType.TOPIC, TOPIC, user, operation))
        allowed.append(Acl(ResourceType.TOPIC, DESCRIBED_ONLY, user, AclOperation.DESCRIBE))
        allowed.append(Acl(ResourceType.GROUP, "cli", user, AclOperation.READ))
        allowed.append(
            Acl(ResourceType.GROUP, "confluent-", user, AclOperation.READ,
                pattern_type=PatternType.PREFIXED)
        )  # fmt: skip
    options = plain_options(pki, "broker", USERS["broker"])
    async with open_admin(cluster.state.bootstrap_servers, **options) as admin:
        results = await admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion("alice", mechanism, ALICE_SCRAM)
                for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256")
            ]
        )
        assert results == {"alice": None}
        topics = [NewTopic(name, 1, 3) for name in (TOPIC, DESCRIBED_ONLY, HIDDEN)]
        assert await admin.create_topics(topics) == {t.name: None for t in topics}
        assert await admin.create_acls(allowed) == [None] * len(allowed)


def kafka_bootstrap(cluster: LocalCluster) -> str:
    return cluster.state.kafka_bootstrap_servers


# -- Tributary's library and CLI -----------------------------------------------------------


@pytest.mark.parametrize("login", ["scram", "plain"])
def test_the_native_client_produces_and_consumes_over_sasl_ssl(secure, pki, login):
    options = scram_options(pki) if login == "scram" else plain_options(pki)
    values = [f"{login}-{i}".encode() for i in range(50)]

    async def scenario() -> list[bytes]:
        bootstrap = secure.state.bootstrap_servers
        async with open_producer(bootstrap, acks=-1, **options) as producer:
            for value in values:
                await producer.send(TOPIC, value)
        got: list[bytes] = []
        async with open_consumer(bootstrap, auto_offset_reset="earliest", **options) as consumer:
            consumer.assign([(TOPIC, 0)])
            with trio.fail_after(60):
                while not set(values) <= set(got):
                    got.extend(r.value for r in await consumer.poll(timeout_ms=1000))
        return got

    got = trio.run(scenario)
    assert set(values) <= set(got)


@pytest.mark.parametrize(
    "options, expected",
    [
        ("wrong scram password", "SASL_AUTHENTICATION_FAILED"),
        ("wrong plain password", "SASL_AUTHENTICATION_FAILED"),
    ],
)
def test_a_wrong_password_is_a_clear_error_that_is_not_retried(secure, pki, options, expected):
    if options == "wrong scram password":
        settings = scram_options(pki, password=WRONG)
    else:
        settings = plain_options(pki, password=WRONG)

    async def scenario() -> TributaryError:
        with pytest.raises(TributaryError) as caught:
            async with open_admin(secure.state.bootstrap_servers, **settings):
                pass
        return caught.value

    error = trio.run(scenario)
    assert error.code == ErrorCode.SASL_AUTHENTICATION_FAILED and not error.retriable
    assert WRONG not in str(error)


def test_the_cli_uses_command_config(secure, pki, tmp_path):
    properties = tmp_path / "client.properties"
    properties.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        f'sasl.jaas.config={SCRAM_JAAS} username="alice" password="{ALICE_SCRAM}";\n'
        f"ssl.truststore.location={pki / 'ca.pem'}\n"
        "ssl.truststore.type=PEM\n"
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "tools",
            "topics",
            "describe",
            TOPIC,
            "--bootstrap-server",
            secure.state.bootstrap_servers,
            "--command-config",
            str(properties),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert TOPIC in run.stdout
    cli = [sys.executable, "-m", "tools"]
    security = ["--bootstrap-server", secure.state.bootstrap_servers]
    security += ["--command-config", str(properties)]
    consumed = subprocess.run(
        [*cli, "consume", TOPIC, "--from-beginning", "--max-messages", "5", "--group", "cli",
         *security],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    assert len(consumed.stdout.splitlines()) == 5
    described = subprocess.run(
        [*cli, "groups", "describe", "cli", *security], capture_output=True, text=True, timeout=60
    )
    assert described.returncode == 0, described.stderr
    assert TOPIC in described.stdout
    properties.write_text("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "tools",
            "topics",
            "list",
            "--bootstrap-server",
            secure.state.bootstrap_servers,
            "--command-config",
            str(properties),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert len(run.stderr.strip().splitlines()) == 1 and "sasl.mechanism" in run.stderr


# -- Kafka clients -------------------------------------------------------------------------


def _confluent_settings(pki, login: str) -> dict:
    if login == "scram":
        user, password, mechanism = "alice", ALICE_SCRAM, "SCRAM-SHA-512"
    else:
        user, password, mechanism = "carol", USERS["carol"], "PLAIN"
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": str(pki / "ca.pem"),
    }


@pytest.mark.parametrize("login", ["scram", "plain"])
def test_confluent_kafka_produces_and_consumes_over_sasl_ssl(secure, pki, login):
    settings = _confluent_settings(pki, login)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": kafka_bootstrap(secure), "acks": "all", **settings}
    )
    failed: list[str] = []
    for i in range(20):
        producer.produce(
            TOPIC,
            value=f"confluent-{login}-{i}".encode(),
            on_delivery=lambda err, msg: err and failed.append(str(err)),
        )
    assert producer.flush(60) == 0 and not failed, failed
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": kafka_bootstrap(secure),
            "group.id": f"confluent-{login}",
            "auto.offset.reset": "earliest",
            **settings,
        }
    )
    try:
        consumer.subscribe([TOPIC])
        wanted = {f"confluent-{login}-{i}".encode() for i in range(20)}
        got: set[bytes] = set()
        deadline = time.monotonic() + 60
        while not wanted <= got and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                got.add(message.value())
        assert wanted <= got
    finally:
        consumer.close()


def test_confluent_kafka_with_a_wrong_password_fails_authentication(secure, pki):
    settings = {**_confluent_settings(pki, "scram"), "sasl.password": "wrong"}
    errors: list = []
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": kafka_bootstrap(secure), "error_cb": errors.append, **settings}
    )
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION for e in errors), errors
    assert any("invalid credentials" in e.str() for e in errors)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
@pytest.mark.parametrize(
    "login",
    # SCRAM: kcat 1.7.1's librdkafka 2.0.2 sends its client nonce twice in the
    # client-final (confluentinc/librdkafka#4895), which Kafka 2.8 accepts and so do we.
    ["scram", "plain"],
)
def test_kcat_produces_and_consumes_over_sasl_ssl(secure, pki, login):
    settings = _confluent_settings(pki, login)
    flags = [arg for key, value in settings.items() for arg in ("-X", f"{key}={value}")]
    flags = [f.replace("sasl.mechanism=", "sasl.mechanisms=") for f in flags]
    base = ["kcat", "-b", kafka_bootstrap(secure), *flags, "-t", TOPIC]
    lines = "\n".join(f"kcat-{login}-{i}" for i in range(10)) + "\n"
    produced = subprocess.run(
        [*base, "-P"], input=lines, capture_output=True, text=True, timeout=60
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        [*base, "-C", "-o", "beginning", "-e", "-q"], capture_output=True, text=True, timeout=60
    )
    assert consumed.returncode == 0, consumed.stderr
    assert {f"kcat-{login}-{i}" for i in range(10)} <= set(consumed.stdout.splitlines())


@pytest.mark.parametrize("login", ["scram", "plain"])
def test_kafka_python_produces_and_consumes_over_sasl_ssl(secure, pki, login):
    import kafka

    if login == "scram":
        user, password, mechanism = "alice", ALICE_SCRAM, "SCRAM-SHA-512"
    else:
        user, password, mechanism = "carol", USERS["carol"], "PLAIN"
    settings = {
        "bootstrap_servers": kafka_bootstrap(secure),
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(pki / "ca.pem"),
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }
    producer = kafka.KafkaProducer(acks="all", **settings)
    for i in range(10):
        producer.send(TOPIC, f"kafka-python-{login}-{i}".encode())
    producer.flush(60)
    producer.close()
    consumer = kafka.KafkaConsumer(
        TOPIC, auto_offset_reset="earliest", consumer_timeout_ms=10_000, **settings
    )
    wanted = {f"kafka-python-{login}-{i}".encode() for i in range(10)}
    got: set[bytes] = set()
    for message in consumer:  # ends after 10 s without a record
        got.add(message.value)
        if wanted <= got:
            break
    consumer.close()
    assert wanted <= got


@pytest.mark.parametrize("login", ["scram", "plain"])
def test_aiokafka_produces_and_consumes_over_sasl_ssl(secure, pki, login):
    import aiokafka
    from aiokafka.helpers import create_ssl_context

    if login == "scram":
        user, password, mechanism = "alice", ALICE_SCRAM, "SCRAM-SHA-512"
    else:
        user, password, mechanism = "carol", USERS["carol"], "PLAIN"

    async def scenario() -> set[bytes]:
        settings = {
            "bootstrap_servers": kafka_bootstrap(secure),
            "security_protocol": "SASL_SSL",
            "ssl_context": create_ssl_context(cafile=str(pki / "ca.pem")),
            "sasl_mechanism": mechanism,
            "sasl_plain_username": user,
            "sasl_plain_password": password,
        }
        producer = aiokafka.AIOKafkaProducer(acks="all", **settings)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait(TOPIC, f"aiokafka-{login}-{i}".encode())
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(TOPIC, auto_offset_reset="earliest", **settings)
        await consumer.start()
        got: set[bytes] = set()
        try:
            wanted = {f"aiokafka-{login}-{i}".encode() for i in range(10)}
            deadline = time.monotonic() + 60
            while not wanted <= got and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=1000)
                got.update(r.value for records in batches.values() for r in records)
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(scenario())
    assert {f"aiokafka-{login}-{i}".encode() for i in range(10)} <= got


# -- what a user without an ACL gets --------------------------------------------------------


def _cli_as(pki, tmp_path, login: str, *args: str, stdin: str | None = None):
    """`tributary ARGS` as alice (SCRAM-SHA-512) or carol (PLAIN) over SASL_SSL."""
    user, password, mechanism, jaas = (
        ("alice", ALICE_SCRAM, "SCRAM-SHA-512", SCRAM_JAAS)
        if login == "scram"
        else ("carol", USERS["carol"], "PLAIN", PLAIN_JAAS)
    )
    properties = tmp_path / f"{user}.properties"
    properties.write_text(
        f"security.protocol=SASL_SSL\nsasl.mechanism={mechanism}\n"
        f'sasl.jaas.config={jaas} username="{user}" password="{password}";\n'
        f"ssl.truststore.location={pki / 'ca.pem'}\n"
    )
    return subprocess.run(
        [sys.executable, "-m", "tools", *args, "--command-config", str(properties)],
        input=stdin, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize("login", ["scram", "plain"])
def test_the_cli_and_library_get_kafkas_denials(secure, pki, tmp_path, login):
    """Over the native protocol: no Write is TOPIC_AUTHORIZATION_FAILED, a topic the user
    may not Describe is left out of the listing, a group without Read is
    GROUP_AUTHORIZATION_FAILED."""
    bootstrap = ["--bootstrap-server", secure.state.bootstrap_servers]
    produced = _cli_as(pki, tmp_path, login, "produce", DESCRIBED_ONLY, *bootstrap, stdin="x\n")
    assert produced.returncode != 0 and "TOPIC_AUTHORIZATION_FAILED" in produced.stderr
    listed = _cli_as(pki, tmp_path, login, "topics", "list", *bootstrap)
    assert listed.returncode == 0, listed.stderr
    assert {TOPIC, DESCRIBED_ONLY} <= set(listed.stdout.split()) and HIDDEN not in listed.stdout
    consumed = _cli_as(
        pki, tmp_path, login, "consume", TOPIC, "--group", "forbidden", "--max-messages", "1",
        "--timeout-ms", "10000", *bootstrap,
    )  # fmt: skip
    assert consumed.returncode != 0 and "GROUP_AUTHORIZATION_FAILED" in consumed.stderr

    async def produce_as_library() -> TributaryError:
        options = scram_options(pki) if login == "scram" else plain_options(pki)
        async with open_producer(secure.state.bootstrap_servers, **options) as producer:
            with pytest.raises(TributaryError) as caught:
                await (await producer.send(DESCRIBED_ONLY, b"refused")).wait()
        return caught.value

    assert trio.run(produce_as_library).code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


@pytest.mark.parametrize("login", ["scram", "plain"])
def test_confluent_kafka_gets_kafkas_denials(secure, pki, login):
    settings = {"bootstrap.servers": kafka_bootstrap(secure), **_confluent_settings(pki, login)}
    producer = confluent_kafka.Producer({**settings, "acks": "all", "message.timeout.ms": 20000})
    errors: list = []
    producer.produce(DESCRIBED_ONLY, b"refused", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(30)
    assert [e.code() for e in errors] == [confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED]
    topics = set(producer.list_topics(timeout=20).topics)
    assert {TOPIC, DESCRIBED_ONLY} <= topics and HIDDEN not in topics

    consumer = confluent_kafka.Consumer(
        {**settings, "group.id": "forbidden", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        code = None
        while code is None and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is not None:
                code = message.error().code()
        assert code == confluent_kafka.KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        consumer.close()


# -- a client that does not trust the broker ----------------------------------------------
# (hostile clients: test_security_hostile.py)


def test_a_client_trusting_another_ca_refuses_the_broker(secure, pki):
    async def scenario():
        options = {**plain_options(pki), "ssl_cafile": str(pki / "other-ca.pem")}
        with pytest.raises(TributaryError) as caught:
            async with open_admin(secure.state.bootstrap_servers, **options):
                pass
        return caught.value

    error = trio.run(scenario)
    assert not error.retriable and "certificate" in str(error).lower()


# -- replication and failover with every listener SASL_SSL --------------------------------


def test_replication_and_failover_over_sasl_ssl(secure, pki):
    state = partition_state(secure, TOPIC, 0)
    assert len(state.isr) == 3  # followers fetch over SASL_SSL
    old_leader = state.leader
    secure.kill(f"broker-{old_leader}")
    new_state = wait_until(
        lambda: (s := partition_state(secure, TOPIC, 0)) and s.leader not in (old_leader, -1) and s,
        60,
    )
    assert new_state.leader != old_leader  # the controller reached the others over SASL_SSL
    test_the_native_client_produces_and_consumes_over_sasl_ssl(secure, pki, "scram")
    secure.start(f"broker-{old_leader}")
    wait_until(lambda: len(partition_state(secure, TOPIC, 0).isr) == 3, 90)


def test_controlled_shutdown_reaches_the_controller_over_sasl_ssl(secure, pki):
    """SIGTERM: the broker logs in to the controller's SASL_SSL listener, asks for
    ControlledShutdown and hands its leaderships over before it exits."""
    leader = partition_state(secure, TOPIC, 0).leader
    name = f"broker-{leader}"
    info = secure.stop(name)
    with open(info.log_path) as log_file:
        log_text = log_file.read()
    assert "controlled shutdown succeeded" in log_text
    assert partition_state(secure, TOPIC, 0).leader not in (leader, -1)
    secure.start(name)
    wait_until(lambda: len(partition_state(secure, TOPIC, 0).isr) == 3, 90)


def test_the_controller_checks_scram_logins_against_config_users(secure, pki):
    """A broker whose inter-broker mechanism is SCRAM logs in to the controller's listener
    as to another broker's: with the credential in /config/users (alice's was written
    after the controller started)."""
    from client.security.secure_connector import (
        AuthenticationFailedError,
        SecurityConfig,
        secure_connector,
    )

    port = secure.state.controllers()[0].port

    def config(password: str) -> SecurityConfig:
        return SecurityConfig(
            security_protocol="SASL_SSL",
            ssl_cafile=str(pki / "ca.pem"),
            sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username="alice",
            sasl_plain_password=password,
        )

    async def login(password: str) -> bool:
        try:
            stream = await secure_connector(config(password))("127.0.0.1", port)
        except AuthenticationFailedError:
            return False
        await stream.aclose()
        return True

    assert wait_until(lambda: trio.run(login, ALICE_SCRAM), 10)
    assert not trio.run(login, WRONG)


def test_no_password_reaches_a_log_or_event_file(secure, pki):
    secrets = [ALICE_SCRAM, WRONG, *USERS.values()]
    for info in secure.state.processes:
        if info.role not in ("broker", "controller"):
            continue
        files = [pathlib.Path(info.log_path)]
        files += list(pathlib.Path(info.data_dir).glob("*.jsonl"))
        for path in files:
            if path.exists():
                text = path.read_text(errors="replace")
                leaked = [secret for secret in secrets if secret in text]
                assert not leaked, f"{path} holds a password"
