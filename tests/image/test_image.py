"""The built image, run as the chart runs it: the rendered Deployment's and DaemonSet's user, read-only root,
dropped capabilities, no-new-privileges, memory limit, args, env and volumes (testkit/image_engine.py), against
the test API server over TLS with a service-account token, as in a pod."""

from __future__ import annotations

import base64
import json
import secrets
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import urllib3

from testkit import constraints
from testkit.chart_rendering import FULLNAME, NAMESPACE, Rendered
from testkit.image_engine import ArchImage, Container, Pod, inspect, podman, run_args, service_account
from testkit.kubeapi import KubeAPIServer, ResourceType
from testkit.kubeapi.eviction import install as install_evictions
from testkit.reviews import PC_GVR, patch_ops, pod, priority_class, review
from testkit.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]
ADMISSION = "admissionregistration.k8s.io"
EXTRA_RESOURCES = (
    ResourceType("secrets", "Secret"),
    ResourceType(
        "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", ADMISSION, namespaced=False
    ),
    ResourceType(
        "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", ADMISSION, namespaced=False
    ),
)
NODE = "node-a"
# The first test builds the image (tests/image/conftest.py): on a fresh machine that installs podman and
# makes the base from Debian's archive, a few minutes.
pytestmark = pytest.mark.timeout(1800)


