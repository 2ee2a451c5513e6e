"""Hostile clients against a SASL_SSL broker under a memory cap (issue 27, "Hostile").

One real broker process (with a controller and ZooKeeper) configured as `cluster up
--secure` configures it: its native and its Kafka listener are both SASL_SSL with
SCRAM-SHA-512/256 and PLAIN, the authorizer is on, and its address space is capped
(`RLIMIT_AS` through prlimit, tests/support/hostile.py), so an allocation a bound failed
to stop would kill it rather than the machine. Each test feeds it one hostile input over
raw sockets (TLS where the input needs it) or a real client and checks the answer is
Kafka 2.8's (`SaslServerAuthenticator`): a request before authentication closes the
connection unanswered (one ApiVersions is served; a request the broker cannot read is
answered with an error, then closed), an unknown mechanism gets
UNSUPPORTED_SASL_MECHANISM with the enabled list and a close, a wrong password or a
malformed token gets SASL_AUTHENTICATION_FAILED (after
`connection.failed.authentication.delay.ms`) and a close, a frame (or a token inside
one) announcing 2^31-1 bytes closes without that memory being taken, bytes that are no
TLS ClientHello (or no bytes at all) close, 1,000 failed logins from one address are
each refused and counted. The last test: authenticated clients still produce and
consume on both wires, the broker is alive under its cap, and no password reached a log
or event file. No timed assertions; the latency of other clients during the failed
logins is tests/bench/bench_security.py's.
"""

from __future__ import annotations

import json
import pathlib
import socket
import ssl
import struct
import time
import urllib.request
from dataclasses import dataclass

import confluent_kafka
import msgpack
import pytest
import trio

from client.admin import NewTopic, open_admin
from client.consumer import open_consumer
from client.producer import open_producer
from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.codec import RequestHeader, encode_request
from client.protocol.connection import ClientConnection
from client.protocol.errors import ErrorCode, TributaryError
from client.protocol.records import Record, build_batch
from client.protocol.types import TopicPartition
from tests.integration.conftest import TEST_BROKER_SETTINGS, TEST_CONTROLLER_SETTINGS
from tests.integration.helpers import wait_until
from tests.support.hostile import MiB, cap_address_space, proc_status_kib
from tests.support.sasl_hostile import (
    ANSWER_BOUND_S,
    API_VERSIONS,
    METADATA,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    authenticate_body,
    closed_without_answer,
    failed_login_storm,
    handshake_body,
    kafka_request,
    native_ask,
    parse_authenticate,
    parse_handshake,
    plain_token,
    read_frame,
    send_ignoring_close,
    tls_socket,
)
from tools.cluster import secure as secure_cluster
from tools.cluster.launcher import LocalCluster
from tools.cluster.state import process_alive

pytestmark = pytest.mark.integration

TOPIC = "hostile"
DELAY_MS = 300  # connection.failed.authentication.delay.ms
HANDSHAKE_TIMEOUT_MS = 2000  # ssl.handshake.timeout.ms
HEADROOM = 1024 * MiB  # address space the broker may add to what it has when capped
WRONG = "wrong-password-5be1c"
ENABLED = {"SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"}
BEFORE_AUTH = b"produced-before-authentication"
SASL_AUTHENTICATION_FAILED = int(ErrorCode.SASL_AUTHENTICATION_FAILED)  # 58
UNSUPPORTED_SASL_MECHANISM = int(ErrorCode.UNSUPPORTED_SASL_MECHANISM)  # 33


