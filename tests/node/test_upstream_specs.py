"""Kubernetes' own preemption specs on the real node, the chart installed by Helm and our image serving.

The specs of tests/upstream (testkit/upstream_e2e.py) that one node can run (ONE_NODE: the PodTopologySpread
spec skips itself on fewer than two), against the node suite's cluster in each of its modes (the in-tree
Priority plugin on, then off): the release as users install it (`Release.ensure`), its replicas and sidecar
running from the project's image, the specs' pods run by the kubelet and containerd as real containers. The
only image the specs run is the one `e2e.test --list-images` names as its pause image: the node's own pause
image, under that name in the node's containerd (nothing can be pulled here).

Each spec runs alone, once what the previous one made is gone; what passed is read from the suite's own
report, and a failure carries the spec's own message and the tail of its log. The webhook must have been
asked, not bypassed: the API server's counters of calls answered 200 grew for every configuration entry
the spec reaches, and the replicas' own counters show every review answered, none failed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from testkit import upstream_e2e
from testkit.apiserver_metrics import scrape
from testkit.cluster_webhook import sample_sum
from testkit.node import Node
from testkit.upstream_e2e import object_names
from testkit.wait import wait_for
from tests.node.release import Release

REVIEWS = "priority_webhook_admission_requests_total"


@dataclass(frozen=True)
class Stage:
    """The node ready for the specs: its namespaces and kube-system pods before the first one."""

    node: Node
    namespaces: frozenset[str]
    system_pods: frozenset[str]

    def wait_as_started(self) -> None:
        """Wait until what a spec made is gone: its namespaces (deleted once their pods are) and its pods in
        kube-system. A spec's pods still terminating hold what the next spec's pods need."""

        def back() -> bool:
            return (
                object_names(self.node.control, "namespaces") <= self.namespaces
                and system_pods(self.node) <= self.system_pods
            )

        wait_for(back, timeout=180, interval=0.5, what="the node's namespaces and kube-system pods as before")


def system_pods(node: Node) -> frozenset[str]:
    return frozenset(name for name in object_names(node.control, "pods") if name.startswith("kube-system/"))


def no_namespace_terminating(node: Node) -> bool:
    found = node.control.get_json("namespaces")["items"]
    return not any(item["metadata"].get("deletionTimestamp") for item in found)


@pytest.fixture(scope="module")
def e2e_binary() -> Path:
    return upstream_e2e.binary()


@pytest.fixture(scope="module")
def stage(node: Node, e2e_binary: Path) -> Iterator[Stage]:
    """The node's release deployed and Ready, the pause image under the specs' name, the node agents e2e's
    health check looks for, and no namespace an earlier test left terminating."""
    pause = upstream_e2e.pause_image(e2e_binary)
    node.name_pause_image(pause)
    Release(node).ensure()
    agents = upstream_e2e.start_node_agents(node.control, [node.name], pause)
    wait_for(
        lambda: no_namespace_terminating(node), timeout=180, interval=0.5, what="no namespace terminating"
    )
    yield Stage(node, object_names(node.control, "namespaces"), system_pods(node))
    node.kubectl("delete", "pods", "-n", "kube-system", *agents, "--ignore-not-found")


def review_counts(release: Release) -> dict[str, float]:
    """The replicas' own counters (each replica's /metrics read once): reviews answered, and those they could
    not answer."""
    texts = release.replica_metrics()
    return {
        key: sum(sample_sum(text, REVIEWS, *labels) for text in texts)
        for key, labels in (
            ("answered", ()),
            ("error", ('result="error"',)),
            ("unavailable", ('result="unavailable"',)),
        )
    }


@pytest.mark.parametrize("name", upstream_e2e.ONE_NODE, ids=upstream_e2e.spec_id)
def test_upstream_spec_passes_on_the_node(
    stage: Stage,
    real_node: Node,
    name: str,
    e2e_binary: Path,
    tmp_path: Path,
    count_spec: Callable[[upstream_e2e.Spec], None],
) -> None:
    release = Release(real_node)
    stage.wait_as_started()
    before, ours_before = scrape(real_node.control), review_counts(release)
    run = upstream_e2e.run_specs(e2e_binary, real_node.control, [name], tmp_path / "e2e")
    after, ours_after = scrape(real_node.control), review_counts(release)

    assert [spec.name for spec in run.specs] == [name], f"{e2e_binary} ran {run.specs} for {name!r}"
    (spec,) = run.specs
    count_spec(spec)
    assert spec.passed, f"{spec.name}: {spec.state} ({spec.seconds:.0f} s)\n{spec.failure}\n{run.tail()}"
    assert run.returncode == 0, f"e2e.test exited {run.returncode} with the spec passed:\n{run.tail()}"

    calls = upstream_e2e.calls_answered(before, after, name)
    assert all(calls.values()), f"the API server did not call (or got no answer from) every entry: {calls}"
    moved = {key: ours_after[key] - ours_before[key] for key in ours_after}
    assert moved["answered"] >= sum(calls.values()), json.dumps(moved)
    assert moved["error"] == 0 and moved["unavailable"] == 0, json.dumps(moved)
