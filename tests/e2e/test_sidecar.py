"""The node sidecar on a real control plane: `priority-webhook sidecar --node N` as a process, with the
token of a ServiceAccount bound to the chart's own rendered ClusterRole (so the real authorizer decides),
the real Eviction API with PodDisruptionBudgets computed by the controller manager's disruption
controller, and Events read back with kubectl.

No kubelet runs: the test plays it (tests/e2e/kubelet.py): Node status with heartbeats, pods bound by
`spec.nodeName` and reported Running, the rejection written exactly as the kubelet's status manager
writes it (phase Failed, reason OutOfcpu, "Pod was rejected: Node didn't have enough resource: ..."), and
the end of a deleted pod's termination (delete with grace period 0) when the test decides it happened.

One cluster (the session's, with its controller manager) serves the module; each test has its own
namespace and node.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from testkit.cluster_webhook import priority_class
from testkit.command_line import sidecar_victims
from testkit.envtest import ControlPlane, _die_with_parent
from testkit.server import REPO
from testkit.wait import wait_for
from tests.e2e.chart_rbac import InstalledRbac, install_rbac, uninstall_rbac
from tests.e2e.kubelet import FakeKubelet, pod
from webhook.sidecar import record as rec

CRITICAL = 1000000  # the sidecar's --critical-priority: user classes stop at 1e9, below the kubelet's 2e9
CLASSES = {"sce2e-critical": CRITICAL, "sce2e-higher": CRITICAL + 1000, "sce2e-mid": 1000, "sce2e-low": 10}
RBAC_NAMESPACE = "sce2e-system"
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {"sidecar": {"enabled": True}},
    "dry-run": {"sidecar": {"enabled": True, "dryRun": True}},
    "recreate": {"sidecar": {"enabled": True, "recreateRejected": True}},
}
WAIT = 30.0


@dataclass
class Env:
    cluster: ControlPlane
    kubelet: FakeKubelet
    rbac: dict[str, InstalledRbac]


def wait_for_pdb_status(node: Node) -> None:
    """The disruption controller has counted the guarded pod in the PDB `guard` (else no 429 can come)."""
    wait_for(
        lambda: (
            node.cluster.get_json("pdb", "guard", "-n", node.namespace).get("status", {}).get("expectedPods")
            == 1
        ),
        timeout=WAIT,
        interval=0.2,
        what="the disruption controller",
    )


@pytest.fixture(scope="module")
def env(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    cluster = control_plane
    cluster.apply(*[priority_class(name, value) for name, value in CLASSES.items()])
    workdir = tmp_path_factory.mktemp("sidecar-rbac")
    rbac = {
        name: install_rbac(cluster, workdir / name, values, release=f"sce2e-{name}", namespace=RBAC_NAMESPACE)
        for name, values in VARIANTS.items()
    }
    kubelet = FakeKubelet(cluster)
    try:
        yield Env(cluster, kubelet, rbac)
    finally:
        kubelet.close()
        for installed in rbac.values():
            uninstall_rbac(installed)
        cluster.kubectl("delete", "namespace", RBAC_NAMESPACE, "--wait=false", check=False)
        cluster.kubectl("delete", "priorityclass", *CLASSES, "--ignore-not-found", check=False)


@dataclass
class Node:
    """One test's node and namespace (both named after the test)."""

    env: Env
    name: str
    namespace: str
    tmp_path: Path

    @property
    def cluster(self) -> ControlPlane:
        return self.env.cluster

    @property
    def kubelet(self) -> FakeKubelet:
        return self.env.kubelet

    def pod(self, name: str, **kwargs: Any) -> dict[str, Any]:
        return pod(name, self.namespace, self.name, **kwargs)

    def run(self, name: str, **kwargs: Any) -> dict[str, Any]:
        return self.kubelet.run(self.pod(name, **kwargs))

    def reject(
        self, name: str, cpu: str, *, requested: int, used: int, capacity: int, **kwargs: Any
    ) -> dict[str, Any]:
        kwargs.setdefault("priority_class", "sce2e-critical")
        return self.kubelet.reject(
            self.pod(name, cpu=cpu, **kwargs), "cpu", requested=requested, used=used, capacity=capacity
        )

    def pods(self) -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: p for p in self.kubelet.pods(self.namespace)}

    def deleting(self) -> set[str]:
        return {name for name, p in self.pods().items() if p["metadata"].get("deletionTimestamp")}

    def record(self, name: str) -> rec.Record | None:
        found = self.pods().get(name)
        return rec.read(found) if found else None

    def events(self, reason: str | None = None, on: str | None = None) -> list[dict[str, Any]]:
        """`kubectl get events` in the namespace, the sidecar's only."""
        items = self.cluster.get_json("events", "-n", self.namespace)["items"]
        return [
            e
            for e in items
            if e.get("source", {}).get("component") == "priority-webhook-sidecar"
            and (reason is None or e["reason"] == reason)
            and (on is None or e["involvedObject"]["name"] == on)
        ]

    def wait_record(self, name: str, state: str) -> rec.Record:
        def check() -> rec.Record | None:
            found = self.record(name)
            return found if found is not None and found.state == state else None

        return wait_for(check, timeout=WAIT, interval=0.2, what=f"record {state} on {name}")

    def wait_events(self, reason: str, count: int = 1, on: str | None = None) -> list[dict[str, Any]]:
        return wait_for(
            lambda: (found := self.events(reason, on)) and len(found) >= count and found,
            timeout=WAIT,
            interval=0.2,
            what=f"{count} {reason} event(s) on {on or 'any pod'}",
        )


