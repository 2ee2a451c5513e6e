"""The SASL exchange of one connection: the pure state machine (authenticator.py) with
the real mechanisms, and the gate on the real connection loop (in-memory streams, the
real client's SaslClient), fed hostile inputs: a request before authentication, an
unknown mechanism, a wrong password, a token announcing 2**31-1 bytes."""

from __future__ import annotations

import struct

import pytest
import trio
import trio.testing

from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.errors import ErrorCode
from client.security.sasl_client import SaslClient
from server_common.network import CLOSE_CONNECTION, RespondAndClose, serve_connection
from server_common.security.authenticator import Admission, Authenticator, AuthState
from server_common.security.credential_cache import ScramCredentialCache
from server_common.security.principal import ANONYMOUS, KafkaPrincipal, current_principal
from server_common.security.sasl import SaslServerFactory
from server_common.security.sasl_gate import SaslGate
from server_common.security.scram import credential_to_string, from_password

MECHANISMS = ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]


@pytest.fixture
def factory() -> SaslServerFactory:
    cache = ScramCredentialCache()
    cache.set_user(
        "alice",
        {
            mech: credential_to_string(from_password(mech, "alice-secret", b"salt" * 4, 4096))
            for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512")
        },
    )
    return SaslServerFactory(MECHANISMS, {"bob": "bob-secret"}, cache)


def _exchange(auth: Authenticator, client: SaslClient):
    assert auth.admit(ApiKey.SASL_HANDSHAKE) is Admission.HANDSHAKE
    assert auth.handshake(client.mechanism).error_code == ErrorCode.NONE
    token: bytes | None = client.initial_response()
    answer = None
    while token is not None:
        assert auth.admit(ApiKey.SASL_AUTHENTICATE) is Admission.AUTHENTICATE
        answer = auth.authenticate(token)
        if answer.error_code != ErrorCode.NONE:
            return answer
        token = None if client.complete else client.evaluate(answer.token)
    return answer


@pytest.mark.parametrize(
    "mechanism, user, password",
    [
        ("SCRAM-SHA-512", "alice", "alice-secret"),
        ("SCRAM-SHA-256", "alice", "alice-secret"),
        ("PLAIN", "bob", "bob-secret"),
    ],
)
def test_a_good_login_completes_with_the_users_principal(factory, mechanism, user, password):
    auth = Authenticator(factory)
    assert auth.admit(ApiKey.API_VERSIONS) is Admission.SERVE  # before the handshake
    answer = _exchange(auth, SaslClient(mechanism, user, password))
    assert answer is not None and answer.error_code == ErrorCode.NONE
    assert auth.complete and auth.principal == KafkaPrincipal.user(user)
    assert auth.admit(ApiKey.PRODUCE) is Admission.SERVE


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_wrong_password_fails_after_the_delay_and_closes(factory, mechanism):
    auth = Authenticator(factory, failed_delay_ms=250)
    user = "bob" if mechanism == "PLAIN" else "alice"
    answer = _exchange(auth, SaslClient(mechanism, user, "wrong"))
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert answer.close and answer.delay_ms == 250
    assert "wrong" not in (answer.error_message or "")
    assert auth.state is AuthState.FAILED and auth.principal is None
    assert auth.admit(ApiKey.SASL_AUTHENTICATE) is Admission.CLOSE


def test_an_unknown_mechanism_answers_the_enabled_list_and_closes(factory):
    auth = Authenticator(factory)
    answer = auth.handshake("GSSAPI")
    assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert list(answer.mechanisms) == MECHANISMS and answer.close


@pytest.mark.parametrize("api_key", [ApiKey.PRODUCE, ApiKey.METADATA, ApiKey.SASL_AUTHENTICATE])
def test_any_other_request_before_authentication_closes(factory, api_key):
    auth = Authenticator(factory)
    assert auth.admit(api_key) is Admission.CLOSE
    assert auth.state is AuthState.FAILED


def test_a_second_handshake_or_api_versions_mid_exchange_closes(factory):
    auth = Authenticator(factory)
    auth.handshake("PLAIN")
    assert auth.admit(ApiKey.SASL_HANDSHAKE) is Admission.CLOSE
    auth = Authenticator(factory)
    auth.handshake("PLAIN")
    assert auth.admit(ApiKey.API_VERSIONS) is Admission.CLOSE


def test_a_second_api_versions_before_the_handshake_closes(factory):
    """Kafka answers one ApiVersions before SaslHandshake and closes on another, so an
    unauthenticated connection cannot be kept alive by asking it again and again."""
    auth = Authenticator(factory)
    assert auth.admit(ApiKey.API_VERSIONS) is Admission.SERVE
    assert auth.admit(ApiKey.API_VERSIONS) is Admission.CLOSE
    assert auth.state is AuthState.FAILED
    auth = Authenticator(factory)
    assert auth.admit(ApiKey.API_VERSIONS) is Admission.SERVE
    answer = _exchange(auth, SaslClient("PLAIN", "bob", "bob-secret"))
    assert answer.error_code == ErrorCode.NONE and auth.complete
    assert auth.admit(ApiKey.API_VERSIONS) is Admission.SERVE  # as often as it likes now
    assert auth.admit(ApiKey.API_VERSIONS) is Admission.SERVE


@pytest.mark.parametrize("token", [b"", b"\x00", b"\xff" * 1000, b"n,,n=alice,r=" + b"x" * 5000])
def test_garbage_tokens_fail_authentication(factory, token):
    for mechanism in MECHANISMS:
        auth = Authenticator(factory)
        auth.handshake(mechanism)
        answer = auth.authenticate(token)
        if answer.error_code == ErrorCode.NONE:  # a SCRAM client-first may look valid
            answer = auth.authenticate(b"garbage")
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and answer.close


