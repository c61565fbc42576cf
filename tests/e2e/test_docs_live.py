"""The documentation's cluster examples (tests/test_docs_examples.py: CLUSTER), run verbatim against a real
API server: a control plane of their own, so the example classes (one of them a global default) touch no
other test. As the docs say, the example classes are applied first, with the docs' own line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.envtest import ControlPlane
from tests.test_docs_examples import CLUSTER, ROOT, Example, command


@pytest.fixture(scope="module")
def docs_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with ControlPlane.start(tmp_path_factory.mktemp("docs-cluster")) as plane:
        plane.kubectl("apply", "-f", str(ROOT / "examples" / "priorityclasses.yaml"))  # as the docs say
        plane.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}})
        node = json.loads((ROOT / "examples" / "node.json").read_text())
        status = json.dumps({"status": node["status"]})
        plane.kubectl("patch", "node", "node-1", "--subresource=status", "--type=merge", "-p", status)
        # The API server taints a new node not-ready; with no node controller here, a kubelet's role is ours.
        plane.kubectl("taint", "node", "node-1", "node.kubernetes.io/not-ready:NoSchedule-")
        yield plane


def _run_block(plane: ControlPlane, example: Example, workdir: Path) -> subprocess.CompletedProcess[str]:
    """The block's `kubectl get ... > FILE` lines, then the example, in a directory holding examples/ and a
    home whose ~/.kube/config is the cluster's, with kubectl and our console scripts on PATH."""
    (workdir / "examples").symlink_to(ROOT / "examples")
    (workdir / ".kube").mkdir()
    (workdir / ".kube" / "config").write_text(plane.kubeconfig.read_text())
    setup = [line for line in example.block.splitlines() if re.match(r"kubectl get .*>", line)]
    path = os.pathsep.join([str(Path(sys.executable).parent), str(plane.assets), os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": path, "HOME": str(workdir), "KUBECONFIG": str(plane.kubeconfig)}
    script = "\n".join([*setup, command(example.line)])
    return subprocess.run(
        ["bash", "-ec", script],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("example", CLUSTER, ids=str)
def test_cluster_examples_answer(docs_cluster: ControlPlane, tmp_path: Path, example: Example) -> None:
    result = _run_block(docs_cluster, example, tmp_path)
    assert result.returncode == 0, result.stderr  # every one answers yes on this cluster
    answer = result.stdout
    if " victims " in example.line:  # the system-node-critical agent: critical through its class only
        assert json.loads(answer)["admit"] is True
    if " plan " in example.line:
        assert json.loads(answer)["node"] == "node-1"
    if " review " in example.line:
        assert "priority: 100000" in answer  # the class read from the cluster's own list


def test_live_victims_resolves_a_class_that_only_the_cluster_has(docs_cluster: ControlPlane) -> None:
    """examples/pod.yaml names `high`, which no file gives here: read from the cluster, as admission would."""
    argv = [sys.executable, "-m", "webhook", "victims", "--node", "node-1", "--pod", "examples/pod.yaml"]
    live = subprocess.run(
        [*argv, "--kubeconfig", str(docs_cluster.kubeconfig)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert live.returncode == 0, live.stderr
    assert json.loads(live.stdout)["admit"] is True