@pytest.fixture
def node(env: Env, cluster: ControlPlane, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Node]:
    """`cluster` (the session's) attaches the control plane's logs to a failing test's report."""
    short = re.sub(r"[^a-z0-9]+", "-", request.node.name.removeprefix("test_").lower())[:40].strip("-")
    name = f"sce2e-{short}"
    env.cluster.kubectl("create", "namespace", name)
    env.kubelet.register_node(name, cpu="4", memory="8Gi")
    yield Node(env, name, name, tmp_path)
    env.kubelet.drop_finalizers(name)
    env.cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
    env.kubelet.nodes.pop(name, None)
    env.cluster.kubectl("delete", "node", name, "--wait=false", check=False)


class Sidecar:
    """`priority-webhook sidecar` as a process, with the chart's ServiceAccount's credentials."""

    def __init__(self, node: Node, variant: str, *args: str, log_name: str = "sidecar") -> None:
        self.kubeconfig = node.env.rbac[variant].kubeconfig("sidecar")
        self.log_file = node.tmp_path / f"{log_name}.log"
        self.args = [
            sys.executable,
            "-m",
            "webhook",
            "sidecar",
            "--node",
            node.name,
            "--kubeconfig",
            str(self.kubeconfig),
            "--bind",
            "127.0.0.1:0",
            "--critical-priority",
            str(CRITICAL),
            *args,
        ]
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Sidecar:
        with open(self.log_file, "ab") as out:
            self.process = subprocess.Popen(
                self.args,
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )
        port = int(
            wait_for(
                lambda: (
                    self._running() and re.search(r"serving health and metrics on [^ ]+:(\d+)", self.log())
                ),
                timeout=WAIT,
                interval=0.1,
                what="the sidecar to start",
            ).group(1)
        )
        wait_for(
            lambda: (
                self._running()
                and requests.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
            ),
            timeout=WAIT,
            interval=0.1,
            what="the sidecar's watches to sync",
        )
        return self

    def _running(self) -> bool:
        assert self.process is not None and self.process.poll() is None, f"sidecar exited:\n{self.log()}"
        return True

    def log(self) -> str:
        return self.log_file.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no chance to finish anything (a node reboot, an OOM kill)."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            assert self.process.wait(30) == 0, self.log()


