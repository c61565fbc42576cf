"""The sidecar DaemonSet with real containers on a real kubelet, with the in-tree plugin on and off.

Values beyond the node's (tests/node/release.py), for this module alone: `sidecar.criticalPriority`
1000000, below the kubelet's own critical line (2e9), so that the kubelet *rejects* a pod of such a class
(`OutOfcpu`) rather than preempting for it itself, and the sidecar is what frees the room; and
`sidecar.recreateRejected`, so the rejected pod's ReplicaSet makes a replacement, which must then run.

- The victims are exactly those upstream's node-side order picks (the chart's `priority` order: the lowest
  priority first, the fewest pods), built so that one pod alone is right, and cross-checked with
  `priority-webhook victims` on the node as it was at the rejection.
- The chart's own pods (webhook replicas, the sidecar) are never the sidecar's victims, even when the only
  room left is theirs. The kubelet's own critical-pod preemption follows upstream's rule: a
  system-cluster-critical pod never takes them; a system-node-critical pod may take a webhook replica
  (lower priority), never the sidecar, and takes exactly what `victims` says.
- Each test starts from the release on this module's values, whatever the one before left.
- Node restriction with real pod-bound tokens: a pod running under the sidecar's ServiceAccount may delete
  a pod on its node and no other; a token bound to no pod may delete none.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.utils import parse_quantity

from testkit.cluster_webhook import priority_class
from testkit.command_line import sidecar_victims, victims_answer
from testkit.node import Node
from testkit.wait import wait_for
from tests.node.release import SIDECAR, Release, node_values, pod

CRITICAL = 1000000
CLASSES = {"node-sc-critical": CRITICAL, "node-sc-mid": 1000, "node-sc-low": 10}
SIDECAR_VALUES = {"criticalPriority": CRITICAL, "recreateRejected": True}
WAIT = 120.0


@pytest.fixture
def release(real_node: Node) -> Iterator[Release]:
    """The release on this module's values, from whatever state the test before left it in."""
    real_node.kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [priority_class(n, v) for n, v in CLASSES.items()],
            }
        ),
    )
    installed = Release(real_node)
    installed.ensure(node_values(real_node.project_image, sidecar=SIDECAR_VALUES))
    yield installed
    real_node.kubectl("delete", "priorityclass", *CLASSES, "--ignore-not-found")


@pytest.fixture
def ns(real_node: Node) -> Iterator[str]:
    name = real_node.control.new_namespace("sc")
    yield name
    # kubectl's own deadline above the one it is given (a pod bound to an absent node takes a while).
    real_node.kubectl("delete", "namespace", name, "--wait=true", "--timeout=120s", check=False, timeout=150)


def millicores(quantity: str) -> int:
    return int(parse_quantity(quantity) * 1000)


def pods_on_node(node: Node) -> list[dict[str, Any]]:
    return list(
        node.control.get_json("pods", "-A", "--field-selector", f"spec.nodeName={node.name}")["items"]
    )


def requested(p: dict[str, Any]) -> int:
    return sum(
        millicores(c.get("resources", {}).get("requests", {}).get("cpu", "0"))
        for c in p["spec"]["containers"]
    )


def free_cpu(node: Node) -> int:
    """Allocatable CPU less what the node's live pods request, in millicores."""
    allocatable = millicores(node.node_object()["status"]["allocatable"]["cpu"])
    live = [p for p in pods_on_node(node) if p["status"].get("phase") not in ("Succeeded", "Failed")]
    return allocatable - sum(requested(p) for p in live)


def chart_pods(release: Release) -> dict[str, str]:
    """name -> uid of the release's running pods (webhook replicas, sidecar)."""
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in release.workload_pods()}


def filler(node: Node, name: str, ns: str, cpu: int, klass: str) -> dict[str, Any]:
    """A Burstable pod of `cpu` millicores bound to the node (no scheduler: its preemption would act first)."""
    body = pod(name, ns, node.project_image, priorityClassName=klass, nodeName=node.name)
    body["metadata"]["labels"] = {"app": name}
    body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": f"{cpu}m"}}
    return body


def replica_set(node: Node, name: str, ns: str, cpu: int, klass: str) -> dict[str, Any]:
    template = filler(node, name, ns, cpu, klass)
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": template["spec"]},
        },
    }


