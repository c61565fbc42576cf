"""Our webhook behind a real kube-apiserver, registered with the configurations our own chart renders.

    with registered_webhook(cluster, tmp_path) as hook:
        cluster.kubectl("create", "-f", "pod.yaml", "--dry-run=server")

The server is `priority-webhook serve --kubeconfig` (real gunicorn, real TLS) with a certificate from
`priority-webhook certs`. The chart's MutatingWebhookConfiguration and ValidatingWebhookConfiguration are
rendered by the Helm engine with the given values; only each `clientConfig.service` is switched to a `url`
on loopback (the API server here has no cluster network) with the caBundle the `certs` command printed.
Rules, selectors, failure policies, timeouts and reinvocation are the chart's own.

Also here: object builders, `create()` (one POST through the API server, dry-run or real, answered as an
`Outcome`), `wait_until_resolved()` (until every admission path has seen a class change), and `Meddler`, a
second mutating webhook of our own that changes pods after ours, so the API server reinvokes us.
"""

from __future__ import annotations

import base64
import http.server
import json
import re
import ssl
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helm_python as helm
import requests

from testkit.chart_rendering import CHART, render
from testkit.envtest import ControlPlane
from testkit.server import REPO, WebhookServer, webhook_server
from testkit.wait import wait_for
from webhook.files import tls

RELEASE = "pw"
RELEASE_NAMESPACE = "priority-system"
SERVICE = "pw-priority-webhook"
CONFIG_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
IMAGE = "registry.k8s.io/pause:3.9"
CRITICAL_POD = "scheduler.alpha.kubernetes.io/critical-pod"
WEBHOOK_PREFIX = re.compile(r'^admission webhook "([^"]+)" denied the request: ')