@contextmanager
def sidecar(node: Node, variant: str = "default", *args: str, log_name: str = "sidecar") -> Iterator[Sidecar]:
    process = Sidecar(node, variant, *args, log_name=log_name).start()
    try:
        yield process
    finally:
        process.stop()


def victims_cli(node: Node, rejected: str) -> list[str]:
    """`priority-webhook victims` on the same node and pods (the rejected pod as it was being admitted)."""
    pods = node.pods()
    target = pods.pop(rejected)
    target["status"] = {"qosClass": target["status"].get("qosClass")}
    files = {
        "node.json": node.kubelet.node(node.name),
        "pods.json": {"apiVersion": "v1", "kind": "List", "items": list(pods.values())},
        "pod.json": target,
    }
    for name, obj in files.items():
        (node.tmp_path / name).write_text(json.dumps(obj))
    return sidecar_victims(
        node.tmp_path / "node.json", node.tmp_path / "pods.json", node.tmp_path / "pod.json", CRITICAL
    )


def test_evicts_exactly_the_victims_the_module_chose_and_says_so(node: Node) -> None:
    # 4 CPUs: 3.5 used by five pods of three priorities; the rejected pod needs 1.5, so 1 CPU must go.
    node.run("mid-a", cpu="1", priority_class="sce2e-mid")
    node.run("low-a", cpu="500m", priority_class="sce2e-low")
    node.run("low-b", cpu="500m", priority_class="sce2e-low", limits=True, memory="100Mi")  # Guaranteed
    node.run("low-c", cpu="1", priority_class="sce2e-low")
    node.run("none", cpu="500m")  # no class: priority 0, the first to go
    node.reject("critical", "1500m", requested=1500, used=3500, capacity=4000)
    expected = victims_cli(node, "critical")
    assert expected and "mid-a" not in expected

    with sidecar(node):
        record = node.wait_record("critical", rec.PREEMPTING)
        assert [v.name for v in record.victims] == expected
        wait_for(lambda: node.deleting() == set(expected), timeout=WAIT, interval=0.2, what="the evictions")
        # Events, as `kubectl get events` shows them: one Preempting on each victim (the kubelet's), one
        # Normal Preempting on the rejected pod naming them.
        for victim in expected:
            [event] = node.wait_events("Preempting", on=victim)
            assert (event["type"], event["message"]) == (
                "Warning",
                "Preempted in order to admit critical pod",
            )
            assert event["source"]["host"] == node.name
        [announce] = node.wait_events("Preempting", on="critical")
        assert announce["type"] == "Normal"
        assert announce["message"].endswith(", ".join(f"{node.namespace}/{v}" for v in expected))
        kubectl_events = node.cluster.kubectl("get", "events", "-n", node.namespace).stdout
        assert "Preempted in order to admit critical pod" in kubectl_events

        node.kubelet.finish_terminating(node.namespace)  # the victims' containers stop
        done = node.wait_record("critical", rec.DONE)
        assert done.victims == record.victims
    annotation = node.pods()["critical"]["metadata"]["annotations"][rec.ANNOTATION]
    assert json.loads(annotation)["state"] == "done"
    described = node.cluster.kubectl("describe", "pod", "critical", "-n", node.namespace).stdout
    assert rec.ANNOTATION in described
    assert set(node.pods()) == {"critical", "mid-a", "low-a", "low-b", "low-c", "none"} - set(expected)


