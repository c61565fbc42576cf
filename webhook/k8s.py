"""The project's Kubernetes vocabulary: upstream constants and the few object helpers every layer shares.

Neutral ground below every other module (it imports nothing of the project): the names of things as the
API server spells them (pkg/apis/scheduling/types.go, pkg/kubelet/types/pod_update.go, admission.k8s.io),
and reading a pod's identity the one way the project reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEFAULT_PRIORITY_WHEN_NO_DEFAULT_CLASS = 0
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_CRITICAL_PRIORITY = 2 * HIGHEST_USER_DEFINABLE_PRIORITY
SYSTEM_PRIORITY_CLASS_PREFIX = "system-"
SYSTEM_CLUSTER_CRITICAL = "system-cluster-critical"
SYSTEM_NODE_CRITICAL = "system-node-critical"

PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
PREEMPT_NEVER = "Never"
PREEMPTION_POLICIES = (PREEMPT_NEVER, PREEMPT_LOWER_PRIORITY)

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

CRITICAL_POD_ANNOTATION = "scheduler.alpha.kubernetes.io/critical-pod"
LEGACY_CRITICAL_NAMESPACE = "kube-system"
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"

# A pod in one of these phases has terminated: it holds no resources and will not run again.
TERMINAL_PHASES = ("Succeeded", "Failed")  # a tuple: `in` must not hash what a malformed pod holds

# AdmissionRequest.operation.
CREATE, UPDATE, DELETE, CONNECT = "CREATE", "UPDATE", "DELETE", "CONNECT"
OPERATIONS = (CREATE, UPDATE, DELETE, CONNECT)

# The resources we admit: (group, version, resource) as a review names them, and the group-qualified
# resource that upstream's messages and our decisions use.
POD_GVR = ("", "v1", "pods")
PRIORITY_CLASS_GVR = ("scheduling.k8s.io", "v1", "priorityclasses")
POD_RESOURCE = "pods"
PRIORITY_CLASS_RESOURCE = "priorityclasses.scheduling.k8s.io"
# PodGroups (workload-aware preemption): scheduling.k8s.io/v1alpha2 in 1.36 (alpha, gate
# WorkloadAwarePreemption), v1beta1 in 1.37 (beta, not served unless enabled). Oldest version first.
POD_GROUP_GROUP = "scheduling.k8s.io"
POD_GROUP_VERSIONS = ("v1alpha2", "v1beta1")
POD_GROUP_RESOURCE = "podgroups.scheduling.k8s.io"


class InvalidObject(ValueError):
    """A Kubernetes object that cannot be read: the message names the field and what is wrong."""


PodRef = tuple[str, str, str]  # (namespace, name, uid)


def pod_ref(pod: Any) -> PodRef:
    """(namespace, name, uid), empty strings when absent; generateName stands in for a missing name."""
    meta = pod.get("metadata") if isinstance(pod, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name") or meta.get("generateName") or ""
    return str(meta.get("namespace") or ""), str(name), str(meta.get("uid") or "")


def same_ref(a: PodRef, b: PodRef) -> bool:
    """The same pod: by uid when both have one (a dump of the cluster), else by namespace/name (files
    written by hand); never two unnamed pods."""
    ns_a, name_a, uid_a = a
    ns_b, name_b, uid_b = b
    if uid_a and uid_b:
        return uid_a == uid_b
    return bool(name_a) and (ns_a, name_a) == (ns_b, name_b)


def same_pod(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """`same_ref` of two pod objects."""
    return same_ref(pod_ref(a), pod_ref(b))


def section(obj: Mapping[str, Any], key: str) -> dict[str, Any]:
    """`obj[key]` when it is an object (metadata, spec, annotations, ...), else an empty one: offline input
    may hold anything there, and its validation speaks of it elsewhere."""
    value = obj.get(key)
    return value if isinstance(value, dict) else {}