# -- the gate on the connection loop -----------------------------------------------------


async def test_gate_refuses_requests_before_authentication_and_sets_the_principal(factory):
    principals: list = []

    async def handle(header, request):
        principals.append(current_principal())
        return "served"

    gate = SaslGate(handle, Authenticator(factory, failed_delay_ms=50))
    header = _Header(ApiKey.METADATA)
    assert await gate(header, None) is CLOSE_CONNECTION
    assert principals == []

    gate = SaslGate(handle, Authenticator(factory, failed_delay_ms=50))
    shake = await gate(_Header(ApiKey.SASL_HANDSHAKE), m.SaslHandshakeRequest(mechanism="PLAIN"))
    assert shake.error_code == 0
    ok = await gate(
        _Header(ApiKey.SASL_AUTHENTICATE),
        m.SaslAuthenticateRequest(
            auth_bytes=SaslClient("PLAIN", "bob", "bob-secret").initial_response()
        ),
    )
    assert ok.error_code == 0
    await gate(header, None)
    assert principals == [KafkaPrincipal.user("bob")]


async def test_gate_delays_a_failure_then_answers_and_closes(factory):
    async def handle(header, request):
        raise AssertionError("never served")

    gate = SaslGate(handle, Authenticator(factory, failed_delay_ms=200))
    await gate(_Header(ApiKey.SASL_HANDSHAKE), m.SaslHandshakeRequest(mechanism="PLAIN"))
    started = trio.current_time()
    outcome = await gate(
        _Header(ApiKey.SASL_AUTHENTICATE),
        m.SaslAuthenticateRequest(auth_bytes=b"\x00bob\x00nope"),
    )
    assert trio.current_time() - started >= 0.2  # the configured delay (a floor, not a bound)
    assert isinstance(outcome, RespondAndClose)
    assert outcome.response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED


async def test_gate_without_sasl_answers_illegal_state_and_serves_the_rest():
    async def handle(header, request):
        return "served"

    gate = SaslGate(handle, None)
    shake = await gate(_Header(ApiKey.SASL_HANDSHAKE), m.SaslHandshakeRequest(mechanism="PLAIN"))
    assert shake.error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert await gate(_Header(ApiKey.METADATA), None) == "served"
    assert current_principal() == ANONYMOUS


async def test_a_token_announcing_2_31_bytes_closes_before_any_allocation(factory):
    """On the real loop: the frame's size prefix is over the limit, so the connection
    closes without reading (or allocating) the body."""

    async def handle(header, request):
        raise AssertionError("never served")

    client, server = trio.testing.memory_stream_pair()
    gate = SaslGate(handle, Authenticator(factory))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: serve_connection(server, gate, max_frame_bytes=1 << 20, max_queued=4)
        )
        await client.send_all(struct.pack(">i", 2**31 - 1) + b"\x00" * 100)
        with trio.fail_after(10):
            assert await client.receive_some(100) == b""


class _Header:
    def __init__(self, api_key: int) -> None:
        self.api_key = api_key
        self.correlation_id = 1


@pytest.mark.parametrize("authenticated", [False, True])
async def test_a_big_frame_before_authentication_closes_the_connection(authenticated):
    """sasl.server.max.receive.size: until authenticated, a frame over the limit closes
    the connection; once authenticated the same request is served."""
    from client.protocol.codec import RequestHeader, encode_request

    served: list = []

    async def handle(header, request):
        served.append(request)
        return m.api_versions_response()

    client, server = trio.testing.memory_stream_pair()
    frame = encode_request(
        RequestHeader(ApiKey.API_VERSIONS, 0, 1),
        m.ApiVersionsRequest(client_software_name="x" * 4000),
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: serve_connection(
                server,
                handle,
                max_frame_bytes=1 << 20,
                max_queued=4,
                authenticated=lambda: authenticated,
                max_frame_bytes_before_auth=1024,
            )
        )
        await client.send_all(frame)
        with trio.fail_after(10):
            answer = await client.receive_some(100_000)
        if authenticated:
            assert answer and len(served) == 1
            await client.aclose()
        else:
            assert answer == b"" and served == []


@pytest.mark.parametrize("authenticated", [False, True])
async def test_an_unreadable_request_before_authentication_is_answered_and_closes(authenticated):
    """A SaslHandshake whose mechanism is not a string is answered with an error by the
    wire; before authentication the connection then closes (Kafka's SASL server closes on
    a request it cannot parse), once authenticated it stays open for the next one."""
    import msgpack

    async def handle(header, request):
        raise AssertionError("never served")

    client, server = trio.testing.memory_stream_pair()
    payload = msgpack.packb([int(ApiKey.SASL_HANDSHAKE), 0, 1, None, {"mechanism": 12345}])
    frame = struct.pack(">I", len(payload)) + payload

    async def one_answer() -> bytes:
        received = b""
        with trio.fail_after(10):
            while len(received) < 4 or len(received) < 4 + struct.unpack(">I", received[:4])[0]:
                chunk = await client.receive_some(100_000)
                assert chunk, "closed without an answer"
                received += chunk
        return received

    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: serve_connection(
                server,
                handle,
                max_frame_bytes=1 << 20,
                max_queued=4,
                authenticated=lambda: authenticated,
                max_frame_bytes_before_auth=1024,
            )
        )
        await client.send_all(frame)
        assert await one_answer()  # an error answer comes first, either way
        if authenticated:
            await client.send_all(frame)  # still open: answered again
            assert await one_answer()
            await client.aclose()
        else:
            with trio.fail_after(10):
                assert await client.receive_some(1) == b""
