"""The kubelet's admission predicates (`generalFilter` in pkg/kubelet/lifecycle/predicate.go).

Resource fit is the scheduler's `noderesources.Fits`; the non-resource predicates are NodeAffinity
(nodeSelector + required node affinity), NodeName, NodePorts and, for non-static pods, untolerated
NoExecute taints. Reasons, messages and their order are upstream's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.k8s import TERMINAL_PHASES
from webhook.preemption.pods import is_static_pod
from webhook.preemption.quantities import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, field, spec_of
from webhook.preemption.resources import InvalidObject, is_scalar_resource

NODE_AFFINITY = "NodeAffinity"
NODE_AFFINITY_MESSAGE = "node(s) didn't match Pod's node affinity/selector"
NODE_NAME = "NodeName"
NODE_NAME_MESSAGE = "node(s) didn't match the requested node name"
NODE_PORTS = "NodePorts"
NODE_PORTS_MESSAGE = "node(s) didn't have free ports for the requested pod ports"
TAINT_TOLERATION = "TaintToleration"
TAINT_TOLERATION_MESSAGE = "node(s) had taints that the pod didn't tolerate"

_FIXED_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE)


@dataclass(frozen=True)
class Reason:
    """One admission failure, shaped like the kubelet's rejection (`reason` + `message`).

    Resource reasons (`InsufficientResourceError`) carry resource/requested/used/capacity; predicate
    failures (`PredicateFailureError`) leave them None.
    """

    reason: str
    message: str
    resource: str | None = None
    requested: int | None = None
    used: int | None = None
    capacity: int | None = None

    @property
    def is_resource(self) -> bool:
        return self.resource is not None

    @property
    def insufficient_amount(self) -> int:
        """`GetInsufficientAmount`: what must be freed, requested - (capacity - used)."""
        if self.requested is None or self.used is None or self.capacity is None:
            raise ValueError(f"{self.reason} is not a resource reason")
        return self.requested - (self.capacity - self.used)

    @property
    def short(self) -> str:
        """`GetReason()`: "Insufficient cpu", or the predicate's description."""
        if self.is_resource:
            return f"Insufficient {self.resource}"
        return self.message.split(": ", 1)[1] if ": " in self.message else self.message

    def as_dict(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "message": self.message,
            "resource": self.resource,
            "requested": self.requested,
            "used": self.used,
            "capacity": self.capacity,
        }


def insufficient(resource: str, requested: int, used: int, capacity: int) -> Reason:
    """An `InsufficientResourceError` as the kubelet reports it (`OutOf<name>`)."""
    return Reason(
        reason=f"OutOf{resource}",
        message=f"Node didn't have enough resource: {resource}, requested: {requested}, "
        f"used: {used}, capacity: {capacity}",
        resource=resource,
        requested=requested,
        used=used,
        capacity=capacity,
    )


def predicate_failure(name: str, description: str) -> Reason:
    """A `PredicateFailureError`: reason is the predicate name, message its `Error()` text."""
    return Reason(reason=name, message=f"Predicate {name} failed: {description}")


def resource_reasons(
    pod_request: Mapping[str, int], allocatable: Mapping[str, int], used: Mapping[str, int]
) -> list[Reason]:
    """`noderesources.Fits`: pods first, then cpu, memory, ephemeral-storage, then scalar resources.

    `used` is the node's requested total over the other pods, with `pods` their count. Scalar resources
    (extended, hugepages, ...) are reported sorted by name; upstream iterates a Go map (random order).
    """
    reasons: list[Reason] = []
    pods_used = used.get(PODS, 0)
    pods_allowed = allocatable.get(PODS, 0)
    if pods_used + 1 > pods_allowed:
        reasons.append(insufficient(PODS, 1, pods_used, pods_allowed))
    for name in _FIXED_RESOURCES:
        want = pod_request.get(name, 0)
        if want > 0 and want > allocatable.get(name, 0) - used.get(name, 0):
            reasons.append(insufficient(name, want, used.get(name, 0), allocatable.get(name, 0)))
    for name in sorted(n for n in pod_request if is_scalar_resource(n)):
        want = pod_request[name]
        if want > 0 and want > allocatable.get(name, 0) - used.get(name, 0):
            reasons.append(insufficient(name, want, used.get(name, 0), allocatable.get(name, 0)))
    return reasons


def _meta(obj: Mapping[str, Any], what: str) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = field(obj, "metadata", what, default={})
    return meta


def node_name_mismatch(pod: Mapping[str, Any], node: Mapping[str, Any]) -> Reason | None:
    """`nodename.Fits`: `spec.nodeName` empty or equal to the node's name."""
    wanted = field(spec_of(pod), "nodeName", "spec", str, "")
    if wanted and wanted != _meta(node, "node").get("name"):
        return predicate_failure(NODE_NAME, NODE_NAME_MESSAGE)
    return None


