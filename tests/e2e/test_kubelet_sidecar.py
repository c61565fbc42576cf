"""The node sidecar in the loop it exists for, with a real kubelet (a hollow node) on 1.33.

The sidecar's `--critical-priority` (1000000) is below the kubelet's own notion of critical (2e9): a pod of
such a class bound to a full node is rejected by the kubelet (`OutOfcpu`, "Pod was rejected: ..."); the
sidecar evicts the victims the node-side module names (the real Eviction API, PDBs computed by the
controller manager), then with `--recreate-rejected` deletes the rejected pod so its ReplicaSet makes a new
one, which the kubelet admits. The sidecar runs with a token of the chart's own ServiceAccount and
ClusterRole. One control plane (with its controller manager) and one hollow node serve the module; each
test has its own namespace and leaves the node empty.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from testkit.cluster_webhook import priority_class
from testkit.command_line import sidecar_victims
from testkit.envtest import _die_with_parent
from testkit.server import REPO
from testkit.wait import wait_for
from tests.e2e.chart_rbac import InstalledRbac, install_rbac, uninstall_rbac
from tests.e2e.hollow import (
    KubeletEnv,
    clear_namespace,
    pod,
    pods,
    start_kubelet_env,
    status,
    track,
    wait_running,
    was_preempted,
)

NODE = "hollow-sc"
CRITICAL = 1000000
CLASSES = {"kse2e-critical": CRITICAL, "kse2e-mid": 1000, "kse2e-low": 10}
RBAC_NAMESPACE = "kse2e-system"
LOOP_DEADLINE = 60.0  # reject, evict, recreate, admit: the bound for the whole loop
STATIC = "static-guard"


@dataclass
class Env:
    kubelet: KubeletEnv
    rbac: InstalledRbac


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    workdir = tmp_path_factory.mktemp("kubelet-sidecar")
    with start_kubelet_env(workdir, "1.33", node_name=NODE, max_pods=20) as kubelet:
        kubelet.plane.apply(*[priority_class(name, value) for name, value in CLASSES.items()])
        rbac = install_rbac(
            kubelet.plane,
            workdir / "rbac",
            {"sidecar": {"enabled": True, "recreateRejected": True}},
            release="kse2e",
            namespace=RBAC_NAMESPACE,
        )
        try:
            yield Env(kubelet, rbac)
        finally:
            uninstall_rbac(rbac)


@dataclass
class Case:
    env: Env
    namespace: str
    tmp_path: Path

    @property
    def kubelet(self) -> KubeletEnv:
        return self.env.kubelet

    def pod(self, name: str, cpu: str, klass: str | None = None, **kw: Any) -> dict[str, Any]:
        spec = pod(name, self.namespace, NODE, cpu=cpu, **kw)
        if klass:
            spec["spec"]["priorityClassName"] = klass
        spec["spec"]["terminationGracePeriodSeconds"] = 1
        return spec

    def run(self, *manifests: dict[str, Any]) -> None:
        self.kubelet.plane.apply(*manifests)
        wait_running(self.kubelet, self.namespace, *[m["metadata"]["name"] for m in manifests])

    def replica_set(self, name: str, cpu: str, klass: str) -> dict[str, Any]:
        """A ReplicaSet of one pod bound to the node by its template (no scheduler needed)."""
        template = self.pod(name, cpu, klass, labels={"app": name})
        return {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": template["spec"]},
            },
        }

    def pods(self) -> dict[str, dict[str, Any]]:
        return pods(self.kubelet, self.namespace)

    def of_app(self, app: str) -> list[dict[str, Any]]:
        return [p for p in self.pods().values() if p["metadata"].get("labels", {}).get("app") == app]

    def rejected(self, app: str) -> dict[str, Any]:
        """Wait for the kubelet's rejection of the app's pod, and return that pod."""

        def find() -> dict[str, Any] | None:
            return next((p for p in self.of_app(app) if status(p).get("phase") == "Failed"), None)

        return wait_for(find, timeout=60, interval=0.2, what=f"the kubelet to reject {app}")

    def events(self, component: str | None = None) -> list[dict[str, Any]]:
        response = self.kubelet.plane.get(f"/api/v1/namespaces/{self.namespace}/events")
        items: list[dict[str, Any]] = response.json()["items"]
        return [e for e in items if component is None or e.get("source", {}).get("component") == component]

    def victims_cli(self, rejected: dict[str, Any]) -> list[str]:
        """`priority-webhook victims` on `kubectl get -o json` of the node and its pods, for the rejected pod
        as the kubelet saw it while admitting. The ReplicaSet's other pods (it replaces a rejected pod at
        once) are left out: they are the same demand, which the sidecar counts once."""
        plane = self.kubelet.plane
        app = rejected["metadata"]["labels"]["app"]
        listed = json.loads(
            plane.kubectl(
                "get", "pods", "-A", "--field-selector", f"spec.nodeName={NODE}", "-o", "json"
            ).stdout
        )
        listed["items"] = [p for p in listed["items"] if p["metadata"].get("labels", {}).get("app") != app]
        files = {
            "node.json": plane.kubectl("get", "node", NODE, "-o", "json").stdout,
            "pods.json": json.dumps(listed),
            "pod.json": json.dumps({k: v for k, v in rejected.items() if k != "status"}),
        }
        for name, text in files.items():
            (self.tmp_path / name).write_text(text)
        return sorted(
            sidecar_victims(
                self.tmp_path / "node.json", self.tmp_path / "pods.json", self.tmp_path / "pod.json", CRITICAL
            )
        )


@pytest.fixture
def case(env: Env, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Case]:
    track(request, env.kubelet)
    name = "ks-" + re.sub(r"[^a-z0-9]+", "-", request.node.name.removeprefix("test_").lower())[:50].strip("-")
    env.kubelet.plane.kubectl("create", "namespace", name)
    wait_for(
        lambda: (
            env.kubelet.plane.get(f"/api/v1/namespaces/{name}/serviceaccounts/default").status_code == 200
        ),
        timeout=30,
        interval=0.2,
        what="the namespace's default ServiceAccount",
    )
    yield Case(env, name, tmp_path)
    env.kubelet.plane.kubectl("delete", "replicasets,pdb", "--all", "-n", name, "--wait=false", check=False)
    clear_namespace(env.kubelet, name)


class Sidecar:
    """`priority-webhook sidecar` as a process, with the chart's sidecar ServiceAccount's token."""

    def __init__(self, case: Case) -> None:
        self.log_file = case.tmp_path / "sidecar.log"
        self.args = [
            sys.executable,
            "-m",
            "webhook",
            "sidecar",
            "--node",
            NODE,
            "--kubeconfig",
            str(case.env.rbac.kubeconfig("sidecar")),
            "--bind",
            "127.0.0.1:0",
            "--critical-priority",
            str(CRITICAL),
            "--recreate-rejected",
        ]
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Sidecar:
        with open(self.log_file, "ab") as out:
            self.process = subprocess.Popen(
                self.args,
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )
        wait_for(
            lambda: self.running() and "serving health and metrics on" in self.log(),
            timeout=60,
            interval=0.2,
            what="the sidecar to start",
        )
        return self

    def running(self) -> bool:
        assert self.process is not None and self.process.poll() is None, f"sidecar exited:\n{self.log()}"
        return True

    def log(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def __exit__(self, *exc: object) -> None:
        print(f"--- sidecar log ({self.log_file})\n{self.log()[-6000:]}")  # in a failing test's report
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            assert self.process.wait(30) == 0, self.log()


def identities(case: Case, names: list[str]) -> dict[str, tuple[str, str | None]]:
    """uid and deletion timestamp of each named pod: a pod touched by anyone shows here."""
    found = case.pods()
    return {n: (found[n]["metadata"]["uid"], found[n]["metadata"].get("deletionTimestamp")) for n in names}


def live(found: Any) -> list[dict[str, Any]]:
    """The pods not in a terminal phase (a rejected pod stays Failed until someone deletes it)."""
    return [p for p in found if status(p).get("phase") not in ("Failed", "Succeeded")]


def live_names(case: Case) -> set[str]:
    return {p["metadata"]["name"] for p in live(case.pods().values())}


def wait_admitted_replacement(case: Case, app: str, rejected_uid: str, timeout: float) -> dict[str, Any]:
    """The one pod of `app` now: a new one (not the rejected), Running on the node. The ReplicaSet makes a
    new pod each time the kubelet rejects one: those the sidecar deletes (--recreate-rejected) go too."""

    def admitted() -> dict[str, Any] | None:
        current = live(case.of_app(app))
        ok = len(current) == 1 and current[0]["metadata"]["uid"] != rejected_uid
        return current[0] if ok and status(current[0]).get("phase") == "Running" else None

    return wait_for(admitted, timeout=timeout, interval=0.2, what=f"a new {app} pod admitted by the kubelet")


def fill(case: Case) -> list[str]:
    """900m of the node's 1000m: two low pods (victim material) and one mid pod."""
    case.run(
        case.pod("low-a", "450m", "kse2e-low"),
        case.pod("low-b", "250m", "kse2e-low"),
        case.pod("mid", "200m", "kse2e-mid"),
    )
    return ["low-a", "low-b", "mid"]


