"""`serve --ca-secret ... --webhook-configuration ...` (real gunicorn, real TLS) against the test API server:
what certificate rotation may and may not hold back at start.

A replica with no certificate waits for the CA Secret and the configurations' trust (it has nothing to serve
with). But a webhook configuration it may not read (a role without the grant) does not keep it from
serving, and a replica restarted with the certificate a past pass issued (a container restarted in its
pod keeps the emptyDir) serves it at once while the API server cannot be used, then rotates as usual.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit.kubeapi import DEFAULT_RESOURCES, ROTATION_RESOURCES, KubeAPIServer
from testkit.server import WebhookServer, webhook_server
from testkit.wait import wait_for
from webhook.files import tls
from webhook.kube.rotator import CONFIG_KINDS

pytestmark = pytest.mark.timeout(120)
SECRET_NAMESPACE, SECRET = "priority-system", "priority-webhook-ca"
CONFIGURATION = "priority-webhook"
RESOURCES = (*DEFAULT_RESOURCES, *ROTATION_RESOURCES)
SECRETS_PATH = f"/api/v1/namespaces/{SECRET_NAMESPACE}/secrets"


def configuration(kind: str) -> dict[str, Any]:
    hook = {
        "name": "pods.priority-webhook.io",
        "clientConfig": {"url": "https://127.0.0.1:1/mutate"},
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
    }
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": CONFIGURATION},
        "webhooks": [copy.deepcopy(hook)],
    }


@pytest.fixture
def api() -> Iterator[KubeAPIServer]:
    with KubeAPIServer(resources=RESOURCES, bookmark_interval=0.2) as server:
        server.create("mutatingwebhookconfigurations", configuration("MutatingWebhookConfiguration"))
        server.create("validatingwebhookconfigurations", configuration("ValidatingWebhookConfiguration"))
        yield server


def serve(api: KubeAPIServer, tmp_path: Path, cert_dir: Path) -> Iterator[WebhookServer]:
    """`serve` issuing its own certificate into `cert_dir` (the `webhook` certificates mode's flags)."""
    return webhook_server(
        tmp_path,
        "--kubeconfig",
        api.kubeconfig(tmp_path / "kubeconfig"),
        "--workers",
        "1",
        "--ca-secret",
        f"{SECRET_NAMESPACE}/{SECRET}",
        "--webhook-configuration",
        CONFIGURATION,
        "--rotation-interval",
        "1s",
        cert_dir=cert_dir,
    )


def ready(server: WebhookServer) -> bool:
    return server.session.get(server.url + "/readyz", timeout=5).status_code == 200


def bundles(api: KubeAPIServer) -> set[str]:
    found = set()
    for plural in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        obj = api.get(plural, CONFIGURATION)
        assert obj is not None
        found |= {hook["clientConfig"].get("caBundle", "") for hook in obj["webhooks"]}
    return found


def test_configurations_it_may_not_read_do_not_keep_it_from_serving(
    api: KubeAPIServer, tmp_path: Path
) -> None:
    cert_dir = tmp_path / "certs"
    with (
        api.failing(403, match=lambda r: r.path.startswith("/apis/admissionregistration.k8s.io/")),
        serve(api, tmp_path, cert_dir) as server,
    ):
        wait_for(lambda: ready(server), timeout=30, what="ready")
        assert bundles(api) == {""}  # nothing could be kept
        log = server.log_file.read_text()
        for kind in CONFIG_KINDS:
            assert (
                f"{kind} {CONFIGURATION}: may not be read (HTTP 403): its caBundle is not checked nor kept; "
                "grant get and patch on it"
            ) in log


@pytest.mark.parametrize("fault", ["api-server-down", "secret-forbidden"])
def test_a_restarted_replica_serves_its_certificate_while_the_api_server_cannot_be_used(
    api: KubeAPIServer, tmp_path: Path, fault: str
) -> None:
    cert_dir = tmp_path / "certs"
    with serve(api, tmp_path, cert_dir) as server:
        wait_for(lambda: ready(server), timeout=30, what="ready on a fresh certificate")
        issued = (cert_dir / tls.TLS_CERT).read_bytes()
        ca = base64.b64encode((cert_dir / tls.CA_CERT).read_bytes()).decode()
        assert bundles(api) == {ca}
    status, match = (
        (503, None) if fault == "api-server-down" else (403, lambda r: r.path.startswith(SECRETS_PATH))
    )
    with api.failing(status, match=match), serve(api, tmp_path, cert_dir) as server:
        # Answering /healthz over TLS: it listens with the certificate it had.
        assert server.session.get(server.url + "/healthz", timeout=5).status_code == 200
        assert (cert_dir / tls.TLS_CERT).read_bytes() == issued
        assert "serving the certificate already in" in server.log_file.read_text()
        if fault == "secret-forbidden":  # the classes can be listed: ready, and serving reviews
            wait_for(lambda: ready(server), timeout=30, what="ready")


def test_a_first_start_without_the_secret_waits(api: KubeAPIServer, tmp_path: Path) -> None:
    """No certificate to serve with: it does not listen before a pass has issued one."""
    cert_dir = tmp_path / "certs"
    with (
        api.failing(403, match=lambda r: r.path.startswith(SECRETS_PATH)),
        pytest.raises(AssertionError, match=r"timed out .*/healthz"),
        webhook_server(
            tmp_path,
            "--kubeconfig",
            api.kubeconfig(tmp_path / "kubeconfig"),
            "--ca-secret",
            f"{SECRET_NAMESPACE}/{SECRET}",
            cert_dir=cert_dir,
            startup_timeout=5,
        ),
    ):
        pass
    assert not (cert_dir / tls.TLS_CERT).exists()
