"""The client's security options: the aiokafka/kafka-python keyword arguments, Kafka
client properties (--command-config), and the connector's SASL exchange against the
broker's real gate and mechanisms over in-memory streams."""

from __future__ import annotations

import ssl

import pytest
import trio
import trio.testing

from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from client.security.secure_connector import (
    AuthenticationFailedError,
    SecurityConfig,
    pop_security,
    secure_connector,
)
from server_common.network import serve_connection
from server_common.security.authenticator import Authenticator
from server_common.security.credential_cache import ScramCredentialCache
from server_common.security.principal import current_principal
from server_common.security.sasl import SaslServerFactory
from server_common.security.sasl_gate import SaslGate

SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required"


def test_kafka_client_properties_become_the_options():
    security = SecurityConfig.from_properties(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": f'{SCRAM_JAAS} username="alice" password="a;b=c";',
            "ssl.truststore.location": "/ca.pem",
            "ssl.endpoint.identification.algorithm": "",
            "client.id": "ignored",
        }
    )
    assert security.security_protocol == "SASL_SSL" and security.uses_tls
    assert (security.sasl_plain_username, security.sasl_plain_password) == ("alice", "a;b=c")
    assert security.ssl_cafile == "/ca.pem" and not security.ssl_check_hostname
    assert "a;b=c" not in repr(security)


@pytest.mark.parametrize(
    "properties, message",
    [
        ({"security.protocol": "TLS"}, "security.protocol"),
        ({"security.protocol": "SASL_SSL"}, "sasl.mechanism"),  # Kafka's default GSSAPI
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config"),
        ({"ssl.truststore.type": "JKS"}, "PEM"),
        ({"security.protocol": "SASL_SSL", "sasl.jaas.config": "not jaas"}, "sasl.jaas.config"),
    ],
)
def test_bad_properties_name_what_is_wrong(properties, message):
    with pytest.raises(ValueError, match=message):
        SecurityConfig.from_properties(properties)


def test_pop_security_takes_only_its_options():
    options = {"security_protocol": "SASL_PLAINTEXT", "sasl_plain_username": "u",
               "sasl_plain_password": "p", "acks": -1}  # fmt: skip
    security = pop_security(options)
    assert security is not None and security.uses_sasl and not security.uses_tls
    assert options == {"acks": -1}
    assert pop_security({"security_protocol": "PLAINTEXT"}) is None


async def _exchange(mechanism: str, user: str, password: str):
    factory = SaslServerFactory(["PLAIN"], {"bob": "bob-secret"}, ScramCredentialCache())
    client, server = trio.testing.memory_stream_pair()
    principals: list = []

    async def handle(header, request):
        principals.append(current_principal())
        return m.api_versions_response()

    async def opener(host: str, port: int) -> trio.abc.Stream:
        return client

    connect = secure_connector(
        SecurityConfig(
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism=mechanism,
            sasl_plain_username=user,
            sasl_plain_password=password,
        ),
        opener,
    )
    gate = SaslGate(handle, Authenticator(factory, failed_delay_ms=10))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: serve_connection(server, gate, max_frame_bytes=1 << 20, max_queued=4)
        )
        error: AuthenticationFailedError | None = None
        try:
            stream = await connect("127.0.0.1", 1)
            await stream.aclose()
        except AuthenticationFailedError as exc:
            error = exc
        finally:
            nursery.cancel_scope.cancel()
    if error is not None:
        raise error
    return principals


async def test_the_connector_logs_in():
    await _exchange("PLAIN", "bob", "bob-secret")


@pytest.mark.parametrize(
    "mechanism, password, message",
    [
        ("PLAIN", "wrong", "Invalid username or password"),
        ("SCRAM-SHA-512", "bob-secret", "does not enable SASL mechanism SCRAM-SHA-512"),
    ],
)
async def test_a_refused_login_is_a_non_retriable_error(mechanism, password, message):
    with pytest.raises(AuthenticationFailedError, match=message) as caught:
        await _exchange(mechanism, "bob", password)
    assert caught.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert not caught.value.retriable and password not in str(caught.value)


async def _tls_connect_to(answer: bytes) -> None:
    """A TLS connect to a real TCP listener that sends `answer` and closes at once."""

    async def serve(stream: trio.SocketStream) -> None:
        async with stream:
            if answer:
                await stream.send_all(answer)

    async with trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        nursery.start_soon(trio.serve_listeners, serve, listeners)
        connect = secure_connector(
            SecurityConfig(security_protocol="SSL", ssl_context=ssl.create_default_context())
        )
        error: Exception | None = None
        try:
            with trio.fail_after(10):
                stream = await connect("127.0.0.1", port)
            await stream.aclose()
        except Exception as exc:  # raised outside the nursery, not in a group
            error = exc
        finally:
            nursery.cancel_scope.cancel()
    if error is not None:
        raise error


async def test_a_peer_closing_during_the_tls_handshake_is_a_broken_connection():
    """A broker shutting down (or a proxy whose upstream is gone) closes the connection
    mid-handshake: a retriable OSError, as Kafka counts that EOF, not a refused login
    that would make the controller or a client give up."""
    with pytest.raises(OSError, match="broke"):
        await _tls_connect_to(b"")


async def test_a_peer_that_does_not_speak_tls_is_an_authentication_failure():
    with pytest.raises(AuthenticationFailedError, match="TLS handshake"):
        await _tls_connect_to(b"HTTP/1.0 400 Bad Request\r\n\r\n" * 4)