@dataclass(frozen=True)
class Target:
    cluster: LocalCluster
    pid: int
    cap: int  # bytes of address space
    native: int  # port of the native SASL_SSL listener
    kafka: int  # port of the Kafka SASL_SSL listener
    cafile: str
    passwords: dict[str, str]
    log_path: pathlib.Path
    events_path: pathlib.Path
    metrics_url: str

    def scram(self, password: str | None = None, user: str = "admin") -> dict:
        return {
            "security_protocol": "SASL_SSL",
            "ssl_cafile": self.cafile,
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": user,
            "sasl_plain_password": self.passwords["admin"] if password is None else password,
        }

    def assert_alive_under_cap(self) -> None:
        assert process_alive(self.pid), "the broker died"
        size = proc_status_kib(self.pid, "VmSize") * 1024
        rss = proc_status_kib(self.pid, "VmRSS") * 1024
        print(f"broker: RSS {rss / MiB:.0f} MiB, address space {size / MiB:.0f} MiB")
        assert size <= self.cap and rss <= self.cap


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    cluster = LocalCluster(
        tmp_path_factory.mktemp("hostile"),
        brokers=1,
        controllers=1,
        base_port=None,
        secure=True,
        broker_overrides={
            **TEST_BROKER_SETTINGS,
            "offsets.topic.replication.factor": 1,
            "connection.failed.authentication.delay.ms": DELAY_MS,
            "ssl.handshake.timeout.ms": HANDSHAKE_TIMEOUT_MS,
        },
        controller_overrides=TEST_CONTROLLER_SETTINGS,
    )
    try:
        cluster.up(timeout_s=90)
        files = secure_cluster.prepare(cluster.directory)
        info = cluster.process("broker-1")
        assert info.kafka_port is not None and info.pid is not None
        cap = cap_address_space(info.pid, HEADROOM)
        print(f"broker-1: address space capped at {cap / MiB:.0f} MiB")
        found = Target(
            cluster,
            info.pid,
            cap,
            info.port,
            info.kafka_port,
            str(files.ca_file),
            dict(files.passwords),
            pathlib.Path(info.log_path),
            pathlib.Path(info.data_dir) / "events.jsonl",
            f"http://127.0.0.1:{info.metrics_port}/metrics",
        )
        trio.run(_create_topic, found)
        yield found
    finally:
        cluster.down(timeout_s=20)


async def _create_topic(target: Target) -> None:
    async with open_admin(f"127.0.0.1:{target.native}", **target.scram()) as admin:
        assert await admin.create_topics([NewTopic(TOPIC, 1, 1)]) == {TOPIC: None}


def _kafka_sasl_handshake(sock: ssl.SSLSocket, mechanism: str) -> int:
    sock.sendall(kafka_request(SASL_HANDSHAKE, 1, 1, handshake_body(mechanism)))
    frame = read_frame(sock)
    assert frame is not None, "SaslHandshake went unanswered"
    answer = parse_handshake(frame)
    assert answer.correlation_id == 1
    return answer.error_code


def _native_handshake(sock: ssl.SSLSocket, mechanism: str) -> m.SaslHandshakeResponse:
    answer = native_ask(
        sock, ClientConnection("hostile"), m.SaslHandshakeRequest(mechanism=mechanism)
    )
    assert answer is not None, "SaslHandshake went unanswered"
    return answer


# -- a request before authentication -------------------------------------------------------


@pytest.mark.parametrize(
    "then",
    [
        pytest.param(kafka_request(METADATA, 1, 2, struct.pack(">i", -1)), id="Metadata"),
        pytest.param(kafka_request(API_VERSIONS, 0, 2, b""), id="a second ApiVersions"),
    ],
)
def test_kafka_requests_before_authentication_close_the_connection(target, then):
    """One ApiVersions is served before the handshake (clients ask it first); anything
    else closes: Kafka's "Unexpected Kafka request of type METADATA during SASL
    handshake", "Unexpected ApiVersions request received during SASL authentication
    state HANDSHAKE_REQUEST"."""
    with tls_socket(target.kafka, target.cafile) as sock:
        sock.sendall(kafka_request(API_VERSIONS, 0, 1, b""))
        frame = read_frame(sock)
        assert frame is not None and struct.unpack(">ih", frame[:6]) == (1, 0)
        sock.sendall(then)
        assert closed_without_answer(sock)
    with tls_socket(target.kafka, target.cafile) as sock:  # a token before the handshake
        sock.sendall(kafka_request(SASL_AUTHENTICATE, 1, 1, authenticate_body(b"\0a\0b")))
        assert closed_without_answer(sock)


