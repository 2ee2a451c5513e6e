"""SASL PLAIN and SCRAM-SHA-256/512 as the broker runs them (server_common/security/sasl.py)
against the client's side (client/security/sasl_client.py) and scramp's own client.

What a user cares about: the right password logs in as User:<name>; a wrong password,
an unknown user, an unsupported extension or any malformed token fails with a clear,
password-free message; and no bytes a client can send raise anything but
`SaslAuthenticationFailed`.
"""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
import scramp
from hypothesis import HealthCheck, given, settings

from client.protocol.errors import ErrorCode
from client.security.sasl_client import SaslClient, SaslClientError
from server_common.security.credential_cache import ScramCredentialCache
from server_common.security.principal import KafkaPrincipal
from server_common.security.sasl import (
    SaslAuthenticationFailed,
    SaslServer,
    SaslServerFactory,
    UnsupportedSaslMechanism,
)
from server_common.security.scram import credential_to_string, from_password

SCRAM = ["SCRAM-SHA-256", "SCRAM-SHA-512"]
ALL = ["PLAIN", *SCRAM]
SALT = b"a-salt-of-16-byt"


def make_factory(mechanisms=ALL, iterations: int = 4096) -> SaslServerFactory:
    cache = ScramCredentialCache()
    cache.set_user(
        "alice",
        {
            m: credential_to_string(from_password(m, "alice-secret", SALT, iterations))
            for m in SCRAM
        },
    )
    return SaslServerFactory(mechanisms, {"alice": "alice-secret", "admin": "admin-pw"}, cache)


def run_exchange(server: SaslServer, client: SaslClient) -> None:
    token: bytes | None = client.initial_response()
    while token is not None:
        answer = server.evaluate(token)
        token = client.evaluate(answer)


@pytest.mark.parametrize("mechanism", ALL)
def test_right_password_logs_in_as_the_user(mechanism: str) -> None:
    server = make_factory().create(mechanism)
    client = SaslClient(mechanism, "alice", "alice-secret")
    assert not server.complete
    run_exchange(server, client)
    assert server.complete and client.complete
    assert server.principal == KafkaPrincipal.user("alice")
    assert str(server.principal) == "User:alice"


@pytest.mark.parametrize("mechanism", SCRAM)
def test_scramp_client_logs_in(mechanism: str) -> None:
    """An independent SCRAM client (scramp's, as a Kafka client would speak it)."""
    server = make_factory().create(mechanism)
    client = scramp.ScramClient([mechanism], "alice", "alice-secret")
    server_first = server.evaluate(client.get_client_first().encode())
    client.set_server_first(server_first.decode())
    server_final = server.evaluate(client.get_client_final().encode())
    client.set_server_final(server_final.decode())  # raises if the signature is wrong
    assert server.principal == KafkaPrincipal.user("alice")


@pytest.mark.parametrize("mechanism", SCRAM)
@pytest.mark.parametrize("password", ["alice-secret", "wrong"])
def test_kafka_pythons_own_scram_client(mechanism: str, password: str) -> None:
    """kafka-python's hand-written SCRAM client (what it sends to Kafka brokers)."""
    from kafka.net.sasl.scram import ScramClient as KafkaPythonScram

    server = make_factory().create(mechanism)
    client = KafkaPythonScram("alice", password, mechanism)
    client.process_server_first_message(server.evaluate(client.first_message()))
    if password != "alice-secret":
        with pytest.raises(SaslAuthenticationFailed):
            server.evaluate(client.final_message())
        return
    client.process_server_final_message(server.evaluate(client.final_message()))
    assert server.principal == KafkaPrincipal.user("alice")


def _client_final(
    mechanism: str, password: str, client_first_bare: str, server_first: str, nonce: str
) -> bytes:
    """A client-final with nonce `nonce` and the proof RFC 5802 computes over it."""
    import base64
    import hashlib
    import hmac

    digest = hashlib.sha256 if mechanism == "SCRAM-SHA-256" else hashlib.sha512
    attrs = dict(a.split("=", 1) for a in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        digest().name, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"])
    )
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    without_proof = f"c=biws,r={nonce}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(digest(client_key).digest(), auth_message, digest).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


