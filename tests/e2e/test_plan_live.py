"""`plan --kubeconfig` on a real control plane: it lists the cluster itself (read-only, paged) and answers
exactly as `plan --cluster` on `kubectl get nodes,pods,pdb,pc -A -o json` of the same cluster."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from testkit import cluster_webhook as e2e_webhook
from testkit.envtest import ControlPlane, wait_deleted
from testkit.wait import wait_for
from webhook.kube.config import api_client
from webhook.kube.listing import list_objects

NS = "plan-live"
PREFIX = "plan-live-"


def node(
    name: str, cpu: str, memory: str = "8Gi", taints: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": PREFIX + name, "labels": {"kubernetes.io/hostname": PREFIX + name, NS: "yes"}},
        "spec": {"taints": taints or []},
    }


def node_status(cpu: str, memory: str = "8Gi") -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": memory, "pods": "110"}
    return {
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "played by the test"}
            ],
        }
    }


def pod(name: str, node_name: str, klass: str, cpu: str, app: str, start: str) -> tuple[dict[str, Any], str]:
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": app}},
        "spec": {
            "nodeName": PREFIX + node_name,
            "priorityClassName": PREFIX + klass,
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.9",
                    "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}},
                }
            ],
        },
    }
    return obj, start


def priority_class(name: str, value: int) -> dict[str, Any]:
    return e2e_webhook.priority_class(PREFIX + name, value)


NODES = {"a": "2", "b": "2", "c": "4"}
PODS = [
    pod("web-1", "a", "low", "1", "web", "2026-01-01T00:00:01Z"),
    pod("web-2", "a", "low", "900m", "web", "2026-01-01T00:00:02Z"),
    pod("batch-1", "b", "mid", "1500m", "batch", "2026-01-01T00:00:03Z"),
    pod("batch-2", "c", "low", "2", "batch", "2026-01-01T00:00:04Z"),
    pod("batch-3", "c", "low", "1500m", "batch", "2026-01-01T00:00:05Z"),
]
PENDING: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "urgent", "namespace": NS},
    "spec": {
        "priorityClassName": PREFIX + "high",
        # Only this test's nodes, whatever else the shared cluster holds; and whatever taints
        # the node lifecycle controller puts on nodes nobody heartbeats.
        "nodeSelector": {NS: "yes"},
        "tolerations": [{"operator": "Exists"}],
        "containers": [
            {
                "name": "c",
                "image": "registry.k8s.io/pause:3.9",
                "resources": {"requests": {"cpu": "1800m", "memory": "1Gi"}},
            }
        ],
    },
}


@pytest.fixture
def scenario(both_versions: ControlPlane) -> Iterator[ControlPlane]:
    """The scenario on the current version and on the oldest (`plan --kubeconfig` follows the API server
    it reads, and must list and answer on both)."""
    cluster = both_versions
    cluster.kubectl("create", "namespace", NS)
    try:
        cluster.apply(priority_class("low", 100), priority_class("mid", 1000), priority_class("high", 10000))
        cluster.apply(*(node(name, cpu) for name, cpu in NODES.items()))
        with cluster.session() as session:
            for name, cpu in NODES.items():
                patched = session.patch(
                    f"{cluster.url}/api/v1/nodes/{PREFIX}{name}/status",
                    json=node_status(cpu),
                    headers={"Content-Type": "application/merge-patch+json"},
                    timeout=10,
                )
                assert patched.status_code == 200, patched.text
            cluster.apply(*(obj for obj, _ in PODS))
            for obj, start in PODS:
                status: dict[str, Any] = {
                    "status": {
                        "phase": "Running",
                        "startTime": start,
                        "conditions": [{"type": "Ready", "status": "True"}],
                    }
                }
                url = f"{cluster.url}/api/v1/namespaces/{NS}/pods/{obj['metadata']['name']}/status"
                patched = session.patch(
                    url, json=status, headers={"Content-Type": "application/merge-patch+json"}, timeout=10
                )
                assert patched.status_code == 200, patched.text
        cluster.apply(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "web", "namespace": NS},
                "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
            }
        )
        yield cluster
    finally:
        # Bound pods wait for a kubelet that does not exist: delete them at once.
        cluster.kubectl("delete", "pods", "--all", "-n", NS, "--grace-period=0", "--force", check=False)
        cluster.kubectl("delete", "namespace", NS, "--wait=false", check=False)
        cluster.kubectl("delete", "nodes", *(PREFIX + n for n in NODES), "--wait=false", check=False)
        cluster.kubectl(
            "delete", "priorityclasses", *(PREFIX + c for c in ("low", "mid", "high")), check=False
        )
        wait_deleted(cluster, "namespace", NS)


def run_plan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "webhook", "plan", *args, "-o", "json", "--explain"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def versions(dump: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["resourceVersion"])
        for o in dump["items"]
    ]


def test_plan_on_the_live_cluster_answers_as_on_its_dump(scenario: ControlPlane, tmp_path: Path) -> None:
    pending = tmp_path / "urgent.yaml"
    pending.write_text(yaml.safe_dump(PENDING))
    kubeconfig = scenario.write_kubeconfig(tmp_path / "kubeconfig", "admin", ("system:masters",))

    def same_answer() -> tuple[dict[str, Any], dict[str, Any]] | None:
        """Both answers, from one state of the cluster (the controller manager may write between reads)."""
        before = scenario.kubectl("get", "nodes,pods,pdb,pc", "-A", "-o", "json").stdout
        live = run_plan("--kubeconfig", str(kubeconfig), "--pod", str(pending))
        after = scenario.kubectl("get", "nodes,pods,pdb,pc", "-A", "-o", "json").stdout
        if versions(json.loads(before)) != versions(json.loads(after)):
            return None
        dump = tmp_path / "cluster.json"
        dump.write_text(before)
        offline = run_plan("--cluster", str(dump), "--pod", str(pending))
        assert (live.returncode, live.stderr) == (offline.returncode, offline.stderr) == (0, "")
        return json.loads(live.stdout), json.loads(offline.stdout)

    live, offline = wait_for(same_answer, timeout=60, interval=0.5, what="two reads of one cluster state")
    assert live == offline
    # The scenario's answer: a would lose both web pods, against their PDB; b and c one pod each, and c's
    # victim has the lower priority (100 against b's 1000); batch-2 on c started first and is kept.
    assert live["node"] == PREFIX + "c"
    assert [(v["namespace"], v["name"]) for v in live["victims"]] == [(NS, "batch-3")]
    assert live["pdbViolations"] == 0
    assert {c["node"]: c["pdbViolations"] for c in live["explain"]["candidates"]} == {
        PREFIX + "a": 2,
        PREFIX + "b": 0,
        PREFIX + "c": 0,
    }


def test_the_listing_pages_with_limit_and_continue(scenario: ControlPlane, tmp_path: Path) -> None:
    kubeconfig = scenario.write_kubeconfig(tmp_path / "kubeconfig", "admin", ("system:masters",))
    client = api_client(str(kubeconfig), False)
    try:
        listed = list(list_objects(client, page_size=2))
    finally:
        client.close()
    ours = [
        (o["kind"], o["metadata"]["name"])
        for _, o in listed
        if o["metadata"]["name"].startswith(PREFIX) or o["metadata"].get("namespace") == NS
    ]
    assert ours == [
        *(("Node", PREFIX + n) for n in sorted(NODES)),
        *(
            ("Pod", obj["metadata"]["name"])
            for obj, _ in sorted(PODS, key=lambda p: p[0]["metadata"]["name"])
        ),
        ("PodDisruptionBudget", "web"),
        *(("PriorityClass", PREFIX + c) for c in ("high", "low", "mid")),
    ]
    sources = [source for source, _ in listed]
    assert len(set(sources)) == len(sources)  # every page's items, once each


def test_plan_only_reads(cluster: ControlPlane, tmp_path: Path) -> None:
    """A user who may only list (no get, watch, create, ...) can plan: the command needs nothing else."""
    cluster.kubectl("create", "namespace", "plan-reader")
    try:
        cluster.apply(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "plan-lister"},
                "rules": [
                    {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["list"]},
                    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["list"]},
                    {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": ["list"]},
                ],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "plan-lister"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "plan-lister",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "planner", "namespace": "plan-reader"}],
            },
        )
        kubeconfig = cluster.service_account_kubeconfig(tmp_path / "sa.kubeconfig", "plan-reader", "planner")
        pending = tmp_path / "p.yaml"
        pending.write_text(
            yaml.safe_dump({**PENDING, "spec": {**PENDING["spec"], "priorityClassName": None}})
        )
        result = wait_for(
            lambda: (
                (r := run_plan("--kubeconfig", str(kubeconfig), "--pod", str(pending))).returncode in (0, 1)
                and r
            ),
            timeout=30,
            interval=0.5,
            what="RBAC to apply",
        )
        assert result.stderr == "" and "message" in json.loads(result.stdout)
        cluster.kubectl("delete", "clusterrolebinding", "plan-lister")
        denied = wait_for(
            lambda: (
                (r := run_plan("--kubeconfig", str(kubeconfig), "--pod", str(pending))).returncode == 2 and r
            ),
            timeout=30,
            interval=0.5,
            what="RBAC to revoke",
        )
        assert denied.stderr.startswith("priority-webhook plan: error: listing nodes: 403 ")
        assert "forbidden" in denied.stderr and denied.stderr.count("\n") == 1
    finally:
        cluster.kubectl("delete", "clusterrolebinding", "plan-lister", check=False)
        cluster.kubectl("delete", "clusterrole", "plan-lister", check=False)
        cluster.kubectl("delete", "namespace", "plan-reader", "--wait=false", check=False)


def test_a_missing_kubeconfig_is_an_input_error(tmp_path: Path) -> None:
    pending = tmp_path / "p.yaml"
    pending.write_text(yaml.safe_dump(PENDING))
    result = run_plan("--kubeconfig", str(tmp_path / "nowhere"), "--pod", str(pending))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith(f"priority-webhook plan: error: kubeconfig {tmp_path}/nowhere: ")
    assert "found" in result.stderr and result.stderr.count("\n") == 1
