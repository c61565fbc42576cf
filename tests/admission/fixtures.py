"""Upstream admission_test.go fixtures (classes converted to v1 without defaulting: policy stays None)."""

from __future__ import annotations

from typing import Any

from webhook.k8s import POD_RESOURCE, PRIORITY_CLASS_RESOURCE
from webhook.policy.class_model import PriorityClass
from webhook.policy.decision import Request

default1 = PriorityClass("default1", 1000, True, None)
default2 = PriorityClass("default2", 2000, True, None)
nondefault1 = PriorityClass("nondefault1", 2000, False, None, "Just a test priority class")
system_cluster_critical = PriorityClass("system-cluster-critical", 2000000000, True, None)
preemption_policy_class = PriorityClass("nopreemptionpolicy", 2000, True, "PreemptLowerPriority")
system_test = PriorityClass("system-test", 1000000001, False, None, "Name has system critical prefix")


def pod(
    name: str,
    namespace: str,
    class_name: str | None = None,
    priority: int | None = None,
    policy: str | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "container"}]}
    if class_name is not None:
        spec["priorityClassName"] = class_name
    if priority is not None:
        spec["priority"] = priority
    if policy is not None:
        spec["preemptionPolicy"] = policy
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


MIRROR = {"kubernetes.io/config.mirror": ""}
PODS = {
    "p0": pod("pod-w-priorityclass", "namespace", "default1"),
    "p1": pod("pod-wo-priorityclass", "namespace"),
    "p2": pod("pod-w-non-existing-priorityclass", "namespace", "non-existing"),
    "p3": pod("pod-w-integer-priority", "namespace", "default1", 1000),
    "p4": pod("pod-w-system-priority", "kube-system", "system-cluster-critical"),
    "p5": pod("mirror-pod-w-system-priority", "kube-system", "system-cluster-critical", annotations=MIRROR),
    "p6": pod("mirror-pod-w-integer-priority", "namespace", "default1", 1000, annotations=MIRROR),
    "p7": pod(
        "pod-w-system-priority-in-nonsystem-namespace", "non-system-namespace", "system-cluster-critical"
    ),
    "p8": pod("pod-w-zero-priority-in-nonsystem-namespace", "non-system-namespace", priority=0),
    "p9": pod("pod-w-priority-matching-default-priority", "non-system-namespace", priority=2000),
    "p10": pod(
        "pod-w-priority-matching-resolved-default-priority",
        "kube-system",
        "system-cluster-critical",
        2000000000,
    ),
    "p11": pod(
        "pod-never-preemption-policy-matching-resolved-preemption-policy",
        "kube-system",
        "nopreemptionpolicy",
        2000,
    ),
    "p12": pod(
        "pod-preemption-policy-matching-resolved-preemption-policy",
        "kube-system",
        "nopreemptionpolicy",
        2000,
        "PreemptLowerPriority",
    ),
    "p13": pod(
        "pod-preemption-policy-not-matching-resolved-preemption-policy",
        "kube-system",
        "nopreemptionpolicy",
        2000,
        "Never",
    ),
}


def pod_request(
    obj: dict[str, Any], operation: str = "CREATE", old: dict[str, Any] | None = None, sub_resource: str = ""
) -> Request:
    return Request(operation, POD_RESOURCE, obj, old, obj["metadata"]["namespace"], "", sub_resource)


def class_request(
    obj: dict[str, Any] | None, operation: str, old: dict[str, Any] | None = None, name: str = ""
) -> Request:
    return Request(operation, PRIORITY_CLASS_RESOURCE, obj, old, "", name)
