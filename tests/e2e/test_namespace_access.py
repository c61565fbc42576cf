"""The webhook under a role that may not list namespaces, on a real kube-apiserver: what a hand-made or older
ClusterRole gives, or an upgrade whose RBAC is applied after the Deployment.

The chart's RBAC is applied with the namespaces rule taken out of the webhook's ClusterRole, and the webhook
reads the cluster with its ServiceAccount's token. It must become ready on its PriorityClasses alone and
admit every pod whose class has no allowed-namespaces rule as usual; a class that gains a rule refuses its
pods with the cause (enforcement deny) or admits them with kubectl's `Warning:` that the rule was not
checked (audit). Once the grant is applied, the rule decides on the labels again, without a restart.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from testkit.cluster_webhook import (
    RegisteredWebhook,
    ensure_namespace,
    kubectl_create,
    kubectl_denial,
    metric,
    pod,
    priority_class,
    registered_webhook,
)
from testkit.envtest import ControlPlane
from testkit.wait import wait_for
from tests.e2e.chart_rbac import InstalledRbac, component_of, install_rbac, uninstall_rbac
from webhook.kube.namespace_store import GRANT

POD_WEBHOOK = "pods.priority-webhook.io"
SELECTOR = "tier=gold"
FREE, GOLD, AUDITED = "e2e-noaccess-free", "e2e-noaccess-gold", "e2e-noaccess-audited"
VALUES = {FREE: 3100, GOLD: 3200, AUDITED: 3300}
CAUSE = f"the webhook may not list namespaces (HTTP 403 Forbidden): {GRANT}"
# The cache retries a refused LIST after at most 30 s (a refusal keeps the full backoff).
GRANT_DEADLINE = 60.0


def gated(name: str, enforcement: str) -> dict[str, Any]:
    obj = priority_class(name, VALUES[name])
    obj["metadata"]["annotations"] = {
        "priority-webhook.io/allowed-namespaces": SELECTOR,
        "priority-webhook.io/enforcement": enforcement,
    }
    return obj


def webhook_role(installed: InstalledRbac) -> dict[str, Any]:
    (role,) = [o for o in installed.rendered.of_kind("ClusterRole") if component_of(o) == "webhook"]
    return role


def without_namespaces(role: dict[str, Any]) -> dict[str, Any]:
    narrowed = copy.deepcopy(role)
    narrowed["rules"] = [r for r in role["rules"] if "namespaces" not in r.get("resources", [])]
    assert len(narrowed["rules"]) == len(role["rules"]) - 1
    return narrowed


@pytest.fixture(scope="module")
def team(control_plane: ControlPlane) -> Iterator[str]:
    """A namespace whose labels every rule here would admit, were they known."""
    name = f"e2e-noaccess-{uuid.uuid4().hex[:6]}"
    ensure_namespace(control_plane, name)
    control_plane.kubectl("label", "namespace", name, f"{SELECTOR}", "--overwrite")
    yield name
    control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def rbac(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InstalledRbac]:
    installed = install_rbac(
        control_plane,
        tmp_path_factory.mktemp("noaccess-rbac"),
        {"sidecar": {"enabled": False}},
        release=f"na{uuid.uuid4().hex[:5]}",
        namespace=f"pw-noaccess-{uuid.uuid4().hex[:6]}",
    )
    control_plane.apply(without_namespaces(webhook_role(installed)))
    yield installed
    uninstall_rbac(installed)
    control_plane.kubectl("delete", "namespace", installed.namespace, "--wait=false", check=False)


@pytest.fixture(scope="module")
def hook(
    control_plane: ControlPlane, rbac: InstalledRbac, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RegisteredWebhook]:
    control_plane.apply(priority_class(FREE, VALUES[FREE]))
    try:
        with registered_webhook(
            control_plane,
            tmp_path_factory.mktemp("noaccess-hook"),
            workers=1,
            kubeconfig=rbac.kubeconfig("webhook"),
        ) as registered:
            yield registered
    finally:
        control_plane.kubectl(
            "delete", "priorityclass", FREE, GOLD, AUDITED, "--ignore-not-found", check=False
        )


def created(cluster: ControlPlane, obj: dict[str, Any]) -> dict[str, Any]:
    result = kubectl_create(cluster, obj)
    assert result.returncode == 0, result.stderr
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def test_a_role_without_namespaces_serves_every_class_without_a_rule(
    cluster: ControlPlane, hook: RegisteredWebhook, rbac: InstalledRbac, team: str
) -> None:
    can = cluster.kubectl("auth", "can-i", "list", "namespaces", "--as", rbac.user("webhook"), check=False)
    assert can.stdout.strip() == "no"
    ready = hook.server.session.get(hook.server.url + "/readyz", timeout=5)
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready", "namespaces": f"not synced: {CAUSE}"}
    assert (
        metric(hook.server, "priority_webhook_cache_failing", 'reason="forbidden",reflector="namespaces"')
        == 1
    )
    assert created(cluster, pod("free", team, FREE))["spec"]["priority"] == VALUES[FREE]
    assert created(cluster, pod("unnamed", team))["spec"]["priority"] == 0
    critical = created(cluster, pod("critical", team, "system-cluster-critical"))
    assert critical["spec"]["priority"] == 2000000000


def test_a_class_that_gains_a_rule_says_it_cannot_be_checked_then_is_checked_once_granted(
    cluster: ControlPlane, hook: RegisteredWebhook, rbac: InstalledRbac, team: str
) -> None:
    cluster.apply(gated(GOLD, "deny"), gated(AUDITED, "audit"))
    refusal = (
        f'pods "gold" is forbidden: PriorityClass {GOLD} may not be used in namespace {team}: '
        f'priority-webhook.io/allowed-namespaces: "{SELECTOR}" cannot be checked: {CAUSE}'
    )

    def refused() -> bool:
        return kubectl_create(cluster, pod("gold", team, GOLD)).stderr.strip() == kubectl_denial(
            POD_WEBHOOK, refusal
        )

    wait_for(refused, timeout=30, interval=0.2, what="the class's rule reaching the webhook")
    audited = kubectl_create(cluster, pod("audited", team, AUDITED))
    assert audited.returncode == 0, audited.stderr
    assert (
        f"Warning: audit: PriorityClass {AUDITED}: priority-webhook.io/allowed-namespaces: "
        f'"{SELECTOR}" was not checked for namespace {team}: {CAUSE}'
    ) in audited.stderr.splitlines()
    assert json.loads(audited.stdout)["spec"]["priority"] == VALUES[AUDITED]
    assert hook.server.session.get(hook.server.url + "/readyz", timeout=5).status_code == 200
    assert created(cluster, pod("free-again", team, FREE))["spec"]["priority"] == VALUES[FREE]

    cluster.apply(webhook_role(rbac))  # the grant, as the chart has it
    wait_for(
        lambda: kubectl_create(cluster, pod("gold", team, GOLD)).returncode == 0,
        timeout=GRANT_DEADLINE,
        interval=0.5,
        what="the rule evaluated on the labels once namespaces may be listed",
    )
    assert "Warning" not in kubectl_create(cluster, pod("audited", team, AUDITED)).stderr
    ready = hook.server.session.get(hook.server.url + "/readyz", timeout=5).json()
    assert ready == {"status": "ready", "namespaces": "synced"}
