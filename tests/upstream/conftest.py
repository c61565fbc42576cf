"""Upstream's own judge: Kubernetes' preemption specs (`e2e.test`) with our webhook giving pods their priority.

The suite needs what `testkit/upstream_e2e.py` looks for: the envtest folder (`testkit/envtest.py`) with the
scheduler, the controller manager and kubemark beside the control plane, `e2e.test` there (or where `E2E_TEST`
names it), and root for the hollow nodes. Where a part is missing the suite is left out with one summary line
naming it and where it was looked for:

    upstream e2e: not run: no e2e.test in ~/.local/share/kubebuilder-envtest/k8s/1.33.3-linux-amd64 (E2E_TEST unset)

`UPSTREAM_E2E_REQUIRED=1` turns that into an error. Where it runs, one line per mode, counted from the
suite's own report:

    upstream e2e: 6 specs passed with the webhook in place of the in-tree plugin (Kubernetes v1.33.3)
    upstream e2e: 6 specs passed with the webhook beside the in-tree plugin (Kubernetes v1.33.3)
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from testkit import upstream_e2e
from testkit.cluster_webhook import IMAGE, RegisteredWebhook, registered_webhook
from testkit.envtest import ControlPlane
from testkit.hollow_node import HollowNode
from testkit.upstream_e2e import object_names
from testkit.wait import wait_for
from tests.suite_gate import leave_out

_HERE = Path(__file__).parent
_NOT_RUN: list[str] = []
_TALLY = upstream_e2e.Tally()  # from the suite's own reports
_CLUSTERS = pytest.StashKey[list["Cluster"]]()
_RUNS = pytest.StashKey[list[upstream_e2e.Run]]()

# The two ways the specs run: the in-tree Priority plugin off (our webhook alone gives pods their priority),
# and on, with our webhook beside it (as most clusters that install the chart run).
WEBHOOK_ALONE = "webhook-alone"
BESIDE_PLUGIN = "beside-plugin"
MODES = (WEBHOOK_ALONE, BESIDE_PLUGIN)
SAYS = {
    WEBHOOK_ALONE: "with the webhook in place of the in-tree plugin",
    BESIDE_PLUGIN: "with the webhook beside the in-tree plugin",
}
NODES = ("hollow-1", "hollow-2")
# Room for the specs' pods (a few each) and the ReplicaSets' replacements; 40 is what a hollow node was seen
# to run them with.
MAX_PODS = 40


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without e2e.test or a part to run it against, leave the suite out with one summary line (an error
    under UPSTREAM_E2E_REQUIRED=1). Collection only looks."""
    line = leave_out(
        config, items, _HERE, upstream_e2e.unavailable, env="UPSTREAM_E2E_REQUIRED", what="upstream e2e"
    )
    if line:
        _NOT_RUN.append(line)


@dataclass
class Cluster:
    """A control plane with the scheduler and the controller manager, two hollow nodes, and our webhook
    (None for the plugin-alone baseline)."""

    mode: str
    plane: ControlPlane
    nodes: list[HollowNode]
    hook: RegisteredWebhook | None
    namespaces: frozenset[str]  # once started: the API server's own and the release namespace
    pods: frozenset[str]  # once started (the node agents, NAMESPACE/NAME)

    def wait_as_started(self) -> None:
        """Wait until what a spec made is gone: its namespaces (their deletion ends once their pods are
        gone) and its pods in kube-system. A spec's pods still terminating hold resources the next spec's
        pods need (upstream's own wait between specs looks only at namespaces named `e2e-tests-*`)."""

        def back() -> bool:
            return (
                object_names(self.plane, "pods") == self.pods
                and object_names(self.plane, "namespaces") == self.namespaces
            )

        wait_for(back, timeout=180, interval=0.5, what=f"the {self.mode} cluster as it started")

    def logs(self) -> str:
        text = self.plane.logs()
        if self.hook is not None:
            tail = "\n".join(self.hook.server.log().splitlines()[-40:])
            text += f"\n--- webhook ({self.hook.server.log_file})\n{tail}"
        return text


@contextmanager
def started_cluster(workdir: Path, mode: str, *, webhook: bool) -> Iterator[Cluster]:
    """The cluster of `mode` (the plugin off for WEBHOOK_ALONE), with our webhook registered from the
    chart's configurations rendered with its default values where `webhook`."""
    args = ["--disable-admission-plugins=Priority"] if mode == WEBHOOK_ALONE else []
    with ExitStack() as stack:
        plane = stack.enter_context(
            ControlPlane.start(
                workdir / "plane", apiserver_args=args, controller_manager=True, scheduler=True
            )
        )
        nodes = []
        for name in NODES:
            node = HollowNode.create(plane, workdir / name, name, max_pods=MAX_PODS)
            stack.callback(node.close)
            nodes.append(node)
        hook = stack.enter_context(registered_webhook(plane, workdir / "webhook")) if webhook else None
        upstream_e2e.start_node_agents(plane, NODES, IMAGE)
        yield Cluster(
            mode, plane, nodes, hook, object_names(plane, "namespaces"), object_names(plane, "pods")
        )


@pytest.fixture(scope="session")
def e2e_binary() -> Path:
    return upstream_e2e.binary()


@pytest.fixture(scope="module", params=MODES)
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One cluster per mode, one at a time: stopped before the other mode's starts."""
    with started_cluster(tmp_path_factory.mktemp(request.param), request.param, webhook=True) as started:
        yield started


@pytest.fixture(scope="session")
def plugin_alone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The baseline, started only when a spec fails with the webhook: the in-tree plugin alone, no webhook."""
    with started_cluster(tmp_path_factory.mktemp("plugin-alone"), "plugin-alone", webhook=False) as started:
        yield started


@pytest.fixture
def tracked(request: pytest.FixtureRequest) -> Callable[[Cluster | upstream_e2e.Run], None]:
    """`tracked(cluster)` / `tracked(run)`: its logs go into this test's report if the test fails."""

    def track(thing: Cluster | upstream_e2e.Run) -> None:
        if isinstance(thing, Cluster):
            request.node.stash.setdefault(_CLUSTERS, []).append(thing)
        else:
            request.node.stash.setdefault(_RUNS, []).append(thing)

    return track


def count(cluster: Cluster, spec: upstream_e2e.Spec) -> None:
    """A spec the suite reported, for the mode's summary line."""
    _TALLY.add(cluster.mode, cluster.plane.version, spec)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    for run in item.stash.get(_RUNS, []):
        report.sections.append((f"e2e.test output ({run.log}, kept)", run.tail()))
    for cluster in item.stash.get(_CLUSTERS, []):
        report.sections.append((f"{cluster.mode} cluster {cluster.plane.workdir} (kept)", cluster.logs()))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in _NOT_RUN:
        terminalreporter.write_line(line)
    for mode, version, passed in _TALLY.passed():
        terminalreporter.write_line(f"upstream e2e: {passed} {SAYS[mode]} (Kubernetes {version})")
