"""Scheduling and wiring that managed clusters need: OS selector, host network, extra args, affinity, PDB
policy, annotations on the webhook configurations, the GKE quota, and the fields gated by version."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import helm_python as helm
import pytest

from testkit.chart_rendering import FULLNAME, NAMESPACE, Rendered, render
from tests.chart.scenarios import SCENARIOS
from tests.chart.selectors import matches

Render = Callable[[dict[str, Any]], Rendered]
SIDECAR = f"{FULLNAME}-sidecar"
PORTABLE = SCENARIOS["portable"]
CONFIG_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def pod_spec(r: Rendered, kind: str, name: str) -> dict[str, Any]:
    return r.one(kind, name)["spec"]["template"]["spec"]


@pytest.mark.parametrize("kind, name", [("Deployment", FULLNAME), ("DaemonSet", SIDECAR)])
def test_linux_only_by_default(kind: str, name: str, rendered: Render) -> None:
    assert pod_spec(rendered({}), kind, name)["nodeSelector"] == {"kubernetes.io/os": "linux"}


def test_node_selectors_merge_with_the_os_one(rendered: Render) -> None:
    r = rendered(PORTABLE)
    assert pod_spec(r, "Deployment", FULLNAME)["nodeSelector"] == {
        "kubernetes.io/os": "linux",
        "pool": "system",
    }
    assert pod_spec(r, "DaemonSet", SIDECAR)["nodeSelector"] == {}, "an empty value drops the default key"
    windows = rendered({"webhook": {"nodeSelector": {"kubernetes.io/os": "windows"}}})
    assert pod_spec(windows, "Deployment", FULLNAME)["nodeSelector"] == {"kubernetes.io/os": "windows"}


def test_host_network_serves_on_the_node_with_cluster_dns(rendered: Render) -> None:
    r = rendered(PORTABLE)
    spec = pod_spec(r, "Deployment", FULLNAME)
    assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    (c,) = spec["containers"]
    assert "--bind=0.0.0.0:9443" in c["args"]
    assert c["ports"] == [{"name": "https", "containerPort": 9443, "protocol": "TCP"}]
    # the Service still fronts it on 443 by port name: the webhook configurations need no change
    assert r.one("Service", FULLNAME)["spec"]["ports"][0]["targetPort"] == "https"
    default = pod_spec(rendered({}), "Deployment", FULLNAME)
    assert "hostNetwork" not in default and "dnsPolicy" not in default
    assert "hostNetwork" not in pod_spec(r, "DaemonSet", SIDECAR), (
        "the sidecar is never called by the API server"
    )


def test_extra_args_and_env_come_after_the_charts_own(rendered: Render) -> None:
    r = rendered(PORTABLE)
    webhook = pod_spec(r, "Deployment", FULLNAME)["containers"][0]
    sidecar = pod_spec(r, "DaemonSet", SIDECAR)["containers"][0]
    assert webhook["args"][0] == "serve" and webhook["args"][-1] == "--access-log"
    assert sidecar["args"][0] == "sidecar" and sidecar["args"][-1] == "--max-evictions-per-minute=3"
    assert webhook["env"][-1] == {"name": "HTTPS_PROXY", "value": ""}
    assert sidecar["env"][-1]["valueFrom"] == {"fieldRef": {"fieldPath": "status.hostIP"}}
    assert {"name": "TMPDIR", "value": "/tmp"} in webhook["env"] and {
        "name": "TMPDIR",
        "value": "/tmp",
    } in sidecar["env"]


def test_affinity_is_free_form_and_keeps_the_spread(rendered: Render) -> None:
    r = rendered(PORTABLE)
    affinity = pod_spec(r, "Deployment", FULLNAME)["affinity"]
    assert affinity["nodeAffinity"] == PORTABLE["webhook"]["affinity"]["nodeAffinity"]
    (term,) = affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    labels = r.one("Deployment", FULLNAME)["spec"]["template"]["metadata"]["labels"]
    assert matches(term["podAffinityTerm"]["labelSelector"], labels)
    assert pod_spec(r, "DaemonSet", SIDECAR)["affinity"] == {"podAntiAffinity": {}}
    own = rendered({"webhook": {"affinity": {"podAntiAffinity": {"x": 1}}}})
    assert pod_spec(own, "Deployment", FULLNAME)["affinity"] == {"podAntiAffinity": {"x": 1}}, (
        "given one replaces ours"
    )
    assert "affinity" not in pod_spec(rendered({}), "DaemonSet", SIDECAR)


@pytest.mark.parametrize(
    "values, expected",
    [
        ({}, "AlwaysAllow"),
        (PORTABLE, "IfHealthyBudget"),
        ({"webhook": {"podDisruptionBudget": {"minAvailable": 1, "unhealthyPodEvictionPolicy": ""}}}, None),
    ],
)
def test_pdb_unhealthy_pod_eviction_policy(
    values: dict[str, Any], expected: str | None, rendered: Render
) -> None:
    spec = rendered(values).one("PodDisruptionBudget", FULLNAME)["spec"]
    assert spec.get("unhealthyPodEvictionPolicy") == expected


@pytest.mark.parametrize("kind", CONFIG_KINDS)
def test_annotations_reach_both_webhook_configurations(kind: str, rendered: Render) -> None:
    annotations = rendered(PORTABLE).one(kind, FULLNAME)["metadata"]["annotations"]
    assert annotations["admissions.enforcer/disabled"] == "true"
    cert_manager = {**SCENARIOS["cert-manager"], "admission": {"annotations": {"team": "platform"}}}
    annotations = rendered(cert_manager).one(kind, FULLNAME)["metadata"]["annotations"]
    assert annotations["team"] == "platform" and "cert-manager.io/inject-ca-from" in annotations


def test_system_priority_quota_covers_the_charts_classes(rendered: Render) -> None:
    r = rendered(PORTABLE)
    (quota,) = r.of_kind("ResourceQuota")
    assert quota["metadata"]["namespace"] == NAMESPACE and quota["spec"]["hard"] == {"pods": "500"}
    (expr,) = quota["spec"]["scopeSelector"]["matchExpressions"]
    classes = {
        pod_spec(r, "Deployment", FULLNAME)["priorityClassName"],
        pod_spec(r, "DaemonSet", SIDECAR)["priorityClassName"],
    }
    assert (
        expr["scopeName"] == "PriorityClass" and expr["operator"] == "In" and set(expr["values"]) == classes
    )
    assert rendered({}).of_kind("ResourceQuota") == []


# version -> (matchConditions, unhealthyPodEvictionPolicy, preStop sleep)
GATES = [
    ("1.24.0", False, False, False),
    ("1.27.3", False, True, False),
    ("1.28.0", True, True, False),
    ("v1.30.2-eks-1234", True, True, True),
    ("", True, True, True),  # offline render: Helm's own default, a recent version
]


@pytest.mark.parametrize("version, conditions, pdb_policy, sleep", GATES)
def test_fields_follow_the_kubernetes_version(
    version: str, conditions: bool, pdb_policy: bool, sleep: bool, rendered: Render
) -> None:
    r = rendered({"kubeVersionOverride": version} if version else {})
    mutating = r.one("MutatingWebhookConfiguration", FULLNAME)["webhooks"]
    assert all(("matchConditions" in hook) is conditions for hook in mutating)
    assert ("unhealthyPodEvictionPolicy" in r.one("PodDisruptionBudget", FULLNAME)["spec"]) is pdb_policy
    c = pod_spec(r, "Deployment", FULLNAME)["containers"][0]
    assert ("lifecycle" in c) is sleep


@pytest.mark.parametrize("setting, expected", [(True, True), (False, False)])
def test_match_conditions_can_be_forced(setting: bool, expected: bool, rendered: Render) -> None:
    r = rendered(
        {"kubeVersionOverride": "1.27.0" if setting else "1.31.0", "admission": {"matchConditions": setting}}
    )
    assert all(
        ("matchConditions" in h) is expected
        for h in r.one("MutatingWebhookConfiguration", FULLNAME)["webhooks"]
    )


def test_a_bad_version_override_is_refused(chart: helm.Chart) -> None:
    with pytest.raises(helm.HelmValuesError, match="kubeVersionOverride"):
        chart.validate_schema({"kubeVersionOverride": "latest"})


def test_the_test_namespace_must_be_served(chart: helm.Chart) -> None:
    with pytest.raises(helm.HelmRenderError, match="is not served by the webhooks"):
        render(chart, {"tests": {"namespace": NAMESPACE}})
