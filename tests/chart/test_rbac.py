"""Least privilege: the exact (apiGroup, resource, verb) grants, per component and option."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from testkit.chart_rendering import FULLNAME, NAMESPACE, Rendered
from tests.chart.scenarios import SCENARIOS

Render = Callable[[dict[str, Any]], Rendered]
SIDECAR = f"{FULLNAME}-sidecar"
HOOKS = f"{FULLNAME}-hooks"
TEST = f"{FULLNAME}-test"

# What the code calls, and nothing else: the reflector lists and watches (no single GETs), the event
# recorder POSTs core/v1 Events (never patches them, never uses events.k8s.io), the sidecar PATCHes its
# record onto the rejected pod and evicts (outside dry-run), and deletes only with the options that delete.
WEBHOOK_GRANTS = {
    (group, resource, verb)
    for group, resource in (("scheduling.k8s.io", "priorityclasses"), ("", "namespaces"))
    for verb in ("list", "watch")
}
# With the sidecar's NodeRestriction (sidecar on, not a dry run): the webhook GETs the pod being evicted.
EVICTION_CHECK = {("", "pods", "get")}
SIDECAR_READS = {("", resource, verb) for resource in ("nodes", "pods") for verb in ("list", "watch")}
EVENTS = {("", "events", "create")}
EVICT = {("", "pods/eviction", "create")}
PATCH_PODS = {("", "pods", "patch")}  # the preemption record on the rejected pod
DELETE_PODS = {("", "pods", "delete")}
SIDECAR_GRANTS = SIDECAR_READS | EVENTS | EVICT | PATCH_PODS
DRY_RUN_GRANTS = SIDECAR_READS | EVENTS  # a dry run writes nothing but Events
CLEANUP_GRANTS = {
    ("admissionregistration.k8s.io", resource, "delete")
    for resource in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
}
TEST_CLUSTER_GRANTS = {("scheduling.k8s.io", "priorityclasses", "list")}
# certificates.mode webhook (the default): its two configurations' caBundle, its one CA Secret.
ROTATION_GRANTS = {
    ("admissionregistration.k8s.io", resource, verb)
    for resource in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
    for verb in ("get", "list", "watch", "patch")
}
CA_SECRET_GRANTS = {("", "secrets", verb) for verb in ("create", "get", "update")}
TEST_NAMESPACE_GRANTS = {("", "pods", "create")}


def grants(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    found = set()
    for rule in role["rules"]:
        assert "nonResourceURLs" not in rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    found.add((group, resource, verb))
    return found


@pytest.mark.parametrize(
    "scenario, sidecar, checks_evictions",
    [
        ("default", SIDECAR_GRANTS, True),
        ("sidecar", SIDECAR_GRANTS, True),
        ("sidecar-ignore-pdb", DRY_RUN_GRANTS, False),  # dry run: ignorePdb deletes nothing
        ("sidecar-recreate-rejected", SIDECAR_GRANTS | DELETE_PODS, True),
        ("sidecar-delete", SIDECAR_GRANTS | DELETE_PODS, True),
        ("observability", SIDECAR_GRANTS, True),
        ("no-sidecar", None, False),
        ("no-node-restriction", SIDECAR_GRANTS, False),
    ],
)
def test_grants_are_exactly_what_each_component_needs(
    scenario: str, sidecar: set[tuple[str, str, str]] | None, checks_evictions: bool, rendered: Render
) -> None:
    values = (
        SCENARIOS[scenario]
        if scenario in SCENARIOS
        else {
            "sidecar-delete": {"sidecar": {"ignorePdb": True}},
            "no-sidecar": {"sidecar": {"enabled": False}},
            "no-node-restriction": {"sidecar": {"nodeRestriction": False}},
        }[scenario]
    )
    r = rendered(values)
    roles = {role["metadata"]["name"]: grants(role) for role in r.of_kind("ClusterRole")}
    webhook = WEBHOOK_GRANTS | ROTATION_GRANTS | (EVICTION_CHECK if checks_evictions else set())
    expected = {FULLNAME: webhook, HOOKS: CLEANUP_GRANTS, TEST: TEST_CLUSTER_GRANTS}
    expected |= {SIDECAR: sidecar} if sidecar else {}
    assert roles == expected
    assert {role["metadata"]["name"]: grants(role) for role in r.of_kind("Role")} == {
        TEST: TEST_NAMESPACE_GRANTS,
        FULLNAME: CA_SECRET_GRANTS,
    }
    for grant in set().union(*roles.values()):
        assert "*" not in grant
        assert grant[1] != "secrets", "no component reads Secrets cluster-wide"


def test_the_cleanup_job_can_delete_only_the_releases_own_configurations(rendered: Render) -> None:
    (rule,) = rendered({}).one("ClusterRole", HOOKS)["rules"]
    assert rule["resourceNames"] == [FULLNAME]
    for role in rendered({}).of_kind("ClusterRole"):
        if role["metadata"]["name"] not in (HOOKS, FULLNAME):
            assert all("resourceNames" not in r for r in role["rules"])
    # The webhook's own rights on admission configuration are the caBundle patch, limited the same way.
    rules = rendered({}).one("ClusterRole", FULLNAME)["rules"]
    (own,) = [r for r in rules if r["apiGroups"] == ["admissionregistration.k8s.io"]]
    assert own["resourceNames"] == [FULLNAME] and "delete" not in own["verbs"]


def test_the_webhook_updates_only_its_own_ca_secret(rendered: Render) -> None:
    """A create cannot be limited by name; every read and write after it is."""
    rules = rendered({}).one("Role", FULLNAME)["rules"]
    assert [r for r in rules if "resourceNames" not in r] == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}
    ]
    assert rendered(SCENARIOS["generated"]).of_kind("Role") == [rendered({}).one("Role", TEST)]


def test_without_the_install_gate_there_is_no_cleanup_identity(rendered: Render) -> None:
    r = rendered({"admission": {"installGate": {"enabled": False}}})
    assert HOOKS not in {o["metadata"]["name"] for o in r.objects if o["kind"] != "ConfigMap"}


@pytest.mark.parametrize("scenario", ["default", "sidecar"])
def test_each_role_is_bound_to_its_own_service_account_only(scenario: str, rendered: Render) -> None:
    r = rendered(SCENARIOS[scenario])
    for binding in r.of_kind("ClusterRoleBinding") + r.of_kind("RoleBinding"):
        name = binding["metadata"]["name"]
        kind = "ClusterRole" if binding["kind"] == "ClusterRoleBinding" else "Role"
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]
        r.one("ServiceAccount", name)
    pods = {
        o["metadata"]["name"]: o["spec"]["template"]["spec"]
        for o in r.objects
        if o["kind"] in ("Deployment", "DaemonSet")
    }
    pods |= {o["metadata"]["name"]: o["spec"] for o in r.of_kind("Pod")}
    for name, spec in pods.items():
        assert spec["serviceAccountName"] == name
    for job in r.of_kind("Job"):
        spec = job["spec"]["template"]["spec"]
        assert spec["serviceAccountName"] == HOOKS
        # only the cleanup Job talks to the API server
        assert spec["automountServiceAccountToken"] is job["metadata"]["name"].endswith("-cleanup")
    bound = {b["metadata"]["name"] for b in r.of_kind("ClusterRoleBinding")}
    assert bound == set(pods) | {HOOKS}