def test_the_loop_reject_evict_recreate_admit_touches_no_other_pod(case: Case) -> None:
    bystanders = fill(case)
    static_dir = case.kubelet.node.static_pod_dir()
    (static_dir / f"{STATIC}.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": STATIC, "namespace": case.namespace},
                "spec": {
                    "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "50m"}}}]
                },
            }
        )
    )
    mirror = f"{STATIC}-{NODE}"
    try:
        wait_running(case.kubelet, case.namespace, mirror)
        case.kubelet.plane.apply(case.replica_set("critical", "400m", "kse2e-critical"))
        rejected = case.rejected("critical")
        st = status(rejected)
        assert (st["reason"], st["message"]) == (
            "OutOfcpu",
            "Pod was rejected: Node didn't have enough resource: cpu, requested: 400, used: 950, capacity: 1000",
        )
        expected = case.victims_cli(rejected)
        assert expected == ["low-a"]  # the lowest priority, closest fit; never the mirror pod
        before = identities(case, [n for n in bystanders if n not in expected] + [mirror])

        with Sidecar(case) as sidecar:
            replacement = wait_admitted_replacement(
                case, "critical", rejected["metadata"]["uid"], LOOP_DEADLINE
            )
            sidecar.running()
        assert live_names(case) == {*bystanders, mirror, replacement["metadata"]["name"]} - set(expected)
        assert identities(case, list(before)) == before
        ours = case.events("priority-webhook-sidecar")
        evicted = {
            e["involvedObject"]["name"]
            for e in ours
            if e["reason"] == "Preempting" and e["type"] == "Warning"
        }
        assert evicted == set(expected)
        assert not was_preempted(case.pods()[mirror])
    finally:
        (static_dir / f"{STATIC}.yaml").unlink(missing_ok=True)