def _labels(node: Mapping[str, Any]) -> Mapping[str, Any]:
    labels: Mapping[str, Any] = field(_meta(node, "node"), "labels", "node.metadata", default={})
    return labels


def _requirement_matches(req: Any, labels: Mapping[str, Any]) -> bool:
    """One `NodeSelectorRequirement` on labels; an invalid requirement matches nothing (as upstream)."""
    if not isinstance(req, Mapping):
        return False
    key, op, values = req.get("key"), req.get("operator"), req.get("values") or []
    if not isinstance(key, str) or not isinstance(values, list):
        return False
    present = key in labels
    value = labels.get(key)
    if op == "In":
        return bool(values) and present and value in values
    if op == "NotIn":
        return bool(values) and (not present or value not in values)
    if op == "Exists":
        return not values and present
    if op == "DoesNotExist":
        return not values and not present
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            return False
        try:
            bound, actual = int(values[0]), int(str(value))
        except (TypeError, ValueError):
            return False
        return present and (actual > bound if op == "Gt" else actual < bound)
    return False


def _field_matches(req: Any, node_name: Any) -> bool:
    """A `matchFields` requirement: only `metadata.name` with In/NotIn and exactly one value."""
    if not isinstance(req, Mapping) or req.get("key") != "metadata.name":
        return False
    values = req.get("values") or []
    if not isinstance(values, list) or len(values) != 1:
        return False
    if req.get("operator") == "In":
        return bool(node_name == values[0])
    if req.get("operator") == "NotIn":
        return bool(node_name != values[0])
    return False


def _term_matches(term: Any, labels: Mapping[str, Any], node_name: Any) -> bool:
    """A `NodeSelectorTerm`: all of its requirements; an empty term matches nothing."""
    if not isinstance(term, Mapping):
        return False
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not isinstance(exprs, list) or not isinstance(fields, list) or not (exprs or fields):
        return False
    return all(_requirement_matches(r, labels) for r in exprs) and all(
        _field_matches(r, node_name) for r in fields
    )


def node_selector_mismatch(pod: Mapping[str, Any], node: Mapping[str, Any]) -> Reason | None:
    """`GetRequiredNodeAffinity(pod).Match(node)`: nodeSelector AND required node affinity (terms ORed)."""
    spec = spec_of(pod)
    labels = _labels(node)
    selector = field(spec, "nodeSelector", "spec", default={})
    if any(labels.get(k) != v for k, v in selector.items()):
        return predicate_failure(NODE_AFFINITY, NODE_AFFINITY_MESSAGE)
    affinity = field(field(spec, "affinity", "spec", default={}), "nodeAffinity", "spec.affinity", default={})
    required = field(affinity, "requiredDuringSchedulingIgnoredDuringExecution", "spec.affinity.nodeAffinity")
    if required is not None:
        terms = required.get("nodeSelectorTerms") or []
        node_name = _meta(node, "node").get("name")
        if not isinstance(terms, list) or not any(_term_matches(t, labels, node_name) for t in terms):
            return predicate_failure(NODE_AFFINITY, NODE_AFFINITY_MESSAGE)
    return None


def _text(obj: Mapping[str, Any], key: str, path: str) -> str:
    """A string field; absent/null is "" (as Go's zero value)."""
    text: str = field(obj, key, path, str, "")
    return text


def _host_ports(pod: Mapping[str, Any]) -> Iterable[tuple[str, str, int]]:
    """(hostIP, protocol, hostPort) of regular containers with a host port, defaults applied."""
    for i, container in enumerate(field(spec_of(pod), "containers", "spec", list, [])):
        if not isinstance(container, dict):
            raise InvalidObject(f"spec.containers[{i}]: must be an object")
        for j, port in enumerate(field(container, "ports", f"spec.containers[{i}]", list, [])):
            path = f"spec.containers[{i}].ports[{j}]"
            if not isinstance(port, dict):
                raise InvalidObject(f"{path}: must be an object")
            host_port = port.get("hostPort") or 0
            if not isinstance(host_port, int) or isinstance(host_port, bool):
                raise InvalidObject(f"{path}.hostPort: must be an integer")
            if host_port > 0:
                yield (
                    _text(port, "hostIP", path) or "0.0.0.0",
                    _text(port, "protocol", path) or "TCP",
                    host_port,
                )


def host_port_conflicts(pod: Mapping[str, Any], pods_on_node: Iterable[Mapping[str, Any]]) -> Reason | None:
    """`nodeports.Fits`: a wanted host port is taken on the same IP, or either side binds 0.0.0.0."""
    wanted = list(_host_ports(pod))
    if not wanted:
        return None
    used: dict[tuple[str, int], set[str]] = {}
    for other in pods_on_node:
        for ip, protocol, port in _host_ports(other):
            used.setdefault((protocol, port), set()).add(ip)
    for ip, protocol, port in wanted:
        ips = used.get((protocol, port))
        if ips and (ip == "0.0.0.0" or ip in ips or "0.0.0.0" in ips):
            return predicate_failure(NODE_PORTS, NODE_PORTS_MESSAGE)
    return None


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """`Toleration.ToleratesTaint`: effect and key match when set; Equal (default) compares values."""
    effect, key = toleration.get("effect") or "", toleration.get("key") or ""
    if effect and effect != taint.get("effect"):
        return False
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return operator == "Exists"


