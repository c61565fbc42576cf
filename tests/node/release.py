"""The chart on the node, installed as users install it: Helm's own actions through helm-python-sdk
(`Config.install`, `upgrade`, `rollback`, `test`, `uninstall`, `history`), and what the tests do around it.

The values are the chart's defaults but for what one node needs (`node_values`):
- `image.repository` and `image.tag`: the reference `scripts/image` printed. The image exists only in the
  node's containerd, imported under that name (no registry is reachable); `pullPolicy` stays the default
  `IfNotPresent`, so the kubelet never tries to pull it.
Everything else is the default: two webhook replicas (anti-affinity `preferred` schedules both on one node),
the install gate on, the sidecar on with its default critical priority, `certificates.mode: webhook`.

helm-python-sdk's quirks (seen with 0.2.2, Helm v4.2.3): a failed hook raises with Helm's message alone
(the Job's log is fetched here), `rollback` returns None, `uninstall(wait=...)` returns while pods still
terminate (the tests wait for them), and `timeout` must exceed the install gate's own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import helm_python as helm

from testkit.chart_rendering import CHART
from testkit.node import Node
from testkit.wait import wait_for

RELEASE = "priority-webhook"
NAMESPACE = "priority-system"
FULLNAME = "priority-webhook"  # the release name contains the chart's: no suffix
SIDECAR = f"{FULLNAME}-sidecar"
CA_SECRET = f"{FULLNAME}-webhook-ca"
HELM_TIMEOUT = 420  # above the install gate's 300 s
CONFIG_KINDS = ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")
CLUSTER_KINDS = (
    *CONFIG_KINDS,
    "clusterrole",
    "clusterrolebinding",
    "validatingadmissionpolicy",
    "validatingadmissionpolicybinding",
)
NAMESPACED_KINDS = (
    "deployment",
    "daemonset",
    "replicaset",
    "pod",
    "job",
    "service",
    "serviceaccount",
    "configmap",
    "secret",
    "role",
    "rolebinding",
    "poddisruptionbudget",
)


def image_values(reference: str) -> dict[str, Any]:
    """`localhost/priority-webhook:0.1.0` -> the chart's image values (repository and tag)."""
    name, _, tag = reference.rpartition(":")
    if not name or "/" in tag:
        raise ValueError(f"image reference {reference!r} has no tag")
    return {"image": {"repository": name, "tag": tag}}


def node_values(image: str, **extra: Any) -> dict[str, Any]:
    """The chart's defaults but for what one node needs (the module docstring: the image, by the reference
    `scripts/image` printed), merged with `extra` (one level deep)."""
    values = image_values(image)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(values.get(key), dict):
            values[key] = {**values[key], **value}
        else:
            values[key] = value
    return values


