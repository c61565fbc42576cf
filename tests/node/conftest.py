"""The node suite: the chart installed with Helm's own actions on a real single-node cluster (testkit/node.py).

The node is found the envtest way (testkit/node_parts.py): the envtest folder with `kubelet` and `kube-proxy`
beside the control plane (or `KUBELET`, `KUBE_PROXY`), root, and Debian's containerd, runc, CNI plugins,
conntrack, iptables and podman, installed where missing once the Kubernetes binaries are there. Where a part
is absent the suite is left out with one summary line naming it and where it was looked for:

    node: not run: no envtest folder (KUBEBUILDER_ASSETS unset; none under ~/.local/share/kubebuilder-envtest/k8s)

`NODE_REQUIRED=1` turns that into an error. Where it runs, the summary says on what:

    node: 31 tests ran on a real node (kubelet v1.33.3, containerd 1.6.20~ds1)

One node at a time runs on a machine (one kubelet, one bridge), so the `node` fixture is parametrized by the
in-tree Priority plugin, on then off: pytest runs every test of the first node, stops it (the machine as it
was found), then starts the second. A failing test gets the tail of every log of the node in its report.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit import node_images, node_parts, upstream_e2e
from testkit.node import Node
from tests.node.release import Release
from tests.suite_gate import leave_out

_HERE = Path(__file__).parent
UPSTREAM = _HERE / "test_upstream_specs.py"
UPSTREAM_WHAT = "upstream e2e on the node"
_NOT_RUN: list[str] = []
_RAN: dict[str, int] = {}
_FIGURES: list[str] = []
_SPECS = upstream_e2e.Tally()  # upstream's specs on the node, from the suite's own reports
_NODES = pytest.StashKey[Node]()
MODES = ("in-tree-on", "in-tree-off")
SAYS = {"in-tree-on": "beside the in-tree plugin", "in-tree-off": "in place of the in-tree plugin"}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without the parts of a node, leave the suite out with one summary line (an error under
    NODE_REQUIRED=1). Nothing is installed here: `unavailable()` only looks."""
    line = leave_out(config, items, _HERE, node_parts.unavailable, env="NODE_REQUIRED", what="node")
    if line:
        _NOT_RUN.append(line)
        return
    # Upstream's specs on the node need e2e.test too (the node's own control plane runs them).
    line = leave_out(
        config, items, UPSTREAM, upstream_e2e.binary_missing, env="UPSTREAM_E2E_REQUIRED", what=UPSTREAM_WHAT
    )
    if line:
        _NOT_RUN.append(line)
    # A test marked `node_modes(...)` runs on those modes' nodes alone (what it shows does not depend on the
    # in-tree plugin; each node mode costs the test's whole time again).
    other_modes = [item for item in items if _HERE in item.path.parents and not _in_its_modes(item)]
    if other_modes:
        gone = set(other_modes)
        items[:] = [item for item in items if item not in gone]
        config.hook.pytest_deselected(items=other_modes)
    # A test's budget holds what its session fixtures do first: the image built (on a fresh machine, a base
    # made from Debian's archive) and a whole node started or stopped.
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.timeout(1800))


def mode_of(node: Node) -> str:
    """The node's mode, as MODES names it."""
    return MODES[0] if node.in_tree_priority else MODES[1]


def _in_its_modes(item: pytest.Item) -> bool:
    marker = item.get_closest_marker("node_modes")
    callspec = getattr(item, "callspec", None)
    if marker is None or callspec is None:
        return True
    unknown = set(marker.args) - set(MODES)
    if unknown:
        raise pytest.UsageError(f"{item.nodeid}: node_modes names no mode of the node: {sorted(unknown)}")
    return callspec.params.get("node") in marker.args


@pytest.fixture(scope="session")
def project_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The project's image, built once with `scripts/image` (its SBOM in a folder of the session's)."""
    return node_images.project_image(tmp_path_factory.mktemp("project-image"))


# Package scope: the second node stops as the suite ends, not when the whole run does (the suites after it,
# the node harness's and the hollow nodes', need the machine without a kubelet).
@pytest.fixture(scope="package", params=MODES)
def node(
    request: pytest.FixtureRequest, project_image: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Node]:
    """The node, with the in-tree Priority plugin on (`in-tree-on`) or off (`in-tree-off`); stopped, and the
    machine left as found, before the other one starts. Its teardown fails a test run that left anything."""
    with Node.start(
        tmp_path_factory.mktemp(f"node-{request.param}"),
        project_image=project_image,
        in_tree_priority=request.param == "in-tree-on",
    ) as started:
        yield started
    left = started.leftovers()
    assert not left, f"the node left these on the machine: {left}"


@pytest.fixture
def real_node(node: Node, request: pytest.FixtureRequest) -> Node:
    """The session's node, its logs attached to this test's report if the test fails."""
    request.node.stash[_NODES] = node
    return node


@pytest.fixture
def release(real_node: Node) -> Release:
    """The session's release in the known state every test starts from, whatever the test before it left
    (`Release.ensure`: deployed with the node's values, Ready, nothing terminating). A module whose tests
    need other values or no release overrides this fixture."""
    installed = Release(real_node)
    installed.ensure()
    return installed


@pytest.fixture
def figure(real_node: Node) -> Callable[[str, str], None]:
    """Records a measured figure; the summary lists them under the node's mode (docs/performance.md quotes
    them)."""

    def record(name: str, value: str) -> None:
        _FIGURES.append(f"node figure [{mode_of(real_node)}]: {name}: {value}")

    return record


@pytest.fixture
def count_spec(real_node: Node) -> Callable[[upstream_e2e.Spec], None]:
    """Counts an upstream spec the suite reported, for the mode's summary line."""
    return lambda spec: _SPECS.add(mode_of(real_node), real_node.control.version, spec)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    node = item.stash.get(_NODES, None)
    if node is None:
        return
    if report.when == "call":
        _RAN[node.summary()] = _RAN.get(node.summary(), 0) + 1
    if report.failed:
        report.sections.append((f"node {node.workdir} (kept)", node.logs()))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in _NOT_RUN:
        terminalreporter.write_line(line)
    for line in _FIGURES:
        terminalreporter.write_line(line)
    for summary, count in sorted(_RAN.items()):
        terminalreporter.write_line(f"node: {count} tests ran on a real node ({summary})")
    for mode, version, passed in _SPECS.passed():
        terminalreporter.write_line(
            f"{UPSTREAM_WHAT}: {passed} on a real node, the chart installed by Helm, {SAYS[mode]} "
            f"(Kubernetes {version})"
        )
