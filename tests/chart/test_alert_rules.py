"""The chart's alerts, unit-tested by Prometheus's own rule tester (`promtool test rules`).

The PrometheusRule is rendered by the real Helm engine, its groups written as a rule file, and each alert
gets cases where it fires (with the labels it must carry) and where it must stay silent. The series and
label names of the API server's admission metrics are the ones kube-apiserver exports (proven on a real
1.33 API server by tests/e2e/test_apiserver_metrics.py). Annotations other than runbook_url are left out
of the tested copy (their text is checked by `promtool check rules` on the full rule file); runbook_url
must point at a section of docs/operations.md.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from testkit.chart_rendering import FULLNAME, NAMESPACE, Rendered
from tests.chart.scenarios import SCENARIOS

Render = Callable[[dict[str, Any]], Rendered]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
RUNBOOK = "https://github.com/priority-webhook/priority-webhook/blob/main/docs/operations.md"
API = 'job="apiserver"'
OURS = f'namespace="{NAMESPACE}"'
WEBHOOK_JOB = f'job="{FULLNAME}",{OURS}'
SIDECAR_JOB = f'job="{NAMESPACE}/{FULLNAME}-sidecar",{OURS}'
POD = "pods.priority-webhook.io"
SYSTEM = "system-pods.priority-webhook.io"


def _series(name: str, labels: str, values: str) -> dict[str, str]:
    return {"series": f"{name}{{{labels}}}", "values": values}


def _buckets(labels: str, slow: bool) -> list[dict[str, str]]:
    """The API server's duration histogram (its buckets) at 10 calls a minute, all fast or all ~3 s."""
    out = []
    for le in ("0.005", "0.025", "0.1", "0.5", "1", "2.5", "10", "25", "+Inf"):
        fast_count = "0+10x30"
        slow_count = "0+10x30" if float(le) >= 10 else "0x30"
        out.append(
            _series(
                "apiserver_admission_webhook_admission_duration_seconds_bucket",
                f'{labels},le="{le}"',
                slow_count if slow else fast_count,
            )
        )
    return out


def _namespace_series(pod: str, rule_classes: str, synced: str, forbidden: str) -> list[dict[str, str]]:
    """One replica's series for the namespace-rule alert: classes with a rule, the Namespace cache's synced
    gauge, and its forbidden failure gauge."""
    cache = f'{OURS},pod="{pod}",reflector="namespaces"'
    return [
        _series("priority_webhook_namespace_rule_classes", f'{OURS},pod="{pod}"', rule_classes),
        _series("priority_webhook_cache_synced", cache, synced),
        _series("priority_webhook_cache_failing", f'{cache},reason="forbidden"', forbidden),
    ]


