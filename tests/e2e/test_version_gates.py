"""What the chart renders only for newer Kubernetes, proven on the real API servers of both versions.

The chart gates three fields by the Kubernetes version it renders for (`kubeVersionOverride`, else the
cluster's): the mutating pod entries' `matchConditions` (1.28+), the PodDisruptionBudget's
`unhealthyPodEvictionPolicy` (1.27+) and the webhook container's preStop `sleep` (1.30+). Each test runs
on the current version (where the chart renders them: the API server must accept them AND act on them)
and on the oldest version we prove (where the chart leaves them out, and the older behaviour is asserted).

- matchConditions: the API server evaluates the CEL itself. With our webhook alone (the in-tree plugin
  off), a pod UPDATE the condition excludes never reaches our webhook (its own request counter does not
  move); one it includes does, and its answer is stored. In a default cluster the plugin restores the
  fields first, so on 1.28+ no pod UPDATE reaches our webhook; without the conditions (1.24) every one
  does.
- unhealthyPodEvictionPolicy `AlwaysAllow` (the chart's default): a webhook replica that runs but is not
  Ready can be evicted although the budget allows no disruption; with `IfHealthyBudget`, or on 1.24
  where the field is left out, the same eviction gets the real 429.
- the preStop `sleep`: the chart's Deployment, created for real, keeps it, and so do the pods its
  ReplicaSet creates (pod validation accepts the handler).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from testkit.cluster_webhook import (
    RegisteredWebhook,
    ensure_namespace,
    pod,
    priority_class,
    registered_webhook,
    wait_until_resolved,
)
from testkit.envtest import ControlPlane
from testkit.wait import wait_for
from tests.e2e.chart_rbac import render_chart

MATCH_CONDITIONS_SINCE = (1, 28)
UNHEALTHY_POLICY_SINCE = (1, 27)
PRESTOP_SLEEP_SINCE = (1, 30)
NS = "e2e-gates"
CLASS = "e2e-gates-high"


# -- matchConditions -------------------------------------------------------------------------------------
def _label(obj: dict[str, Any]) -> None:
    obj["metadata"].setdefault("labels", {})["edited"] = "yes"


def _drop_priority(obj: dict[str, Any]) -> None:
    del obj["spec"]["priority"]


def _drop_policy(obj: dict[str, Any]) -> None:
    del obj["spec"]["preemptionPolicy"]


def _drop_both(obj: dict[str, Any]) -> None:
    del obj["spec"]["priority"], obj["spec"]["preemptionPolicy"]


def _annotate(obj: dict[str, Any]) -> None:
    obj["metadata"].setdefault("annotations", {})["note"] = "x"


# (case, the change a PUT makes, whether the chart's CEL condition alone sends it).
UPDATES: list[tuple[str, Callable[[dict[str, Any]], None], bool]] = [
    ("label", _label, False),
    ("annotation", _annotate, False),
    ("drops-priority", _drop_priority, True),
    ("drops-preemptionPolicy", _drop_policy, True),
    ("drops-both", _drop_both, True),
]
UPDATE_IDS = [case[0] for case in UPDATES]


def _target(cluster: ControlPlane) -> None:
    ensure_namespace(cluster, NS)
    cluster.apply(priority_class(CLASS, 7000, policy="Never"))
    with cluster.session() as session:
        wait_until_resolved(cluster, session, NS, {CLASS: 7000})
    cluster.apply(pod("target", NS, CLASS))


def _untarget(cluster: ControlPlane) -> None:
    cluster.kubectl(
        "delete", "pod", "target", "-n", NS, "--grace-period=0", "--ignore-not-found", check=False
    )
    cluster.kubectl("delete", "priorityclass", CLASS, "--ignore-not-found", check=False)


@pytest.fixture
def hook(both_versions: ControlPlane, tmp_path: Path) -> Iterator[RegisteredWebhook]:
    """Our webhook (one worker) registered on this version's default cluster (the in-tree Priority plugin
    on) with the chart's configurations, rendered for its version; a class and a pod to update."""
    cluster = both_versions
    try:
        with registered_webhook(cluster, tmp_path, workers=1) as registered:
            _target(cluster)
            yield registered
    finally:
        _untarget(cluster)


@pytest.fixture
def alone(
    no_priority_cluster: ControlPlane, no_priority_webhook: RegisteredWebhook
) -> Iterator[RegisteredWebhook]:
    """The current version with the plugin off, our webhook alone (the shared registration)."""
    try:
        _target(no_priority_cluster)
        yield no_priority_webhook
    finally:
        _untarget(no_priority_cluster)