@pytest.mark.parametrize("mechanism", SCRAM)
@pytest.mark.parametrize(
    "form,accepted",
    [("exact", True), ("librdkafka<2.6.1", True), ("other prefix", False), ("password", False)],
)
def test_the_client_final_nonce(mechanism: str, form: str, accepted: bool) -> None:
    """The combined nonce as sent; librdkafka < 2.6.1 (kcat 1.7.1) sends its own nonce
    again in front of it, which Kafka 2.8 accepts; any other prefix, or the right nonce
    with a wrong password, fails."""
    server = make_factory().create(mechanism)
    client_first_bare = "n=alice,r=fyko+d2lbbFgONRv9qkxdawL"
    server_first = server.evaluate(f"n,,{client_first_bare}".encode()).decode()
    combined = dict(a.split("=", 1) for a in server_first.split(","))["r"]
    nonce = {
        "exact": combined,
        "librdkafka<2.6.1": "fyko+d2lbbFgONRv9qkxdawL" + combined,
        "other prefix": "evil" + combined,
        "password": combined,
    }[form]
    password = "wrong" if form == "password" else "alice-secret"
    final = _client_final(mechanism, password, client_first_bare, server_first, nonce)
    if not accepted:
        with pytest.raises(SaslAuthenticationFailed):
            server.evaluate(final)
        return
    assert server.evaluate(final).startswith(b"v=")
    assert server.principal == KafkaPrincipal.user("alice")


@pytest.mark.parametrize("mechanism", ALL)
@pytest.mark.parametrize("user,password", [("alice", "wrong"), ("mallory", "alice-secret")])
def test_wrong_password_or_unknown_user_fails(mechanism: str, user: str, password: str) -> None:
    server = make_factory().create(mechanism)
    with pytest.raises(SaslAuthenticationFailed) as failure:
        run_exchange(server, SaslClient(mechanism, user, password))
    message = str(failure.value)
    assert "Authentication failed" in message
    if mechanism == "PLAIN":
        assert message == "Authentication failed: Invalid username or password"
    else:
        assert message == (
            "Authentication failed during authentication due to invalid credentials "
            f"with SASL mechanism {mechanism}"
        )
    for text in (message, failure.value.reason):
        assert "alice-secret" not in text and "wrong" not in text
    assert not server.complete
    with pytest.raises(RuntimeError):
        server.principal  # noqa: B018
    # A failed server stays failed: no second try on the same exchange.
    with pytest.raises(SaslAuthenticationFailed):
        server.evaluate(SaslClient(mechanism, "alice", "alice-secret").initial_response())


def test_plain_rules_of_kafkas_plain_server() -> None:
    factory = make_factory()

    def plain(token: bytes) -> str:
        with pytest.raises(SaslAuthenticationFailed) as failure:
            factory.create("PLAIN").evaluate(token)
        return str(failure.value)

    assert plain(b"\x00\x00pw") == "Authentication failed: username not specified"
    assert plain(b"\x00alice\x00") == "Authentication failed: password not specified"
    assert "authorization id" in plain(b"admin\x00alice\x00alice-secret")
    assert "invalid credentials with SASL mechanism PLAIN" in plain(b"alice\x00alice-secret")
    assert "invalid credentials" in plain(b"\xff\xfe\x00alice\x00x")
    server = factory.create("PLAIN")  # an authzid equal to the username is accepted
    assert server.evaluate(b"alice\x00alice\x00alice-secret") == b""
    assert server.principal == KafkaPrincipal.user("alice")


@pytest.mark.parametrize("mechanism", SCRAM)
def test_scram_refuses_the_tokenauth_extension(mechanism: str) -> None:
    server = make_factory().create(mechanism)
    with pytest.raises(SaslAuthenticationFailed) as failure:
        server.evaluate(b"n,,n=alice,r=abcdefghijkl,tokenauth=true")
    assert "tokenauth" in failure.value.reason


@pytest.mark.parametrize("mechanism", SCRAM)
def test_scram_refuses_a_credential_under_4096_iterations(mechanism: str) -> None:
    cache = ScramCredentialCache()
    cache.set_user(
        "weak", {mechanism: credential_to_string(from_password(mechanism, "pw", SALT, 1000))}
    )
    server = SaslServerFactory([mechanism], {}, cache).create(mechanism)
    with pytest.raises(SaslAuthenticationFailed) as failure:
        run_exchange(server, SaslClient(mechanism, "weak", "pw"))
    assert "less than the minimum 4096" in failure.value.reason


@pytest.mark.parametrize("mechanism", SCRAM)
def test_the_client_refuses_a_server_that_does_not_know_the_credential(mechanism: str) -> None:
    """A fake server (another salt and keys for the same salt) cannot prove itself."""
    real = make_factory().create(mechanism)
    client = SaslClient(mechanism, "alice", "alice-secret")
    server_first = real.evaluate(client.initial_response())
    client.evaluate(server_first)
    forged = b"v=" + __import__("base64").b64encode(b"\x00" * 32)
    with pytest.raises(SaslClientError) as failure:
        client.evaluate(forged)
    assert failure.value.code is ErrorCode.SASL_AUTHENTICATION_FAILED
    assert not client.complete


