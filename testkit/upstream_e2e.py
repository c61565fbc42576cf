"""Kubernetes' own end-to-end tests (`e2e.test`) against a control plane of ours, and what they reported.

`e2e.test` is upstream's e2e suite compiled from the release's source (`go test -c ./test/e2e`), run against
any kubeconfig (`--provider=skeleton`). Like kubemark it is not part of what setup-envtest brings, and this
repository ships none: it is found beside the control plane's binaries in the envtest folder
(`testkit/envtest.py`), or where `E2E_TEST` names it. `unavailable()` says, in one line, what a run of the
specs lacks here and where it looked.

    specs = run_specs(binary, plane, focus=SPECS, workdir=path)
    [spec.name for spec in specs if not spec.passed]

What passed and failed is read from the suite's own report (Ginkgo's JSON report), never from its output.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testkit.apiserver_metrics import Samples, grown
from testkit.envtest import AssetsMissing, ControlPlane, Process, assets_dir, shown
from testkit.hollow_node import KUBEMARK
from testkit.wait import wait_for

E2E_TEST_ENV = "E2E_TEST"
BINARY = "e2e.test"
# What the suite's control plane runs beside the API server: the scheduler preempts, the controller manager
# makes namespaces' ServiceAccounts, runs ReplicaSets and deletes the specs' namespaces.
COMPONENTS = ("kube-controller-manager", "kube-scheduler", KUBEMARK)

# The specs, by their full text (container texts and the spec's own, space-joined, as Ginkgo matches a
# focus): upstream's preemption specs that decide a pod's priority through admission, in kube-system too.
# `e2e.test --ginkgo.dry-run --ginkgo.focus='SchedulerPreemption'` lists the rest of the file: the
# PodTopologySpread spec (a plain preemption on labelled nodes, priority through admission as well) and
# the async-preemption spec ([Feature:SchedulerAsyncPreemption], left out as conformance runs leave
# features out).
PREEMPTION = "[sig-scheduling] SchedulerPreemption [Serial]"
SPECS = (
    f"{PREEMPTION} validates basic preemption works [Conformance]",
    f"{PREEMPTION} validates lower priority pod preemption by critical pod [Conformance]",
    f"{PREEMPTION} validates pod disruption condition is added to the preempted pod [Conformance]",
    f"{PREEMPTION} PodTopologySpread Preemption validates proper pods are preempted",
    f"{PREEMPTION} PreemptionExecutionPath runs ReplicaSets to verify preemption running path [Conformance]",
    f"{PREEMPTION} PriorityClass endpoints verify PriorityClass endpoints can be operated with different "
    "HTTP methods [Conformance]",
)
# What one node runs: the PodTopologySpread spec skips itself on fewer than two nodes.
ONE_NODE = tuple(name for name in SPECS if "PodTopologySpread" not in name)

# The entries of the chart's configurations: (webhook name, the API server's type label).
_PODS = (("pods.priority-webhook.io", "admit"), ("pods.priority-webhook.io", "validating"))
_KUBE_SYSTEM = (
    ("system-pods.priority-webhook.io", "admit"),
    ("system-pods.priority-webhook.io", "validating"),
)
_CLASSES = (("priorityclasses.priority-webhook.io", "validating"),)
# What each spec sends through admission: every one writes PriorityClasses (their BeforeEach), all but the
# PriorityClass one create pods in their namespace, and the critical pod is in kube-system.
REACHES = {
    name: _CLASSES
    + (() if "PriorityClass endpoints" in name else _PODS)
    + (_KUBE_SYSTEM if "critical pod" in name else ())
    for name in SPECS
}

# What e2e's node health check (`WaitForTotalHealthy`, in the preemption specs' BeforeEach) looks for on each
# schedulable node: a Running kube-system pod named like each of these, the per-node agents a cluster runs as
# DaemonSets. Without them the check waits out its minute in every spec (it never fails).
NODE_AGENTS = ("kube-proxy", "fluentd-elasticsearch", "node-problem-detector")

# A run of one spec takes 5-20 s; one stuck waits out its own timeouts (5 minutes for a pod to run). The
# run's deadline is Ginkgo's (`--ginkgo.timeout`: it stops the spec and still writes its report), ours a
# little longer.
SPEC_TIMEOUT_MINUTES = 10


class UpstreamUnavailable(RuntimeError):
    """No e2e.test (or no control plane, scheduler, controller manager or kubemark to run it against)."""


def binary() -> Path:
    """`e2e.test`: the file E2E_TEST names, else the one in the envtest folder. UpstreamUnavailable names
    where it looked."""
    given = os.environ.get(E2E_TEST_ENV, "")
    if given:
        path = Path(given)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise UpstreamUnavailable(f"{E2E_TEST_ENV}={given} is not an executable file")
        return path
    try:
        folder = assets_dir()
    except AssetsMissing as err:
        raise UpstreamUnavailable(str(err)) from None
    path = folder / BINARY
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise UpstreamUnavailable(f"no {BINARY} in {shown(folder)} ({E2E_TEST_ENV} unset)")
    return path


def binary_missing() -> str | None:
    """Why there is no e2e.test here (where it was looked for), or None."""
    try:
        binary()
    except UpstreamUnavailable as err:
        return str(err)
    return None


def unavailable() -> str | None:
    """Why the specs cannot run here on hollow nodes (every missing part, with where it was looked for), or
    None."""
    missing = binary_missing()
    lacking = [missing] if missing else []
    try:
        folder = assets_dir()
    except AssetsMissing:
        return "; ".join(lacking)  # the envtest folder's absence is the line already
    lacking += [
        f"no {name} in {shown(folder)}" for name in COMPONENTS if not os.access(folder / name, os.X_OK)
    ]
    if os.geteuid() != 0:
        lacking.append("the hollow nodes' kubelet must run as root (it opens /dev/kmsg)")
    return "; ".join(lacking) or None


def spec_id(name: str) -> str:
    """A spec's id, for a shell: its text after the Describe's, in words joined by dashes."""
    return re.sub(r"[^A-Za-z0-9]+", "-", name.removeprefix(PREEMPTION)).strip("-")


def focus(names: Sequence[str]) -> str:
    """A Ginkgo focus that selects exactly these specs: each full text, to the end. Ginkgo matches a focus
    against the suite's description and the spec's text, so the start cannot be anchored; every text here
    starts with its SIG's tag."""
    return "|".join(f"{re.escape(name)}$" for name in names)