def _put(cluster: ControlPlane, hook: RegisteredWebhook, change: Callable[[dict[str, Any]], None]) -> int:
    """PUT the target pod changed by `change` (server-side dry run); the mutating reviews it caused. The
    stored priority fields are the pod's own whoever restored them, and UPDATEs are never validated."""
    current = cluster.get_json("pod", "target", "-n", NS)
    change(current)
    before = {endpoint: hook.requests(endpoint) for endpoint in ("mutate", "validate")}
    out = cluster.kubectl("replace", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(current))
    replaced = json.loads(out.stdout)
    assert (replaced["spec"]["priority"], replaced["spec"]["preemptionPolicy"]) == (7000, "Never")
    assert hook.requests("validate") == before["validate"]
    return int(hook.requests("mutate") - before["mutate"])


def test_in_a_default_cluster_the_api_server_keeps_the_match_conditions_and_no_update_reaches_us(
    both_versions: ControlPlane, hook: RegisteredWebhook
) -> None:
    """The plugin on, as in a default cluster. Where the chart renders matchConditions (1.28+) the API
    server stores them as rendered; the plugin restores a dropped `priority`/`preemptionPolicy` before any
    webhook, so the CEL sees nothing dropped and no pod UPDATE of the table reaches our webhook. On 1.24,
    rendered without them, every one does. A CREATE always does."""
    cluster = both_versions
    (rendered,) = [c for c in hook.configurations if c["kind"] == "MutatingWebhookConfiguration"]
    stored = cluster.get_json("mutatingwebhookconfiguration", rendered["metadata"]["name"])
    conditions = {h["name"]: h.get("matchConditions") for h in stored["webhooks"]}
    gated = cluster.minor >= MATCH_CONDITIONS_SINCE
    if gated:
        assert conditions == {h["name"]: h["matchConditions"] for h in rendered["webhooks"]}
        assert all(c and c[0]["name"] == "update-drops-priority-fields" for c in conditions.values())
    else:  # rendered for this version, the chart leaves them out
        assert conditions == dict.fromkeys(conditions)
        assert not any("matchConditions" in h for h in rendered["webhooks"])
    sent = {name: _put(cluster, hook, change) for name, change, _ in UPDATES}
    assert sent == dict.fromkeys(UPDATE_IDS, 0 if gated else 1)
    before = hook.requests("mutate")
    out = cluster.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(pod("fresh", NS, CLASS))
    )
    assert json.loads(out.stdout)["spec"]["priority"] == 7000
    assert hook.requests("mutate") == before + 1


@pytest.mark.parametrize(("change", "sent"), [(c[1], c[2]) for c in UPDATES], ids=UPDATE_IDS)
def test_the_api_server_sends_a_pod_update_only_when_the_match_condition_says_so(
    no_priority_cluster: ControlPlane,
    alone: RegisteredWebhook,
    change: Callable[[dict[str, Any]], None],
    sent: bool,
) -> None:
    """The plugin off, our webhook alone: the API server evaluates the chart's CEL. An UPDATE it excludes
    never reaches the webhook; one it includes (a dropped priority field) does, and our answer restores the
    field."""
    assert no_priority_cluster.minor >= MATCH_CONDITIONS_SINCE
    assert _put(no_priority_cluster, alone, change) == (1 if sent else 0)


# -- the webhook's Deployment and PodDisruptionBudget, created for real ---------------------------------
@pytest.fixture
def release(both_versions: ControlPlane) -> Iterator[tuple[str, str]]:
    """A release name and namespace for this test; everything it created is removed afterwards."""
    name, namespace = f"gates{uuid.uuid4().hex[:5]}", f"pw-gates-{uuid.uuid4().hex[:6]}"
    yield name, namespace
    cluster = both_versions
    cluster.kubectl(
        "delete",
        "clusterrole,clusterrolebinding",
        "-l",
        f"app.kubernetes.io/instance={name}",
        "--ignore-not-found",
        check=False,
    )
    cluster.kubectl("delete", "pods", "--all", "-n", namespace, "--grace-period=0", "--force", check=False)
    cluster.kubectl("delete", "namespace", namespace, "--wait=false", "--ignore-not-found", check=False)


def _install(cluster: ControlPlane, name: str, namespace: str, values: dict[str, Any]) -> None:
    """The release's own objects (no hooks: the webhook configurations would wait for a webhook that no
    kubelet runs here), rendered for this API server's version, applied for real."""
    rendered = render_chart(
        {"kubeVersionOverride": cluster.version, **values}, release=name, namespace=namespace
    )
    served = set(cluster.kubectl("api-versions").stdout.split())
    ensure_namespace(cluster, namespace)
    cluster.apply(*[o for o in rendered.installed() if o["apiVersion"] in served])