def test_a_victim_protected_by_a_pdb_gets_the_real_429_and_is_evicted_once_the_budget_allows(
    node: Node,
) -> None:
    node.cluster.apply(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guard", "namespace": node.namespace},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
        }
    )
    node.run("guarded", cpu="3", priority_class="sce2e-low", labels={"app": "guarded"})
    wait_for_pdb_status(node)
    node.reject("critical", "2", requested=2000, used=3000, capacity=4000)

    with sidecar(node) as process:
        [failed] = node.wait_events("EvictionFailed", on="critical")
        assert failed["type"] == "Warning"
        assert "refused by its PodDisruptionBudget" in failed["message"]
        assert "Cannot evict pod as it would violate the pod's disruption budget" in failed["message"]
        assert node.deleting() == set()
        wait_for(
            lambda: process.log().count("refused by its PodDisruptionBudget") >= 2,
            timeout=WAIT,
            interval=0.2,
            what="a retry",
        )
        node.cluster.kubectl(
            "patch", "pdb", "guard", "-n", node.namespace, "--type=merge", "-p", '{"spec":{"minAvailable":0}}'
        )
        wait_for(
            lambda: node.deleting() == {"guarded"},
            timeout=90,
            interval=0.2,
            what="the eviction once the budget allows it",
        )
        assert len(node.events("EvictionFailed")) == 1  # reported once, however many retries
        assert len(node.events("Preempting", on="guarded")) == 1


def test_dry_run_evicts_nothing(node: Node) -> None:
    node.run("low", cpu="3", priority_class="sce2e-low")
    node.reject("critical", "2", requested=2000, used=3000, capacity=4000)
    with sidecar(node, "dry-run", "--dry-run"):
        [event] = node.wait_events("PreemptionDryRun", on="critical")
        assert event["message"] == f"Dry run: would preempt 1 pod(s) (cpu): {node.namespace}/low"
    assert node.deleting() == set()
    assert node.record("critical") is None  # no record: the dry-run chart does not even grant patch


def test_a_sidecar_killed_and_restarted_mid_preemption_never_evicts_a_second_set(node: Node) -> None:
    """Two victims: one evicted (its containers still stopping), one refused by its PDB. The sidecar is
    killed with SIGKILL, a new one starts: it reads the record, evicts the refused victim once the budget
    allows, and no other pod; Events stay one per victim (deduplicated through the API, not memory)."""
    node.cluster.apply(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guard", "namespace": node.namespace},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
        }
    )
    node.run("free", cpu="1500m", priority_class="sce2e-low")
    node.run("guarded", cpu="1500m", priority_class="sce2e-low", labels={"app": "guarded"})
    node.run("spare-a", cpu="500m", priority_class="sce2e-mid")
    node.run("spare-b", cpu="500m", priority_class="sce2e-mid")
    wait_for_pdb_status(node)
    node.reject("critical", "3", requested=3000, used=4000, capacity=4000)

    first = Sidecar(node, "default", log_name="first").start()
    try:
        record = node.wait_record("critical", rec.PREEMPTING)
        assert {v.name for v in record.victims} == {"free", "guarded"}
        wait_for(lambda: node.deleting() == {"free"}, timeout=WAIT, interval=0.2, what="the first eviction")
        node.wait_events("EvictionFailed", on="critical")
    finally:
        first.kill()

    with sidecar(node, log_name="second") as second:
        wait_for(
            lambda: "refused by its PodDisruptionBudget" in second.log(),
            timeout=WAIT,
            interval=0.2,
            what="the restarted sidecar to retry the refused eviction",
        )
        assert node.deleting() == {"free"}
        node.cluster.kubectl(
            "patch", "pdb", "guard", "-n", node.namespace, "--type=merge", "-p", '{"spec":{"minAvailable":0}}'
        )
        wait_for(
            lambda: node.deleting() == {"free", "guarded"},
            timeout=90,
            interval=0.2,
            what="the refused victim's eviction",
        )
        node.kubelet.finish_terminating(node.namespace)
        node.wait_record("critical", rec.DONE)
        critical = node.record("critical")
        assert critical is not None and critical.victims == record.victims
    assert set(node.pods()) == {"critical", "spare-a", "spare-b"}
    for victim in ("free", "guarded"):
        assert len(node.events("Preempting", on=victim)) == 1, node.events("Preempting", on=victim)
    assert len(node.events("Preempting", on="critical")) == 1
    assert len(node.events("EvictionFailed", on="critical")) == 1, node.events("EvictionFailed")


