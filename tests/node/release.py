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
import requests

from testkit.chart_rendering import CHART
from testkit.cluster_webhook import sample_sum
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

    def install(
        self, values: dict[str, Any] | None = None, *, timeout: int = HELM_TIMEOUT, wait: str = "watcher"
    ) -> Any:
        """`helm install`. `wait`: Helm's strategy; "watcher" waits on the release's resources before the
        post-install hooks run, "hookOnly" on the hooks alone (so a webhook that never starts fails at the
        install gate, as a user's install without --wait does)."""
        with self.helm() as (config, chart):
            return config.install(
                chart,
                self.name,
                values if values is not None else node_values(self.node.project_image),
                namespace=self.namespace,
                create_namespace=True,
                timeout=timeout,
                wait=wait,
            )

    def values(self) -> dict[str, Any]:
        """The release's user-supplied values (`helm get values`)."""
        with self.helm() as (config, _):
            return dict(config.get_values(self.name) or {})

    def ensure(self, values: dict[str, Any] | None = None) -> None:
        """The known state a test starts from, whatever the one before it left: the release deployed with
        `values` (default: the node's) and Ready. A release on other values is upgraded to them; one left
        failed, pending or half-removed is uninstalled and installed again."""
        values = values if values is not None else node_values(self.node.project_image)
        status = self.status()
        if status == "deployed" and self.values() != values:
            self.upgrade(values)
        elif status != "deployed":
            if status is not None:
                self.uninstall()
            self.install(values)
        self.wait_ready()

    def ensure_absent(self) -> None:
        """No release (a test that installs it itself starts from here)."""
        if self.status() is not None:
            self.uninstall()

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
            workloads = self.workload_pods()
            return (
                # A pod still terminating (an old replica, an evicted one) is not part of the known state.
                not any(p["metadata"].get("deletionTimestamp") for p in workloads)
                and len(workloads) == deployment["spec"]["replicas"] + 1
                and d.get("observedGeneration") == deployment["metadata"]["generation"]
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

    def workload_pods(self) -> list[dict[str, Any]]:
        """The webhook's and the sidecar's pods that have not finished (a replica the kubelet preempted stays
        as a Failed or Succeeded pod)."""
        return [
            p
            for p in self.pods()
            if _component(p) in ("webhook", "sidecar")
            and p["status"].get("phase") not in ("Succeeded", "Failed")
        ]

    def replica_metrics(self) -> list[str]:
        """Each webhook replica's /metrics text, through the API server's proxy to the pod (no other route
        to a pod exists from outside the node)."""
        pods = f"/api/v1/namespaces/{self.namespace}/pods"
        return [
            self.node.kubectl(
                "get", "--raw", f"{pods}/https:{replica['metadata']['name']}:8443/proxy/metrics"
            ).stdout
            for replica in self.pods("webhook")
        ]

    def replica_metric(self, name: str, *labels: str) -> float:
        """A counter summed over the webhook's replicas, over the series whose labels hold every one of
        `labels` (`resource="pods"`)."""
        return sum(sample_sum(text, name, *labels) for text in self.replica_metrics())

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


@dataclass(frozen=True)
class Answer:
    """One creation of a CreationLoop: when, and what the API server answered."""

    at: float  # time.monotonic()
    status: int | None  # None: the request itself failed (no answer)
    priority: int | None
    message: str


@dataclass
class CreationLoop:
    """Pods created through the API server in `threads` threads while something else happens (an install,
    an upgrade, a rollback, an outage): server-side dry runs and, unless `dry_run_only`, one real creation in
    seven (deleted at once), every answer recorded with its time. Bounded: it stops at `stop()`, after
    `max_seconds` or after `max_creations`, whichever comes first."""

    node: Node
    namespace: str
    class_name: str | None
    expected_priority: int
    dry_run_only: bool = False
    threads: int = 1
    max_seconds: float = 600.0
    max_creations: int = 50_000
    answers: list[Answer] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _workers: list[threading.Thread] = field(default_factory=list)
    _numbers: Iterator[int] = field(default_factory=lambda: iter(range(1, 1 << 62)))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def body(self, n: int) -> dict[str, Any]:
        """A pod of the class that never runs (no node has the label): admission is what is measured, and
        the node is spared hundreds of containers. Its image is the project's, so nothing is ever pulled."""
        spec: dict[str, Any] = {"nodeSelector": {"priority-webhook.io/never": "scheduled"}}
        if self.class_name:
            spec["priorityClassName"] = self.class_name
        return pod(f"loop-{n}", self.namespace, self.node.project_image, **spec)

    def _run(self) -> None:
        base = f"{self.node.control.url}/api/v1/namespaces/{self.namespace}/pods"
        deadline = time.monotonic() + self.max_seconds
        with self.node.control.session() as session:
            while not self._stop.is_set() and time.monotonic() < deadline:
                with self._lock:
                    n = next(self._numbers)
                if n > self.max_creations:
                    return
                real = not self.dry_run_only and n % 7 == 0
                url = base if real else f"{base}?dryRun=All"
                try:
                    answer = session.post(url, json=self.body(n), timeout=30)
                except Exception as err:  # the client's own failure counts as a failed creation
                    self._record(Answer(time.monotonic(), None, None, f"#{n}: {err}"))
                    continue
                priority = answer.json()["spec"].get("priority") if answer.status_code == 201 else None
                self._record(Answer(time.monotonic(), answer.status_code, priority, f"#{n}: {_said(answer)}"))
                if real and answer.status_code == 201:
                    session.delete(f"{base}/loop-{n}?gracePeriodSeconds=0", timeout=30)

    def _record(self, answer: Answer) -> None:
        with self._lock:
            self.answers.append(answer)

    def since(self, started: float = 0.0) -> list[Answer]:
        with self._lock:
            return [a for a in self.answers if a.at >= started]

    def refused(self, started: float = 0.0) -> list[Answer]:
        """Answers the API server refused (4xx: an admission denial, a webhook call that failed closed)."""
        return [a for a in self.since(started) if a.status is not None and 400 <= a.status < 500]

    def failed(self, started: float = 0.0) -> list[Answer]:
        """Creations that got no answer or a server error."""
        return [a for a in self.since(started) if a.status is None or a.status >= 500]

    def not_created(self, started: float = 0.0) -> list[Answer]:
        """Refused or failed: what a fail-closed outage gives (the API server answers a webhook it cannot
        call with 500 `failed calling webhook`)."""
        return [a for a in self.since(started) if a.status != 201]

    def wrong(self, started: float = 0.0) -> list[Answer]:
        """Created, but without the class's priority."""
        return [a for a in self.since(started) if a.status == 201 and a.priority != self.expected_priority]

    def outage(self) -> float:
        """Seconds from the first refused or failed creation to the last one (0 with none)."""
        bad = [a.at for a in self.not_created()]
        return max(bad) - min(bad) if bad else 0.0

    def __enter__(self) -> CreationLoop:
        for i in range(self.threads):
            worker = threading.Thread(target=self._run, name=f"creation-loop-{i}", daemon=True)
            worker.start()
            self._workers.append(worker)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for worker in self._workers:
            worker.join(60)


def _said(answer: requests.Response) -> str:
    """The API server's message (a Status's `message`), else the start of the body."""
    try:
        return str(answer.json()["message"])
    except (ValueError, KeyError, TypeError):
        return answer.text[:300]


def _component(p: dict[str, Any]) -> str | None:
    return p["metadata"].get("labels", {}).get("app.kubernetes.io/component")
