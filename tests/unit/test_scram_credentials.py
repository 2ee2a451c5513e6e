"""SCRAM credentials as Kafka 2.8 stores them (server_common/security/scram.py), the
broker's credential cache, and Kafka's `sasl.jaas.config` values (client/security/jaas.py).

The expected keys are derived here independently of the product code (RFC 5802's
definitions with hashlib.pbkdf2_hmac and hmac), so a credential Tributary writes is the
one Kafka's ScramFormatter would write for the same salt.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re

import hypothesis.strategies as st
import pytest
from hypothesis import given

from client.security.jaas import parse_jaas_config, plain_users
from client.security.sasl_client import salted_password as client_salted_password
from server_common.security.credential_cache import ScramCredentialCache
from server_common.security.scram import (
    ScramCredential,
    credential_from_string,
    credential_to_string,
    from_password,
    from_salted_password,
)

HASHES = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}


def expected_keys(mechanism: str, password: str, salt: bytes, iterations: int):
    hash_fn = HASHES[mechanism]
    salted = hashlib.pbkdf2_hmac(hash_fn().name, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hash_fn).digest()
    return hash_fn(client_key).digest(), hmac.new(salted, b"Server Key", hash_fn).digest()


@pytest.mark.parametrize("mechanism", sorted(HASHES))
def test_credential_matches_kafkas_for_a_known_salt(mechanism: str) -> None:
    salt = bytes(range(20))
    credential = from_password(mechanism, "pencil", salt, 4096)
    stored_key, server_key = expected_keys(mechanism, "pencil", salt, 4096)
    assert credential == ScramCredential(salt, stored_key, server_key, 4096)
    # KIP-554: the client sends the salted password; the broker derives the same keys.
    salted = client_salted_password(mechanism, "pencil", salt, 4096)
    assert from_salted_password(mechanism, salt, salted, 4096) == credential
    text = credential_to_string(credential)
    b64 = "[A-Za-z0-9+/]+=*"
    assert re.fullmatch(f"salt={b64},stored_key={b64},server_key={b64},iterations=4096", text), text
    assert text.startswith("salt=" + base64.b64encode(salt).decode() + ",")
    assert f"stored_key={base64.b64encode(stored_key).decode()}," in text
    assert "pencil" not in repr(credential) and base64.b64encode(stored_key).decode() not in repr(
        credential
    )


@given(
    salt=st.binary(min_size=1, max_size=64),
    stored=st.binary(min_size=1, max_size=64),
    server=st.binary(min_size=1, max_size=64),
    iterations=st.integers(1, 10**8),
)
def test_credential_string_round_trips(salt, stored, server, iterations) -> None:
    credential = ScramCredential(salt, stored, server, iterations)
    assert credential_from_string(credential_to_string(credential)) == credential


@pytest.mark.parametrize(
    "text",
    [
        "",
        "salt=AAAA",
        "salt=AAAA,stored_key=AAAA,server_key=AAAA",
        "salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations=x",
        "salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations=-1",
        "salt=!!!!,stored_key=AAAA,server_key=AAAA,iterations=4096",
        "salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations=4096,extra=1",
        "salt=AAAA,stored_key=AAAA,stored_key=AAAA,iterations=4096",
        "garbage",
    ],
)
def test_bad_credential_strings_are_refused_without_echoing_them(text: str) -> None:
    with pytest.raises(ValueError) as failure:
        credential_from_string(text)
    assert "AAAA" not in str(failure.value)


def test_the_cache_follows_set_and_remove() -> None:
    cache = ScramCredentialCache()
    good = credential_to_string(from_password("SCRAM-SHA-512", "pw", b"x" * 16, 4096))
    assert cache.set_user(
        "bob", {"SCRAM-SHA-512": good, "SCRAM-SHA-256": "junk", "quota": "1"}
    ) == ["SCRAM-SHA-256"]
    assert cache.scram_credential("SCRAM-SHA-512", "bob") == credential_from_string(good)
    assert cache.scram_credential("SCRAM-SHA-256", "bob") is None
    assert cache.users() == {"bob": ["SCRAM-SHA-512"]}
    cache.set_user("bob", {})  # every mechanism deleted
    assert cache.scram_credential("SCRAM-SHA-512", "bob") is None and cache.users() == {}
    cache.set_user("bob", {"SCRAM-SHA-512": good})
    cache.remove_user("bob")
    assert cache.users() == {}


def test_jaas_config_of_a_client_and_a_plain_listener() -> None:
    entry = parse_jaas_config(
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="a" password="b";'
    )
    assert entry.login_module == "org.apache.kafka.common.security.scram.ScramLoginModule"
    assert entry.control_flag == "required"
    assert entry.options == {"username": "a", "password": "b"}
    assert "password='b'" not in repr(entry) and "'b'" not in repr(entry)
    listener = parse_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '    username="admin"\n    password="admin-secret"\n'
        '    user_admin="admin-secret"\n    user_alice="alice \\"quoted\\" secret";'
    )
    assert plain_users(listener.options) == {
        "admin": "admin-secret",
        "alice": 'alice "quoted" secret',
    }
    assert parse_jaas_config("m.Module Optional  k=v ; ").options == {"k": "v"}


@pytest.mark.parametrize(
    "text",
    [
        "",
        ";",
        "m.Module",
        "m.Module required",
        'm.Module mandatory username="a";',
        'm.Module required username="secret-value"',
        'm.Module required username "secret-value";',
        'm.Module required password="secret-value',
        'm.Module required password="secret-value"; other.Module required;',
        'm.Module required a="secret-value" a="secret-value";',
    ],
)
def test_bad_jaas_configs_get_a_clear_error_that_hides_values(text: str) -> None:
    with pytest.raises(ValueError) as failure:
        parse_jaas_config(text)
    assert "secret-value" not in str(failure.value)
    assert "sasl.jaas.config" in str(failure.value)