def test_an_unknown_version_before_authentication_closes_unless_it_is_api_versions(target):
    """An ApiVersions of a version we do not speak is answered UNSUPPORTED_VERSION and the
    client may ask again (Kafka keeps the connection); a SaslHandshake of an unknown
    version is answered and closed (Kafka: UnsupportedVersionException, closed)."""
    with tls_socket(target.kafka, target.cafile) as sock:
        sock.sendall(kafka_request(API_VERSIONS, 99, 1, b""))
        frame = read_frame(sock)
        assert frame is not None and struct.unpack(">ih", frame[:6]) == (1, 35)
        sock.sendall(kafka_request(API_VERSIONS, 0, 2, b""))
        frame = read_frame(sock)
        assert frame is not None and struct.unpack(">ih", frame[:6]) == (2, 0)
        assert _kafka_sasl_handshake(sock, "PLAIN") == 0  # still in the exchange
    with tls_socket(target.kafka, target.cafile) as sock:
        sock.sendall(kafka_request(SASL_HANDSHAKE, 99, 1, handshake_body("PLAIN")))
        read_frame(sock)  # an UNSUPPORTED_VERSION answer, or none
        assert closed_without_answer(sock)


def test_a_native_produce_before_authentication_closes_and_writes_nothing(target):
    produce = m.ProduceRequest(
        acks=1,
        timeout_ms=5000,
        topics=[
            m.ProduceTopic(
                name=TOPIC,
                partitions=[
                    m.ProducePartition(partition=0, records=_batch_of(BEFORE_AUTH)),
                ],
            )
        ],
    )
    with tls_socket(target.native, target.cafile) as sock:
        assert native_ask(sock, ClientConnection("hostile"), produce) is None
    with tls_socket(target.native, target.cafile) as sock:
        metadata = encode_request(
            RequestHeader(ApiKey.METADATA, 0, 1), m.MetadataRequest(topics=None)
        )
        sock.sendall(metadata)
        assert closed_without_answer(sock)
    # (that nothing was appended is checked by the last test, which reads the partition)


def _batch_of(value: bytes) -> bytes:
    return build_batch([Record(None, value, int(time.time() * 1000))])


# -- an unknown mechanism ------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["GSSAPI", "OAUTHBEARER", "x" * 2000])
def test_an_unknown_mechanism_on_the_kafka_wire_is_answered_with_the_enabled_ones(
    target, mechanism
):
    with tls_socket(target.kafka, target.cafile) as sock:
        sock.sendall(kafka_request(SASL_HANDSHAKE, 1, 9, handshake_body(mechanism)))
        frame = read_frame(sock)
        assert frame is not None
        answer = parse_handshake(frame)
        assert answer.correlation_id == 9
        assert answer.error_code == UNSUPPORTED_SASL_MECHANISM
        assert set(answer.mechanisms) == ENABLED
        assert closed_without_answer(sock)


def test_an_unknown_mechanism_on_the_native_wire_is_answered_with_the_enabled_ones(target):
    with tls_socket(target.native, target.cafile) as sock:
        answer = _native_handshake(sock, "GSSAPI")
        assert answer.error_code == UNSUPPORTED_SASL_MECHANISM
        assert set(answer.mechanisms) == ENABLED
        assert closed_without_answer(sock)


@pytest.mark.parametrize(
    "request_body",
    [
        pytest.param([17, 0, 7, None, {"mechanism": 12345}], id="mechanism not a string"),
        pytest.param([17, 0, 7, None, {"mechanism": None}], id="mechanism null"),
        pytest.param([17, 0, 7, None, {}], id="no mechanism"),
        pytest.param([17, 0, 7, None, {"mechanism": ["PLAIN"] * 1000}], id="mechanism a list"),
        pytest.param([36, 0, 7, None, {"auth_bytes": "text"}], id="token not bytes"),
        pytest.param([17, 0, 7, None], id="no body"),
        pytest.param({"not": "a request"}, id="not a list"),
    ],
)
def test_a_malformed_native_sasl_request_is_refused_or_closed(target, request_body):
    """A native SASL request whose fields have the wrong types is answered with an error
    and closed, or closed unanswered; never served, never a crashed connection task."""
    payload = msgpack.packb(request_body, use_bin_type=True)
    with tls_socket(target.native, target.cafile) as sock:
        sock.sendall(struct.pack(">I", len(payload)) + payload)
        frame = read_frame(sock)
        if frame is not None:
            answer = msgpack.unpackb(frame, raw=False)
            print(f"answered: {answer!r:.200}")
            assert closed_without_answer(sock)
    # The broker still takes a good login on that listener.
    trio.run(_list_topics, target)