def test_terminating_terminal_mirror_and_higher_priority_pods_are_never_victims(node: Node) -> None:
    # 4 CPUs: a pod stuck Terminating (1), a mirror pod (1), a higher-priority pod (1) and one ordinary low
    # pod (1); a Succeeded pod (1) holds nothing. The rejected pod needs 2: only evicting a protected pod
    # as well as the low one would make room, so the sidecar must refuse and evict nothing.
    node.run("stuck", cpu="1", priority_class="sce2e-low", finalizers=["example.com/hold"])
    node.cluster.kubectl("delete", "pod", "stuck", "-n", node.namespace, "--wait=false")
    node.run(
        "static",
        cpu="1",
        annotations={"kubernetes.io/config.mirror": "abc", "kubernetes.io/config.source": "file"},
    )
    node.run("higher", cpu="1", priority_class="sce2e-higher")
    node.run("finished", cpu="1", priority_class="sce2e-low")
    node.kubelet.succeed(node.namespace, "finished")
    node.run("low", cpu="1", priority_class="sce2e-low")
    node.reject("critical", "2", requested=2000, used=4000, capacity=4000)

    with sidecar(node):
        [failed] = node.wait_events("PreemptionFailed", on="critical")
        assert "Cannot make room for this pod" in failed["message"]
        assert node.deleting() == {"stuck"}
        assert node.record("critical") is None
        # The stuck pod's containers stop at last: now evicting `low` is enough, and only `low` goes.
        node.kubelet.drop_finalizers(node.namespace)
        node.kubelet.finish_terminating(node.namespace)
        record = node.wait_record("critical", rec.PREEMPTING)
        assert [v.name for v in record.victims] == ["low"]
        wait_for(lambda: node.deleting() == {"low"}, timeout=WAIT, interval=0.2, what="the eviction of low")
    assert {"static", "higher", "finished"} <= set(node.pods())


def test_two_rejected_pods_never_share_a_victim(node: Node) -> None:
    node.run("low-a", cpu="2", priority_class="sce2e-low")
    node.run("low-b", cpu="2", priority_class="sce2e-low")
    node.reject("critical-a", "1", requested=1000, used=4000, capacity=4000)
    node.reject("critical-b", "1", requested=1000, used=4000, capacity=4000)
    with sidecar(node):
        a = node.wait_record("critical-a", rec.PREEMPTING)
        b = node.wait_record("critical-b", rec.PREEMPTING)
        assert len(a.victims) == len(b.victims) == 1
        assert {v.name for v in a.victims} | {v.name for v in b.victims} == {"low-a", "low-b"}
        wait_for(lambda: node.deleting() == {"low-a", "low-b"}, timeout=WAIT, interval=0.2, what="evictions")


def test_a_rejected_pod_that_fits_is_done_and_recreated_while_another_pod_is_stuck_terminating(
    node: Node,
) -> None:
    """Defect: the wait for terminating pods ran before the "fits already" check, so one pod held by a
    finalizer kept a rejected pod that fits from ever being marked done (or recreated)."""
    node.cluster.kubectl("create", "configmap", "owner", "-n", node.namespace)
    owner = node.cluster.get_json("configmap", "owner", "-n", node.namespace)
    node.run("stuck", cpu="1", priority_class="sce2e-low", finalizers=["example.com/hold"])
    node.cluster.kubectl("delete", "pod", "stuck", "-n", node.namespace, "--wait=false")
    node.reject(
        "critical",
        "1",
        requested=1000,
        used=3000,
        capacity=4000,
        owner={
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "owner",
            "uid": owner["metadata"]["uid"],
            "controller": True,
        },
    )
    with sidecar(node, "recreate", "--recreate-rejected"):
        wait_for(
            lambda: "critical" not in node.pods(),
            timeout=WAIT,
            interval=0.2,
            what="the rejected pod, which fits, to be deleted for its controller to recreate",
        )
        [event] = node.wait_events("Recreating")
        assert event["involvedObject"]["name"] == "critical"
    assert node.deleting() == {"stuck"}
