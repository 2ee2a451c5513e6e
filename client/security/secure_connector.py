"""Connecting securely: TLS and the native SASL exchange when a connection opens, with
the aiokafka / kafka-python option names.

How it works: `SecurityConfig` holds a client's security options (`security_protocol`
PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; `ssl_context` or `ssl_cafile` with
`ssl_certfile`/`ssl_keyfile` for mTLS; `sasl_mechanism`, `sasl_plain_username`,
`sasl_plain_password`); `from_properties()` reads Kafka client properties (the
`--command-config` file of the tools: `security.protocol`, `sasl.mechanism`,
`sasl.jaas.config`, PEM `ssl.truststore.location` / `ssl.keystore.location`).
`secure_connector(security, base)` wraps a `Connector` (client/connection.py): the
stream it opens gets its TLS handshake (the broker's certificate checked against the CA,
and its host name unless `ssl_check_hostname=False`), then, on a SASL protocol, the
SaslHandshake / SaslAuthenticate exchange in native messages with `SaslClient`
(sasl_client.py), before the connection is handed over; correlation ids of the exchange
are its own (the broker does not require them to continue). Every connection the
library opens goes through a connector (pools, the consumer's coordinator, the broker's
followers and the controller's channel), so this is the one place security happens.

Failures: a refused login, an unsupported mechanism or a TLS handshake the broker's
certificate (or ours) fails raise `AuthenticationFailedError`, which is not retriable
(Kafka's AuthenticationException); a connection that breaks meanwhile, the peer closing
in the middle of the TLS handshake included (a broker shutting down, a proxy whose
upstream is gone: Kafka's SslTransportLayer counts that EOF as a disconnection too), is
the connector's usual OSError (the caller's `BrokerUnavailableError`).
"""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from client.protocol import messages as m
from client.protocol.connection import ClientConnection
from client.protocol.errors import ErrorCode, ProtocolError, TributaryError
from client.security.jaas import parse_jaas_config
from client.security.sasl_client import SUPPORTED_MECHANISMS, SaslClient, SaslClientError

Connector = Callable[[str, int], Awaitable[trio.abc.Stream]]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# The peer closed the connection during the handshake: a broken connection, not a refusal.
_CLOSED_MIDWAY = (ssl.SSLEOFError, ssl.SSLZeroReturnError)
# Most bytes of one answer read during the exchange (a SCRAM challenge is ~200).
MAX_EXCHANGE_FRAME = 64 * 1024


class AuthenticationFailedError(TributaryError):
    """The broker refused our credentials or certificate, or we refused its certificate.
    Not retriable: asking again with the same settings changes nothing."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.SASL_AUTHENTICATION_FAILED, message)

    @property
    def retriable(self) -> bool:
        return False


@dataclasses.dataclass(frozen=True)
class SecurityConfig:
    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: str | None = None
    ssl_check_hostname: bool = True
    sasl_mechanism: str = "PLAIN"
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        protocol = self.security_protocol.upper()
        object.__setattr__(self, "security_protocol", protocol)
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"security_protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, "
                f"got {self.security_protocol!r}"
            )
        if self.uses_sasl:
            if self.sasl_mechanism not in SUPPORTED_MECHANISMS:
                raise ValueError(
                    f"sasl_mechanism must be one of {', '.join(SUPPORTED_MECHANISMS)}, "
                    f"got {self.sasl_mechanism!r}"
                )
            if self.sasl_plain_username is None or self.sasl_plain_password is None:
                raise ValueError(
                    f"security_protocol {protocol} needs sasl_plain_username and "
                    "sasl_plain_password"
                )

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def tls_context(self) -> ssl.SSLContext:
        """`ssl_context`, or one made from the CA / certificate files."""
        if self.ssl_context is not None:
            return self.ssl_context
        try:
            context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.ssl_cafile)
            if self.ssl_certfile:
                context.load_cert_chain(
                    self.ssl_certfile, self.ssl_keyfile or None, password=self.ssl_password
                )
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"TLS files ({self.ssl_cafile}, {self.ssl_certfile}): {exc}") from None
        context.check_hostname = self.ssl_check_hostname
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        return context

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> SecurityConfig:
        """Kafka client properties -> SecurityConfig; ValueError naming the property.
        Properties that are not about security are ignored."""
        get = properties.get
        for key in ("ssl.truststore.type", "ssl.keystore.type"):
            if get(key, "PEM").upper() != "PEM":
                raise ValueError(f"{key}: only PEM files are supported, got {get(key)!r}")
        username = password = None
        if jaas := get("sasl.jaas.config", "").strip():
            try:
                options = parse_jaas_config(jaas).options
            except ValueError as exc:
                raise ValueError(f"sasl.jaas.config: {exc}") from None
            username, password = options.get("username"), options.get("password")
        identification = get("ssl.endpoint.identification.algorithm", "https")
        try:
            return cls(
                security_protocol=get("security.protocol", "PLAINTEXT"),
                ssl_cafile=get("ssl.truststore.location") or None,
                ssl_certfile=get("ssl.keystore.location") or None,
                ssl_password=get("ssl.key.password") or None,
                ssl_check_hostname=identification.strip().lower() == "https",
                sasl_mechanism=get("sasl.mechanism", "GSSAPI"),
                sasl_plain_username=username,
                sasl_plain_password=password,
            )
        except ValueError as exc:
            message = str(exc)
            for option, prop in (
                ("security_protocol", "security.protocol"),
                ("sasl_mechanism", "sasl.mechanism"),
                (
                    "sasl_plain_username and sasl_plain_password",
                    "sasl.jaas.config username/password",
                ),
            ):
                message = message.replace(option, prop)
            raise ValueError(message) from None


# The keyword arguments `open_producer` / `open_consumer` / `open_admin` take for this.
OPTION_NAMES = tuple(f.name for f in dataclasses.fields(SecurityConfig))


def with_security(connector: Connector | None, options: dict[str, Any]) -> Connector | None:
    """`connector` with the security options popped from `options` (a client's keyword
    arguments) applied; unchanged when there are none (or PLAINTEXT)."""
    security = pop_security(options)
    return connector if security is None else secure_connector(security, connector)


def pop_security(options: dict[str, Any]) -> SecurityConfig | None:
    """Take the security options out of a client's keyword arguments: a SecurityConfig,
    or None when none was given (or `security_protocol` is PLAINTEXT)."""
    given = {name: options.pop(name) for name in OPTION_NAMES if name in options}
    security = SecurityConfig(**given) if given else None
    if security is not None and security.security_protocol == "PLAINTEXT":
        return None
    return security


async def _tcp(host: str, port: int) -> trio.abc.Stream:
    return await trio.open_tcp_stream(host, port)


def secure_connector(security: SecurityConfig | None, base: Connector | None = None) -> Connector:
    """`base` (TCP by default) with `security`'s TLS and SASL on every stream it opens."""
    opener = base or _tcp
    if security is None:
        return opener
    context = security.tls_context() if security.uses_tls else None

    async def connect(host: str, port: int) -> trio.abc.Stream:
        stream = await opener(host, port)
        try:
            if context is not None:
                stream = await _start_tls(stream, context, host, port)
            if security.uses_sasl:
                await _authenticate(stream, security, f"{host}:{port}")
        except BaseException:
            await trio.aclose_forcefully(stream)
            raise
        return stream

    return connect