def _string_objects(items: list[Any], keys: tuple[str, ...], path: str) -> list[dict[str, Any]]:
    """Taints/tolerations: objects whose named fields are strings (checked so bad input names itself)."""
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidObject(f"{path}[{i}]: must be an object")
        for key in keys:
            _text(item, key, f"{path}[{i}]")
    return items


def untolerated_taint(
    pod: Mapping[str, Any], node: Mapping[str, Any], effects: Iterable[str] = ("NoExecute",)
) -> Reason | None:
    """`FindMatchingUntoleratedTaint` over taints with one of `effects` (the kubelet: NoExecute only)."""
    fields = ("key", "value", "effect")
    taints = field(field(node, "spec", "node", default={}), "taints", "node.spec", list, [])
    taints = _string_objects(taints, fields, "node.spec.taints")
    tolerations = field(spec_of(pod), "tolerations", "spec", list, [])
    tolerations = _string_objects(tolerations, (*fields, "operator"), "spec.tolerations")
    wanted = set(effects)
    for taint in taints:
        if taint.get("effect") not in wanted:
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return predicate_failure(TAINT_TOLERATION, TAINT_TOLERATION_MESSAGE)
    return None


def non_resource_reasons(
    pod: Mapping[str, Any], node: Mapping[str, Any], pods_on_node: Iterable[Mapping[str, Any]]
) -> list[Reason]:
    """The kubelet's non-resource failures in upstream order: NodeAffinity, NodeName, NodePorts, taints.

    Static pods skip the taint check (`generalFilter`).
    """
    checks = [
        node_selector_mismatch(pod, node),
        node_name_mismatch(pod, node),
        host_port_conflicts(pod, pods_on_node),
    ]
    if not is_static_pod(pod):
        checks.append(untolerated_taint(pod, node))
    return [r for r in checks if r is not None]


OS_LABEL = "kubernetes.io/os"
DEFAULT_OS = "linux"  # the kubelet's runtime.GOOS when the node does not say
OS_SELECTOR_MISMATCH = Reason(
    "PodOSSelectorNodeLabelDoesNotMatch",
    "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
)
OS_NOT_SUPPORTED = Reason("PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS")


def os_mismatch(pod: Mapping[str, Any], node: Mapping[str, Any]) -> Reason | None:
    """The kubelet's OS checks, before any predicate (and so never a reason to preempt).

    The pod's `kubernetes.io/os` *label* and its `spec.os.name` must be the node's OS; the kubelet sets
    the node's `kubernetes.io/os` label from its own OS, which is what is compared here.
    """
    node_os = _labels(node).get(OS_LABEL) or DEFAULT_OS
    pod_labels = field(field(pod, "metadata", "pod", default={}), "labels", "metadata", default={})
    if OS_LABEL in pod_labels and pod_labels[OS_LABEL] != node_os:
        return OS_SELECTOR_MISMATCH
    pod_os = field(spec_of(pod), "os", "spec")
    if pod_os is not None and pod_os.get("name") != node_os:
        return OS_NOT_SUPPORTED
    return None


SUPPLEMENTAL_GROUPS_POLICY_NOT_SUPPORTED = Reason(
    "SupplementalGroupsPolicyNotSupported",
    "SupplementalGroupsPolicy=Strict is not supported in this node",
)


def supplemental_groups_policy_unsupported(pod: Mapping[str, Any], node: Mapping[str, Any]) -> Reason | None:
    """`rejectPodAdmissionBasedOnSupplementalGroupsPolicy` (feature beta or above, 1.33): a pod asking
    `securityContext.supplementalGroupsPolicy: Strict` on a node whose `status.features` does not say
    `supplementalGroupsPolicy: true`. Checked after the OS checks and before any predicate, so it is
    never a reason to preempt."""
    context = field(spec_of(pod), "securityContext", "spec", default={})
    policy = field(context, "supplementalGroupsPolicy", "spec.securityContext", str)
    if policy != "Strict":  # unset, or Merge (the default)
        return None
    status = field(node, "status", "node", default={})
    features = field(status, "features", "node.status", default={})
    if features.get("supplementalGroupsPolicy") is True:
        return None
    return SUPPLEMENTAL_GROUPS_POLICY_NOT_SUPPORTED


def is_terminal(pod: Mapping[str, Any]) -> bool:
    """Phase Succeeded or Failed: the pod holds no resources any more."""
    status = field(pod, "status", "pod", default={})
    return status.get("phase") in TERMINAL_PHASES