def _webhook_pods(cluster: ControlPlane, name: str, namespace: str) -> list[dict[str, Any]]:
    selector = f"app.kubernetes.io/instance={name},app.kubernetes.io/component=webhook"
    return list(cluster.get_json("pods", "-n", namespace, "-l", selector)["items"])


def _evict(cluster: ControlPlane, namespace: str, name: str) -> requests.Response:
    with cluster.session() as session:
        return session.post(
            f"{cluster.url}/api/v1/namespaces/{namespace}/pods/{name}/eviction",
            json={
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace},
            },
            timeout=30,
        )


def _run_unready(cluster: ControlPlane, namespace: str, name: str) -> None:
    """Report the pod Running and not Ready, as a kubelet would for a replica whose readiness probe fails
    (a Pending pod may always be evicted: it would not show the budget)."""
    with cluster.session() as session:
        patched = session.patch(
            f"{cluster.url}/api/v1/namespaces/{namespace}/pods/{name}/status",
            json={
                "status": {
                    "phase": "Running",
                    "startTime": "2026-01-01T00:00:00Z",
                    "conditions": [{"type": "Ready", "status": "False"}],
                }
            },
            headers={"Content-Type": "application/merge-patch+json"},
            timeout=30,
        )
    assert patched.status_code == 200, patched.text


def test_the_webhook_deployment_and_its_budget_as_the_api_server_keeps_and_enforces_them(
    both_versions: ControlPlane, release: tuple[str, str]
) -> None:
    """The chart's release objects created for real. The Deployment keeps the preStop `sleep` (1.30+), and so
    do the pods its ReplicaSet creates. Both replicas then run but are not Ready: the budget (minAvailable 1)
    allows no disruption. The chart's default `AlwaysAllow` (1.27+) lets the eviction of one through anyway
    (a broken replica never blocks a drain); switched to `IfHealthyBudget`, Kubernetes' default and what
    1.24 does (the chart leaves the field out there), the other gets the real 429."""
    cluster, (name, namespace) = both_versions, release
    _install(cluster, name, namespace, {})
    deployment = cluster.get_json("deployment", f"{name}-priority-webhook", "-n", namespace)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    wait_for(
        lambda: len(_webhook_pods(cluster, name, namespace)) == 2,
        timeout=60,
        interval=0.3,
        what="the ReplicaSet to create the webhook's two pods",
    )
    pods = _webhook_pods(cluster, name, namespace)
    lifecycles = [p["spec"]["containers"][0].get("lifecycle") for p in pods]
    if cluster.minor >= PRESTOP_SLEEP_SINCE:
        assert container["lifecycle"] == {"preStop": {"sleep": {"seconds": 5}}}
        assert lifecycles == [container["lifecycle"]] * 2
    else:
        assert "lifecycle" not in container and lifecycles == [None, None]

    pdb_name = f"{name}-priority-webhook"
    honoured = cluster.minor >= UNHEALTHY_POLICY_SINCE
    stored = cluster.get_json("pdb", pdb_name, "-n", namespace)["spec"]
    assert stored.get("unhealthyPodEvictionPolicy") == ("AlwaysAllow" if honoured else None)
    replicas = [p["metadata"]["name"] for p in pods]
    for replica in replicas:
        _run_unready(cluster, namespace, replica)

    def budget_computed(generation: int) -> bool:
        status = cluster.get_json("pdb", pdb_name, "-n", namespace).get("status", {})
        return (
            status.get("currentHealthy") == 0
            and status.get("desiredHealthy") == 1
            and status.get("disruptionsAllowed") == 0
            and status.get("observedGeneration") == generation
        )

    wait_for(lambda: budget_computed(1), timeout=60, interval=0.3, what="the disruption controller")
    answer = _evict(cluster, namespace, replicas[0])
    if honoured:
        assert answer.status_code == 201, answer.text
        # The budget alone re-applied (a new render would also make a new certificate, and a rollout).
        budget = render_chart(
            {
                "kubeVersionOverride": cluster.version,
                "webhook": {"podDisruptionBudget": {"unhealthyPodEvictionPolicy": "IfHealthyBudget"}},
            },
            release=name,
            namespace=namespace,
        ).one("PodDisruptionBudget")
        cluster.apply(budget)
        assert (
            cluster.get_json("pdb", pdb_name, "-n", namespace)["spec"]["unhealthyPodEvictionPolicy"]
            == "IfHealthyBudget"
        )
        wait_for(lambda: budget_computed(2), timeout=60, interval=0.3, what="the disruption controller")
        answer = _evict(cluster, namespace, replicas[1])
    assert answer.status_code == 429, answer.text
    assert "Cannot evict pod as it would violate the pod's disruption budget" in answer.text
