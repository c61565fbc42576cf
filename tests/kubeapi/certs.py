"""Certificates for the test API server's TLS mode: a CA, a serving certificate for 127.0.0.1, and a
client certificate (the API server's x509 client authentication: CN is the user, O the groups).

The CA and serving certificate come from the project's own certificate code; a client certificate needs
the clientAuth usage, which the project never issues, so it is built here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook import tls


@dataclass(frozen=True)
class ApiCertificates:
    directory: Path
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def client_certificate(ca: tls.KeyPair, user: str, groups: tuple[str, ...] = ()) -> tls.KeyPair:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([
        *(x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups),
        x509.NameAttribute(NameOID.COMMON_NAME, user),
    ])
    not_before, not_after = tls._validity(1)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    return tls.KeyPair(cert, key)


def write_api_certificates(directory: Path, user: str = "priority-webhook") -> ApiCertificates:
    directory.mkdir(parents=True, exist_ok=True)
    ca = tls.create_ca("test-kubeapi CA", days=1)
    server = tls.create_serving_cert(ca, ["127.0.0.1", "localhost"], days=1)
    client = client_certificate(ca, user)
    paths = ApiCertificates(directory, directory / "ca.crt", directory / "apiserver.crt",
                            directory / "apiserver.key", directory / "client.crt", directory / "client.key")
    for path, data in ((paths.ca, ca.cert_pem()), (paths.server_cert, server.cert_pem()),
                       (paths.server_key, server.key_pem()), (paths.client_cert, client.cert_pem()),
                       (paths.client_key, client.key_pem())):
        tls.write_file(path, data, 0o600)
    return paths
