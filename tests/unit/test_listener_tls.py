"""Listener security: the protocol map and ssl.* keys of a broker's config, and TLS on the
real connection loop (`serve_connection`) over in-memory streams with real certificates
(trustme): mTLS principals, a certificate from another CA refused in the handshake,
garbage instead of a ClientHello closed."""

from __future__ import annotations

import pytest
import trio
import trio.testing
import trustme

from broker.config import BrokerConfig
from client.connection import BrokerConnectionError, open_connection
from client.protocol import messages as m
from server_common.network import serve_connection
from server_common.properties import ConfigError
from server_common.security.credential_cache import ScramCredentialCache
from server_common.security.listener_config import TlsSettings
from server_common.security.principal import ANONYMOUS, current_principal
from server_common.security.tls import client_context, rfc2253, server_context


def _config(**values) -> BrokerConfig:
    return BrokerConfig({"broker.id": 1, **values})


def test_protocol_map_defaults_names_like_protocols_and_keeps_other_names_plaintext():
    config = _config(
        listeners="PLAINTEXT://:1,SASL_PLAINTEXT://:2,KAFKA://:3,INTERNAL://:4",
        **{"listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT"},
    )
    protocols = {name: s.protocol for name, s in config.security.items()}
    assert protocols == {
        "PLAINTEXT": "PLAINTEXT",
        "SASL_PLAINTEXT": "SASL_PLAINTEXT",
        "KAFKA": "PLAINTEXT",
        "INTERNAL": "SASL_PLAINTEXT",
    }


def test_listener_prefixed_keys_win_for_their_listener():
    config = _config(
        listeners="EXTERNAL://:1,INTERNAL://:2",
        **{
            "listener.security.protocol.map": "EXTERNAL:SASL_SSL,INTERNAL:SSL",
            "ssl.keystore.location": "/k.pem",
            "listener.name.internal.ssl.keystore.location": "/internal.pem",
            "listener.name.internal.ssl.client.auth": "required",
            "ssl.truststore.location": "/ca.pem",
            "listener.name.external.sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
            "listener.name.external.plain.sasl.jaas.config": "plain-jaas",
            "sasl.jaas.config": "general-jaas",
        },
    )
    external, internal = config.security["EXTERNAL"], config.security["INTERNAL"]
    assert external.tls is not None and external.tls.keystore_location == "/k.pem"
    assert external.tls.client_auth == "none"
    assert internal.tls is not None and internal.tls.keystore_location == "/internal.pem"
    assert internal.tls.client_auth == "required"
    assert external.sasl_mechanisms == ("SCRAM-SHA-512", "PLAIN")
    assert external.jaas == {"SCRAM-SHA-512": "general-jaas", "PLAIN": "plain-jaas"}
    assert internal.sasl_mechanisms == ()


@pytest.mark.parametrize(
    "values, message",
    [
        ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "NAME:PROTOCOL"),
        ({"listener.security.protocol.map": "OTHER:SSL"}, "not in listeners"),
        ({"listener.security.protocol.map": "PLAINTEXT:SSL"}, "ssl.keystore.location"),
        ({"listener.name.plaintext.log.dirs": "/x"}, "cannot be set per listener"),
        ({"listener.name.other.ssl.key.password": "x"}, "not in listeners"),
        ({"sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI"),
        ({"ssl.enabled.protocols": "SSLv3"}, "ssl.enabled.protocols"),
        ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type"),
    ],
)
def test_bad_security_configs_name_the_key(values, message):
    with pytest.raises(ConfigError, match=message):
        _config(listeners="PLAINTEXT://:1", **values)


def test_security_inter_broker_protocol_picks_the_listener():
    config = _config(
        listeners="SASL_SSL://:1,INTERNAL://:2",
        **{
            "listener.security.protocol.map": "SASL_SSL:SASL_PLAINTEXT,INTERNAL:SSL",
            "ssl.keystore.location": "/k.pem",
            "security.inter.broker.protocol": "SSL",
        },
    )
    assert config.inter_broker_listener == "INTERNAL"


def test_rfc2253_reverses_rdns_and_escapes():
    subject = (
        (("organizationName", "Example, Inc"),),
        (("organizationalUnitName", "eng"),),
        (("commonName", "alice"),),
    )
    assert rfc2253(subject) == "CN=alice,OU=eng,O=Example\\, Inc"


# -- TLS on the connection loop ------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    server.private_key_and_cert_chain_pem.write_to_path(str(directory / "broker.pem"))
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    alice = ca.issue_cert("alice@example.com", common_name="alice", organization_unit_name="eng")
    alice.private_key_and_cert_chain_pem.write_to_path(str(directory / "alice.pem"))
    other = trustme.CA().issue_cert("mallory@example.com", common_name="mallory")
    other.private_key_and_cert_chain_pem.write_to_path(str(directory / "mallory.pem"))
    return directory