async def _start_tls(
    stream: trio.abc.Stream, context: ssl.SSLContext, host: str, port: int
) -> trio.SSLStream[trio.abc.Stream]:
    tls = trio.SSLStream(stream, context, server_hostname=host)
    try:
        await tls.do_handshake()
    except trio.BrokenResourceError as exc:
        cause = exc.__cause__
        if isinstance(cause, ssl.SSLError) and not isinstance(cause, _CLOSED_MIDWAY):
            raise AuthenticationFailedError(
                f"TLS handshake with {host}:{port} failed: {cause}"
            ) from None
        raise OSError(f"TLS handshake with {host}:{port} broke: {cause or exc}") from None
    return tls


async def _authenticate(stream: trio.abc.Stream, security: SecurityConfig, peer: str) -> None:
    """The native SASL exchange; AuthenticationFailedError when it does not succeed."""
    assert security.sasl_plain_username is not None and security.sasl_plain_password is not None
    protocol = ClientConnection("tributary-sasl", max_frame_bytes=MAX_EXCHANGE_FRAME)
    mechanism = security.sasl_mechanism
    shake = await _ask(stream, protocol, m.SaslHandshakeRequest(mechanism=mechanism), peer)
    if shake.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
        raise AuthenticationFailedError(
            f"{peer} does not enable SASL mechanism {mechanism} "
            f"(it enables {', '.join(shake.mechanisms) or 'none'})"
        )
    if shake.error_code != ErrorCode.NONE:
        raise AuthenticationFailedError(
            f"{peer} refused the SASL handshake: {ErrorCode.from_code(shake.error_code).name} "
            "(is it a SASL listener?)"
        )
    client = SaslClient(mechanism, security.sasl_plain_username, security.sasl_plain_password)
    token: bytes | None = client.initial_response()
    while token is not None:
        answer = await _ask(stream, protocol, m.SaslAuthenticateRequest(auth_bytes=token), peer)
        if answer.error_code != ErrorCode.NONE:
            detail = answer.error_message or ErrorCode.from_code(answer.error_code).name
            raise AuthenticationFailedError(f"{peer}: {detail}")
        try:
            token = client.evaluate(answer.auth_bytes)
        except SaslClientError as exc:
            raise AuthenticationFailedError(f"{peer}: {exc.message}") from None


async def _ask(stream: trio.abc.Stream, protocol: ClientConnection, request: Any, peer: str) -> Any:
    _, frame = protocol.send_request(request)
    await stream.send_all(bytes(frame) if isinstance(frame, bytes) else b"".join(frame))
    while True:
        try:
            item = protocol.next_response()
        except ProtocolError as exc:
            raise AuthenticationFailedError(
                f"{peer} answered the SASL exchange badly: {exc}"
            ) from None
        if item is not None:
            _, outcome = item
            if isinstance(outcome, TributaryError):
                raise AuthenticationFailedError(f"{peer} refused the SASL exchange: {outcome}")
            return outcome
        data = await stream.receive_some(MAX_EXCHANGE_FRAME)
        if not data:
            raise OSError(f"{peer} closed the connection during the SASL exchange")
        protocol.receive_data(data)