async def _list_topics(target: Target) -> None:
    async with open_admin(f"127.0.0.1:{target.native}", **target.scram()) as admin:
        assert TOPIC in await admin.list_topics()


# -- a wrong password ----------------------------------------------------------------------


@pytest.mark.parametrize("user", ["broker", "nobody"])
def test_a_wrong_plain_password_on_the_kafka_wire_is_refused_after_the_delay(target, user):
    with tls_socket(target.kafka, target.cafile) as sock:
        assert _kafka_sasl_handshake(sock, "PLAIN") == 0
        started = time.monotonic()
        token = authenticate_body(plain_token(user, WRONG))
        sock.sendall(kafka_request(SASL_AUTHENTICATE, 1, 2, token))
        frame = read_frame(sock)
        waited = time.monotonic() - started
        assert frame is not None
        answer = parse_authenticate(frame)
        assert answer.correlation_id == 2
        assert answer.error_code == SASL_AUTHENTICATION_FAILED
        assert answer.error_message and WRONG not in answer.error_message
        # Not a speed check: the answer may not come *before* the configured delay.
        assert waited >= DELAY_MS / 1000 * 0.9
        assert closed_without_answer(sock)


def test_a_wrong_plain_password_on_the_native_wire_is_refused_and_closed(target):
    with tls_socket(target.native, target.cafile) as sock:
        protocol = ClientConnection("hostile")
        assert native_ask(sock, protocol, m.SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        token = plain_token("broker", WRONG)
        answer = native_ask(sock, protocol, m.SaslAuthenticateRequest(auth_bytes=token))
        assert answer is not None and answer.error_code == SASL_AUTHENTICATION_FAILED
        assert WRONG not in (answer.error_message or "")
        assert closed_without_answer(sock)


@pytest.mark.parametrize("user", ["admin", "nobody"])
def test_a_wrong_scram_password_on_the_native_wire_is_refused(target, user):
    async def login() -> TributaryError:
        with pytest.raises(TributaryError) as caught:
            options = target.scram(WRONG, user)
            async with open_admin(f"127.0.0.1:{target.native}", **options) as admin:
                await admin.list_topics()
        return caught.value

    error = trio.run(login)
    assert error.code == ErrorCode.SASL_AUTHENTICATION_FAILED and not error.retriable
    assert WRONG not in str(error)


def test_a_wrong_scram_password_from_confluent_kafka_is_an_authentication_error(target):
    errors: list = []
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{target.kafka}",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "admin",
            "sasl.password": WRONG,
            "ssl.ca.location": target.cafile,
            "error_cb": errors.append,
        }
    )
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION for e in errors), errors


@pytest.mark.parametrize(
    "mechanism, token",
    [
        pytest.param("PLAIN", b"", id="PLAIN empty"),
        pytest.param("PLAIN", b"no-separators", id="PLAIN no NULs"),
        pytest.param("PLAIN", b"\0\0", id="PLAIN empty user and password"),
        pytest.param("PLAIN", b"\0\xff\xfe\0\xc3", id="PLAIN not UTF-8"),
        pytest.param("PLAIN", b"\0broker\0" + b"p" * 400_000, id="PLAIN 400 KB password"),
        pytest.param("SCRAM-SHA-512", b"", id="SCRAM empty"),
        pytest.param("SCRAM-SHA-512", b"n,,n=admin", id="SCRAM no nonce"),
        pytest.param("SCRAM-SHA-512", b"c=biws,r=abc,p=AAAA", id="SCRAM final first"),
        pytest.param("SCRAM-SHA-256", b"\xff" * 1000, id="SCRAM binary"),
        pytest.param("SCRAM-SHA-256", b"n,,n=" + b"u" * 400_000 + b",r=x", id="SCRAM 400 KB user"),
    ],
)
def test_a_malformed_token_is_a_failed_authentication(target, mechanism, token):
    """Kafka answers a token its mechanism cannot read as a failed authentication
    (SASL_AUTHENTICATION_FAILED, then the close), on both wires."""
    with tls_socket(target.kafka, target.cafile) as sock:
        assert _kafka_sasl_handshake(sock, mechanism) == 0
        sock.sendall(kafka_request(SASL_AUTHENTICATE, 1, 2, authenticate_body(token)))
        frame = read_frame(sock)
        assert frame is not None
        assert parse_authenticate(frame).error_code == SASL_AUTHENTICATION_FAILED
        assert closed_without_answer(sock)
    with tls_socket(target.native, target.cafile) as sock:
        protocol = ClientConnection("hostile")
        assert (
            native_ask(sock, protocol, m.SaslHandshakeRequest(mechanism=mechanism)).error_code == 0
        )
        answer = native_ask(sock, protocol, m.SaslAuthenticateRequest(auth_bytes=token))
        assert answer is not None and answer.error_code == SASL_AUTHENTICATION_FAILED
        assert closed_without_answer(sock)


