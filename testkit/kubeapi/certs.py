"""Certificates for the test API server's TLS mode: a CA, a serving certificate for 127.0.0.1, and a
client certificate (the API server's x509 client authentication: CN is the user, O the groups).

Every certificate comes from the project's own certificate code.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from webhook.files import tls


@dataclass(frozen=True)
class ApiCertificates:
    directory: Path
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def write_api_certificates(directory: Path, user: str = "priority-webhook") -> ApiCertificates:
    directory.mkdir(parents=True, exist_ok=True)
    ca = tls.create_ca("test-kubeapi CA", days=1)
    server = tls.create_serving_cert(ca, ["127.0.0.1", "localhost"], days=1)
    client = tls.create_client_cert(ca, user)
    paths = ApiCertificates(
        directory,
        directory / "ca.crt",
        directory / "apiserver.crt",
        directory / "apiserver.key",
        directory / "client.crt",
        directory / "client.key",
    )
    for path, data in (
        (paths.ca, ca.cert_pem()),
        (paths.server_cert, server.cert_pem()),
        (paths.server_key, server.key_pem()),
        (paths.client_cert, client.cert_pem()),
        (paths.client_key, client.key_pem()),
    ):
        tls.write_file(path, data, 0o600)
    return paths
