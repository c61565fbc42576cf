"""Our webhook behind a real kube-apiserver, registered with the configurations our own chart renders.

    with registered_webhook(cluster, tmp_path) as hook:
        cluster.kubectl("create", "-f", "pod.yaml", "--dry-run=server")

The server is `priority-webhook serve --kubeconfig` (real gunicorn, real TLS) with a certificate from
`priority-webhook certs`. The chart's MutatingWebhookConfiguration and ValidatingWebhookConfiguration are
rendered by the Helm engine with the given values; only each `clientConfig.service` is switched to a `url`
on loopback (the API server here has no cluster network) with the caBundle the `certs` command printed.
Rules, selectors, failure policies, timeouts and reinvocation are the chart's own.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python as helm

from tests.chart.rendering import CHART, render
from tests.support.envtest import ControlPlane
from tests.support.server import REPO, WebhookServer, webhook_server
from tests.support.wait import wait_for

RELEASE = "pw"
RELEASE_NAMESPACE = "priority-system"
SERVICE = "pw-priority-webhook"
CONFIG_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def make_certificates(out: Path, service: str = SERVICE, namespace: str = RELEASE_NAMESPACE) -> str:
    """`priority-webhook certs` into `out`; returns the caBundle it printed."""
    result = subprocess.run(
        [sys.executable, "-m", "webhook", "certs", "--service", service, "--namespace", namespace,
         "--out", str(out)], cwd=REPO, capture_output=True, text=True, check=True,
    )
    return result.stdout.strip().splitlines()[-1]


def chart_webhook_configurations(
    server_url: str, ca_bundle: str, values: dict[str, Any] | None = None,
    *, release: str = RELEASE, namespace: str = RELEASE_NAMESPACE,
) -> list[dict[str, Any]]:
    """The chart's webhook configurations, each `service` client config switched to `url` + caBundle."""
    with helm.Chart.load(CHART) as chart:
        rendered = render(chart, values, namespace=namespace, release=release)
    configs = [obj for kind in CONFIG_KINDS for obj in rendered.of_kind(kind)]
    for config in configs:
        for hook in config["webhooks"]:
            path = hook["clientConfig"]["service"].get("path", "/")
            hook["clientConfig"] = {"url": server_url + path, "caBundle": ca_bundle}
    return configs


def admission_requests(server: WebhookServer) -> float:
    """Reviews the server has answered so far (all workers), from its own /metrics."""
    text = server.session.get(server.url + "/metrics", timeout=5).text
    return sum(float(value) for value in
               re.findall(r"^priority_webhook_admission_requests_total\{[^}]*\} ([0-9.e+]+)$", text, re.M))


@dataclass
class RegisteredWebhook:
    server: WebhookServer
    configurations: list[dict[str, Any]]
    ca_bundle: str

    def requests(self) -> float:
        return admission_requests(self.server)


def ensure_namespace(cluster: ControlPlane, name: str) -> None:
    if cluster.kubectl("get", "namespace", name, check=False).returncode != 0:
        cluster.kubectl("create", "namespace", name)


def wait_until_called(cluster: ControlPlane, server: WebhookServer, namespace: str = "default") -> None:
    """The API server picks up webhook configurations asynchronously: wait until a server-side dry-run pod
    creation in `namespace` reaches our server."""
    before = admission_requests(server)

    def called() -> bool:
        probe = {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": f"probe-{uuid.uuid4().hex[:8]}", "namespace": namespace},
                 "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}
        cluster.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(probe), check=False)
        return admission_requests(server) > before

    wait_for(called, timeout=60, interval=0.2, what="the API server to call the webhook")


@contextmanager
def registered_webhook(
    cluster: ControlPlane, tmp_path: Path, *serve_args: str, values: dict[str, Any] | None = None,
    workers: int | None = None,
) -> Iterator[RegisteredWebhook]:
    """Serve the webhook against `cluster` and register the chart's configurations; undo both on exit."""
    cert_dir = tmp_path / "webhook-certs"
    ca_bundle = make_certificates(cert_dir)
    args = ["--kubeconfig", str(cluster.kubeconfig), *serve_args]
    if workers is not None:
        args += ["--workers", str(workers)]
    ensure_namespace(cluster, RELEASE_NAMESPACE)
    with webhook_server(tmp_path, *args, cert_dir=cert_dir) as server:
        wait_for(lambda: server.session.get(server.url + "/readyz", timeout=5).status_code == 200,
                 timeout=60, interval=0.1, what="the webhook's class cache to sync")
        # Rendered for this API server's version: the chart leaves out fields it does not know.
        configs = chart_webhook_configurations(
            server.url, ca_bundle, {"kubeVersionOverride": cluster.version, **(values or {})}
        )
        cluster.apply(*configs)
        try:
            wait_until_called(cluster, server)
            yield RegisteredWebhook(server, configs, ca_bundle)
        finally:
            for config in configs:
                cluster.kubectl("delete", config["kind"].lower(), config["metadata"]["name"],
                                "--ignore-not-found", check=False)
