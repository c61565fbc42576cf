"""Certificates for the webhook: a private CA and a serving certificate signed by it (ECDSA P-256).

The API server calls the webhook at `https://NAME.NS.svc:443` and verifies the chain against the
`caBundle` of the webhook configuration, so the serving certificate must carry the Service's DNS names
as SANs (the API server ignores the Common Name). File names follow the Kubernetes TLS secret keys
(`tls.crt`, `tls.key`) plus `ca.crt`, so a secret volume can be mounted as the server's `--cert-dir`.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_CERT, CA_KEY = "ca.crt", "ca.key"
TLS_CERT, TLS_KEY = "tls.crt", "tls.key"
DEFAULT_SERVICE, DEFAULT_NAMESPACE = "priority-webhook", "default"
# Certificates are valid from a little in the past: clocks of the API server and of the machine that
# generated them are never exactly in step.
CLOCK_SKEW = datetime.timedelta(minutes=5)


@dataclass(frozen=True)
class KeyPair:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def is_dns_label(text: str) -> bool:
    """Service and namespace names are RFC 1123 labels; anything else cannot be a SAN the API server uses."""
    return _DNS_LABEL.fullmatch(text) is not None


def service_names(service: str, namespace: str) -> list[str]:
    """Every name the API server or a person may use to reach the Service, plus loopback for development."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        "localhost",
        "127.0.0.1",
    ]


def _validity(
    days: int, lifetime: datetime.timedelta | None = None
) -> tuple[datetime.datetime, datetime.datetime]:
    """From a little in the past to `lifetime` (or `days`) from now."""
    if lifetime is None:
        if days < 1:
            raise ValueError(f"days: must be at least 1, got {days}")
        lifetime = datetime.timedelta(days=days)
    elif lifetime <= datetime.timedelta(0):
        raise ValueError(f"lifetime: must be positive, got {lifetime}")
    now = datetime.datetime.now(datetime.UTC)
    return now - CLOCK_SKEW, now + lifetime


def _key_usage(*, key_cert_sign: bool = False, crl_sign: bool = False) -> x509.KeyUsage:
    """Digital signature, plus certificate and CRL signing for a CA; nothing else for an ECDSA key."""
    return x509.KeyUsage(
        digital_signature=True,
        key_cert_sign=key_cert_sign,
        crl_sign=crl_sign,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        encipher_only=False,
        decipher_only=False,
    )


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def create_ca(common_name: str, days: int = 3650, *, lifetime: datetime.timedelta | None = None) -> KeyPair:
    """A self-signed CA that may sign serving certificates only (pathlen 0); `lifetime` overrides `days`."""
    key = _new_key()
    not_before, not_after = _validity(days, lifetime)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(key_cert_sign=True, crl_sign=True), critical=True)
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert, key)


def create_serving_cert(
    ca: KeyPair, names: list[str], days: int = 365, *, lifetime: datetime.timedelta | None = None
) -> KeyPair:
    """A TLS server certificate for `names` (DNS names or IP addresses), signed by `ca`; `lifetime`
    overrides `days`."""
    if not names:
        raise ValueError("names: at least one DNS name or IP address is needed")
    key = _new_key()
    not_before, not_after = _validity(days, lifetime)
    # A serving certificate must not outlive its CA (clients would reject the chain then).
    not_after = min(not_after, ca.cert.not_valid_after_utc)
    sans: list[x509.GeneralName] = []
    for name in names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            sans.append(x509.DNSName(name))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        # ECDHE with an EC key: the serving key only signs.
        .add_extension(_key_usage(), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False
        )
        .sign(ca.key, hashes.SHA256())
    )
    return KeyPair(cert, key)


def create_client_cert(ca: KeyPair, user: str, groups: tuple[str, ...] = (), days: int = 1) -> KeyPair:
    """A TLS client certificate signed by `ca`, as the API server's x509 authenticator reads it: the Common
    Name is the user, each Organization a group. Used for test control planes and their admin kubeconfig."""
    key = _new_key()
    not_before, not_after = _validity(days)
    subject = x509.Name(
        [
            *(x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups),
            x509.NameAttribute(NameOID.COMMON_NAME, user),
        ]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(min(not_after, ca.cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    return KeyPair(cert, key)


def write_file(path: Path, data: bytes, mode: int) -> None:
    """Write atomically (temp file + rename) with `mode` from the start: a running server that watches the
    directory never reads half a file, and a key is never readable by others, not even for a moment."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def load_key_pair(cert_path: Path, key_path: Path) -> KeyPair:
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{key_path}: expected an EC private key")
    if key.public_key().public_numbers() != cert.public_key().public_numbers():  # type: ignore[union-attr]
        raise ValueError(f"{key_path}: does not match the certificate {cert_path}")
    return KeyPair(cert, key)


def ca_bundle(ca_cert_pem: bytes) -> str:
    """The `caBundle` field of a webhook configuration: the CA's PEM, base64-encoded."""
    return base64.b64encode(ca_cert_pem).decode()


def write_certificates(
    out: Path,
    service: str = DEFAULT_SERVICE,
    namespace: str = DEFAULT_NAMESPACE,
    days: int = 365,
    ca_dir: Path | None = None,
) -> KeyPair:
    """Write `ca.crt`, `tls.crt`, `tls.key` (and `ca.key` for a new CA) into `out`; return the CA.

    With `ca_dir`, the serving certificate is signed by the CA found there (`ca.crt` + `ca.key`): the
    rotation path, where the caBundle in the webhook configurations stays the same.
    """
    out.mkdir(parents=True, exist_ok=True)
    if ca_dir is not None:
        ca = load_key_pair(ca_dir / CA_CERT, ca_dir / CA_KEY)
    else:
        # The CA outlives the serving certificates it signs so that they can be renewed under it.
        ca = create_ca(f"{service}.{namespace}.svc CA", days=max(days, 3650))
        write_file(out / CA_KEY, ca.key_pem(), 0o600)
    serving = create_serving_cert(ca, service_names(service, namespace), days)
    if ca_dir is None or ca_dir.resolve() != out.resolve():
        write_file(out / CA_CERT, ca.cert_pem(), 0o644)
    # Key before certificate: a watcher that reloads when tls.crt changes then finds the matching key.
    write_file(out / TLS_KEY, serving.key_pem(), 0o600)
    write_file(out / TLS_CERT, serving.cert_pem(), 0o644)
    return ca
