"""What the sidecar loads as the chart runs it (in a pod: `--in-cluster`), listed from the running process.

It runs on every node, so every module it loads is paid once per node: the `lean-sidecar` contract in
setup.cfg says the same of the import graph, but a module imported by a function, by a library at run
time or by name is only seen when the process runs. So the real process runs here against the test API
server over TLS, with a service account as the kubelet mounts it, is scraped, and stops on SIGTERM; its
`-X importtime` report lists every module it loaded.
"""

from __future__ import annotations

import secrets
import signal
import subprocess
from pathlib import Path

import requests

from testkit.import_report import modules_in
from testkit.in_pod import in_pod
from testkit.kubeapi import KubeAPIServer
from testkit.server import free_port
from testkit.wait import wait_for
from tests.sidecar.fixtures import node

ROOT = Path(__file__).resolve().parents[2]
# Not used by the sidecar: the official client and its HTTP library (a pod's requests go on http.client),
# the web server and its templates, certificate handling, the YAML parser (it reads no manifest).
FORBIDDEN = {
    "kubernetes",
    "urllib3",
    "flask",
    "werkzeug",
    "jinja2",
    "gunicorn",
    "cryptography",
    "yaml",
    "marshmallow",
}


def modules_of_a_running_sidecar(api: KubeAPIServer, tmp_path: Path, *cluster_args: str) -> set[str]:
    """Every module the sidecar loaded from its start, through readiness and a scrape, to its exit."""
    bind = free_port()
    argv = ["sidecar", "--node", "node-a", *cluster_args, "--bind", f"127.0.0.1:{bind}"]
    command, env = in_pod(api, tmp_path / "serviceaccount", *argv, python_flags=("-X", "importtime"))
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{bind}"

        def ready() -> bool:
            assert proc.poll() is None, "the sidecar exited"
            try:
                return requests.get(f"{base}/readyz", timeout=2).status_code == 200
            except requests.ConnectionError:
                return False

        wait_for(ready, timeout=60, what="sidecar ready")
        assert "priority_webhook_sidecar_pods" in requests.get(f"{base}/metrics", timeout=5).text
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr[-2000:]
    return modules_in(stderr)


def test_an_in_cluster_sidecar_loads_only_what_it_uses(tmp_path: Path) -> None:
    with KubeAPIServer(tls=True, token=secrets.token_urlsafe(16)) as api:
        api.create("nodes", node())
        modules = modules_of_a_running_sidecar(api, tmp_path, "--in-cluster")
    packages = {name.split(".")[0] for name in modules}
    assert {"webhook", "http", "ssl", "prometheus_client"} <= packages  # the report lists what ran
    assert packages & FORBIDDEN == set(), sorted(packages & FORBIDDEN)
    webhook = sorted(name for name in modules if name.startswith("webhook."))
    assert not [name for name in webhook if name.startswith(("webhook.server", "webhook.files.tls"))]
    print(f"{len(modules)} modules, {len(webhook)} of the project's: {', '.join(webhook)}")


def test_the_check_sees_the_client_where_a_kubeconfig_is_given(tmp_path: Path) -> None:
    """The same listing with a kubeconfig (the client's loader): the check can fail."""
    with KubeAPIServer(tls=True, token=secrets.token_urlsafe(16)) as api:
        api.create("nodes", node())
        kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
        modules = modules_of_a_running_sidecar(api, tmp_path, "--kubeconfig", kubeconfig)
    assert {"kubernetes", "urllib3"} <= {name.split(".")[0] for name in modules}
