"""`certificates.mode: webhook` (the default): the webhook keeps its own CA, so the chart renders no key
material and every render is the same; what it renders instead is the webhook's flags, a writable cert
dir and the narrow RBAC the rotation needs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import helm_python as helm
import pytest

from testkit.chart_rendering import FULLNAME, NAMESPACE, RELEASE, Rendered
from tests.chart.scenarios import SCENARIOS

Render = Callable[[dict[str, Any]], Rendered]
CA_SECRET = f"{FULLNAME}-webhook-ca"
CONFIG_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
EVICTION_CHECK = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}


def manifests(chart: helm.Chart, values: dict[str, Any]) -> dict[str, str]:
    return chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)


@pytest.mark.parametrize(("scenario", "identical"), [("default", True), ("generated", False)])
def test_two_renders_are_byte_identical_only_without_chart_made_keys(
    chart: helm.Chart, scenario: str, identical: bool
) -> None:
    """What a GitOps tool sees at every sync: the same bytes, so nothing rolls and no caBundle churns. The
    chart-generated mode, for contrast, mints a new CA at every offline render."""
    first, second = manifests(chart, SCENARIOS[scenario]), manifests(chart, SCENARIOS[scenario])
    assert first.keys() == second.keys()
    assert (first == second) is identical, [name for name in first if first[name] != second[name]]


def test_no_key_material_and_no_ca_bundle_is_rendered(chart: helm.Chart, rendered: Render) -> None:
    text = "\n".join(manifests(chart, {}).values())
    assert "PRIVATE KEY" not in text and "BEGIN CERTIFICATE" not in text
    r = rendered({})
    assert r.of_kind("Secret") == [] and r.of_kind("Certificate") == []
    for kind in CONFIG_KINDS:
        for hook in r.one(kind, FULLNAME)["webhooks"]:
            assert "caBundle" not in hook["clientConfig"], (
                "the webhook writes it; the chart must not fight it"
            )
            assert hook["clientConfig"]["service"]["name"] == FULLNAME


def test_the_webhook_runs_its_own_rotation(rendered: Render) -> None:
    pod = rendered({}).one("Deployment", FULLNAME)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    flags = [arg for arg in container["args"] if arg.startswith("--")]
    assert flags[-6:] == [
        f"--ca-secret={NAMESPACE}/{CA_SECRET}",
        f"--webhook-configuration={FULLNAME}",
        f"--service={FULLNAME}",
        "--ca-validity=17520h",
        "--cert-validity=2160h",
        "--rotation-interval=60s",
    ]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "tls"]
    assert "readOnly" not in mount and "--cert-dir=" + mount["mountPath"] in container["args"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "tls"]
    assert volume == {"name": "tls", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}


def test_lifetimes_come_from_values(rendered: Render) -> None:
    values = {
        "certificates": {"webhook": {"caValidity": "90d", "certValidity": "30d", "checkInterval": "5m"}}
    }
    args = rendered(values).one("Deployment", FULLNAME)["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[-3:] == ["--ca-validity=90d", "--cert-validity=30d", "--rotation-interval=5m"]


def test_rbac_is_one_secret_and_the_two_configurations(rendered: Render) -> None:
    r = rendered({})
    role = r.one("Role", FULLNAME)
    assert role["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": [CA_SECRET],
            "verbs": ["get", "update"],
        },
    ]
    rules = r.one("ClusterRole", FULLNAME)["rules"]
    assert [rule for rule in rules if rule["apiGroups"] == ["admissionregistration.k8s.io"]] == [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
            "resourceNames": [FULLNAME],
            "verbs": ["get", "list", "watch", "patch"],
        }
    ]
    binding = r.one("RoleBinding", FULLNAME)
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": FULLNAME}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": FULLNAME, "namespace": NAMESPACE}]


@pytest.mark.parametrize("scenario", ["generated", "cert-manager", "provided"])
def test_other_modes_get_none_of_it(rendered: Render, scenario: str) -> None:
    r = rendered(SCENARIOS[scenario])
    assert not [o for o in r.of_kind("Role") + r.of_kind("RoleBinding") if o["metadata"]["name"] == FULLNAME]
    rules = [rule for rule in r.one("ClusterRole", FULLNAME)["rules"] if rule != EVICTION_CHECK]
    assert not [rule for rule in rules if "admissionregistration.k8s.io" in rule["apiGroups"]]
    assert len(rules) == 2, "PriorityClasses and Namespaces only (and the eviction check's pod reads)"
    args = r.one("Deployment", FULLNAME)["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not [a for a in args if a.startswith("--ca-secret")]


def test_the_install_gate_trusts_the_bundle_the_webhook_keeps(rendered: Render) -> None:
    r = rendered({})
    assert "ca.crt" not in r.one("ConfigMap", f"{FULLNAME}-hooks")["data"]
    wait = r.one("Job", f"{FULLNAME}-hooks-wait")["spec"]["template"]["spec"]
    sources = wait["volumes"][0]["projected"]["sources"]
    assert sources[1]["secret"] == {"name": CA_SECRET, "items": [{"key": "ca-bundle.crt", "path": "ca.crt"}]}


def test_prometheus_verifies_with_the_bundle_the_webhook_keeps(rendered: Render) -> None:
    monitor = rendered({"serviceMonitor": {"enabled": True}}).one("ServiceMonitor", FULLNAME)
    assert monitor["spec"]["endpoints"][0]["tlsConfig"]["ca"] == {
        "secret": {"name": CA_SECRET, "key": "ca-bundle.crt"}
    }


@pytest.mark.parametrize(
    "webhook",
    [
        {"caValidity": "1y"},
        {"certValidity": "0s"},
        {"checkInterval": "60"},
        {"rotate": True},
    ],
)
def test_the_schema_refuses_bad_lifetimes(chart: helm.Chart, webhook: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmError, match="webhook"):
        manifests(chart, {"certificates": {"webhook": webhook}})
