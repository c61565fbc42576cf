"""Operator extensions: own ServiceAccounts, common labels, extra objects and volumes, and the webhook
entries' extra selectors and matchConditions, rendered by the real Helm engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import helm_python as helm
import pytest

from testkit.chart_rendering import FULLNAME, NAMESPACE, Rendered, render
from tests.chart.selectors import matches

Render = Callable[[dict[str, Any]], Rendered]
SIDECAR = f"{FULLNAME}-sidecar"
POD_ENTRIES = ("pods.priority-webhook.io", "system-pods.priority-webhook.io")
CONDITION = {
    "name": "not-sandboxed",
    "expression": "!has(object.metadata.labels) || !('sandbox' in object.metadata.labels)",
}
EXTENDED: dict[str, Any] = {
    "commonLabels": {"team": "platform", "cost-center": "42"},
    "extraObjects": [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "extra", "namespace": "{{ .Release.Namespace }}"},
        },
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: '{{ .Release.Name }}-proxy-ca'\n  namespace: x\n",
    ],
    "webhook": {
        "extraVolumes": [{"name": "proxy-ca", "secret": {"secretName": "pw-proxy-ca"}}],
        "extraVolumeMounts": [{"name": "proxy-ca", "mountPath": "/etc/proxy-ca", "readOnly": True}],
    },
    "sidecar": {
        "extraVolumes": [{"name": "cache", "emptyDir": {}}],
        "extraVolumeMounts": [{"name": "cache", "mountPath": "/cache"}],
    },
    "admission": {
        "namespaceSelector": {
            "matchLabels": {"priority-webhook.io/enabled": "true"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["sandbox"]}],
        },
        "objectSelector": {
            "matchExpressions": [{"key": "priority-webhook.io/skip", "operator": "DoesNotExist"}]
        },
        "extraMatchConditions": [CONDITION],
    },
}


def webhooks(r: Rendered) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (config["kind"], hook["name"]): hook
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for config in r.of_kind(kind)
        for hook in config["webhooks"]
    }


def container_of(workload: dict[str, Any]) -> dict[str, Any]:
    return workload["spec"]["template"]["spec"]["containers"][0]


def test_common_labels_are_on_every_object_and_pod_but_no_selector(rendered: Render) -> None:
    r = rendered(EXTENDED)
    chart_objects = [o for o in r.objects if o["metadata"]["name"] not in ("extra", "pw-proxy-ca")]
    for obj in chart_objects:
        labels = obj["metadata"].get("labels", {})
        assert labels.get("team") == "platform" and labels.get("cost-center") == "42", obj["metadata"]["name"]
    for kind, name in (("Deployment", FULLNAME), ("DaemonSet", SIDECAR)):
        workload = r.one(kind, name)
        assert workload["spec"]["template"]["metadata"]["labels"]["team"] == "platform"
        assert "team" not in workload["spec"]["selector"]["matchLabels"]


def test_extra_objects_are_rendered_through_tpl(rendered: Render) -> None:
    r = rendered(EXTENDED)
    assert r.one("ConfigMap", "extra")["metadata"]["namespace"] == NAMESPACE
    assert r.one("Secret", "pw-proxy-ca")["metadata"]["namespace"] == "x"


@pytest.mark.parametrize(
    "kind, name, volume, mount",
    [("Deployment", FULLNAME, "proxy-ca", "/etc/proxy-ca"), ("DaemonSet", SIDECAR, "cache", "/cache")],
)
def test_extra_volumes_are_mounted_next_to_the_chart_s_own(
    rendered: Render, kind: str, name: str, volume: str, mount: str
) -> None:
    workload = rendered(EXTENDED).one(kind, name)
    volumes = [v["name"] for v in workload["spec"]["template"]["spec"]["volumes"]]
    mounts = {m["name"]: m["mountPath"] for m in container_of(workload)["volumeMounts"]}
    assert volume in volumes and "tmp" in volumes and len(set(volumes)) == len(volumes)
    assert mounts[volume] == mount and mounts["tmp"] == "/tmp"


def test_namespace_selector_additions_narrow_only_the_fail_closed_and_workload_entries(
    rendered: Render,
) -> None:
    hooks = webhooks(rendered(EXTENDED))
    labelled = {"kubernetes.io/metadata.name": "team-a", "priority-webhook.io/enabled": "true"}
    for (kind, name), hook in hooks.items():
        selector = hook["namespaceSelector"]
        if name in ("pods.priority-webhook.io", "workloads.priority-webhook.io"):
            assert matches(selector, labelled), (kind, name)
            assert not matches(selector, {**labelled, "tier": "sandbox"}), (kind, name)
            assert not matches(selector, {"kubernetes.io/metadata.name": "team-a"}), (kind, name)
            assert not matches(selector, {**labelled, "kubernetes.io/metadata.name": "kube-system"})
        elif name == "system-pods.priority-webhook.io":
            assert matches(selector, {"kubernetes.io/metadata.name": "kube-system"}), (kind, name)


def test_object_selector_and_extra_conditions_apply_to_every_pod_entry_alike(rendered: Render) -> None:
    hooks = webhooks(rendered(EXTENDED))
    pod_hooks = {key: hook for key, hook in hooks.items() if key[1] in POD_ENTRIES}
    assert len(pod_hooks) == 4, "mutating and validating, general and system"
    for key, hook in pod_hooks.items():
        assert matches(hook["objectSelector"], {"app": "x"}), key
        assert not matches(hook["objectSelector"], {"priority-webhook.io/skip": ""}), key
        assert CONDITION in hook["matchConditions"], key
    mutating = hooks[("MutatingWebhookConfiguration", "pods.priority-webhook.io")]["matchConditions"]
    assert [c["name"] for c in mutating] == ["update-drops-priority-fields", "not-sandboxed"]
    assert (
        "matchConditions"
        not in hooks[("ValidatingWebhookConfiguration", "priorityclasses.priority-webhook.io")]
    )


def test_extra_conditions_are_left_out_for_an_api_server_without_match_conditions(rendered: Render) -> None:
    hooks = webhooks(rendered({**EXTENDED, "kubeVersionOverride": "1.27.0"}))
    assert all("matchConditions" not in hook for hook in hooks.values())


def test_defaults_select_every_object(rendered: Render) -> None:
    for key, hook in webhooks(rendered({})).items():
        if key[1] in POD_ENTRIES:
            assert hook["objectSelector"] == {}, key


@pytest.mark.parametrize("component", ["webhook", "sidecar"])
def test_an_own_service_account_is_used_and_bound_not_created(rendered: Render, component: str) -> None:
    r = rendered({component: {"serviceAccount": {"create": False, "name": "mine"}}})
    kind, name = ("Deployment", FULLNAME) if component == "webhook" else ("DaemonSet", SIDECAR)
    assert r.one(kind, name)["spec"]["template"]["spec"]["serviceAccountName"] == "mine"
    assert name not in {sa["metadata"]["name"] for sa in r.of_kind("ServiceAccount")}
    binding = r.one("ClusterRoleBinding", name)
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "mine", "namespace": NAMESPACE}]
    if component == "webhook":  # its rights on its CA Secret (certificates.mode webhook, the default)
        role_binding = r.one("RoleBinding", name)
        assert role_binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "mine", "namespace": NAMESPACE}
        ]
    if component == "sidecar":
        policy = r.one("ValidatingAdmissionPolicy", f"{SIDECAR}-node-restriction")
        (condition,) = policy["spec"]["matchConditions"]
        assert (
            condition["expression"]
            == f'request.userInfo.username == "system:serviceaccount:{NAMESPACE}:mine"'
        )


@pytest.mark.parametrize("component", ["webhook", "sidecar"])
def test_an_own_service_account_needs_a_name(chart: helm.Chart, component: str) -> None:
    with pytest.raises(Exception, match=f"{component}.serviceAccount.name is required"):
        render(chart, {component: {"serviceAccount": {"create": False}}})


@pytest.mark.parametrize(
    "values, present",
    [
        ({}, True),
        ({"sidecar": {"nodeRestriction": False}}, False),
        ({"sidecar": {"dryRun": True}}, False),
        ({"kubeVersionOverride": "1.29.0"}, False),
    ],
)
def test_node_restriction_policy_is_rendered_when_it_can_apply(
    rendered: Render, values: dict[str, Any], present: bool
) -> None:
    r = rendered(values)
    kinds = {o["kind"] for o in r.objects}
    assert ("ValidatingAdmissionPolicy" in kinds) is present
    assert ("ValidatingAdmissionPolicyBinding" in kinds) is present
    if present:
        binding = r.one("ValidatingAdmissionPolicyBinding")
        assert binding["spec"]["policyName"] == r.one("ValidatingAdmissionPolicy")["metadata"]["name"]
        assert binding["spec"]["validationActions"] == ["Deny"]