# (alert, input series, eval time, expected alerts' labels). An empty expectation: the alert must not fire.
CASES: list[tuple[str, str, list[dict[str, str]], str, list[dict[str, str]]]] = [
    (
        "refused calls: the pods entry fails closed",
        "PriorityWebhookCallsRefused",
        [
            _series(
                "apiserver_admission_webhook_rejection_count",
                f'{API},name="{POD}",type="admit",operation="CREATE",error_type="calling_webhook_error",'
                'rejection_code="400"',
                "0+6x20",
            )
        ],
        "10m",
        [{"severity": "critical", "name": POD, "type": "admit", "operation": "CREATE"}],
    ),
    (
        "policy denials are not call failures",
        "PriorityWebhookCallsRefused",
        [
            _series(
                "apiserver_admission_webhook_rejection_count",
                f'{API},name="{POD}",type="validating",operation="CREATE",error_type="no_error",'
                'rejection_code="403"',
                "0+6x20",
            )
        ],
        "10m",
        [],
    ),
    (
        "another webhook's failures are not ours",
        "PriorityWebhookCallsRefused",
        [
            _series(
                "apiserver_admission_webhook_rejection_count",
                f'{API},name="pods.example.com",type="admit",operation="CREATE",'
                'error_type="calling_webhook_error",rejection_code="400"',
                "0+6x20",
            )
        ],
        "10m",
        [],
    ),
    (
        "refused calls that stopped 10 minutes ago",
        "PriorityWebhookCallsRefused",
        [
            _series(
                "apiserver_admission_webhook_rejection_count",
                f'{API},name="{POD}",type="admit",operation="CREATE",error_type="calling_webhook_error",'
                'rejection_code="400"',
                "0+6x10 60x20",
            )
        ],
        "25m",
        [],
    ),
    (
        "system namespaces fail open: code 400, not rejected",
        "PriorityWebhookCallsFailingOpen",
        [
            _series(
                "apiserver_admission_webhook_request_total",
                f'{API},name="{SYSTEM}",type="admit",operation="CREATE",code="400",rejected="false"',
                "0+3x20",
            ),
            _series(
                "apiserver_admission_webhook_request_total",
                f'{API},name="{POD}",type="admit",operation="CREATE",code="200",rejected="false"',
                "0+100x20",
            ),
        ],
        "10m",
        [{"severity": "warning", "name": SYSTEM, "type": "admit"}],
    ),
    (
        "answered calls and denials do not fail open",
        "PriorityWebhookCallsFailingOpen",
        [
            _series(
                "apiserver_admission_webhook_request_total",
                f'{API},name="{POD}",type="admit",operation="CREATE",code="200",rejected="false"',
                "0+100x20",
            ),
            _series(
                "apiserver_admission_webhook_request_total",
                f'{API},name="{POD}",type="validating",operation="CREATE",code="403",rejected="true"',
                "0+100x20",
            ),
        ],
        "10m",
        [],
    ),
    (
        "internal errors by error type",
        "PriorityWebhookAPIServerErrors",
        [
            _series(
                "apiserver_admission_webhook_rejection_count",
                f'{API},name="{POD}",type="admit",operation="CREATE",error_type="apiserver_internal_error",'
                'rejection_code="0"',
                "0+1x20",
            )
        ],
        "15m",
        [{"severity": "warning", "name": POD, "type": "admit", "error_type": "apiserver_internal_error"}],
    ),
    (
        "p99 above half the 5 s timeout",
        "PriorityWebhookSlow",
        _buckets(f'{API},name="{POD}",type="admit",operation="CREATE",rejected="false"', slow=True),
        "20m",
        [{"severity": "warning", "name": POD}],
    ),
    (
        "fast calls",
        "PriorityWebhookSlow",
        _buckets(f'{API},name="{POD}",type="admit",operation="CREATE",rejected="false"', slow=False),
        "20m",
        [],
    ),
    ("no webhook target at all", "PriorityWebhookDown", [], "10m", [{"severity": "critical"}]),
    (
        "every webhook target down",
        "PriorityWebhookDown",
        [_series("up", f'{WEBHOOK_JOB},pod="a"', "0x20"), _series("up", f'{WEBHOOK_JOB},pod="b"', "0x20")],
        "10m",
        [{"severity": "critical"}],
    ),
    (
        "one webhook target up",
        "PriorityWebhookDown",
        [_series("up", f'{WEBHOOK_JOB},pod="a"', "0x20"), _series("up", f'{WEBHOOK_JOB},pod="b"', "1x20")],
        "10m",
        [],
    ),
    (
        "one webhook target down",
        "PriorityWebhookTargetDown",
        [_series("up", f'{WEBHOOK_JOB},pod="a"', "0x20"), _series("up", f'{WEBHOOK_JOB},pod="b"', "1x20")],
        "15m",
        [
            {
                "severity": "warning",
                "job": FULLNAME,
                "namespace": NAMESPACE,
                "pod": "a",
            }
        ],
    ),
    (
        "certificate within the warning (30 days in this render)",
        "PriorityWebhookCertificateExpiresSoon",
        [
            _series(
                "priority_webhook_serving_certificate_expiry_seconds",
                f'{OURS},pod="a",file="tls.crt"',
                f"{20 * 86400}x120",
            )
        ],
        "2h",
        [{"severity": "warning", "namespace": NAMESPACE, "pod": "a"}],
    ),
    (
        "certificate far from expiry",
        "PriorityWebhookCertificateExpiresSoon",
        [
            _series(
                "priority_webhook_serving_certificate_expiry_seconds",
                f'{OURS},pod="a",file="tls.crt"',
                f"{40 * 86400}x120",
            )
        ],
        "2h",
        [],
    ),
    (
        "certificate within a third of the warning",
        "PriorityWebhookCertificateExpiresVerySoon",
        [
            _series(
                "priority_webhook_serving_certificate_expiry_seconds",
                f'{OURS},pod="a",file="tls.crt"',
                f"{5 * 86400}x60",
            )
        ],
        "30m",
        [{"severity": "critical", "namespace": NAMESPACE, "pod": "a"}],
    ),
    (
        "errored reviews",
        "PriorityWebhookAdmissionFailures",
        [
            _series(
                "priority_webhook_admission_requests_total",
                f'{OURS},pod="a",webhook="mutate",operation="CREATE",resource="pods",result="error"',
                "0+1x30",
            ),
            _series(
                "priority_webhook_admission_requests_total",
                f'{OURS},pod="a",webhook="validate",operation="CREATE",resource="pods",result="denied"',
                "0+10x30",
            ),
        ],
        "20m",
        [{"severity": "warning", "namespace": NAMESPACE, "webhook": "mutate"}],
    ),
    (
        "class cache silent for 20 minutes",
        "PriorityWebhookClassCacheStale",
        [
            _series(
                "priority_webhook_cache_last_activity_timestamp_seconds",
                f'{OURS},pod="a",reflector="priorityclasses"',
                "0x30",
            )
        ],
        "30m",
        [{"severity": "warning", "namespace": NAMESPACE}],
    ),
    (
        "a class has a rule and the namespaces are refused (403)",
        "PriorityWebhookNamespaceRulesUnchecked",
        [*_namespace_series("a", "1x30", "0x30", "1x30"), *_namespace_series("b", "1x30", "1x30", "0x30")],
        "10m",
        [{"severity": "warning", "namespace": NAMESPACE, "pod": "a"}],
    ),
    (
        "a class has a rule, the namespaces were listed, then the grant was removed",
        "PriorityWebhookNamespaceRulesUnchecked",
        _namespace_series("a", "2x30", "1x30", "0x5 1x25"),
        "15m",
        [{"severity": "warning", "namespace": NAMESPACE, "pod": "a"}],
    ),
    (
        "namespaces forbidden but no class has a rule",
        "PriorityWebhookNamespaceRulesUnchecked",
        _namespace_series("a", "0x30", "0x30", "1x30"),
        "20m",
        [],
    ),
    (
        "a rule appears; the namespaces sync within minutes",
        "PriorityWebhookNamespaceRulesUnchecked",
        _namespace_series("a", "0x5 1x25", "0x8 1x22", "0x30"),
        "20m",
        [],
    ),
    (
        "one sidecar target down",
        "PriorityWebhookSidecarTargetDown",
        [_series("up", f'{SIDECAR_JOB},pod="s1"', "0x30"), _series("up", f'{SIDECAR_JOB},pod="s2"', "1x30")],
        "20m",
        [
            {
                "severity": "warning",
                "job": f"{NAMESPACE}/{FULLNAME}-sidecar",
                "namespace": NAMESPACE,
                "pod": "s1",
            }
        ],
    ),
    (
        "evictions forbidden (not a budget)",
        "PriorityWebhookSidecarEvictionsFailing",
        [
            _series(
                "priority_webhook_sidecar_eviction_failures_total",
                f'{OURS},pod="s1",reason="Forbidden"',
                "0x5 1x10",
            ),
            _series(
                "priority_webhook_sidecar_eviction_failures_total",
                f'{OURS},pod="s1",reason="TooManyRequests"',
                "0+1x15",
            ),
        ],
        "8m",
        [{"severity": "warning", "namespace": NAMESPACE, "pod": "s1", "reason": "Forbidden"}],
    ),
    (
        "only budget refusals",
        "PriorityWebhookSidecarEvictionsFailing",
        [
            _series(
                "priority_webhook_sidecar_eviction_failures_total",
                f'{OURS},pod="s1",reason="TooManyRequests"',
                "0+1x15",
            )
        ],
        "8m",
        [],
    ),
    (
        "budgets refuse for over 30 minutes",
        "PriorityWebhookSidecarEvictionsBlocked",
        [
            _series(
                "priority_webhook_sidecar_eviction_failures_total",
                f'{OURS},pod="s1",reason="TooManyRequests"',
                "0+1x90",
            )
        ],
        "70m",
        [{"severity": "info", "namespace": NAMESPACE, "pod": "s1"}],
    ),
    (
        "sidecar watch silent for 15 minutes",
        "PriorityWebhookSidecarSyncStale",
        [_series("priority_webhook_sidecar_sync_age_seconds", f'{OURS},pod="s1"', "0+60x30")],
        "20m",
        [{"severity": "warning", "namespace": NAMESPACE, "pod": "s1"}],
    ),
    (
        "sidecar watch fresh",
        "PriorityWebhookSidecarSyncStale",
        [_series("priority_webhook_sidecar_sync_age_seconds", f'{OURS},pod="s1"', "30x30")],
        "20m",
        [],
    ),
]


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def doc_anchors() -> set[str]:
    return {github_anchor(m) for m in re.findall(r"^#+ (.+)$", DOCS.read_text(), flags=re.MULTILINE)}


