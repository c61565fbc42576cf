"""Read every field the kubelet model uses, up front, so bad input fails with the field's name.

`admit_pod` raises `InvalidObject` too, but only here can a caller (the `victims` command) attach the file
and document that the bad object came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.preemption.pods import is_mirror_pod, is_static_pod, is_terminating, priority_of
from webhook.preemption.predicates import (
    host_port_conflicts,
    is_terminal,
    os_mismatch,
    supplemental_groups_policy_unsupported,
    untolerated_taint,
)
from webhook.preemption.qos import qos_class
from webhook.preemption.quantities import field, spec_of
from webhook.preemption.resources import (
    InvalidObject,
    node_allocatable,
    request_views,
    scheduler_pod_requests,
)

_EMPTY_NODE: dict[str, Any] = {"metadata": {"name": ""}, "spec": {"taints": []}}
_STRICT_POD: dict[str, Any] = {"spec": {"securityContext": {"supplementalGroupsPolicy": "Strict"}}}


def check_pod(pod: Any) -> None:
    """Raises InvalidObject naming the first unreadable field of a Pod."""
    _check_kind(pod, "Pod")
    meta = field(pod, "metadata", "pod", default={})
    field(meta, "annotations", "metadata", default={})
    field(pod, "status", "pod", default={})
    spec = spec_of(pod)
    field(spec, "nodeName", "spec", str)
    field(spec, "nodeSelector", "spec")
    affinity = field(spec, "affinity", "spec", default={})
    node_affinity = field(affinity, "nodeAffinity", "spec.affinity", default={})
    field(node_affinity, "requiredDuringSchedulingIgnoredDuringExecution", "spec.affinity.nodeAffinity")
    request_views(pod)
    scheduler_pod_requests(pod)  # the status views read the container statuses and conditions
    qos_class(pod)
    priority_of(pod)
    is_static_pod(pod)
    is_mirror_pod(pod)
    is_terminal(pod)
    is_terminating(pod)
    host_port_conflicts(pod, [pod])
    untolerated_taint(pod, _EMPTY_NODE)
    os_mismatch(pod, _EMPTY_NODE)
    supplemental_groups_policy_unsupported(pod, _EMPTY_NODE)


def check_node(node: Any) -> None:
    """Raises InvalidObject naming the first unreadable field of a Node."""
    _check_kind(node, "Node")
    meta = field(node, "metadata", "node", default={})
    field(meta, "labels", "metadata", default={})
    node_allocatable(node)
    untolerated_taint({"spec": {}}, node)
    supplemental_groups_policy_unsupported(_STRICT_POD, node)


def _check_kind(obj: Any, kind: str) -> None:
    """An object, of `kind` when it says (files written by hand often leave kind out)."""
    if not isinstance(obj, Mapping):
        raise InvalidObject(f"must be a {kind} object, got {type(obj).__name__}")
    said = obj.get("kind")
    if said is not None and said != kind:
        raise InvalidObject(f"kind: expected {kind}, got {said!r}")  # the CLI bounds the line