async def _serve_one(stream, context, principals, timeout_s=10.0):
    async def handle(header, request):
        principals.append(current_principal())
        return m.api_versions_response()

    await serve_connection(
        stream,
        handle,
        max_frame_bytes=1 << 20,
        max_queued=4,
        tls=context,
        tls_handshake_timeout_s=timeout_s,
    )


async def _ask(stream, pki, certfile=None) -> m.ApiVersionsResponse:
    context = client_context(str(pki / "ca.pem"), certfile and str(pki / certfile))

    async def connector(host: str, port: int) -> trio.abc.Stream:
        return trio.SSLStream(stream, context, server_hostname=host)

    async with open_connection("127.0.0.1", 1, connector=connector) as connection:
        return await connection.request(m.ApiVersionsRequest(), timeout_s=10)


@pytest.mark.parametrize(
    "client_auth, certfile, expected",
    [
        ("required", "alice.pem", f"User:CN=alice,OU=eng,O=trustme v{trustme.__version__}"),
        ("requested", None, str(ANONYMOUS)),
        ("none", "alice.pem", str(ANONYMOUS)),
    ],
)
async def test_tls_principal_is_the_client_certificate_subject(
    pki, client_auth, certfile, expected
):
    context = server_context(
        TlsSettings(str(pki / "broker.pem"), "", str(pki / "ca.pem"), client_auth)
    )
    client, server = trio.testing.memory_stream_pair()
    principals: list = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_serve_one, server, context, principals)
        response = await _ask(client, pki, certfile)
    assert response.error_code == 0
    assert [str(p) for p in principals] == [expected]


async def test_certificate_from_another_ca_is_refused_in_the_handshake(pki):
    context = server_context(
        TlsSettings(str(pki / "broker.pem"), "", str(pki / "ca.pem"), "required")
    )
    client, server = trio.testing.memory_stream_pair()
    principals: list = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_serve_one, server, context, principals)
        with pytest.raises(BrokerConnectionError):  # the client sees the broken handshake
            await _ask(client, pki, "mallory.pem")
    assert principals == []  # nothing was served


async def test_garbage_instead_of_a_client_hello_closes_the_connection(pki, caplog):
    context = server_context(TlsSettings(str(pki / "broker.pem")))
    client, server = trio.testing.memory_stream_pair()
    principals: list = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_serve_one, server, context, principals)
        await client.send_all(b"GET / HTTP/1.1\r\n\r\n" * 10)
        with trio.fail_after(10):
            while await client.receive_some(4096):
                pass  # the broker's TLS alert, then EOF
    assert principals == []
    assert [r for r in caplog.records if "TLS handshake failed" in r.getMessage()]


async def test_a_silent_peer_is_closed_after_the_handshake_timeout(pki):
    context = server_context(TlsSettings(str(pki / "broker.pem")))
    client, server = trio.testing.memory_stream_pair()
    with trio.fail_after(10):
        await _serve_one(server, context, [], timeout_s=0.2)
    assert await client.receive_some(10) == b""


def test_a_bad_keystore_is_a_config_error(tmp_path):
    (tmp_path / "bad.pem").write_text("not a pem")
    with pytest.raises(ConfigError, match="ssl.keystore.location"):
        server_context(TlsSettings(str(tmp_path / "bad.pem")))


def test_passwords_are_sensitive_in_describe_configs():
    from broker.dynamic_config import BrokerConfigLayers

    config = _config(
        **{"sasl.jaas.config": 'x required user_a="secret";', "ssl.key.password": "pw"}
    )
    layers = BrokerConfigLayers(config)
    entries = {
        e.name: e
        for e in layers.describe_broker(
            ["sasl.jaas.config", "ssl.key.password", "ssl.client.auth"],
            per_broker=True,
            include_synonyms=True,
        )
    }
    for name in ("sasl.jaas.config", "ssl.key.password"):
        assert entries[name].is_sensitive and entries[name].value is None
        assert all(s.value is None for s in entries[name].synonyms)
    assert entries["ssl.client.auth"].value == "none"


def test_the_controller_uses_the_inter_broker_protocol_on_both_sides(pki):
    from controller.config import ControllerConfig

    values = {
        "controller.id": 1000,
        "security.inter.broker.protocol": "SASL_SSL",
        "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="controller" password="c-secret" user_broker="b-secret";',
        "ssl.truststore.location": str(pki / "ca.pem"),
    }
    with pytest.raises(ConfigError, match="ssl.keystore.location"):
        ControllerConfig(values).listener_security()
    config = ControllerConfig({**values, "ssl.keystore.location": str(pki / "broker.pem")})
    assert config.listener_security().protocol == "SASL_SSL"
    factory = config.sasl_factory(ScramCredentialCache())
    assert factory is not None and "PLAIN" in factory.mechanisms
    security = config.broker_security()
    assert security is not None and security.sasl_plain_username == "controller"
    assert ControllerConfig({"controller.id": 1000}).broker_security() is None