# -- objects -------------------------------------------------------------------------------------------
def pod(
    name: str,
    namespace: str = "default",
    class_name: str | None = None,
    priority: int | None = None,
    policy: str | None = None,
    *,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    generate_name: bool = False,
) -> dict[str, Any]:
    """A minimal Pod; `generate_name` puts `name` in `metadata.generateName` instead."""
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": IMAGE}]}
    if class_name is not None:
        spec["priorityClassName"] = class_name
    if priority is not None:
        spec["priority"] = priority
    if policy is not None:
        spec["preemptionPolicy"] = policy
    meta: dict[str, Any] = {"generateName" if generate_name else "name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def unregister(cluster: ControlPlane, configs: list[dict[str, Any]]) -> None:
    """Delete the webhook configurations (those already gone are fine)."""
    for config in configs:
        cluster.kubectl(
            "delete", config["kind"].lower(), config["metadata"]["name"], "--ignore-not-found", check=False
        )


def priority_class(
    name: str, value: int, default: bool = False, policy: str | None = None, description: str | None = None
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }
    if default:
        obj["globalDefault"] = True
    if policy is not None:
        obj["preemptionPolicy"] = policy
    if description is not None:
        obj["description"] = description
    return obj


# -- one request through the API server ------------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    """What the API server answered to a create: the stored priority fields, or the denial."""

    code: int
    priority: int | None = None
    class_name: str | None = None
    policy: str | None = None
    reason: str = ""
    message: str = ""
    webhook: str | None = None  # the webhook that denied (its prefix is removed from `message`)
    warnings: tuple[str, ...] = ()

    @property
    def allowed(self) -> bool:
        return self.code < 300

    @classmethod
    def of(cls, response: requests.Response) -> Outcome:
        body = response.json()
        warnings = tuple(re.findall(r'299 - "((?:[^"\\]|\\.)*)"', response.headers.get("Warning", "")))
        if response.status_code < 300:
            spec = body.get("spec") or {}
            return cls(
                response.status_code,
                spec.get("priority"),
                spec.get("priorityClassName"),
                spec.get("preemptionPolicy"),
                warnings=warnings,
            )
        message = body.get("message", "")
        found = WEBHOOK_PREFIX.match(message)
        webhook = found.group(1) if found else None
        if found:
            message = message[found.end() :]
        return cls(
            response.status_code,
            reason=body.get("reason", ""),
            message=message,
            webhook=webhook,
            warnings=warnings,
        )

    def fields(self) -> tuple[Any, ...]:
        """What must agree between two API servers: stored fields, or the denial less the webhook prefix."""
        if self.allowed:
            return (self.code, self.priority, self.class_name, self.policy)
        return (self.code, self.reason, self.message)


def object_path(obj: dict[str, Any]) -> str:
    if obj["kind"] == "PriorityClass":
        return "/apis/scheduling.k8s.io/v1/priorityclasses"
    return f"/api/v1/namespaces/{obj['metadata']['namespace']}/pods"


def create(
    session: requests.Session, cluster: ControlPlane, obj: dict[str, Any], *, dry_run: bool = True
) -> Outcome:
    """POST `obj` as `kubectl create [--dry-run=server]` does."""
    params = {"dryRun": "All"} if dry_run else {}
    response = session.post(cluster.url + object_path(obj), json=obj, params=params, timeout=30)
    return Outcome.of(response)


def kubectl_create(
    cluster: ControlPlane, obj: dict[str, Any], *args: str, dry_run: bool = True
) -> subprocess.CompletedProcess[str]:
    """`kubectl create [--dry-run=server] -o json -f -`, unchecked: tests read its exit, stdout and stderr."""
    flags = ["--dry-run=server"] if dry_run else []
    return cluster.kubectl(
        "create", *flags, *args, "-o", "json", "-f", "-", input=json.dumps(obj), check=False
    )


def kubectl_denial(webhook: str, message: str, verb: str = "creating") -> str:
    """The line kubectl prints when one of our webhooks denies an object read from standard input."""
    return (
        f'Error from server (Forbidden): error when {verb} "STDIN": admission webhook "{webhook}" '
        f"denied the request: {message}"
    )


def ensure_namespace(cluster: ControlPlane, name: str) -> None:
    if cluster.kubectl("get", "namespace", name, check=False).returncode != 0:
        cluster.kubectl("create", "namespace", name)
    # Pods need the namespace's `default` ServiceAccount (the controller manager makes it, when it runs).
    wait_for(
        lambda: (
            cluster.get(f"/api/v1/namespaces/{name}/serviceaccounts/default").status_code == 200
            or cluster.kubectl("create", "serviceaccount", "default", "-n", name, check=False).returncode == 0
        ),
        timeout=30,
        interval=0.2,
        what=f"ServiceAccount {name}/default",
    )


def wait_until_resolved(
    cluster: ControlPlane,
    session: requests.Session,
    namespace: str,
    expected: Mapping[str, int | None],
    default: int = 0,
    *,
    times: int = 1,
    timeout: float = 30,
) -> float:
    """Wait until pod admission in `namespace` sees the classes as `expected` says (name → value, or None
    for a class that must be gone) and gives a pod naming no class `default`; `times` answers in a row
    (several webhook workers each have a cache). Returns the seconds it took."""
    start = time.monotonic()
    streak = [0]

    def resolved() -> bool:
        answers = [
            create(session, cluster, pod(f"probe-{uuid.uuid4().hex[:8]}", namespace, name))
            for name in expected
        ]
        unnamed = create(session, cluster, pod(f"probe-{uuid.uuid4().hex[:8]}", namespace))
        ok = (
            unnamed.allowed
            and unnamed.priority == default
            and all(
                (answer.allowed and answer.priority == value)
                if value is not None
                else (not answer.allowed and "no PriorityClass with name" in answer.message)
                for answer, value in zip(answers, expected.values(), strict=True)
            )
        )
        streak[0] = streak[0] + 1 if ok else 0
        return streak[0] >= times

    wait_for(resolved, timeout=timeout, interval=0.02, what=f"admission to see classes {expected}")
    return time.monotonic() - start


# -- our webhook, registered -----------------------------------------------------------------------------
def make_certificates(out: Path, service: str = SERVICE, namespace: str = RELEASE_NAMESPACE) -> str:
    """`priority-webhook certs` into `out`; returns the caBundle it printed."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "certs",
            "--service",
            service,
            "--namespace",
            namespace,
            "--out",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip().splitlines()[-1]


def chart_webhook_configurations(
    server_url: str,
    ca_bundle: str,
    values: dict[str, Any] | None = None,
    *,
    release: str = RELEASE,
    namespace: str = RELEASE_NAMESPACE,
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


def sample_sum(text: str, name: str, *labels: str) -> float:
    """The sum of the samples of metric `name` in a /metrics text whose labels contain every one of `labels`
    (`'resource="pods"'`)."""
    return sum(
        float(value)
        for found, value in re.findall(rf"^{re.escape(name)}(?:\{{([^}}]*)\}})? ([0-9.e+-]+)$", text, re.M)
        if all(label in found for label in labels)
    )


def admission_requests(server: WebhookServer, webhook: str | None = None) -> float:
    """Reviews the server has answered so far (all workers; one endpoint if `webhook` is mutate/validate)."""
    return metric(
        server, "priority_webhook_admission_requests_total", f'webhook="{webhook}"' if webhook else ""
    )


def metric(server: WebhookServer, name: str, labels: str = "") -> float:
    """The sum of the samples of metric `name` (all workers) whose labels contain `labels`."""
    return sample_sum(server.session.get(server.url + "/metrics", timeout=5).text, name, labels)


@dataclass
class RegisteredWebhook:
    server: WebhookServer
    configurations: list[dict[str, Any]]
    ca_bundle: str
    restart: Callable[[], WebhookServer] = field(repr=False)

    def requests(self, webhook: str | None = None) -> float:
        return admission_requests(self.server, webhook)

    @contextmanager
    def down(self) -> Iterator[None]:
        """The webhook process stopped (its port refuses connections); served again, same port, on exit."""
        self.server.terminate()
        try:
            yield
        finally:
            self.server = self.restart()


def wait_until_called(cluster: ControlPlane, server: WebhookServer, namespace: str = "default") -> None:
    """The API server picks up webhook configurations asynchronously: wait until a server-side dry-run pod
    creation in `namespace` reaches our server."""
    before = admission_requests(server)

    def called() -> bool:
        probe = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"probe-{uuid.uuid4().hex[:8]}", "namespace": namespace},
            "spec": {"containers": [{"name": "c", "image": IMAGE}]},
        }
        cluster.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(probe), check=False)
        return admission_requests(server) > before

    wait_for(called, timeout=60, interval=0.2, what="the API server to call the webhook")


def _ready(server: WebhookServer) -> WebhookServer:
    wait_for(
        lambda: server.session.get(server.url + "/readyz", timeout=5).status_code == 200,
        timeout=60,
        interval=0.1,
        what="the webhook's class cache to sync",
    )
    return server


@contextmanager
def registered_webhook(
    cluster: ControlPlane,
    tmp_path: Path,
    *serve_args: str,
    values: dict[str, Any] | None = None,
    workers: int | None = None,
    release: str = RELEASE,
    namespace: str = RELEASE_NAMESPACE,
    kubeconfig: Path | None = None,
) -> Iterator[RegisteredWebhook]:
    """Serve the webhook against `cluster` and register the chart's configurations (rendered as release
    `release` in `namespace`: the names its entries match on); undo both on exit. The webhook reads the
    cluster as its admin, or with `kubeconfig` (a ServiceAccount's: the RBAC the chart gives it)."""
    cert_dir = tmp_path / "webhook-certs"
    ca_bundle = make_certificates(cert_dir)
    args = ["--kubeconfig", str(kubeconfig or cluster.kubeconfig), *serve_args]
    if workers is not None:
        args += ["--workers", str(workers)]
    ensure_namespace(cluster, namespace)
    ensure_namespace(cluster, "default")  # the probe's namespace needs its ServiceAccount
    with ExitStack() as stack:
        server = _ready(stack.enter_context(webhook_server(tmp_path, *args, cert_dir=cert_dir)))

        def restart() -> WebhookServer:
            return _ready(
                stack.enter_context(webhook_server(tmp_path, *args, cert_dir=cert_dir, port=server.port))
            )

        # Rendered for this API server's version: the chart leaves out fields it does not know.
        configs = chart_webhook_configurations(
            server.url,
            ca_bundle,
            {"kubeVersionOverride": cluster.version, **(values or {})},
            release=release,
            namespace=namespace,
        )
        cluster.apply(*configs)
        try:
            wait_until_called(cluster, server)
            yield RegisteredWebhook(server, configs, ca_bundle, restart)
        finally:
            unregister(cluster, configs)


# -- a second mutating webhook ---------------------------------------------------------------------------
SET_CLASS = "meddler.e2e.priority-webhook.io/set-class"
DROP_PRIORITY = "meddler.e2e.priority-webhook.io/drop-priority"
ADD_LABEL = "meddler.e2e.priority-webhook.io/add-label"


def meddle(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The second webhook's JSONPatch for a pod, by the pod's annotations:

    - SET_CLASS: NAME: set `priorityClassName` to NAME and drop `priority`/`preemptionPolicy` (once: a no-op
      when the class is already NAME), as a class-injecting policy engine would;
    - DROP_PRIORITY: drop `priority` and `preemptionPolicy` whenever they are there (a misbehaving webhook);
    - ADD_LABEL: add the label `meddled: "yes"` (once): a change that has nothing to do with priority.
    """
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    spec = obj.get("spec") or {}
    ops: list[dict[str, Any]] = []
    drop = DROP_PRIORITY in annotations
    wanted = annotations.get(SET_CLASS)
    if wanted and spec.get("priorityClassName") != wanted:
        ops.append({"op": "add", "path": "/spec/priorityClassName", "value": wanted})
        drop = True
    if drop:
        ops += [
            {"op": "remove", "path": f"/spec/{key}"}
            for key in ("priority", "preemptionPolicy")
            if key in spec
        ]
    labels = (obj.get("metadata") or {}).get("labels")
    if ADD_LABEL in annotations and (labels or {}).get("meddled") != "yes":
        ops.append({"op": "add", "path": "/metadata/labels", "value": {**(labels or {}), "meddled": "yes"}})
    return ops


def second_webhook_configuration(
    url: str, ca_bundle: str, name: str, namespace: str, *, timeout: int = 5
) -> dict[str, Any]:
    """A MutatingWebhookConfiguration for one of our small test webhooks on pod CREATEs in `namespace`;
    its name sorts after the chart's, so the API server calls it after our /mutate, before our /validate."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": f"{name.removeprefix('zz-e2e-')}.e2e.priority-webhook.io",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": timeout,
                "reinvocationPolicy": "IfNeeded",
                "clientConfig": {"url": url + "/mutate", "caBundle": ca_bundle},
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["pods"],
                        "operations": ["CREATE"],
                        "scope": "Namespaced",
                    }
                ],
            }
        ],
    }