@dataclass(frozen=True)
class Spec:
    """One spec as the suite reported it."""

    name: str
    state: str  # passed, failed, skipped, pending, panicked, interrupted, aborted, timedout
    seconds: float
    failure: str = ""  # the failure's message and where in the spec it happened, as the suite wrote it

    @property
    def passed(self) -> bool:
        return self.state == "passed"

    @property
    def ran(self) -> bool:
        return self.state not in ("skipped", "pending")


@dataclass(frozen=True)
class Run:
    """One e2e.test run: the specs it ran (those its focus selected), its exit code and its log."""

    specs: list[Spec]
    returncode: int
    log: Path

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Tally:
    """The specs the suite reported, per mode and Kubernetes version, for a suite's summary lines."""

    counts: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # -> [passed, ran]

    def add(self, mode: str, version: str, spec: Spec) -> None:
        counts = self.counts.setdefault((mode, version), [0, 0])
        counts[0] += spec.passed
        counts[1] += 1

    def passed(self) -> Iterator[tuple[str, str, str]]:
        """(mode, version, `N specs passed` or `N of M specs passed`), in the order they were first seen."""
        for (mode, version), (passed, ran) in self.counts.items():
            said = f"{passed} specs passed" if passed == ran else f"{passed} of {ran} specs passed"
            yield mode, version, said


def read_report(path: Path) -> list[Spec]:
    """The specs a Ginkgo JSON report ran (`It` nodes not skipped by the focus), in the order they ran."""
    specs = []
    for suite in json.loads(path.read_text()):
        for report in suite.get("SpecReports") or ():
            if report.get("LeafNodeType") != "It":
                continue
            spec = _spec(report)
            if spec.ran:
                specs.append(spec)
    return specs


def _spec(report: dict[str, Any]) -> Spec:
    texts = [*(report.get("ContainerHierarchyTexts") or ()), report.get("LeafNodeText", "")]
    failure = report.get("Failure") or {}
    message = str(failure.get("Message") or "").strip()
    if failure.get("ForwardedPanic"):
        message = f"{message}\npanic: {failure['ForwardedPanic']}".strip()
    location = failure.get("Location") or {}
    if message and location.get("FileName"):
        message += f"\n  at {location['FileName']}:{location.get('LineNumber', '?')}"
    return Spec(
        name=" ".join(text for text in texts if text),
        state=str(report.get("State", "")),
        seconds=float(report.get("RunTime") or 0) / 1e9,
        failure=message,
    )


