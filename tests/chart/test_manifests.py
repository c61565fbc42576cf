"""Every values set renders, lints clean, and every object is valid against the Kubernetes 1.30 schemas."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import helm_python as helm
import jsonschema
import kubernetes_validate
import pytest
import yaml

from testkit.chart_rendering import CHART, KUBE_VERSION, NAMESPACE, Rendered, UniqueKeyLoader
from tests.chart.crd_schemas import SCHEMAS, validate_custom
from tests.chart.scenarios import SCENARIOS

CUSTOM_KINDS = {kind for _, kind in SCHEMAS}
WARNING = 2


# The chart supports Kubernetes 1.30 up to the newest release kubernetes-validate ships schemas for.
VERSIONS = sorted({KUBE_VERSION, ".".join(kubernetes_validate.latest_version().split(".")[:2])})
OLDEST_SHIPPED = (
    "1.25"  # a render for 1.24 must fit the oldest schemas shipped (the end-to-end test runs 1.24)
)


def validate(obj: dict[str, Any], version: str = KUBE_VERSION) -> None:
    if (obj["apiVersion"], obj["kind"]) in SCHEMAS:
        validate_custom(obj)
    else:
        kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_object_is_valid_for_each_supported_kubernetes(
    scenario: str, version: str, rendered: Callable[[dict[str, Any]], Rendered]
) -> None:
    objects = rendered(SCENARIOS[scenario]).objects
    assert len(objects) >= 8
    for obj in objects:
        try:
            validate(obj, version)
        except (kubernetes_validate.ValidationError, jsonschema.ValidationError) as err:
            path = ".".join(str(part) for part in err.path)
            pytest.fail(f"{scenario}: {obj['kind']}/{obj['metadata']['name']}: {path}: {err.message}")


def test_a_render_for_an_old_api_server_uses_only_fields_it_knows(
    rendered: Callable[[dict[str, Any]], Rendered],
) -> None:
    """kubeVersionOverride (or the cluster's version) drops matchConditions, unhealthyPodEvictionPolicy and
    the preStop sleep, which older API servers do not know (kubectl refuses them; the server drops them)."""
    for obj in rendered(SCENARIOS["kubernetes-1.24"]).objects:
        validate(obj, OLDEST_SHIPPED)
    with pytest.raises(kubernetes_validate.ValidationError):
        for obj in rendered({}).objects:
            validate(obj, OLDEST_SHIPPED)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_helm_lint_is_clean(scenario: str) -> None:
    report = helm.lint(
        CHART, SCENARIOS[scenario], strict=True, namespace=NAMESPACE, kube_version=f"v{KUBE_VERSION}.0"
    )
    problems = [m for m in report["messages"] if m["severity"] >= WARNING]
    assert report["errors"] == [] and problems == [], (report["errors"], problems)


@pytest.mark.parametrize(
    "kind, mutate",
    [
        (
            "Deployment",
            lambda d: d["spec"]["template"]["spec"]["containers"][0].update(imagePullPolice="Always"),
        ),
        ("MutatingWebhookConfiguration", lambda d: d["webhooks"][0].update(timeoutSeconds="5s")),
        ("ClusterRole", lambda d: d["rules"][0].update(verb=["get"])),
    ],
)
def test_the_validator_rejects_what_the_api_server_would(
    kind: str, mutate: Callable[[dict[str, Any]], None], rendered: Callable[[dict[str, Any]], Rendered]
) -> None:
    """The validation above can fail: a misspelt field or a bad enum value is caught."""
    obj = copy.deepcopy(rendered({}).of_kind(kind)[0])
    mutate(obj)
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(obj)


def test_custom_resource_schemas_reject_unknown_fields(
    rendered: Callable[[dict[str, Any]], Rendered],
) -> None:
    certificate = copy.deepcopy(
        rendered(SCENARIOS["cert-manager"]).one("Certificate", "pw-priority-webhook-tls")
    )
    certificate["spec"]["dnsName"] = ["typo"]
    with pytest.raises(jsonschema.ValidationError):
        validate(certificate)


def test_custom_kinds_appear_only_when_asked_for(rendered: Callable[[dict[str, Any]], Rendered]) -> None:
    assert not rendered({}).kinds() & CUSTOM_KINDS
    assert rendered(SCENARIOS["cert-manager"]).kinds() & CUSTOM_KINDS == {"Issuer", "Certificate"}
    assert rendered(SCENARIOS["cert-manager-issuer"]).kinds() & CUSTOM_KINDS == {"Certificate"}
    assert rendered(SCENARIOS["observability"]).kinds() & CUSTOM_KINDS == {"ServiceMonitor", "PodMonitor"}
    assert rendered(SCENARIOS["alerts"]).kinds() & CUSTOM_KINDS == {
        "ServiceMonitor",
        "PodMonitor",
        "PrometheusRule",
    }


def test_default_install_renders_exactly_the_core_objects(
    rendered: Callable[[dict[str, Any]], Rendered],
) -> None:
    r = rendered({})
    kinds = sorted(f"{o['kind']}/{o['metadata']['name']}" for o in r.installed())
    assert kinds == sorted(
        f"{kind}/pw-priority-webhook{suffix}"
        for kind, suffix in [
            ("ServiceAccount", ""),
            ("ClusterRole", ""),
            ("ClusterRoleBinding", ""),
            ("Service", ""),
            ("Deployment", ""),
            ("PodDisruptionBudget", ""),
            ("Role", ""),  # certificates.mode webhook: its CA Secret
            ("RoleBinding", ""),
            ("ServiceAccount", "-sidecar"),
            ("ClusterRole", "-sidecar"),
            ("ClusterRoleBinding", "-sidecar"),
            ("DaemonSet", "-sidecar"),
            ("ValidatingAdmissionPolicy", "-sidecar-node-restriction"),
            ("ValidatingAdmissionPolicyBinding", "-sidecar-node-restriction"),
            ("ConfigMap", "-hooks"),
            ("ServiceAccount", "-hooks"),
            ("ClusterRole", "-hooks"),
            ("ClusterRoleBinding", "-hooks"),
        ]
    )
    hooks = {
        event: [f"{o['kind']}/{o['metadata']['name']}" for o in r.hooks(event)]
        for event in ("post-install", "pre-delete", "test")
    }
    assert hooks["post-install"] == [
        "Job/pw-priority-webhook-hooks-wait",
        "MutatingWebhookConfiguration/pw-priority-webhook",
        "ValidatingWebhookConfiguration/pw-priority-webhook",
    ]
    assert hooks["pre-delete"] == ["Job/pw-priority-webhook-hooks-cleanup"]
    assert hooks["test"][-1] == "Pod/pw-priority-webhook-test"


def test_a_key_given_twice_fails_the_render_check() -> None:
    """Rendering parses with this loader, so a template that repeats a label fails every test above."""
    with pytest.raises(yaml.constructor.ConstructorError, match="duplicate keys"):
        yaml.load("labels:\n  app: a\n  app: a\n", Loader=UniqueKeyLoader)