def test_a_pod_of_a_system_class_is_preempted_for_by_the_kubelet_and_the_sidecar_evicts_nothing(
    case: Case,
) -> None:
    bystanders = fill(case)
    with Sidecar(case) as sidecar:
        critical = case.pod("node-critical", "400m", "system-node-critical")
        case.kubelet.plane.apply(critical)
        wait_running(case.kubelet, case.namespace, "node-critical")
        wait_for(
            lambda: any(was_preempted(p) for p in case.pods().values()),
            timeout=60,
            interval=0.2,
            what="the kubelet's own preemption",
        )
        sidecar.running()
    preempted = {n for n, p in case.pods().items() if was_preempted(p)}
    assert preempted and preempted <= set(bystanders)
    assert case.events("priority-webhook-sidecar") == []
    # The kubelet's preemption never deletes the objects; an eviction by the sidecar would have.
    assert not [n for n, p in case.pods().items() if p["metadata"].get("deletionTimestamp")]


def test_a_pdb_with_no_disruption_allowed_stops_the_loop_until_the_budget_allows(case: Case) -> None:
    case.kubelet.plane.apply(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guard", "namespace": case.namespace},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
        }
    )
    case.run(case.pod("guarded", "800m", "kse2e-low", labels={"app": "guarded"}))
    wait_for(
        lambda: (
            case.kubelet.plane.get_json("pdb", "guard", "-n", case.namespace)
            .get("status", {})
            .get("currentHealthy")
            == 1
        ),
        timeout=60,
        interval=0.5,
        what="the disruption controller to count the guarded pod healthy",
    )
    case.kubelet.plane.apply(case.replica_set("critical", "400m", "kse2e-critical"))
    rejected = case.rejected("critical")
    with Sidecar(case):
        wait_for(
            lambda: any(e["reason"] == "EvictionFailed" for e in case.events("priority-webhook-sidecar")),
            timeout=60,
            interval=0.2,
            what="the refused eviction",
        )
        assert not case.pods()["guarded"]["metadata"].get("deletionTimestamp")
        assert not any(status(p).get("phase") == "Running" for p in case.of_app("critical"))
        case.kubelet.plane.kubectl(
            "patch", "pdb", "guard", "-n", case.namespace, "--type=merge", "-p", '{"spec":{"minAvailable":0}}'
        )
        wait_admitted_replacement(case, "critical", rejected["metadata"]["uid"], 90)
    # The evicted pod's object goes once the kubelet has reported it terminated: that can lag the
    # replacement's admission (which only needs its resources freed), so wait for it rather than read once.
    wait_for(
        lambda: "guarded" not in case.pods(), timeout=60, interval=0.5, what="the evicted pod to be gone"
    )


def test_a_kubelet_restart_mid_preemption_leaves_nothing_duplicated_or_lost(case: Case) -> None:
    """The kubelet is down while the sidecar evicts: the victim stays Terminating until the kubelet is back,
    then the loop completes; every other pod is the same pod, once."""
    bystanders = fill(case)
    case.kubelet.plane.apply(case.replica_set("critical", "400m", "kse2e-critical"))
    rejected = case.rejected("critical")
    expected = case.victims_cli(rejected)
    before = identities(case, [n for n in bystanders if n not in expected])
    case.kubelet.node.stop()
    try:
        with Sidecar(case):
            wait_for(
                lambda: all(case.pods()[v]["metadata"].get("deletionTimestamp") for v in expected),
                timeout=60,
                interval=0.2,
                what="the victims evicted while the kubelet is down",
            )
            assert not any(status(p).get("phase") == "Running" for p in case.of_app("critical"))
            case.kubelet.node.start()
            replacement = wait_admitted_replacement(
                case, "critical", rejected["metadata"]["uid"], LOOP_DEADLINE
            )
    finally:
        if not case.kubelet.node.running():
            case.kubelet.node.start()
    assert live_names(case) == {*bystanders, replacement["metadata"]["name"]} - set(expected)
    assert identities(case, list(before)) == before
    for name in before:
        assert status(case.pods()[name])["phase"] == "Running"