def command(e2e: Path, plane: ControlPlane, names: Sequence[str], workdir: Path) -> list[str]:
    """The e2e.test command line for `names` against `plane`, its reports in `workdir`."""
    return [
        str(e2e),
        "--provider=skeleton",
        f"--kubeconfig={plane.kubeconfig}",
        f"--kubectl-path={plane.assets / 'kubectl'}",
        f"--ginkgo.focus={focus(names)}",
        f"--ginkgo.json-report={workdir / 'report.json'}",
        f"--ginkgo.timeout={SPEC_TIMEOUT_MINUTES}m",
        "--ginkgo.no-color",
        "--ginkgo.v",
        f"--report-dir={workdir}",
        # Nothing here runs in kube-system but what a spec creates there: no add-on to wait for.
        "--minStartupPods=0",
    ]


def run_specs(e2e: Path, plane: ControlPlane, names: Sequence[str], workdir: Path) -> Run:
    """Run the specs `names` against `plane` and read what the suite reported; its output goes to
    `workdir`/e2e.log. A run that writes no report (it could not start) raises with the log's tail."""
    workdir.mkdir(parents=True, exist_ok=True)
    process = Process(BINARY, command(e2e, plane, names, workdir), workdir / "e2e.log")
    process.start()
    assert process.popen is not None
    try:
        returncode = process.popen.wait((SPEC_TIMEOUT_MINUTES + 2) * 60)
    finally:
        process.stop(30)  # interrupted, or past its own deadline: its cleanup gets 30 s
    report = workdir / "report.json"
    if not report.exists():
        raise RuntimeError(f"{BINARY} exited {returncode} without a report:\n{process.tail(60)}")
    return Run(read_report(report), returncode, process.log)


def pause_image(e2e: Path) -> str:
    """The pause image the specs' pods run, as this e2e.test names it (`--list-images`)."""
    listed = subprocess.run(
        [str(e2e), "--list-images"], capture_output=True, text=True, timeout=120, check=False
    )
    found = [line for line in listed.stdout.split() if "/pause:" in line]
    if listed.returncode != 0 or len(found) != 1:
        raise RuntimeError(f"{e2e} --list-images named no single pause image: {listed.stderr.strip()[-500:]}")
    return found[0]


def calls_answered(before: Samples, after: Samples, name: str) -> dict[str, float]:
    """Per configuration entry spec `name` reaches (REACHES), the API server's calls to it that our webhook
    answered (HTTP 200) between the scrapes."""
    return {
        f"{webhook} ({kind})": sum(
            grown(
                before,
                after,
                "apiserver_admission_webhook_request_total",
                [("name", "=", webhook), ("type", "=", kind), ("code", "=", "200")],
            ).values()
        )
        for webhook, kind in REACHES[name]
    }


def object_names(plane: ControlPlane, resource: str) -> frozenset[str]:
    """The names of every object of `resource` in the cluster (NAMESPACE/NAME where namespaced)."""
    response = plane.get(f"/api/v1/{resource}")
    response.raise_for_status()
    return frozenset(
        "/".join(filter(None, (item["metadata"].get("namespace"), item["metadata"]["name"])))
        for item in response.json()["items"]
    )


def node_agents(nodes: Sequence[str], image: str) -> dict[str, dict[str, Any]]:
    """A pod of each NODE_AGENTS name on each node, by name: in kube-system, as its DaemonSet would place it
    (bound to the node, `system-node-critical`, no requests)."""
    return {
        f"{agent}-{node}": {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{agent}-{node}", "namespace": "kube-system"},
            "spec": {
                "nodeName": node,
                "priorityClassName": "system-node-critical",
                "containers": [{"name": "agent", "image": image}],
            },
        }
        for node in nodes
        for agent in NODE_AGENTS
    }


def start_node_agents(plane: ControlPlane, nodes: Sequence[str], image: str) -> list[str]:
    """Create `node_agents` and return their names once the kubelets run them."""
    placed = node_agents(nodes, image)
    plane.apply(*placed.values())

    def running() -> bool:
        found = plane.get("/api/v1/namespaces/kube-system/pods").json()["items"]
        phases = {p["metadata"]["name"]: (p.get("status") or {}).get("phase") for p in found}
        return all(phases.get(name) == "Running" for name in placed)

    wait_for(running, timeout=120, interval=0.2, what=f"the node agents Running: {sorted(placed)}")
    return sorted(placed)
