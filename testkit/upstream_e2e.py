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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testkit.envtest import AssetsMissing, ControlPlane, Process, assets_dir, shown
from testkit.hollow_node import KUBEMARK

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


def unavailable() -> str | None:
    """Why the specs cannot run here (every missing part, with where it was looked for), or None."""
    try:
        binary()
    except UpstreamUnavailable as err:
        lacking = [str(err)]
    else:
        lacking = []
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