def test_the_client_refuses_a_server_asking_for_too_many_iterations() -> None:
    client = SaslClient("SCRAM-SHA-256", "alice", "alice-secret")
    client.initial_response()
    with pytest.raises(SaslClientError, match="more than 1000000"):
        client.evaluate(b"r=x,s=QUJDREVGR0hJSktM,i=5000000")


def test_the_client_rejects_unsupported_mechanisms_and_tokens_out_of_turn() -> None:
    with pytest.raises(ValueError, match="unsupported SASL mechanism"):
        SaslClient("GSSAPI", "a", "b")
    with pytest.raises(ValueError, match="SASLprep changes it") as refused:
        SaslClient("SCRAM-SHA-256", "a", "non\u00a0ascii-space")
    assert "ascii-space" not in str(refused.value)
    with pytest.raises(ValueError, match="cannot use this"):
        SaslClient("SCRAM-SHA-512", "a", "control\x07char")
    assert SaslClient("SCRAM-SHA-256", "a", "pässwörd").mechanism == "SCRAM-SHA-256"
    client = SaslClient("PLAIN", "a", "b")
    with pytest.raises(SaslClientError):
        client.evaluate(b"")
    assert client.initial_response() == b"\x00a\x00b"
    assert client.evaluate(b"") is None and client.complete
    with pytest.raises(SaslClientError):
        client.evaluate(b"")


def test_the_factory_enables_only_the_listed_mechanisms() -> None:
    factory = make_factory(["SCRAM-SHA-512", "PLAIN", "SCRAM-SHA-512"])
    assert factory.mechanisms == ["SCRAM-SHA-512", "PLAIN"]
    for name in ("SCRAM-SHA-256", "GSSAPI", "", "x" * 10_000):
        with pytest.raises(UnsupportedSaslMechanism) as failure:
            factory.create(name)
        assert len(str(failure.value)) < 200
    with pytest.raises(UnsupportedSaslMechanism):
        SaslServerFactory(["PLAIN", "OAUTHBEARER"], {}, ScramCredentialCache())


def test_a_completed_server_takes_no_more_tokens() -> None:
    server = make_factory().create("SCRAM-SHA-256")
    run_exchange(server, SaslClient("SCRAM-SHA-256", "alice", "alice-secret"))
    with pytest.raises(SaslAuthenticationFailed):
        server.evaluate(b"n,,n=alice,r=abc")


def test_huge_and_empty_tokens_fail_cleanly() -> None:
    factory = make_factory()
    for mechanism in ALL:
        for token in (b"", b"\x00" * 1_000_000, b"n,,n=" + b"a" * 1_000_000 + b",r=x"):
            with pytest.raises(SaslAuthenticationFailed):
                factory.create(mechanism).evaluate(token)


_FACTORY = make_factory()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    mechanism=st.sampled_from(ALL),
    tokens=st.lists(
        st.one_of(
            st.binary(max_size=300),
            st.text(max_size=200).map(str.encode),
            st.sampled_from(
                [
                    b"n,,n=alice,r=",
                    b"n,,n=alice,r=abc",
                    b"y,,n=alice,r=abc",
                    b"p=tls-unique,,n=alice,r=a",
                ]
            ).flatmap(lambda head: st.text(max_size=60).map(lambda t: head + t.encode())),
        ),
        min_size=1,
        max_size=3,
    ),
    valid_first=st.booleans(),
)
def test_hostile_tokens_only_ever_fail_authentication(
    mechanism: str, tokens: list[bytes], valid_first: bool
) -> None:
    server = _FACTORY.create(mechanism)
    if valid_first and mechanism != "PLAIN":  # a real client-first, then garbage
        server.evaluate(SaslClient(mechanism, "alice", "alice-secret").initial_response())
    for token in tokens:
        try:
            answer = server.evaluate(token)
        except SaslAuthenticationFailed as e:
            assert "alice-secret" not in str(e) and "alice-secret" not in e.reason
            assert len(str(e)) < 200
            return
        assert isinstance(answer, bytes)


@settings(max_examples=200, deadline=None)
@given(
    mechanism=st.sampled_from(SCRAM),
    challenges=st.lists(
        st.one_of(
            st.binary(max_size=200),
            st.text(max_size=100).map(str.encode),
            st.text(max_size=40).map(lambda t: f"r={t},s=QUJDREVGR0hJSktM,i=4096".encode()),
            st.integers(-5, 10**9).map(lambda i: f"r=x,s=QUJDREVGR0hJSktM,i={i}".encode()),
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_a_hostile_server_only_ever_fails_the_client(
    mechanism: str, challenges: list[bytes]
) -> None:
    client = SaslClient(mechanism, "alice", "alice-secret")
    client.initial_response()
    for challenge in challenges:
        try:
            client.evaluate(challenge)
        except SaslClientError as e:
            assert "alice-secret" not in str(e)
            return
