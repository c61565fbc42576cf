"""Kubelet critical-pod admission: the fit check, then `CriticalPodAdmissionHandler`.

Upstream: pkg/kubelet/lifecycle/predicate.go (admission) and pkg/kubelet/preemption/preemption.go
(`HandleAdmissionFailure`); the victims themselves come from `victim_search`.

Choices where upstream leaves room (see docs/node-preemption.md):
* Terminating pods (deletionTimestamp set) keep holding their resources and are candidates, as upstream's
  active-pod list holds them: the kubelet kills such a victim again and admits. Such a victim is marked
  `terminating`, so that an evictor (the sidecar) waits for it instead of evicting it.
* Mirror pods (the API view of static pods) hold resources but are never victims: deleting a mirror pod
  does not stop its static pod, the kubelet recreates it. Upstream's active list holds the static pod,
  which a higher-priority critical pod could preempt.
* Pods in a terminal phase hold nothing and are ignored. Every other pod in the input counts as admitted.
* The kubelet's active-pod list order is fixed as admission order: creation time, then namespace/name.
* Scalar resources are reported sorted by name (upstream: Go map order).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.k8s import (
    CONFIG_SOURCE_ANNOTATION,
    MIRROR_POD_ANNOTATION,
    SYSTEM_CRITICAL_PRIORITY,
    TERMINAL_PHASES,
    pod_ref,
    same_ref,
)
from webhook.preemption.node.victim_search import (
    ORDER_QOS,
    ORDERS,
    Candidate,
    NoVictims,
    Requirements,
    pods_to_preempt,
)
from webhook.preemption.pods import (
    API_SOURCE,
    describe,
    is_critical,
    is_mirror_pod,
    is_static_pod,
    is_terminating,
    preemptable,
    priority_of,
)
from webhook.preemption.predicates import (
    Reason,
    is_terminal,
    non_resource_reasons,
    os_mismatch,
    resource_reasons,
    supplemental_groups_policy_unsupported,
)
from webhook.preemption.qos import qos_class
from webhook.preemption.resources import (
    InvalidObject,
    is_extended_resource,
    node_allocatable,
    request_views,
    scheduler_pod_requests,
    total,
)
from webhook.preemption.semantics import Semantics, node_semantics

# Texts and reasons from preemption.go and predicate.go.
FIND_ERROR = "preemption: error finding a set of pods to preempt: "
UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"
RECOVER_ERROR = "Unexpected error while attempting to recover from admission failure: "

__all__ = [
    "ORDERS",
    "Admission",
    "FailureHandling",
    "admit_to_node",
    "handle_admission_failure",
    "is_critical",
    "is_mirror_pod",
    "is_static_pod",
    "preemptable",
]


@dataclass
class Admission:
    """What the kubelet decides for one pod.

    `fits`: the pod fits as the node stands. `reasons`: every reason it does not (upstream order).
    `victims`: pods to evict, in eviction order, when a critical pod is admitted by preemption.
    `error`: the preemption error upstream's handler returns (then the pod is rejected).
    `requirements`: the insufficient amounts preemption had to free (the first one labels the metric).
    `rejection`: (reason, message) as the kubelet records a rejection, None when admitted.
    """

    admit: bool
    fits: bool
    reasons: list[Reason]
    victims: list[dict[str, Any]]
    error: str | None
    requirements: Requirements = field(default_factory=list)
    rejection: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class _Facts:
    """What admission needs of one pod, read once."""

    pod: Mapping[str, Any]
    kubelet: dict[str, int]  # GetResourceRequest view (by spec): what it frees as a victim
    scheduler: dict[str, int]  # what it holds on the node for admission (allocated/running from 1.33)
    terminal: bool
    terminating: bool
    static_or_mirror: bool
    priority: int | None

    def critical(self, critical_priority: int) -> bool:
        return self.static_or_mirror or (self.priority is not None and self.priority >= critical_priority)

    def admission_key(self) -> tuple[str, ...]:
        meta = self.pod.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        return (
            str(meta.get("creationTimestamp") or ""),
            str(meta.get("namespace") or ""),
            str(meta.get("name") or ""),
        )


def _facts(pod: Mapping[str, Any], semantics: Semantics) -> _Facts:
    """Reads a pod; a direct path for well-formed API objects, the checked accessors for anything else."""
    meta, spec, status = pod.get("metadata"), pod.get("spec"), pod.get("status")
    status = {} if status is None else status
    annotations = meta.get("annotations") if type(meta) is dict else None
    priority = spec.get("priority") if type(spec) is dict else None
    if (
        type(meta) is dict
        and type(spec) is dict
        and type(status) is dict
        and (annotations is None or type(annotations) is dict)
        and (priority is None or type(priority) is int)
    ):
        annotations = annotations or {}
        source = annotations.get(CONFIG_SOURCE_ANNOTATION)
        kubelet, scheduler = request_views(pod, semantics)
        return _Facts(
            pod,
            kubelet,
            scheduler,
            status.get("phase") in TERMINAL_PHASES,
            meta.get("deletionTimestamp") is not None,
            (source is not None and source != API_SOURCE) or MIRROR_POD_ANNOTATION in annotations,
            priority,
        )
    kubelet, scheduler = request_views(pod, semantics)
    return _Facts(
        pod,
        kubelet,
        scheduler,
        is_terminal(pod),
        is_terminating(pod),
        is_static_pod(pod) or is_mirror_pod(pod),
        priority_of(pod),
    )


def _active_pods(pod: Mapping[str, Any], pods: Iterable[Any], semantics: Semantics) -> list[_Facts]:
    """The other admitted pods: not terminal, not the pod itself, in admission order."""
    active = []
    ref = pod_ref(pod)
    for i, other in enumerate(pods):
        if not isinstance(other, dict):
            raise InvalidObject(f"pods[{i}]: must be an object")
        try:
            facts = _facts(other, semantics)
        except InvalidObject as err:
            raise InvalidObject(f"pods[{i}] ({describe(other)}): {err}") from None
        if facts.terminal or same_ref(ref, pod_ref(other)):
            continue
        active.append(facts)
    return sorted(active, key=_Facts.admission_key)


def _candidates(active: Sequence[_Facts], critical_priority: int) -> list[Candidate]:
    """Mirror and static pods hold resources but are never victims (module docstring)."""
    out = []
    for f in active:
        if f.static_or_mirror:
            continue
        try:
            qos = qos_class(f.pod)
        except InvalidObject as err:
            raise InvalidObject(f"pod {describe(f.pod)}: {err}") from None
        out.append(Candidate(f.pod, f.kubelet, qos, f.priority, f.critical(critical_priority)))
    return out


def _rejection(reasons: Sequence[Reason]) -> tuple[str, str]:
    if not reasons:
        return ("UnknownReason", "GeneralPredicates failed due to unknown reason, which is unexpected.")
    return (reasons[0].reason, reasons[0].message)


def admit_to_node(
    pod: Mapping[str, Any],
    node: Mapping[str, Any],
    pods: Iterable[Mapping[str, Any]],
    *,
    order: str = ORDER_QOS,
    critical_priority: int = SYSTEM_CRITICAL_PRIORITY,
    semantics: Semantics | None = None,
) -> Admission:
    """Kubelet admission of `pod` on `node` given every pod bound to the node (any phase).

    A pod that does not fit only for resource reasons and is critical is admitted after choosing
    victims; a non-resource reason means no eviction. `semantics`: the kubelet's version, by default
    read from the Node (`status.nodeInfo.kubeletVersion`). Raises InvalidObject for unreadable input.
    """
    if order not in ORDERS:
        raise ValueError(f"order: must be one of {', '.join(ORDERS)}, got {order!r}")
    if semantics is None:
        semantics = node_semantics(node)
    allocatable = _with_prefix("node", node_allocatable, node)
    try:
        early = os_mismatch(pod, node)
        if early is None and semantics.supplemental_groups_policy_check:
            early = supplemental_groups_policy_unsupported(pod, node)
    except InvalidObject as err:
        raise InvalidObject(f"pod {describe(pod)}: {err}") from None
    if early is not None:  # rejected before the predicates: preemption cannot help
        return Admission(False, False, [early], [], None, rejection=(early.reason, early.message))
    active = _active_pods(pod, pods, semantics)
    used = total(f.scheduler for f in active)
    try:
        request = scheduler_pod_requests(pod, semantics, on_node=False)
        # The kubelet drops extended resources the node does not advertise (removeMissingExtendedResources):
        # they are cluster-level resources handled elsewhere.
        for name in [n for n in request if is_extended_resource(n) and n not in allocatable]:
            del request[name]
        others = [f.pod for f in active]
        reasons = resource_reasons(request, allocatable, used) + non_resource_reasons(pod, node, others)
        is_critical(pod, critical_priority)  # reads spec.priority and annotations: fail here, named
    except InvalidObject as err:
        raise InvalidObject(f"pod {describe(pod)}: {err}") from None
    if not reasons:
        return Admission(admit=True, fits=True, reasons=[], victims=[], error=None)
    candidates = _candidates(active, critical_priority)
    handled = handle_admission_failure(
        pod, candidates, reasons, order=order, critical_priority=critical_priority
    )
    if handled.error is not None:
        rejection = (UNEXPECTED_ADMISSION_ERROR, RECOVER_ERROR + handled.error)
        return Admission(False, False, reasons, [], handled.error, handled.requirements, rejection)
    if handled.reasons:
        return Admission(False, False, reasons, [], None, handled.requirements, _rejection(handled.reasons))
    victims = [victim_summary(v) for v in handled.victims]
    return Admission(True, False, reasons, victims, None, handled.requirements)


@dataclass(frozen=True)
class FailureHandling:
    """`HandleAdmissionFailure`'s outcome: the reasons it returns, the victims it evicts, its error.

    No reasons and no error means the pod is admitted (after the victims are gone).
    """

    reasons: list[Reason]
    victims: list[Candidate]
    error: str | None
    requirements: Requirements


def handle_admission_failure(
    pod: Mapping[str, Any],
    candidates: Sequence[Candidate],
    failure_reasons: Sequence[Reason],
    *,
    order: str = ORDER_QOS,
    critical_priority: int = SYSTEM_CRITICAL_PRIORITY,
) -> FailureHandling:
    """`CriticalPodAdmissionHandler.HandleAdmissionFailure` on the active pods `candidates`.

    Non-critical pod: the reasons unchanged. Any non-resource reason: only those come back and nothing
    is evicted (the reported rejection reason changes, as upstream). Otherwise the insufficient amounts
    become requirements, in reason order, and victims are chosen.
    """
    if not is_critical(pod, critical_priority):
        return FailureHandling(list(failure_reasons), [], None, [])
    non_resource = [r for r in failure_reasons if not r.is_resource]
    if non_resource:
        return FailureHandling(non_resource, [], None, [])
    reqs = [(r.resource or "", r.insufficient_amount) for r in failure_reasons]
    try:
        victims = pods_to_preempt(pod, candidates, reqs, order=order, critical_priority=critical_priority)
    except NoVictims as err:
        return FailureHandling([], [], FIND_ERROR + str(err), reqs)
    return FailureHandling([], victims, None, reqs)


def _with_prefix(what: str, fn: Any, obj: Any) -> Any:
    try:
        return fn(obj)
    except InvalidObject as err:
        raise InvalidObject(f"{what}: {err}") from None


def victim_summary(victim: Candidate) -> dict[str, Any]:
    """The contract's victim entry: namespace, name, uid, qosClass, priority, terminating (already being
    deleted: its room comes without an eviction)."""
    raw_meta = victim.pod.get("metadata")
    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
    return {
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "qosClass": victim.qos,
        "priority": victim.priority,
        "terminating": is_terminating(victim.pod),
    }