@dataclass
class Release:
    node: Node
    name: str = RELEASE
    namespace: str = NAMESPACE

    @contextmanager
    def helm(self) -> Iterator[tuple[helm.Config, helm.Chart]]:
        with (
            helm.Config(
                kubeconfig_path=str(self.node.control.kubeconfig), namespace=self.namespace
            ) as config,
            helm.Chart.load(CHART) as chart,
        ):
            yield config, chart

    @property
    def fullname(self) -> str:
        return self.name if "priority-webhook" in self.name else f"{self.name}-priority-webhook"

    def status(self) -> str | None:
        """The release's status (`deployed`, `failed`, ...), or None where there is no release."""
        with self.helm() as (config, _):
            try:
                return str(config.status(self.name)["status"])
            except helm.HelmError as err:  # NotFound, or Helm's "release: not found" under another code
                if isinstance(err, helm.HelmNotFoundError) or "not found" in str(err).lower():
                    return None
                raise

    def install(self, values: dict[str, Any] | None = None, *, timeout: int = HELM_TIMEOUT) -> Any:
        with self.helm() as (config, chart):
            return config.install(
                chart,
                self.name,
                values if values is not None else node_values(self.node.project_image),
                namespace=self.namespace,
                create_namespace=True,
                timeout=timeout,
                wait="watcher",
            )

    def ensure_installed(self) -> None:
        """Install with the node's values unless the release is there and deployed (one left failed by a
        test is uninstalled first)."""
        status = self.status()
        if status != "deployed":
            if status is not None:
                self.uninstall()
            self.install()
        self.wait_ready()

    def upgrade(self, values: dict[str, Any]) -> Any:
        with self.helm() as (config, chart):
            return config.upgrade(
                chart, self.name, values, namespace=self.namespace, timeout=HELM_TIMEOUT, wait="watcher"
            )

    def rollback(self, revision: int | None = None) -> None:
        with self.helm() as (config, _):
            config.rollback(self.name, version=revision, timeout=HELM_TIMEOUT, wait="watcher")

    def test(self) -> Any:
        with self.helm() as (config, _):
            return config.test(self.name, timeout=HELM_TIMEOUT, logs=True)

    def history(self) -> list[dict[str, Any]]:
        """The release's revisions (summaries: `revision`, `status`, ...), oldest first."""
        with self.helm() as (config, _):
            return sorted(config.history(self.name), key=lambda summary: int(summary["revision"]))

    def uninstall(self) -> None:
        with self.helm() as (config, _):
            config.uninstall(self.name, timeout=HELM_TIMEOUT, wait="watcher", ignore_not_found=True)
        self.wait_pods_gone()

    def wait_pods_gone(self, timeout: float = 120.0) -> None:
        wait_for(
            lambda: (
                not self.node.kubectl(
                    "get",
                    "pods",
                    "-n",
                    self.namespace,
                    "-l",
                    f"app.kubernetes.io/instance={self.name}",
                    "-o",
                    "name",
                ).stdout.strip()
            ),
            timeout=timeout,
            interval=0.5,
            what=f"the pods of {self.name} to be gone",
        )

    def wait_ready(self, timeout: float = 300.0) -> None:
        """The webhook Deployment and the sidecar DaemonSet all Ready, at their current generation."""

        def ready() -> bool:
            deployment = self.get("deployment", self.fullname)
            daemonset = self.get("daemonset", f"{self.fullname}-sidecar")
            d, s = deployment.get("status", {}), daemonset.get("status", {})
            return (
                d.get("observedGeneration") == deployment["metadata"]["generation"]
                and d.get("updatedReplicas") == deployment["spec"]["replicas"] == d.get("readyReplicas")
                and d.get("replicas") == deployment["spec"]["replicas"]
                and s.get("observedGeneration") == daemonset["metadata"]["generation"]
                and s.get("numberReady")
                == s.get("desiredNumberScheduled")
                == s.get("updatedNumberScheduled")
                == 1
            )

        wait_for(ready, timeout=timeout, interval=0.5, what=f"{self.fullname} Ready")

    def get(self, kind: str, name: str) -> dict[str, Any]:
        return dict(self.node.control.get_json(kind, name, "-n", self.namespace))

    def pods(self, component: str | None = None) -> list[dict[str, Any]]:
        selector = f"app.kubernetes.io/instance={self.name}"
        if component:
            selector += f",app.kubernetes.io/component={component}"
        return list(self.node.control.get_json("pods", "-n", self.namespace, "-l", selector)["items"])

    def hook_job_logs(self) -> str:
        """The logs of the release's hook Jobs (Helm's error names a failed Job only)."""
        return self.node.kubectl(
            "logs", "-n", self.namespace, "-l", "app.kubernetes.io/component=hooks", "--tail=50", check=False
        ).stdout

    def left_behind(self) -> list[str]:
        """Every object of the release still in the cluster (by its instance label, which the hook Jobs and
        their pods carry too), and any webhook configuration of its name, as `kind/name`."""
        selector = f"app.kubernetes.io/instance={self.name}"
        left = []
        for kinds, scope in ((CLUSTER_KINDS, ()), (NAMESPACED_KINDS, ("-n", self.namespace))):
            found = self.node.kubectl(
                "get", ",".join(kinds), *scope, "-l", selector, "-o", "name", check=False
            )
            left += found.stdout.split()
        for kind in CONFIG_KINDS:
            if self.node.kubectl("get", kind, self.fullname, check=False).returncode == 0:
                left.append(f"{kind}/{self.fullname}")
        return sorted(set(left))


def pod(name: str, ns: str, image: str, **spec: Any) -> dict[str, Any]:
    """A pod that runs the project's image (present on the node) and sleeps until deleted."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "c",
                    "image": image,
                    "command": ["python", "-c", "import signal; signal.sigwait({signal.SIGTERM})"],
                }
            ],
            **spec,
        },
    }


@dataclass
class CreationLoop:
    """Pods created through the API server in a thread, while something else happens (an upgrade, a
    rollback): server-side dry runs and real creations (each deleted at once), every answer recorded.
    Bounded: it stops at `stop()`, after `max_seconds` or after `max_creations`, whichever comes first."""

    node: Node
    namespace: str
    class_name: str
    expected_priority: int
    max_seconds: float = 600.0
    max_creations: int = 50_000
    created: int = 0
    failures: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def body(self, n: int) -> dict[str, Any]:
        """A pod of the class that never runs (no node has the label): admission is what is measured, and
        the node is spared hundreds of containers. Its image is the project's, so nothing is ever pulled."""
        return pod(
            f"loop-{n}",
            self.namespace,
            self.node.project_image,
            priorityClassName=self.class_name,
            nodeSelector={"priority-webhook.io/never": "scheduled"},
        )

    def _run(self) -> None:
        base = f"{self.node.control.url}/api/v1/namespaces/{self.namespace}/pods"
        deadline = time.monotonic() + self.max_seconds
        with self.node.control.session() as session:
            n = 0
            while not self._stop.is_set() and time.monotonic() < deadline and n < self.max_creations:
                n += 1
                real = n % 7 == 0  # one real creation in seven, the rest dry runs
                url = base if real else f"{base}?dryRun=All"
                try:
                    answer = session.post(url, json=self.body(n), timeout=30)
                except Exception as err:  # the client's own failure counts as a failed creation
                    self.failures.append(f"#{n}: {err}")
                    continue
                self.created += 1
                if answer.status_code != 201:
                    self.failures.append(f"#{n}: {answer.status_code} {answer.text[:300]}")
                    continue
                priority = answer.json()["spec"].get("priority")
                if priority != self.expected_priority:
                    self.wrong.append(f"#{n}: priority {priority}")
                if real:
                    session.delete(f"{base}/loop-{n}?gracePeriodSeconds=0", timeout=30)

    def __enter__(self) -> CreationLoop:
        self._thread = threading.Thread(target=self._run, name="creation-loop", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)
