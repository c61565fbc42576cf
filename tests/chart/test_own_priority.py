"""The chart's own pods carry their class's priority in every mode.

The release's namespace is never sent to the webhook (its pods must start before it can answer), so with
the in-tree Priority plugin off ("the webhook does all of it") nothing would set `spec.priority` on them: on
a real node the sidecar then took its own pod for a victim, and the kubelet's critical-pod preemption a
webhook replica. Their templates carry the value themselves, which the plugin, where it runs, accepts as it
is equal to the class's value (upstream's rule, as `admit_pod` implements it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from testkit.chart_rendering import FULLNAME, NAMESPACE, Rendered
from webhook.k8s import SYSTEM_CLUSTER_CRITICAL, SYSTEM_NODE_CRITICAL
from webhook.policy.class_model import SYSTEM_CLASSES, SYSTEM_CLASSES_BY_NAME, ClassSet
from webhook.policy.decision import Request
from webhook.policy.pod_rules import admit_pod

Render = Callable[[dict[str, Any] | None], Rendered]
SIDECAR = f"{FULLNAME}-sidecar"

CASES = [
    # values, (kind, name), class named
    ({}, ("Deployment", FULLNAME), SYSTEM_CLUSTER_CRITICAL),
    ({}, ("DaemonSet", SIDECAR), SYSTEM_NODE_CRITICAL),
    (
        {"webhook": {"priorityClassName": SYSTEM_NODE_CRITICAL}},
        ("Deployment", FULLNAME),
        SYSTEM_NODE_CRITICAL,
    ),
    (
        {"sidecar": {"priorityClassName": SYSTEM_CLUSTER_CRITICAL}},
        ("DaemonSet", SIDECAR),
        SYSTEM_CLUSTER_CRITICAL,
    ),
]


def pod_spec(r: Rendered, kind: str, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = r.one(kind, name)["spec"]["template"]["spec"]
    return spec


@pytest.mark.parametrize("values, workload, class_name", CASES)
def test_each_pod_template_carries_its_class_s_value(
    values: dict[str, Any], workload: tuple[str, str], class_name: str, rendered: Render
) -> None:
    spec = pod_spec(rendered(values), *workload)
    assert spec["priorityClassName"] == class_name
    assert spec["priority"] == SYSTEM_CLASSES_BY_NAME[class_name].value


@pytest.mark.parametrize("values, workload, class_name", CASES)
def test_the_in_tree_plugin_admits_the_template_as_it_is(
    values: dict[str, Any], workload: tuple[str, str], class_name: str, rendered: Render
) -> None:
    """Upstream accepts a client-set priority equal to the class's value and changes nothing."""
    spec = pod_spec(rendered(values), *workload)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": NAMESPACE}, "spec": spec}
    request = Request(operation="CREATE", resource="pods", object=pod, namespace=NAMESPACE, name="p")
    decision = admit_pod(request, ClassSet(SYSTEM_CLASSES))
    assert decision.allowed, decision.message
    assert "priority" not in decision.spec_changes


def test_a_class_of_the_user_s_own_is_read_from_the_cluster_at_install(rendered: Render) -> None:
    """Offline (`helm template`) its value cannot be known: no spec.priority rather than a wrong one."""
    spec = pod_spec(rendered({"webhook": {"priorityClassName": "platform-critical"}}), "Deployment", FULLNAME)
    assert spec["priorityClassName"] == "platform-critical"
    assert "priority" not in spec
