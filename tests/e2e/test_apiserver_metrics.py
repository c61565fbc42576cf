"""The API server series the chart's alerts select exist, with those labels, on a real kube-apiserver.

Our webhook is registered with the chart's configurations, called once while it serves and then stopped
for real: a pod outside the system namespaces is refused (the `Fail` entry), one in kube-system is
admitted without it (the `Ignore` entry). The API server's /metrics is read before and after, and every
selector of the rendered PrometheusRule that names an `apiserver_admission_*` series is matched against it
(the scrape job is Prometheus's label, so `job` is left out): the outage alerts' selectors match series
that grew during the outage; the others match series of the right family and label names.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from testkit.apiserver_metrics import grown, scrape, selected
from testkit.cluster_webhook import (
    RELEASE,
    RELEASE_NAMESPACE,
    RegisteredWebhook,
    ensure_namespace,
    kubectl_create,
    pod,
)
from testkit.envtest import ControlPlane
from tests.chart.scenarios import SCENARIOS
from tests.e2e.chart_rbac import render_chart

NS = "e2e-apiserver-metrics"
SELECTOR = re.compile(r"\b(apiserver_admission_[a-z_]+)\{([^}]*)\}")
MATCHER = re.compile(r'(\w+)(=~|!~|!=|=)"((?:[^"\\]|\\.)*)"')


@pytest.fixture(scope="module")
def hook(
    no_priority_plane: ControlPlane, no_priority_webhook: RegisteredWebhook
) -> Iterator[RegisteredWebhook]:
    ensure_namespace(no_priority_plane, NS)
    try:
        yield no_priority_webhook
    finally:
        no_priority_plane.kubectl("delete", "namespace", NS, "--wait=false", check=False)


def selectors() -> dict[str, list[tuple[str, list[tuple[str, str, str]]]]]:
    """Per alert: (series name, [(label, operator, value)]) of each API server selector, job left out."""
    (rule,) = render_chart(SCENARIOS["alerts"], release=RELEASE, namespace=RELEASE_NAMESPACE).of_kind(
        "PrometheusRule"
    )
    found: dict[str, list[tuple[str, list[tuple[str, str, str]]]]] = {}
    for group in rule["spec"]["groups"]:
        for alert in group["rules"]:
            for name, body in SELECTOR.findall(alert["expr"]):
                matchers = [
                    (label, op, value.replace("\\\\", "\\"))
                    for label, op, value in MATCHER.findall(body)
                    if label != "job"
                ]
                found.setdefault(alert["alert"], []).append((name, matchers))
    return found


def test_the_alerts_select_what_the_api_server_exports_during_an_outage(
    no_priority_cluster: ControlPlane, hook: RegisteredWebhook
) -> None:
    cluster = no_priority_cluster
    served = kubectl_create(cluster, pod("served", NS, "system-node-critical"))
    assert served.returncode == 0, served.stderr
    before = scrape(cluster)
    with hook.down():
        refused = kubectl_create(cluster, pod("refused", NS, "system-node-critical"))
        assert refused.returncode == 1 and "connection refused" in refused.stderr
        admitted = kubectl_create(cluster, pod("failed-open", "kube-system", "system-node-critical"))
        assert admitted.returncode == 0, admitted.stderr
    after = scrape(cluster)

    rules = selectors()
    assert {"PriorityWebhookCallsRefused", "PriorityWebhookCallsFailingOpen", "PriorityWebhookSlow"} <= set(
        rules
    )
    # Fail closed: the pods entry, at its first (mutating) call, as a calling error.
    ((name, matchers),) = rules["PriorityWebhookCallsRefused"]
    refusals = grown(before, after, name, matchers)
    assert {dict(k[1])["name"] for k in refusals} == {"pods.priority-webhook.io"}
    assert {(dict(k[1])["type"], dict(k[1])["rejection_code"]) for k in refusals} == {("admit", "400")}
    # Fail open: kube-system's entries (mutating and validating) answered nothing, the pod was admitted.
    ((name, matchers),) = rules["PriorityWebhookCallsFailingOpen"]
    opened = grown(before, after, name, matchers)
    assert {(dict(k[1])["name"], dict(k[1])["type"]) for k in opened} == {
        ("system-pods.priority-webhook.io", "admit"),
        ("system-pods.priority-webhook.io", "validating"),
    }
    fail_open = grown(before, after, "apiserver_admission_webhook_fail_open_count", [])
    assert {dict(k[1])["name"] for k in fail_open} == {"system-pods.priority-webhook.io"}
    # The call that was served: a duration histogram per webhook name, with the bucket label.
    ((name, matchers),) = rules["PriorityWebhookSlow"]
    buckets = selected(after, name, matchers)
    assert {dict(k[1])["name"] for k in buckets} >= {"pods.priority-webhook.io"}
    assert all("le" in dict(k[1]) for k in buckets)
    # Every other API server selector names a series family that exists.
    for alert, found in rules.items():
        for name, _ in found:
            assert any(key[0] == name for key in after), f"{alert}: no {name} on the API server"