def run_all(node: Node, ns: str, *bodies: dict[str, Any]) -> None:
    node.kubectl(
        "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(bodies)})
    )
    names = [b["metadata"]["name"] for b in bodies]

    def running() -> bool:
        phases = {
            p["metadata"]["name"]: p["status"].get("phase")
            for p in pods_on_node(node)
            if p["metadata"]["namespace"] == ns
        }
        return all(phases.get(n) == "Running" for n in names)

    wait_for(running, timeout=WAIT, interval=0.5, what=f"{names} to run")


def of_app(node: Node, ns: str, app: str) -> list[dict[str, Any]]:
    return list(node.control.get_json("pods", "-n", ns, "-l", f"app={app}")["items"])


def gone_or_terminating(node: Node, ns: str, name: str) -> bool:
    found = node.kubectl("get", "pod", name, "-n", ns, "-o", "json", check=False)
    return found.returncode != 0 or "deletionTimestamp" in json.loads(found.stdout)["metadata"]


def snapshot(node: Node, tmp_path: Path) -> tuple[Path, Path]:
    """The Node and its pods as they are now, as `kubectl get -o json` prints them: what the kubelet sees
    when the next pod arrives (taken before it does, so no eviction has begun)."""
    listed = {"apiVersion": "v1", "kind": "List", "items": pods_on_node(node)}
    (tmp_path / "node.json").write_text(json.dumps(node.node_object()))
    (tmp_path / "pods.json").write_text(json.dumps(listed))
    return tmp_path / "node.json", tmp_path / "pods.json"


def victims_cli(files: tuple[Path, Path], rejected: dict[str, Any], tmp_path: Path) -> list[str]:
    """`priority-webhook victims` on that snapshot for the rejected pod, in the chart's order."""
    (tmp_path / "pod.json").write_text(json.dumps({k: v for k, v in rejected.items() if k != "status"}))
    return sorted(sidecar_victims(files[0], files[1], tmp_path / "pod.json", CRITICAL))


def test_a_rejected_critical_pod_gets_exactly_upstreams_victims_and_its_replacement_runs(
    real_node: Node, release: Release, ns: str, tmp_path: Path
) -> None:
    chart_before = chart_pods(release)
    free = free_cpu(real_node)
    assert free >= 400, f"the node has {free}m of CPU free: too little for the scenario"
    big, small, mid = free * 40 // 100, free * 10 // 100, free * 30 // 100
    run_all(
        real_node,
        ns,
        filler(real_node, "low-big", ns, big, "node-sc-low"),
        filler(real_node, "low-small", ns, small, "node-sc-low"),
        filler(real_node, "mid", ns, mid, "node-sc-mid"),
    )
    left = free_cpu(real_node)
    # Needs more than is left, less than low-big frees and more than low-small does: low-big alone.
    need = left + (small + big) // 2
    before = snapshot(real_node, tmp_path)
    real_node.kubectl(
        "apply", "-f", "-", input=json.dumps(replica_set(real_node, "crit", ns, need, "node-sc-critical"))
    )

    def rejected() -> dict[str, Any] | None:
        return next(
            (p for p in of_app(real_node, ns, "crit") if p["status"].get("reason") == "OutOfcpu"), None
        )

    first = wait_for(rejected, timeout=WAIT, interval=0.2, what="the kubelet to reject the critical pod")
    assert first["status"]["phase"] == "Failed" and "Pod was rejected" in first["status"]["message"]
    expected = victims_cli(before, first, tmp_path)
    assert expected == ["low-big"], "upstream's order picks the one low pod that frees enough"

    wait_for(
        lambda: gone_or_terminating(real_node, ns, "low-big"),
        timeout=WAIT,
        interval=0.2,
        what="the sidecar to evict low-big",
    )
    wait_for(
        lambda: any(p["status"].get("phase") == "Running" for p in of_app(real_node, ns, "crit")),
        timeout=WAIT,
        interval=0.5,
        what="the replacement of the critical pod to run",
    )
    for name in ("low-small", "mid"):
        assert not gone_or_terminating(real_node, ns, name), f"{name} was not a victim"
    assert chart_pods(release) == chart_before, "the chart's own pods were not touched"


