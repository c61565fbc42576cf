"""The webhook configurations: contract settings, rules, and the lockout-safe namespace split."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import helm_python as helm
import pytest

from testkit.chart_rendering import FULLNAME, NAMESPACE, Rendered, render
from tests.chart.scenarios import SCENARIOS
from tests.chart.selectors import matches, namespace_labels
from tests.chart.test_workload_webhook import WORKLOAD_RULES
from webhook.review.routes import route_of

Render = Callable[[dict[str, Any]], Rendered]
CONFIG_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
PATHS = {"MutatingWebhookConfiguration": "/mutate", "ValidatingWebhookConfiguration": "/validate"}
EVICTIONS = "evictions.priority-webhook.io"


def entries(r: Rendered) -> list[tuple[str, dict[str, Any]]]:
    return [(kind, hook) for kind in CONFIG_KINDS for hook in r.one(kind, FULLNAME)["webhooks"]]


def covers(hook: dict[str, Any], group: str, resource: str, operation: str) -> bool:
    for rule in hook["rules"]:
        if (
            group in rule["apiGroups"]
            and resource in rule["resources"]
            and (operation in rule["operations"] or "*" in rule["operations"])
        ):
            return True
    return False


def called_for_pod(r: Rendered, kind: str, namespace: str, operation: str) -> list[dict[str, Any]]:
    """The entries of one configuration the API server calls for a pod request in `namespace`."""
    return [
        hook
        for hook in r.one(kind, FULLNAME)["webhooks"]
        if covers(hook, "", "pods", operation)
        and matches(hook.get("namespaceSelector"), namespace_labels(namespace))
    ]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_entry_follows_the_contract(scenario: str, rendered: Render) -> None:
    values = SCENARIOS[scenario]
    timeout = values.get("admission", {}).get("timeoutSeconds", 5)
    for kind, hook in entries(rendered(values)):
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["sideEffects"] == "None"
        assert hook["matchPolicy"] == "Equivalent"
        assert hook["timeoutSeconds"] == timeout
        assert hook["clientConfig"]["service"] == {
            "name": FULLNAME,
            "namespace": NAMESPACE,
            "path": PATHS[kind],
            "port": 443,
        }
        assert "url" not in hook["clientConfig"]
        assert len(hook["name"].split(".")) >= 3, "webhook names must be fully qualified"
        if kind == "MutatingWebhookConfiguration":
            assert hook["reinvocationPolicy"] == "IfNeeded"
        else:
            assert "reinvocationPolicy" not in hook


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_rules_cover_exactly_the_contract(scenario: str, rendered: Render) -> None:
    r = rendered(SCENARIOS[scenario])
    for _, hook in entries(r):
        for rule in hook["rules"]:
            subresources = [res for res in rule["resources"] if "/" in res]
            if hook["name"] == EVICTIONS:
                assert subresources == ["pods/eviction"] == rule["resources"]
                continue
            assert "*" not in rule["resources"] and not subresources, (
                "no subresources (status, binding, ephemeralcontainers, scale) are admitted"
            )
            assert "*" not in rule["apiGroups"] and "*" not in rule["operations"]
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    route = route_of(f"{resource}.{group}" if group else resource)
                    assert route is not None, f"{resource}.{group} has no route: the webhook would allow it"
                    assert rule["apiVersions"] == list(route.versions)
    mutating = r.one("MutatingWebhookConfiguration", FULLNAME)["webhooks"]
    pod_groups = bool(SCENARIOS[scenario].get("admission", {}).get("podGroups", {}).get("enabled"))
    assert {
        (tuple(rule["resources"]), tuple(rule["operations"])) for h in mutating for rule in h["rules"]
    } == {(("pods",), ("CREATE", "UPDATE")), *([(("podgroups",), ("CREATE",))] if pod_groups else [])}
    validating = r.one("ValidatingWebhookConfiguration", FULLNAME)["webhooks"]
    assert {
        (tuple(rule["resources"]), tuple(rule["operations"])) for h in validating for rule in h["rules"]
    } == {
        (("priorityclasses",), ("CREATE", "UPDATE", "DELETE")),
        (("pods",), ("CREATE",)),
        *WORKLOAD_RULES,
        *([(("pods/eviction",), ("CREATE",))] if sidecar_restricted(r) else []),
    }


def sidecar_restricted(r: Rendered) -> bool:
    """The sidecar's NodeRestriction is on: its policy is rendered (the evictions entry's gate too)."""
    return bool(r.of_kind("ValidatingAdmissionPolicy"))


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_evictions_entry_takes_only_the_sidecars_evictions_and_fails_closed(
    scenario: str, rendered: Render
) -> None:
    r = rendered(SCENARIOS[scenario])
    hooks = [
        h for h in r.one("ValidatingWebhookConfiguration", FULLNAME)["webhooks"] if h["name"] == EVICTIONS
    ]
    if not sidecar_restricted(r):
        assert hooks == []
        return
    (hook,) = hooks
    assert hook["failurePolicy"] == "Fail"
    assert hook["clientConfig"]["service"]["path"] == "/validate"
    assert hook["namespaceSelector"] == {} and hook["objectSelector"] == {}
    assert hook["rules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods/eviction"],
            "operations": ["CREATE"],
            "scope": "Namespaced",
        }
    ]
    user = f"system:serviceaccount:{NAMESPACE}:{FULLNAME}-sidecar"
    assert hook["matchConditions"] == [
        {"name": "sidecar-service-account", "expression": f'request.userInfo.username == "{user}"'}
    ]
    (policy,) = r.of_kind("ValidatingAdmissionPolicy")
    assert policy["spec"]["matchConditions"] == hook["matchConditions"], "the policy's user, the same"


# (namespace, operation) -> failurePolicy of the one entry called, or None when no entry is.
LOCKOUT_TABLE = [
    ("kube-system", "Ignore"),
    (NAMESPACE, None),
    ("default", "configured"),
    ("team-a", "configured"),
    ("kube-public", "configured"),
]


@pytest.mark.parametrize("kind", CONFIG_KINDS)
@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
@pytest.mark.parametrize("namespace, expected", LOCKOUT_TABLE)
@pytest.mark.parametrize("policy", ["default", "fail-open-and-tuned"])
def test_each_namespace_is_served_by_at_most_one_entry_with_the_right_policy(
    kind: str, operation: str, namespace: str, expected: str | None, policy: str, rendered: Render
) -> None:
    values = SCENARIOS[policy]
    r = rendered(values)
    called = called_for_pod(r, kind, namespace, operation)
    if kind == "ValidatingWebhookConfiguration" and operation == "UPDATE":
        assert called == []
        return
    if expected is None:
        assert called == [], f"the release namespace must never be sent to the webhook: {called}"
        return
    assert len(called) == 1, f"{namespace}: {[h['name'] for h in called]}"
    configured = values.get("admission", {}).get("failurePolicy", "Fail")
    assert called[0]["failurePolicy"] == (configured if expected == "configured" else expected)


def test_options_move_namespaces_between_groups(rendered: Render) -> None:
    r = rendered(SCENARIOS["fail-open-and-tuned"])
    for kind in CONFIG_KINDS:
        assert called_for_pod(r, kind, "sandbox", "CREATE") == [], "excludedNamespaces are never sent"
        lease = called_for_pod(r, kind, "kube-node-lease", "CREATE")
        assert [h["failurePolicy"] for h in lease] == ["Ignore"], "extra systemNamespaces fail open"


@pytest.mark.parametrize("scenario", ["default", "fail-open-and-tuned"])
def test_the_server_knows_the_namespaces_its_fail_open_entries_serve(scenario: str, rendered: Render) -> None:
    """There a pod may reach /validate unmutated (its /mutate call failed open) and must be admitted."""
    r = rendered(SCENARIOS[scenario])
    args = r.one("Deployment", FULLNAME)["spec"]["template"]["spec"]["containers"][0]["args"]
    told = {arg.split("=", 1)[1] for arg in args if arg.startswith("--system-namespace=")}
    candidates = ["kube-system", "kube-node-lease", "kube-public", "default", "sandbox"]
    system_entry = {
        ns
        for ns in candidates
        if [
            (h["name"], h["failurePolicy"])
            for h in called_for_pod(r, "MutatingWebhookConfiguration", ns, "CREATE")
        ]
        == [("system-pods.priority-webhook.io", "Ignore")]
    }
    assert (
        told
        == system_entry
        == set(SCENARIOS[scenario].get("admission", {}).get("systemNamespaces", ["kube-system"]))
    )


def test_the_default_policy_is_fail_closed_outside_kube_system(rendered: Render) -> None:
    r = rendered({})
    for kind in CONFIG_KINDS:
        assert [h["failurePolicy"] for h in called_for_pod(r, kind, "default", "CREATE")] == ["Fail"]


@pytest.mark.parametrize("scenario", ["default", "fail-open-and-tuned", "cert-manager"])
def test_priorityclasses_have_exactly_one_cluster_scoped_entry(scenario: str, rendered: Render) -> None:
    """A namespaceSelector does not apply to cluster-scoped objects: a PriorityClass rule in a namespaced
    entry would be called once per entry, and once with failurePolicy Ignore."""
    values = SCENARIOS[scenario]
    r = rendered(values)
    for operation in ("CREATE", "UPDATE", "DELETE"):
        called = [
            (kind, h)
            for kind, h in entries(r)
            if covers(h, "scheduling.k8s.io", "priorityclasses", operation)
        ]
        assert len(called) == 1
        kind, hook = called[0]
        assert kind == "ValidatingWebhookConfiguration"
        assert [rule["scope"] for rule in hook["rules"]] == ["Cluster"]
        assert hook["namespaceSelector"] == {} and hook["objectSelector"] == {}
        expected = values.get("admission", {}).get("priorityClassFailurePolicy", "Fail")
        assert hook["failurePolicy"] == expected
    for _, hook in entries(r):
        if covers(hook, "", "pods", "CREATE"):
            assert [rule["scope"] for rule in hook["rules"]] == ["Namespaced"]


def test_no_entry_uses_an_object_selector_a_pod_could_spoof(rendered: Render) -> None:
    for _, hook in entries(rendered({})):
        assert not hook.get("objectSelector"), "a label on the pod must not let it skip admission"


@pytest.mark.parametrize(
    "values, namespace, message",
    [
        ({}, "kube-system", 'not "kube-system"'),
        ({"admission": {"excludedNamespaces": ["kube-system"]}}, NAMESPACE, "is a system namespace"),
    ],
)
def test_setups_that_defeat_the_split_are_refused(
    chart: helm.Chart, values: dict[str, Any], namespace: str, message: str
) -> None:
    with pytest.raises(helm.HelmRenderError, match=message):
        render(chart, values, namespace=namespace)


def test_pod_groups_are_registered_only_when_switched_on(rendered: Render) -> None:
    """Off by default (upstream's feature gate off: the Priority plugin leaves PodGroups alone); on, two
    entries split as the pod entries are, CREATE only (upstream's UPDATE is a no-op)."""
    assert not any(covers(h, "scheduling.k8s.io", "podgroups", "CREATE") for _, h in entries(rendered({})))
    r = rendered({"admission": {"podGroups": {"enabled": True}}})
    hooks = {h["name"]: h for h in r.one("MutatingWebhookConfiguration", FULLNAME)["webhooks"]}
    general, system = hooks["podgroups.priority-webhook.io"], hooks["system-podgroups.priority-webhook.io"]
    assert (general["failurePolicy"], system["failurePolicy"]) == ("Fail", "Ignore")
    assert general["namespaceSelector"] == hooks["pods.priority-webhook.io"]["namespaceSelector"]
    assert system["namespaceSelector"] == hooks["system-pods.priority-webhook.io"]["namespaceSelector"]
    for hook in (general, system):
        assert not covers(hook, "scheduling.k8s.io", "podgroups", "UPDATE")
        assert hook["rules"][0]["apiVersions"] == ["v1alpha2", "v1beta1"]