@contextmanager
def serve_mutating(
    tmp_path: Path, name: str, answer: Callable[[dict[str, Any]], list[dict[str, Any]]]
) -> Iterator[tuple[str, str]]:
    """Serve a mutating webhook whose JSONPatch for an object is `answer(obj)`, on a free loopback port over
    TLS (a CA and certificate of its own), in this process: (url, caBundle)."""
    ca = tls.create_ca(f"{name} CA")
    pair = tls.create_serving_cert(ca, ["127.0.0.1", "localhost"])
    folder = tmp_path / name
    folder.mkdir(parents=True, exist_ok=True)
    tls.write_file(folder / "tls.crt", pair.cert_pem(), 0o600)
    tls.write_file(folder / "tls.key", pair.key_pem(), 0o600)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "tls.crt", folder / "tls.key")

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            request = review["request"]
            ops = answer(request.get("object") or {})
            response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
            if ops:
                response["patchType"] = "JSONPatch"
                response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
            body = json.dumps(
                {"apiVersion": review["apiVersion"], "kind": "AdmissionReview", "response": response}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, name=name, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", tls.ca_bundle(ca.cert_pem())
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@dataclass
class Meddler:
    """A tiny mutating webhook over TLS, in this process; `calls` lists (pod name, patched?) per review."""

    url: str
    ca_bundle: str
    calls: list[tuple[str, bool]] = field(default_factory=list)

    def configuration(self, namespace: str, name: str = "zz-e2e-meddler") -> dict[str, Any]:
        """Registered under a name that sorts after the chart's, so it runs after our webhook."""
        return second_webhook_configuration(self.url, self.ca_bundle, name, namespace)

    def answer(self, obj: dict[str, Any]) -> list[dict[str, Any]]:
        ops = meddle(obj)
        self.calls.append(((obj.get("metadata") or {}).get("name", ""), bool(ops)))
        return ops

    def calls_for(self, name: str) -> list[bool]:
        return [patched for pod_name, patched in list(self.calls) if pod_name == name]


@contextmanager
def meddler(tmp_path: Path) -> Iterator[Meddler]:
    """Serve `meddle` on a free loopback port over TLS (a CA and certificate of its own)."""
    state = Meddler("", "")
    with serve_mutating(tmp_path, "meddler", state.answer) as (state.url, state.ca_bundle):
        yield state