def test_the_chart_pods_are_never_the_sidecars_victims(real_node: Node, release: Release, ns: str) -> None:
    """The only room that would fit the critical pod is the chart's own pods': nothing is evicted."""
    chart_before = chart_pods(release)
    free = free_cpu(real_node)
    run_all(real_node, ns, filler(real_node, "low", ns, free // 2, "node-sc-low"))
    need = free_cpu(real_node) + free // 2 + 100  # every low pod and 100m of the chart's
    real_node.kubectl(
        "apply", "-f", "-", input=json.dumps(replica_set(real_node, "crit", ns, need, "node-sc-critical"))
    )
    wait_for(
        lambda: any(p["status"].get("reason") == "OutOfcpu" for p in of_app(real_node, ns, "crit")),
        timeout=WAIT,
        interval=0.2,
        what="the kubelet to reject the critical pod",
    )
    events = real_node.kubectl("get", "events", "-n", release.namespace, "-o", "json").stdout
    assert chart_pods(release) == chart_before
    assert '"reason": "Evicted"' not in events and "Preempting" not in events


def kubelet_decision(node: Node, ns: str, name: str) -> dict[str, Any]:
    """The pod once the kubelet has admitted (Running) or refused (Failed) it."""

    def decided() -> dict[str, Any] | None:
        found: dict[str, Any] = node.control.get_json("pod", name, "-n", ns)
        return found if found["status"].get("phase") in ("Failed", "Running") else None

    return wait_for(decided, timeout=WAIT, interval=0.2, what=f"the kubelet to decide on {name}")


def preempted_by_kubelet(release: Release, ns: str) -> set[str]:
    """Pods of the test's namespace and of the release that the kubelet preempted (its DisruptionTarget)."""
    pods = list(release.node.control.get_json("pods", "-n", ns)["items"]) + release.pods()
    return {
        p["metadata"]["name"]
        for p in pods
        if any(
            c["type"] == "DisruptionTarget" and c.get("reason") == "TerminationByKubelet"
            for c in p["status"].get("conditions", [])
        )
    }


def replicas_alike(release: Release, names: set[str]) -> list[str]:
    """Victims' names with the webhook's replicas alike (`<webhook replica>`): equal replicas are an exact
    tie, which the kubelet breaks at random (a Go map's order), so which one it takes is not a fact to check."""
    replica = re.compile(rf"^{re.escape(release.fullname)}-[0-9a-f]+-[0-9a-z]+$")
    return sorted("<webhook replica>" if replica.match(name) else name for name in names)


def test_the_kubelet_takes_chart_pods_only_as_upstream_allows(
    real_node: Node, release: Release, ns: str, tmp_path: Path
) -> None:
    """The kubelet's own critical-pod preemption, upstream's rule: a critical pod may take any pod that is not
    critical, and a pod of strictly lower priority. So a system-cluster-critical pod never takes the chart's
    pods (critical, of no lower priority): with only their room left it is refused and nothing is taken. A
    system-node-critical pod may take a webhook replica (system-cluster-critical, lower) but never the
    sidecar (system-node-critical): what it takes is exactly what `priority-webhook victims` (the kubelet's
    own order) says on the node as it was, and the Deployment replaces the replica once there is room."""
    try:
        chart_before = chart_pods(release)
        free = free_cpu(real_node)
        run_all(real_node, ns, filler(real_node, "low", ns, free // 2, "node-sc-low"))
        # Every pod's room that is not the chart's, and 50m of the chart's: more than any non-critical
        # victim can give, less than a replica (100m) does.
        need = free_cpu(real_node) + free // 2 + 50

        cluster = filler(real_node, "cluster-critical", ns, need, "system-cluster-critical")
        real_node.kubectl("create", "-f", "-", input=json.dumps(cluster))
        assert kubelet_decision(real_node, ns, "cluster-critical")["status"]["phase"] == "Failed"
        assert preempted_by_kubelet(release, ns) == set() and chart_pods(release) == chart_before
        real_node.kubectl("delete", "pod", "cluster-critical", "-n", ns, "--wait=true", timeout=90)

        before = snapshot(real_node, tmp_path)
        node_critical = filler(real_node, "node-critical", ns, need, "system-node-critical")
        (tmp_path / "pod.json").write_text(json.dumps(node_critical))
        answer = victims_answer(
            *("--node", str(before[0]), "--pods", str(before[1]), "--pod", str(tmp_path / "pod.json"))
        )
        expected = replicas_alike(release, {victim["name"] for victim in answer["victims"]})
        sidecars = {name for name in chart_before if name.startswith(SIDECAR)}
        assert answer["admit"] and expected and not set(expected) & sidecars, answer
        real_node.kubectl("create", "-f", "-", input=json.dumps(node_critical))
        assert kubelet_decision(real_node, ns, "node-critical")["status"]["phase"] == "Running"
        wait_for(
            lambda: replicas_alike(release, preempted_by_kubelet(release, ns)) == expected,
            timeout=WAIT,
            interval=0.2,
            what=f"the kubelet to preempt exactly {expected}",
        )
        assert {name: chart_before[name] for name in sidecars} == {
            name: uid for name, uid in chart_pods(release).items() if name in sidecars
        }, "the sidecar is never the kubelet's victim"
    finally:
        real_node.kubectl(
            "delete", "namespace", ns, "--wait=true", "--timeout=120s", check=False, timeout=150
        )
        # The replicas the kubelet preempted stay as finished pods: gone, so the next test starts clean.
        real_node.kubectl(
            "delete",
            "pods",
            "-n",
            release.namespace,
            "--field-selector=status.phase!=Running,status.phase!=Pending",
            check=False,
        )
    release.wait_ready()


def test_node_restriction_with_real_pod_bound_tokens(real_node: Node, release: Release, ns: str) -> None:
    """A pod of the sidecar's ServiceAccount, bound to this node, deletes (dry run) a pod on its node and is
    refused one on another node; a token bound to no pod is refused both."""
    here = pod("here", ns, real_node.project_image, nodeName=real_node.name)
    elsewhere = pod("elsewhere", ns, real_node.project_image, nodeName="node-absent")
    real_node.kubectl(
        "create",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [here, elsewhere]}),
    )
    probe = f"restriction-{uuid.uuid4().hex[:4]}"
    body = pod(
        probe,
        release.namespace,
        real_node.project_image,
        serviceAccountName=SIDECAR,
        automountServiceAccountToken=True,  # the projected token, bound to this pod and so to its node
        nodeName=real_node.name,
    )
    real_node.kubectl("create", "-f", "-", input=json.dumps(body))
    try:
        wait_for(
            lambda: (
                real_node.control.get_json("pod", probe, "-n", release.namespace)["status"].get("phase")
                == "Running"
            ),
            timeout=WAIT,
            interval=0.5,
            what="the probe pod to run",
        )
        script = (
            "import json, os, urllib.error, urllib.request, ssl\n"
            "d = '/var/run/secrets/kubernetes.io/serviceaccount/'\n"
            "token = open(d + 'token').read()\n"
            "ctx = ssl.create_default_context(cafile=d + 'ca.crt')\n"
            # No cluster DNS: the Service's address from the environment, as in-cluster clients use it.
            "api = 'https://%s:%s' % (os.environ['KUBERNETES_SERVICE_HOST'], os.environ['KUBERNETES_SERVICE_PORT'])\n"
            "out = {}\n"
            f"for name in ('here', 'elsewhere'):\n"
            f"    req = urllib.request.Request(api + '/api/v1/namespaces/{ns}/pods/' + name + '?dryRun=All', method='DELETE', headers={{'Authorization': 'Bearer ' + token}})\n"
            "    try:\n"
            "        out[name] = [urllib.request.urlopen(req, context=ctx, timeout=10).status, '']\n"
            "    except urllib.error.HTTPError as err:\n"
            "        out[name] = [err.code, json.loads(err.read())['message']]\n"
            "print(json.dumps(out))\n"
        )
        done = real_node.kubectl("exec", probe, "-n", release.namespace, "--", "python", "-c", script)
        answers = json.loads(done.stdout)
        assert answers["here"][0] == 200, answers
        assert answers["elsewhere"][0] == 403, answers
        assert (
            f"the sidecar of node {real_node.name} may not change pod {ns}/elsewhere, which is not on its node"
            in answers["elsewhere"][1]
        )
    finally:
        real_node.kubectl("delete", "pod", probe, "-n", release.namespace, "--wait=false", check=False)

    # A token of the same ServiceAccount bound to no pod names no node.
    kubeconfig = real_node.control.service_account_kubeconfig(
        tmp := real_node.workdir / f"{probe}.kubeconfig", release.namespace, SIDECAR
    )
    refused = real_node.kubectl(
        "delete", "pod", "here", "-n", ns, "--dry-run=server", kubeconfig=kubeconfig, check=False
    )
    assert refused.returncode != 0 and "the sidecar's token names no node" in refused.stderr, refused.stderr
    tmp.unlink(missing_ok=True)
