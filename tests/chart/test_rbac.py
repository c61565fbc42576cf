"""Least privilege: the exact (apiGroup, resource, verb) grants, per component and option."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.chart.rendering import FULLNAME, NAMESPACE, Rendered
from tests.chart.scenarios import SCENARIOS

Render = Callable[[dict[str, Any]], Rendered]
SIDECAR = f"{FULLNAME}-sidecar"

WEBHOOK_GRANTS = {("scheduling.k8s.io", "priorityclasses", verb) for verb in ("get", "list", "watch")}
SIDECAR_GRANTS = (
    {("", resource, verb) for resource in ("nodes", "pods") for verb in ("get", "list", "watch")}
    | {("", "pods/eviction", "create")}
    | {(group, "events", verb) for group in ("", "events.k8s.io") for verb in ("create", "patch")}
)
DELETE_PODS = {("", "pods", "delete")}
PATCH_PODS = {("", "pods", "patch")}  # the preemption record on the rejected pod (not needed in dry-run)


def grants(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    found = set()
    for rule in role["rules"]:
        assert "resourceNames" not in rule and "nonResourceURLs" not in rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    found.add((group, resource, verb))
    return found


@pytest.mark.parametrize(
    "scenario, sidecar",
    [
        ("default", None),
        ("sidecar", SIDECAR_GRANTS | PATCH_PODS),
        ("sidecar-ignore-pdb", SIDECAR_GRANTS | DELETE_PODS),  # dry run
        ("sidecar-recreate-rejected", SIDECAR_GRANTS | PATCH_PODS | DELETE_PODS),
        ("observability", SIDECAR_GRANTS | PATCH_PODS),
    ],
)
def test_grants_are_exactly_what_each_component_needs(
    scenario: str, sidecar: set[tuple[str, str, str]] | None, rendered: Render
) -> None:
    r = rendered(SCENARIOS[scenario])
    assert r.of_kind("Role") == [] and r.of_kind("RoleBinding") == []
    roles = {role["metadata"]["name"]: grants(role) for role in r.of_kind("ClusterRole")}
    expected = {FULLNAME: WEBHOOK_GRANTS} | ({SIDECAR: sidecar} if sidecar else {})
    assert roles == expected
    for grant in set().union(*roles.values()):
        assert "*" not in grant
        assert grant[1] != "secrets", "no component reads Secrets"


@pytest.mark.parametrize("scenario", ["default", "sidecar"])
def test_each_role_is_bound_to_its_own_service_account_only(scenario: str, rendered: Render) -> None:
    r = rendered(SCENARIOS[scenario])
    for binding in r.of_kind("ClusterRoleBinding"):
        name = binding["metadata"]["name"]
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": name,
        }
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]
        r.one("ServiceAccount", name)
    workloads = {o["metadata"]["name"]: o for o in r.objects if o["kind"] in ("Deployment", "DaemonSet")}
    for name, workload in workloads.items():
        assert workload["spec"]["template"]["spec"]["serviceAccountName"] == name
    assert len(r.of_kind("ClusterRoleBinding")) == len(workloads)