# -- a token announcing 2^31-1 bytes -------------------------------------------------------


def test_a_kafka_frame_announcing_two_gib_after_the_handshake_closes(target):
    with tls_socket(target.kafka, target.cafile) as sock:
        assert _kafka_sasl_handshake(sock, "PLAIN") == 0
        send_ignoring_close(sock, struct.pack(">i", 2**31 - 1) + b"\x00" * 65536)
        assert closed_without_answer(sock)
    # A frame of an honest size whose token's own length says 2^31-1: unreadable, closed.
    with tls_socket(target.kafka, target.cafile) as sock:
        assert _kafka_sasl_handshake(sock, "PLAIN") == 0
        body = struct.pack(">i", 2**31 - 1) + b"\0admin\0x"
        sock.sendall(kafka_request(SASL_AUTHENTICATE, 1, 2, body))
        assert closed_without_answer(sock)
    target.assert_alive_under_cap()


def test_a_native_frame_announcing_two_gib_after_the_handshake_closes(target):
    with tls_socket(target.native, target.cafile) as sock:
        assert _native_handshake(sock, "SCRAM-SHA-512").error_code == 0
        send_ignoring_close(sock, struct.pack(">I", 2**31 - 1) + b"\x00" * 65536)
        assert closed_without_answer(sock)
    # msgpack bin32 whose length says 2^31-1 inside a small frame: unreadable, closed.
    token = b"n,,n=admin,r=" + b"A" * 300
    frame = encode_request(
        RequestHeader(ApiKey.SASL_AUTHENTICATE, 0, 2), m.SaslAuthenticateRequest(auth_bytes=token)
    )
    packed = msgpack.packb(token, use_bin_type=True)
    assert packed in frame
    payload = frame[4:].replace(packed, b"\xc6" + struct.pack(">I", 2**31 - 1) + token)
    with tls_socket(target.native, target.cafile) as sock:
        assert _native_handshake(sock, "SCRAM-SHA-512").error_code == 0
        sock.sendall(struct.pack(">I", len(payload)) + payload)
        assert closed_without_answer(sock)
    target.assert_alive_under_cap()


def test_frames_just_over_the_sasl_receive_size_close_before_authentication(target):
    """sasl.server.max.receive.size (512 KiB): a bigger frame before authentication closes
    the connection even though socket.request.max.bytes (100 MiB) would take it."""
    for port in (target.native, target.kafka):
        with tls_socket(port, target.cafile) as sock:
            send_ignoring_close(sock, struct.pack(">I", 524_288 + 1) + b"\x00" * 1024)
            assert closed_without_answer(sock)
    target.assert_alive_under_cap()


# -- no TLS --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(b"\xde\xad\xbe\xef" * 1024, id="random bytes"),
        pytest.param(kafka_request(API_VERSIONS, 0, 1, b""), id="plaintext ApiVersions"),
        pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", id="HTTP"),
        pytest.param(b"\x16\x03\x01\xff\xff" + b"\x01" * 300, id="truncated ClientHello"),
    ],
)
def test_garbage_instead_of_a_tls_client_hello_closes(target, garbage):
    for port in (target.native, target.kafka):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            send_ignoring_close(sock, garbage)
            assert _closed_with_at_most_a_tls_alert(sock)


def _closed_with_at_most_a_tls_alert(sock: socket.socket) -> bool:
    """The peer closes; whatever it sent first is a TLS alert record (content type 21)."""
    sock.settimeout(ANSWER_BOUND_S)
    received = b""
    try:
        while chunk := sock.recv(4096):
            received += chunk
            if len(received) > 64:
                return False
    except ConnectionResetError:
        pass
    except TimeoutError:
        return False
    return received[:1] in (b"", b"\x15")


