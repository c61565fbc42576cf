"""values.schema.json accepts the documented settings and rejects bad ones, naming the offending key."""

from __future__ import annotations

from typing import Any

import helm_python as helm
import pytest

from testkit.chart_rendering import CHART, NAMESPACE
from tests.chart.scenarios import SCENARIOS

BAD_VALUES: list[tuple[str, dict[str, Any], str]] = [
    ("unknown top-level key", {"replicaCount": 3}, "replicaCount"),
    ("unknown nested key (typo)", {"admission": {"failurePolicyy": "Fail"}}, "failurePolicyy"),
    ("failure policy not an enum", {"admission": {"failurePolicy": "fail"}}, "/admission/failurePolicy"),
    (
        "priority class policy",
        {"admission": {"priorityClassFailurePolicy": "Open"}},
        "priorityClassFailurePolicy",
    ),
    ("timeout above the API maximum", {"admission": {"timeoutSeconds": 31}}, "/admission/timeoutSeconds"),
    ("timeout zero", {"admission": {"timeoutSeconds": 0}}, "/admission/timeoutSeconds"),
    ("timeout as a string", {"admission": {"timeoutSeconds": "5"}}, "/admission/timeoutSeconds"),
    (
        "kube-system dropped from the fail-open group",
        {"admission": {"systemNamespaces": ["default"]}},
        "systemNamespaces",
    ),
    ("namespace not a DNS label", {"admission": {"excludedNamespaces": ["Bad_NS"]}}, "excludedNamespaces"),
    ("a single replica", {"webhook": {"replicas": 1}}, "/webhook/replicas"),
    ("PDB allowing zero", {"webhook": {"podDisruptionBudget": {"minAvailable": 0}}}, "minAvailable"),
    ("anti-affinity mode", {"webhook": {"antiAffinity": "sometimes"}}, "antiAffinity"),
    ("privileged port", {"webhook": {"port": 443}}, "/webhook/port"),
    ("unknown certificate mode", {"certificates": {"mode": "selfsigned"}}, "/certificates/mode"),
    ("provided without a secret", {"certificates": {"mode": "provided"}}, "secretName"),
    (
        "provided bundle not base64",
        {
            "certificates": {
                "mode": "provided",
                "provided": {"secretName": "s", "caBundle": "-----BEGIN CERT"},
            }
        },
        "caBundle",
    ),
    ("validity too short", {"certificates": {"generated": {"validityDays": 1}}}, "validityDays"),
    (
        "issuerRef without a name",
        {"certificates": {"certManager": {"issuerRef": {"kind": "Issuer"}}}},
        "name",
    ),
    ("cert-manager duration", {"certificates": {"certManager": {"duration": "90 days"}}}, "duration"),
    ("root user", {"podSecurityContext": {"runAsUser": 0}}, "runAsUser"),
    ("root allowed", {"podSecurityContext": {"runAsNonRoot": False}}, "runAsNonRoot"),
    (
        "privilege escalation",
        {"containerSecurityContext": {"allowPrivilegeEscalation": True}},
        "allowPrivilegeEscalation",
    ),
    (
        "writable root",
        {"containerSecurityContext": {"readOnlyRootFilesystem": False}},
        "readOnlyRootFilesystem",
    ),
    (
        "capabilities kept",
        {"containerSecurityContext": {"capabilities": {"drop": ["NET_RAW"]}}},
        "capabilities",
    ),
    (
        "capability added",
        {"containerSecurityContext": {"capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN"]}}},
        "add",
    ),
    ("sidecar order", {"sidecar": {"order": "random"}}, "/sidecar/order"),
    ("sidecar flag type", {"sidecar": {"ignorePdb": "yes"}}, "ignorePdb"),
    (
        "critical priority above the system range",
        {"sidecar": {"criticalPriority": 3000000000}},
        "criticalPriority",
    ),
    ("pull policy", {"image": {"pullPolicy": "Sometimes"}}, "pullPolicy"),
    ("digest format", {"image": {"digest": "latest"}}, "digest"),
    ("empty repository", {"image": {"repository": ""}}, "repository"),
    ("scrape interval", {"serviceMonitor": {"interval": "often"}}, "interval"),
    ("API server CIDR", {"networkPolicy": {"apiServer": {"cidrs": ["10.0.0.1"]}}}, "cidrs"),
    ("no API server port", {"networkPolicy": {"apiServer": {"ports": []}}}, "ports"),
    ("kube version not a version", {"kubeVersionOverride": "1.x"}, "kubeVersionOverride"),
    ("matchConditions not a boolean", {"admission": {"matchConditions": "auto"}}, "matchConditions"),
    (
        "install gate timeout too short",
        {"admission": {"installGate": {"timeoutSeconds": 5}}},
        "timeoutSeconds",
    ),
    (
        "annotation value not a string",
        {"admission": {"annotations": {"admissions.enforcer/disabled": True}}},
        "annotations",
    ),
    (
        "PDB eviction policy",
        {"webhook": {"podDisruptionBudget": {"unhealthyPodEvictionPolicy": "Always"}}},
        "unhealthyPodEvictionPolicy",
    ),
    ("extraArgs not strings", {"webhook": {"extraArgs": [1]}}, "extraArgs"),
    ("extraEnv without a name", {"sidecar": {"extraEnv": [{"value": "x"}]}}, "extraEnv"),
    ("sidecar log level", {"sidecar": {"logLevel": "verbose"}}, "logLevel"),
    ("hostNetwork flag type", {"webhook": {"hostNetwork": "yes"}}, "hostNetwork"),
    ("alert days", {"prometheusRule": {"certificateExpiryWarningDays": 1}}, "certificateExpiryWarningDays"),
    ("test namespace", {"tests": {"namespace": "Not_A_Namespace"}}, "namespace"),
    (
        "common label owned by the chart",
        {"commonLabels": {"app.kubernetes.io/name": "x"}},
        "invalid propertyName 'app.kubernetes.io/name'",
    ),
    ("common label value type", {"commonLabels": {"team": 5}}, "commonLabels"),
    ("extra volume without a name", {"webhook": {"extraVolumes": [{"emptyDir": {}}]}}, "extraVolumes"),
    ("extra mount without a path", {"sidecar": {"extraVolumeMounts": [{"name": "x"}]}}, "extraVolumeMounts"),
    (
        "selector operator",
        {"admission": {"objectSelector": {"matchExpressions": [{"key": "a", "operator": "Is"}]}}},
        "objectSelector",
    ),
    ("selector key typo", {"admission": {"namespaceSelector": {"matchLabel": {}}}}, "matchLabel"),
    (
        "match condition without an expression",
        {"admission": {"extraMatchConditions": [{"name": "x"}]}},
        "extraMatchConditions",
    ),
    (
        "match condition named as the chart's own",
        {
            "admission": {
                "extraMatchConditions": [{"name": "update-drops-priority-fields", "expression": "true"}]
            }
        },
        "extraMatchConditions",
    ),
    ("service account name", {"sidecar": {"serviceAccount": {"name": "Bad_Name"}}}, "serviceAccount"),
    ("runbook url", {"prometheusRule": {"runbookUrl": "docs/operations.md"}}, "runbookUrl"),
    ("slow fraction", {"prometheusRule": {"slowFraction": 2}}, "slowFraction"),
]


@pytest.mark.parametrize(
    "values, fragment", [case[1:] for case in BAD_VALUES], ids=[case[0] for case in BAD_VALUES]
)
def test_bad_values_are_rejected_naming_the_key(
    chart: helm.Chart, values: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(helm.HelmValuesError) as caught:
        chart.validate_schema(values)
    assert fragment in str(caught.value)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_scenario_is_accepted(chart: helm.Chart, scenario: str) -> None:
    chart.validate_schema(SCENARIOS[scenario])


def test_the_defaults_are_accepted_and_fully_described(chart: helm.Chart) -> None:
    """additionalProperties is false throughout, so passing defaults means every default key is in the schema."""
    chart.validate_schema({})
    schema = chart.schema
    assert schema is not None and schema["additionalProperties"] is False
    assert set(chart.values) <= set(schema["properties"])


def test_helm_lint_runs_the_schema() -> None:
    report = helm.lint(CHART, {"admission": {"failurePolicy": "Sometimes"}}, namespace=NAMESPACE)
    assert any("failurePolicy" in m["error"] for m in report["messages"] if m["severity"] >= 3), report