def package_version() -> str:
    done = subprocess.run(
        [sys.executable, "-m", "webhook", "--version"], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return done.stdout.strip()


def workload(rendered: Rendered, kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(pod spec, its one container) of the chart's Deployment or DaemonSet."""
    spec = rendered.one(kind)["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    return spec, container


def in_image(
    image: str, rendered: Rendered, tmp_path: Path, *command: str
) -> subprocess.CompletedProcess[str]:
    """Run a command in the image with the webhook container's settings (entrypoint replaced)."""
    spec, container = workload(rendered, "Deployment")
    options, _ = run_args(spec, container, Pod(NODE, None, tmp_path))
    return podman("run", "--rm", *options, f"--entrypoint={command[0]}", image, *command[1:])


@pytest.fixture
def api() -> Iterator[KubeAPIServer]:
    """The test API server over TLS, with a token, as the in-cluster configuration expects."""
    server = KubeAPIServer(tls=True, token=secrets.token_urlsafe(16), bookmark_interval=0.2)
    for resource in EXTRA_RESOURCES:
        server.register_resource(resource)
    with server:
        yield server


@pytest.fixture
def pod_for(api: KubeAPIServer, tmp_path: Path) -> Pod:
    assert api.certificates is not None and api.token is not None
    folder = service_account(
        tmp_path / "serviceaccount", token=api.token, ca=api.certificates.ca.read_bytes(), namespace=NAMESPACE
    )
    return Pod(NODE, folder, tmp_path)


def in_cluster_env(api: KubeAPIServer) -> dict[str, str]:
    """What the kubelet puts in every container's environment for the `kubernetes` Service."""
    host, _, port = api.url.removeprefix("https://").rpartition(":")
    return {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}


@pytest.fixture
def containers() -> Iterator[list[Container]]:
    """The test's containers, removed at teardown; their logs are printed (shown if the test failed)."""
    started: list[Container] = []
    yield started
    for container in started:
        print(f"--- {container.name}\n{container.logs()[-5000:]}")
        container.remove()


def name(kind: str) -> str:
    return f"pw-image-test-{kind}-{secrets.token_hex(4)}"


def test_version_is_the_packages(any_image: ArchImage, chart_objects: Rendered, tmp_path: Path) -> None:
    spec, container = workload(chart_objects, "Deployment")
    options, _ = run_args(spec, container, Pod(NODE, None, tmp_path))
    assert inspect(any_image.id)["Architecture"] == any_image.arch
    done = podman("run", "--rm", *options, any_image.id, "--version", timeout=300)
    assert done.stdout.strip() == package_version()
    tag = any_image.built.reference.rpartition(":")[2]
    want = package_version().split()[-1] + (f"-{any_image.arch}" if any_image.emulated else "")
    assert tag == want, "the host's image tagged with the version, as the chart expects; another -ARCH"


def test_the_image_runs_as_the_chart_expects(image: str, chart_objects: Rendered) -> None:
    config = inspect(image)["Config"]
    spec, container = workload(chart_objects, "Deployment")
    context = {**spec["securityContext"], **container["securityContext"]}
    assert config["User"] == f"{context['runAsUser']}:{context['runAsGroup']}", "numeric, for runAsNonRoot"
    assert config["Entrypoint"] == ["priority-webhook"]
    assert "Healthcheck" not in config or not config["Healthcheck"], "Kubernetes probes instead"
    labels = config["Labels"]
    assert labels["org.opencontainers.image.version"] == package_version().split()[-1]
    revision = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    if revision.returncode == 0:
        assert labels["org.opencontainers.image.revision"].startswith(revision.stdout.strip())
    assert labels["org.opencontainers.image.source"].startswith("https://")
    # The base it was built on, by name and digest: what to build on to reproduce it.
    base = inspect(labels["org.opencontainers.image.base.name"])
    assert base["Digest"] == labels["org.opencontainers.image.base.digest"]
    layers = inspect(image)["RootFS"]["Layers"]
    assert layers[: len(base["RootFS"]["Layers"])] == base["RootFS"]["Layers"]
    assert not [e for e in config.get("Env", []) if e.startswith("PIP_")], (
        "the builder's pip settings stay there"
    )


def test_no_build_configuration_is_left_in_the_image(
    image: str, chart_objects: Rendered, tmp_path: Path
) -> None:
    """pip's configuration and the CA were build secrets: no file of them, no trace in the layers' history."""
    found = in_image(
        image,
        chart_objects,
        tmp_path,
        "python",
        "-c",
        "import os\n"
        "hits = [os.path.join(d, f) for d, _, fs in os.walk('/', onerror=None) "
        "if not d.startswith(('/proc', '/sys', '/dev')) for f in fs "
        "if f in ('pip.conf', 'pip.ini') or d.startswith('/run/secrets')]\n"
        "print('\\n'.join(hits))",
    ).stdout.split()
    assert found == []
    history = podman("history", "--no-trunc", "--format=json", image).stdout
    for layer in json.loads(history):
        assert "secret" not in layer.get("CreatedBy", layer.get("created_by", "")).lower()


def test_every_module_imports_and_nothing_installed_is_unused(
    image: str, chart_objects: Rendered, tmp_path: Path
) -> None:
    """The client's asyncio half and aiohttp are left out of the image: nothing of ours needs them, and
    nothing else installed is left without a user."""
    script = (
        "import importlib, importlib.metadata as md, pkgutil, re, webhook\n"
        "for m in pkgutil.walk_packages(webhook.__path__, 'webhook.'):\n"
        "    if not m.name.endswith('.__main__'):\n"
        "        importlib.import_module(m.name)\n"
        "import kubernetes, kubernetes.client, kubernetes.config, kubernetes.watch\n"
        "names = lambda d: d.metadata['Name'].lower().replace('_', '-')\n"
        "dists = {names(d): d for d in md.distributions()}\n"
        "req = lambda r: re.split(r'[<>=!~\\[; (]', r)[0].lower().replace('_', '-')\n"
        # A requirement counts where its marker holds here: no extra, and its python_version bounds (such as
        # our own `orjson; python_version < "3.15"`) true of this Python.
        "import operator as op, sys\n"
        "ops = {'<': op.lt, '<=': op.le, '>': op.gt, '>=': op.ge, '==': op.eq, '!=': op.ne}\n"
        "here = lambda m: 'extra ==' not in m and all(ops[o](sys.version_info[:2], tuple(map(int, v.split('.'))))\n"
        "    for o, v in re.findall(r'python_version\\s*([<>=!]=?)\\s*.(\\d+(?:\\.\\d+)*)', m))\n"
        "needs = {n: {req(r) for r in d.requires or [] if here(r.partition(';')[2])}\n"
        "         for n, d in dists.items()}\n"
        "missing = sorted(f'{n}->{r}' for n, rs in needs.items() for r in rs if r not in dists)\n"
        "used, todo = set(), ['priority-webhook']\n"
        "while todo:\n"
        "    n = todo.pop()\n"
        "    if n in used or n not in dists: continue\n"
        "    used.add(n); todo += needs[n]\n"
        "print(' '.join(missing)); print(' '.join(sorted(set(dists) - used)))\n"
    )
    missing, unused = (in_image(image, chart_objects, tmp_path, "python", "-c", script).stdout + "\n").split(
        "\n"
    )[:2]
    assert missing.split() == ["kubernetes->aiohttp", "kubernetes->aiohttp-retry"]
    assert unused.split() == []


def test_installed_versions_are_the_pinned_ones(image: str, chart_objects: Rendered, tmp_path: Path) -> None:
    """Two builds of one commit install the same versions: every distribution in the image is at its pin."""
    listing = in_image(
        image,
        chart_objects,
        tmp_path,
        "python",
        "-c",
        "import importlib.metadata as md\nfor d in md.distributions(): print(d.metadata['Name'], d.version)",
    ).stdout.split("\n")
    installed = {
        name.lower().replace("_", "-"): version
        for name, version in (line.split() for line in listing if line)
    }
    pins = {name: pin.version for name, pin in constraints.pins().items()}
    assert installed.pop("priority-webhook") == package_version().split()[-1]
    assert installed and {name: pins.get(name) for name in installed} == installed


def verified_session(ca: Path, server_name: str) -> urllib3.PoolManager:
    context = ssl.create_default_context(cafile=str(ca))
    return urllib3.PoolManager(
        ssl_context=context, server_hostname=server_name, assert_hostname=server_name, retries=False
    )


def test_serve_as_the_deployment_runs_it(
    any_image: ArchImage,
    chart_objects: Rendered,
    api: KubeAPIServer,
    pod_for: Pod,
    containers: list[Container],
    ports: dict[str, int],
    tmp_path: Path,
) -> None:
    """The webhook container with the Deployment's settings, in the chart's default certificate mode: it
    makes its CA in a Secret, issues its serving certificate into its memory volume, publishes the caBundle
    in the webhook configurations, and serves /healthz, /readyz, /metrics, /mutate and /validate over TLS
    verified with that CA; SIGTERM drains it and it exits within the grace period. The arm64 image too, under
    emulation (several times slower: the waits are longer)."""
    image = any_image.id
    slow = 5 if any_image.emulated else 1
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        plural = kind.lower() + "s"
        api.create(plural, chart_objects.one(kind))
    api.create("priorityclasses", priority_class("high", 1000))
    spec, container = workload(chart_objects, "Deployment")
    options, args = run_args(spec, container, pod_for, extra_env=in_cluster_env(api))
    containers.append(box := Container.start(image, name("serve"), options, args))

    def ca_bundle() -> bytes | None:
        assert box.running(), box.logs()[-3000:]
        secret = api.get("secrets", f"{FULLNAME}-webhook-ca", NAMESPACE)
        return base64.b64decode(secret["data"]["ca-bundle.crt"]) if secret else None

    bundle = wait_for(ca_bundle, timeout=60 * slow, interval=0.2, what="the CA Secret")
    (tmp_path / "ca.crt").write_bytes(bundle)
    http = verified_session(tmp_path / "ca.crt", f"{FULLNAME}.{NAMESPACE}.svc")
    base = f"https://127.0.0.1:{ports['webhook']}"

    def status(path: str) -> int:
        assert box.running(), box.logs()[-3000:]
        try:
            return http.request("GET", base + path, timeout=2 * slow).status
        except urllib3.exceptions.HTTPError:
            return 0

    wait_for(lambda: status("/readyz") == 200, timeout=60 * slow, interval=0.2, what="/readyz 200")
    assert status("/healthz") == 200
    metrics = http.request("GET", base + "/metrics", timeout=5 * slow)
    assert metrics.status == 200 and b"# TYPE" in metrics.data
    for config in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        published = api.get(config, FULLNAME)
        assert published is not None
        for entry in published["webhooks"]:
            assert base64.b64decode(entry["clientConfig"]["caBundle"]) == bundle, (config, entry["name"])

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = http.request(
            "POST",
            base + path,
            body=json.dumps(body).encode(),
            timeout=10 * slow,
            headers={"Content-Type": "application/json"},
        )
        assert answer.status == 200, answer.data
        return json.loads(answer.data)

    mutated = post("/mutate", review(pod("web", "high")))
    assert mutated["response"]["allowed"] is True
    assert {"op": "add", "path": "/spec/priority", "value": 1000} in patch_ops(mutated)
    assert post("/validate", review(priority_class("fine", 100), gvr=PC_GVR))["response"]["allowed"] is True
    refused = post("/validate", review(priority_class("too-high", 2_000_000_000), gvr=PC_GVR))["response"]
    assert refused["allowed"] is False

    code, _ = box.terminate(deadline=spec["terminationGracePeriodSeconds"])
    assert code == 0, box.logs()[-3000:]
    assert box.diff() == [], "nothing written outside the mounted volumes"


def test_sidecar_as_the_daemonset_runs_it(
    image: str,
    chart_objects: Rendered,
    api: KubeAPIServer,
    pod_for: Pod,
    containers: list[Container],
    ports: dict[str, int],
) -> None:
    """The sidecar container with the DaemonSet's settings, in --dry-run, against the test API server: ready,
    serving /healthz and /metrics; SIGTERM ends it within the grace period."""
    install_evictions(api)
    api.create(
        "nodes", {"metadata": {"name": NODE}, "status": {"allocatable": {"cpu": "2", "memory": "4Gi"}}}
    )
    spec, container = workload(chart_objects, "DaemonSet")
    options, args = run_args(
        spec, container, pod_for, extra_env=in_cluster_env(api), extra_args=["--dry-run"]
    )
    assert f"--node={NODE}" in args, "the node name comes from the downward API"
    containers.append(box := Container.start(image, name("sidecar"), options, args))
    base = f"http://127.0.0.1:{ports['sidecar']}"

    def status(path: str) -> int:
        assert box.running(), box.logs()[-3000:]
        try:
            return requests.get(base + path, timeout=2).status_code
        except requests.RequestException:
            return 0

    wait_for(lambda: status("/readyz") == 200, timeout=60, interval=0.2, what="/readyz 200")
    assert status("/healthz") == 200
    assert "# TYPE" in requests.get(base + "/metrics", timeout=5).text
    assert "dry-run=True" in box.logs()
    code, _ = box.terminate(deadline=spec.get("terminationGracePeriodSeconds", 30))
    assert code == 0, box.logs()[-3000:]
    assert box.diff() == [], "nothing written outside the mounted volumes"