def promtool() -> str:
    found = shutil.which("promtool")
    if found:
        return found
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(
            "promtool is missing (scripts/test installs the Debian package prometheus)", pytrace=False
        )
    pytest.skip("promtool is not installed (Debian package prometheus)")


def alerts_of(rule: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["alert"]: a for group in rule["spec"]["groups"] for a in group["rules"]}


@pytest.fixture(scope="module")
def rule(rendered: Render) -> dict[str, Any]:
    (found,) = rendered(SCENARIOS["alerts"]).of_kind("PrometheusRule")
    return found


def test_every_alert_has_a_unit_test_and_a_runbook_section(rule: dict[str, Any]) -> None:
    alerts = alerts_of(rule)
    assert {case[1] for case in CASES} == set(alerts)
    anchors = doc_anchors()
    for name, alert in alerts.items():
        url = alert["annotations"]["runbook_url"]
        base, _, anchor = url.partition("#")
        assert base == RUNBOOK and anchor == name.lower(), url
        assert anchor in anchors, f"docs/operations.md has no section for {name}"
        assert alert["labels"]["severity"] in ("critical", "warning", "info")


def test_the_full_rule_file_passes_promtool_check(rule: dict[str, Any], tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    result = subprocess.run([promtool(), "check", "rules", str(rules)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_alerts_fire_exactly_when_they_should(rule: dict[str, Any], tmp_path: Path) -> None:
    groups = copy.deepcopy(rule["spec"]["groups"])
    for group in groups:
        for alert in group["rules"]:
            alert["annotations"] = {"runbook_url": alert["annotations"]["runbook_url"]}
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    tests = []
    for title, alert, series, at, expected in CASES:
        exp = [
            {"exp_labels": labels, "exp_annotations": {"runbook_url": f"{RUNBOOK}#{alert.lower()}"}}
            for labels in expected
        ]
        tests.append(
            {
                "name": title,
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [{"eval_time": at, "alertname": alert, "exp_alerts": exp}],
            }
        )
    (tmp_path / "tests.yaml").write_text(
        yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests})
    )
    result = subprocess.run(
        [promtool(), "test", "rules", "tests.yaml"], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_api_server_filters_name_every_webhook_the_chart_configures(
    rule: dict[str, Any], rendered: Render
) -> None:
    r = rendered(SCENARIOS["alerts"])
    names = {
        hook["name"]
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for config in r.of_kind(kind)
        for hook in config["webhooks"]
    }
    for name, alert in alerts_of(rule).items():
        found = re.search(r'name=~"([^"]+)"', alert["expr"])
        if "apiserver_admission" in alert["expr"]:
            assert found, name
            pattern = found.group(1).replace("\\\\", "\\")
            assert all(re.fullmatch(pattern, n) for n in names), (name, names)
            assert not re.fullmatch(pattern, "pods.example.com")
        else:
            assert f'namespace="{NAMESPACE}"' in alert["expr"], name


@pytest.mark.parametrize(
    "values, threshold",
    [({}, 2.5), ({"admission": {"timeoutSeconds": 10}, "prometheusRule": {"slowFraction": 0.8}}, 8.0)],
)
def test_slow_threshold_follows_the_timeout(
    values: dict[str, Any], threshold: float, rendered: Render
) -> None:
    merged = copy.deepcopy(SCENARIOS["alerts"])
    for key, value in values.items():
        merged[key] = {**merged.get(key, {}), **value}
    (found,) = rendered(merged).of_kind("PrometheusRule")
    expr = alerts_of(found)["PriorityWebhookSlow"]["expr"]
    assert float(expr.rsplit(">", 1)[1]) == threshold


def test_no_sidecar_alerts_without_the_sidecar(rendered: Render) -> None:
    values = {**SCENARIOS["alerts"], "sidecar": {"enabled": False}}
    (found,) = rendered(values).of_kind("PrometheusRule")
    assert not [name for name in alerts_of(found) if "Sidecar" in name]


def test_any_api_server_job(rendered: Render) -> None:
    values = copy.deepcopy(SCENARIOS["alerts"])
    values["prometheusRule"]["apiServerJob"] = ""
    (found,) = rendered(values).of_kind("PrometheusRule")
    expr = alerts_of(found)["PriorityWebhookCallsRefused"]["expr"]
    assert "job=" not in expr and 'name=~"' in expr