def test_a_silent_connection_is_closed_at_the_tls_handshake_timeout(target):
    ports = (target.native, target.kafka)
    silent = [socket.create_connection(("127.0.0.1", port), timeout=10) for port in ports]
    try:
        for sock in silent:
            assert closed_without_answer(sock)  # ssl.handshake.timeout.ms, 2 s here
    finally:
        for sock in silent:
            sock.close()


# -- 1,000 failed logins -------------------------------------------------------------------


def _failed_authentications(target: Target) -> float:
    with urllib.request.urlopen(target.metrics_url, timeout=10) as response:
        lines = response.read().decode().splitlines()
    return sum(
        float(line.split()[-1])
        for line in lines
        if line.startswith("tributary_failed_authentications_total{")
    )


def _failure_events(target: Target) -> int:
    if not target.events_path.exists():
        return 0
    with open(target.events_path) as events:
        return sum(json.loads(line)["event"] == "authentication_failed" for line in events)


def test_a_thousand_failed_logins_from_one_address_are_each_refused_and_counted(target):
    counted, events = _failed_authentications(target), _failure_events(target)
    outcomes = trio.run(
        lambda: failed_login_storm(
            [("native", target.native), ("kafka", target.kafka)],
            target.cafile,
            "broker",
            count=1000,
            concurrency=50,
        )
    )
    print(f"\n[1000 failed logins] outcomes: {outcomes}")
    assert set(outcomes) <= {"refused", "closed"} and sum(outcomes.values()) == 1000
    assert outcomes.get("refused", 0) >= 990  # each answered, bar a close under load
    assert _failed_authentications(target) - counted >= 1000
    wait_until(lambda: _failure_events(target) - events >= 1000, 30)
    target.assert_alive_under_cap()
    trio.run(_produce_and_consume, target, b"after-the-storm")


# -- afterwards ----------------------------------------------------------------------------


async def _produce_and_consume(target: Target, value: bytes) -> list[bytes]:
    bootstrap = f"127.0.0.1:{target.native}"
    async with open_producer(bootstrap, acks=-1, **target.scram()) as producer:
        await (await producer.send(TOPIC, value))
    got: list[bytes] = []
    async with open_consumer(bootstrap, **target.scram()) as consumer:
        consumer.assign([TopicPartition(TOPIC, 0)])
        consumer.seek_to_beginning()
        with trio.fail_after(60):
            while value not in got:
                got.extend(r.value for r in await consumer.poll(500))
    return got


def test_afterwards_good_clients_are_served_and_no_password_was_logged(target):
    got = trio.run(_produce_and_consume, target, b"native-last")
    assert BEFORE_AUTH not in got  # the produce before authentication wrote nothing
    settings = {
        "bootstrap.servers": f"127.0.0.1:{target.kafka}",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "admin",
        "sasl.password": target.passwords["admin"],
        "ssl.ca.location": target.cafile,
    }
    producer = confluent_kafka.Producer({**settings, "acks": "all"})
    failed: list = []
    producer.produce(TOPIC, b"confluent-last", on_delivery=lambda e, _: e and failed.append(e))
    assert producer.flush(60) == 0 and not failed, failed
    consumer = confluent_kafka.Consumer(
        {**settings, "group.id": "hostile-last", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe([TOPIC])
        seen: set[bytes] = set()
        deadline = time.monotonic() + 60
        while b"confluent-last" not in seen and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen.add(message.value())
        assert b"confluent-last" in seen and BEFORE_AUTH not in seen
    finally:
        consumer.close()
    target.assert_alive_under_cap()
    secrets = [WRONG, "storm-secret-1-q7", "storm-secret-998-q7", *target.passwords.values()]
    for info in target.cluster.state.processes:
        if info.role not in ("broker", "controller"):
            continue
        files = [pathlib.Path(info.log_path), *pathlib.Path(info.data_dir).glob("*.jsonl")]
        for path in files:
            if path.exists():
                text = path.read_text(errors="replace")
                assert not [s for s in secrets if s in text], f"{path} holds a password"
