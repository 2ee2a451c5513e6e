"""TLS for listeners and clients: SSL contexts from PEM files, the server-side handshake,
and the principal of a client certificate.

How it works: `server_context(settings)` loads the listener's keystore (a PEM file with
the private key and certificate chain, Kafka's `ssl.keystore.type=PEM`) and truststore
(PEM CA certificates), and asks for client certificates as `ssl.client.auth` says
(none, requested: checked when sent, required: mTLS). `client_context()` is what the
client library and the inter-broker connections use. `accept_tls()` wraps an accepted
stream in a `trio.SSLStream` and completes the handshake within a timeout: a peer that
sends garbage instead of a ClientHello, presents a certificate from another CA or never
finishes is closed with one log line. `certificate_principal()` is Kafka's default
principal builder for TLS: `User:` and the client certificate's subject in RFC 2253 form
(`User:CN=alice,OU=eng,O=example`), ANONYMOUS without a certificate.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Sequence

import trio

from server_common.properties import ConfigError
from server_common.security.listener_config import TlsSettings
from server_common.security.principal import ANONYMOUS, KafkaPrincipal

log = logging.getLogger(__name__)

_VERIFY_MODES = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
# Attribute names RFC 2253 (and Java's X500Principal) write by keyword.
_RFC2253_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


class TlsConfigError(ConfigError):
    """A PEM file is missing or unreadable, or its key does not match its certificate."""


def _limit_versions(context: ssl.SSLContext, versions: Sequence[str]) -> None:
    chosen = sorted(_TLS_VERSIONS[v] for v in versions)
    context.minimum_version = chosen[0]
    context.maximum_version = chosen[-1]


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """The SSLContext of a TLS listener; TlsConfigError naming the file that is wrong."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _limit_versions(context, settings.enabled_protocols)
    try:
        context.load_cert_chain(settings.keystore_location, password=settings.key_password or None)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"ssl.keystore.location {settings.keystore_location}: {exc}") from None
    if settings.truststore_location:
        try:
            context.load_verify_locations(cafile=settings.truststore_location)
        except (OSError, ssl.SSLError) as exc:
            raise TlsConfigError(
                f"ssl.truststore.location {settings.truststore_location}: {exc}"
            ) from None
    context.verify_mode = _VERIFY_MODES[settings.client_auth]
    return context


def client_context(
    cafile: str | None = None,
    certfile: str | None = None,
    keyfile: str | None = None,
    password: str | None = None,
    *,
    check_hostname: bool = True,
) -> ssl.SSLContext:
    """A client SSLContext: the CA file to trust (the system's when None) and, for
    mTLS, this client's certificate (and key, when not in the same PEM file)."""
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=cafile)
        if certfile:
            context.load_cert_chain(certfile, keyfile or None, password=password or None)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"TLS client files ({cafile}, {certfile}): {exc}") from None
    context.check_hostname = check_hostname
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


async def accept_tls(
    stream: trio.abc.Stream, context: ssl.SSLContext, timeout_s: float, peer: str
) -> trio.SSLStream[trio.abc.Stream] | None:
    """`stream` as a server-side SSLStream with its handshake done, or None (the stream
    closed, one line logged) when the handshake fails or takes over `timeout_s`."""
    tls = trio.SSLStream(stream, context, server_side=True)
    reason = f"no TLS handshake within {timeout_s:g} s"
    with trio.move_on_after(timeout_s):
        try:
            await tls.do_handshake()
            return tls
        except trio.BrokenResourceError as exc:
            cause = exc.__cause__
            reason = f"TLS handshake failed: {cause or exc}"
        except trio.ClosedResourceError:
            reason = "closed during the TLS handshake"
    log.warning("closing connection from %s: %s", peer, reason)
    await trio.aclose_forcefully(stream)
    return None


def certificate_principal(tls: trio.SSLStream[trio.abc.Stream]) -> KafkaPrincipal:
    """Kafka's default principal of a TLS connection: the client certificate's subject
    (RFC 2253), ANONYMOUS when the client sent none."""
    certificate = tls.getpeercert()
    if not certificate or not certificate.get("subject"):
        return ANONYMOUS
    return KafkaPrincipal.user(rfc2253(certificate["subject"]))


def rfc2253(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """`ssl.getpeercert()`'s subject (RDNs, most significant first) in RFC 2253 form:
    the RDNs last to first, each `KEYWORD=value` with RFC 2253's escaping."""
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_RFC2253_KEYWORDS.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)


def _escape(value: str) -> str:
    escaped = "".join("\\" + c if c in ',+"\\<>;' else c for c in value)
    if escaped.startswith(("#", " ")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped
