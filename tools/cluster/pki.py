"""A local cluster's certificates: a CA of its own and one certificate for 127.0.0.1 and
localhost (and any more host names asked for: the compose services') that every broker
and controller listener serves (`cluster up --secure`, `cluster pki`).

How it works: `write_local_pki(directory)` makes, with the `cryptography` library, an EC
P-256 CA and a leaf certificate signed by it (server and client auth, the SANs
`localhost`, `127.0.0.1` and the extra `hostnames`), and writes them as the listeners
and clients read PEM: `ca.pem` (the truststore) and `broker.pem` (the leaf's private
key, then its chain; mode 0600). Files already there are kept, so a restarted cluster keeps its CA.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from pathlib import Path

CA_FILE = "ca.pem"
KEYSTORE_FILE = "broker.pem"
VALIDITY = datetime.timedelta(days=825)


def write_private_file(path: Path, data: bytes) -> None:
    """Write `path` readable by its owner only (0600, also when it already existed)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(path, 0o600)


def write_local_pki(directory: Path, hostnames: Sequence[str] = ()) -> tuple[Path, Path]:
    """(CA PEM, keystore PEM) in `directory`, made unless both exist; the certificate is
    for localhost, 127.0.0.1 and `hostnames` (DNS names)."""
    ca_path, keystore_path = directory / CA_FILE, directory / KEYSTORE_FILE
    if ca_path.exists() and keystore_path.exists():
        return ca_path, keystore_path
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Tributary local cluster CA")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    *(x509.DNSName(h) for h in dict.fromkeys(hostnames) if h != "localhost"),
                ]
            ),
            critical=False,
        )
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    directory.mkdir(parents=True, exist_ok=True)
    write_private_file(
        keystore_path,
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        + cert.public_bytes(pem)
        + ca_cert.public_bytes(pem),
    )
    ca_path.write_bytes(ca_cert.public_bytes(pem))
    return ca_path, keystore_path
