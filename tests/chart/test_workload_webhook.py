"""`admission.workloads`: the validating entry for workloads, fail-open, and the serve flag for `deny`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import helm_python as helm
import pytest

from testkit.chart_rendering import CHART, FULLNAME, NAMESPACE, Rendered
from tests.chart.selectors import matches, namespace_labels
from webhook.objects.workloads import WORKLOADS

Render = Callable[[dict[str, Any] | None], Rendered]
HOOK = "workloads.priority-webhook.io"
FLAG = "--deny-unadmittable-workloads"
WORKLOAD_RULES = {
    (("deployments", "replicasets", "statefulsets", "daemonsets"), ("CREATE", "UPDATE")),
    (("jobs", "cronjobs"), ("CREATE", "UPDATE")),
    (("replicationcontrollers", "podtemplates"), ("CREATE", "UPDATE")),
}


def _hooks(r: Rendered) -> list[dict[str, Any]]:
    return [h for h in r.one("ValidatingWebhookConfiguration", FULLNAME)["webhooks"] if h["name"] == HOOK]


def _args(r: Rendered) -> list[str]:
    return r.one("Deployment", FULLNAME)["spec"]["template"]["spec"]["containers"][0]["args"]


@pytest.mark.parametrize(
    ("mode", "entry", "flag"),
    [("warn", True, False), ("deny", True, True), ("off", False, False), (None, True, False)],
)
def test_modes(rendered: Render, mode: str | None, entry: bool, flag: bool) -> None:
    r = rendered({"admission": {"workloads": mode}} if mode else {})
    assert len(_hooks(r)) == int(entry)
    assert (FLAG in _args(r)) is flag


def test_the_entry_covers_every_workload_the_server_checks_and_fails_open(rendered: Render) -> None:
    (hook,) = _hooks(rendered({"admission": {"workloads": "deny"}}))
    assert hook["failurePolicy"] == "Ignore", "a webhook outage must never block a rollout"
    assert hook["clientConfig"]["service"]["path"] == "/validate"
    covered = {(g, res) for rule in hook["rules"] for g in rule["apiGroups"] for res in rule["resources"]}
    assert covered == {(group, resource) for group, resource, _ in WORKLOADS.values()}
    assert {(tuple(rule["resources"]), tuple(rule["operations"])) for rule in hook["rules"]} == WORKLOAD_RULES
    assert {rule["scope"] for rule in hook["rules"]} == {"Namespaced"}
    assert matches(hook["namespaceSelector"], namespace_labels("shop"))
    assert not matches(hook["namespaceSelector"], namespace_labels("kube-system"))


def test_an_unknown_mode_is_refused() -> None:
    report = helm.lint(CHART, {"admission": {"workloads": "block"}}, namespace=NAMESPACE)
    assert any("workloads" in m["error"] for m in report["messages"] if m["severity"] >= 3), report
