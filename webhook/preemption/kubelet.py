"""Kubelet critical-pod admission: fit check, then `CriticalPodAdmissionHandler` victim selection.

Upstream: pkg/kubelet/lifecycle/predicate.go (admission), pkg/kubelet/preemption/preemption.go (victims),
pkg/kubelet/types/pod_update.go (criticality). Two victim orders:

* "qos" (upstream, algorithm A): victims are bucketed by QoS class only; priority is just the
  `Preemptable` filter. Eviction order BestEffort, Burstable, Guaranteed.
* "priority" (this project's priority-aware order): candidates are grouped by (priority, QoS) from the
  least protected group up; a pod of equal or higher priority than the preemptor is never a victim.
  Within one priority this is exactly the QoS order above (kubernetes issue #135857).

Choices where upstream leaves room (see the README, section "Kubelet-side preemption"):
* Terminating pods (deletionTimestamp set) keep holding their resources but are never victims: evicting a
  pod that is already shutting down frees nothing sooner. Upstream may pick them again.
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

from webhook.policy.constants import (
    CONFIG_SOURCE_ANNOTATION,
    MIRROR_POD_ANNOTATION,
    SYSTEM_CRITICAL_PRIORITY,
)
from webhook.preemption.pods import (
    API_SOURCE,
    describe,
    is_mirror_pod,
    is_static_pod,
    is_terminating,
    pod_ref,
    priority_of,
    same_ref,
)
from webhook.preemption.predicates import (
    TERMINAL_PHASES,
    Reason,
    is_terminal,
    non_resource_reasons,
    os_mismatch,
    resource_reasons,
)
from webhook.preemption.qos import BEST_EFFORT, BURSTABLE, GUARANTEED, qos_class
from webhook.preemption.resources import (
    CPU,
    MEMORY,
    InvalidObject,
    is_extended_resource,
    node_allocatable,
    request_views,
    total,
)

__all__ = [
    "ORDERS",
    "Admission",
    "Candidate",
    "NoVictims",
    "admit_pod",
    "handle_admission_failure",
    "is_critical",
    "is_mirror_pod",
    "is_static_pod",
    "pods_to_preempt",
    "preemptable",
]

ORDER_QOS = "qos"
ORDER_PRIORITY = "priority"
ORDERS = (ORDER_QOS, ORDER_PRIORITY)

# Texts and reasons from preemption.go and predicate.go.
NO_VICTIMS = "no set of running pods found to reclaim resources: "
FIND_ERROR = "preemption: error finding a set of pods to preempt: "
UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"
RECOVER_ERROR = "Unexpected error while attempting to recover from admission failure: "

_QOS_RANK = {BEST_EFFORT: 1, BURSTABLE: 2, GUARANTEED: 3}

Requirements = list[tuple[str, int]]


def is_critical(pod: Mapping[str, Any], critical_priority: int = SYSTEM_CRITICAL_PRIORITY) -> bool:
    """`IsCriticalPod`: static, mirror, or priority at least `critical_priority` (namespace is irrelevant)."""
    if is_static_pod(pod) or is_mirror_pod(pod):
        return True
    priority = priority_of(pod)
    return priority is not None and priority >= critical_priority


def preemptable(
    preemptor: Mapping[str, Any],
    preemptee: Mapping[str, Any],
    critical_priority: int = SYSTEM_CRITICAL_PRIORITY,
) -> bool:
    """`Preemptable`: critical beats non-critical; otherwise strictly higher priority, nil never compares."""
    if is_critical(preemptor, critical_priority) and not is_critical(preemptee, critical_priority):
        return True
    a, b = priority_of(preemptor), priority_of(preemptee)
    return a is not None and b is not None and a > b


@dataclass(frozen=True, slots=True)
class Candidate:
    """A pod that could be preempted, with its kubelet-view requests (`GetResourceRequest`) computed once."""

    pod: Mapping[str, Any]
    requests: Mapping[str, int]
    qos: str
    priority: int | None
    critical: bool = False

    @classmethod
    def of(cls, pod: Mapping[str, Any], critical_priority: int = SYSTEM_CRITICAL_PRIORITY) -> Candidate:
        return cls(
            pod, request_views(pod)[0], qos_class(pod), priority_of(pod), is_critical(pod, critical_priority)
        )

    def request(self, resource: str) -> int:
        return self.requests.get(resource, 0)


def _preempts(critical: bool, priority: int | None, candidate: Candidate) -> bool:
    """`preemptable` with both sides' criticality and priority already known (the hot path)."""
    if critical and not candidate.critical:
        return True
    return priority is not None and candidate.priority is not None and priority > candidate.priority


class NoVictims(Exception):
    """No set of pods can free the requirements; the text is upstream's error."""


def requirements_string(reqs: Requirements) -> str:
    """`admissionRequirementList.toString()`, trailing ", " included: `[(res: cpu, q: 100), ]`."""
    return "[" + "".join(f"(res: {name}, q: {q}), " for name, q in reqs) + "]"


def distance(reqs: Requirements, pod: Candidate) -> float:
    """Σ ((q - request)/q)² over requirements the pod does not fully cover; each term is at most 1."""
    dist = 0.0
    for name, q in reqs:
        remaining = q - pod.request(name)
        if remaining > 0:
            fraction = remaining / q
            dist += fraction * fraction
    return dist


def subtract(reqs: Requirements, pods: Iterable[Candidate]) -> Requirements:
    """What is still needed after the pods are gone; satisfied requirements drop out, order kept."""
    pods = list(pods)
    out: Requirements = []
    for name, q in reqs:
        for pod in pods:
            q -= pod.request(name)
            if q <= 0:
                break
        if q > 0:
            out.append((name, q))
    return out


def smaller_resource_request(a: Candidate, b: Candidate) -> bool:
    """`smallerResourceRequest`: memory, then cpu; True on full equality (so later pods win ties)."""
    for name in (MEMORY, CPU):
        ra, rb = a.request(name), b.request(name)
        if ra < rb:
            return True
        if ra > rb:
            return False
    return True


def by_distance(pods: Sequence[Candidate], reqs: Requirements) -> list[Candidate]:
    """`getPodsToPreemptByDistance`: greedy, closest pod first, with upstream's swap-remove.

    Same arithmetic and scan as upstream; for speed the distance is computed once per distinct request
    vector per round, and `smallerResourceRequest` is a (memory, cpu) tuple comparison (`<=`: True on
    equality, so the later pod wins ties).
    """
    pods = list(pods)
    position = {name: i for i, (name, _) in enumerate(reqs)}
    vector_ids: dict[tuple[int, ...], int] = {}
    vectors: list[tuple[int, ...]] = []
    ids: list[int] = []
    sizes: list[tuple[int, int]] = []
    for pod in pods:
        requests = pod.requests
        vector = tuple(requests.get(name, 0) for name in position)
        vid = vector_ids.setdefault(vector, len(vectors))
        if vid == len(vectors):
            vectors.append(vector)
        ids.append(vid)
        sizes.append((requests.get(MEMORY, 0), requests.get(CPU, 0)))
    evict: list[Candidate] = []
    while reqs:
        if not pods:
            raise NoVictims(NO_VICTIMS + requirements_string(reqs))
        wanted = [(position[name], q) for name, q in reqs]
        distances = []
        for vector in vectors:
            d = 0.0
            for pos, q in wanted:
                remaining = q - vector[pos]
                if remaining > 0:
                    fraction = remaining / q
                    d += fraction * fraction
            distances.append(d)
        best, best_index = float(len(reqs) + 1), 0
        for i, vid in enumerate(ids):
            d = distances[vid]
            if d < best or (d == best and sizes[i] <= sizes[best_index]):
                best, best_index = d, i
        chosen = pods[best_index]
        reqs = subtract(reqs, [chosen])
        evict.append(chosen)
        _swap_remove(pods, best_index)
        _swap_remove(ids, best_index)
        _swap_remove(sizes, best_index)
    return evict


def _swap_remove(items: list[Any], index: int) -> None:
    """Upstream's `pods[i] = pods[len-1]; pods = pods[:len-1]`: it reorders the rest, which decides ties."""
    items[index] = items[-1]
    items.pop()


def _effective_priority(priority: int | None, critical: bool, critical_priority: int) -> int:
    """Priority for the priority-aware order: spec.priority; unset counts as 0, or as `critical_priority`
    for a critical pod (with no priority only static and mirror pods are critical)."""
    if priority is not None:
        return priority
    return critical_priority if critical else 0


def _groups(
    preemptor: Mapping[str, Any], pods: Sequence[Candidate], order: str, critical_priority: int
) -> list[list[Candidate]]:
    """Preemptable candidates in groups from least to most protected; input order kept inside a group."""
    critical, priority = is_critical(preemptor, critical_priority), priority_of(preemptor)
    if order == ORDER_QOS:
        buckets: dict[Any, list[Candidate]] = {BEST_EFFORT: [], BURSTABLE: [], GUARANTEED: []}
        for pod in pods:
            if pod.qos in buckets and _preempts(critical, priority, pod):
                buckets[pod.qos].append(pod)
        return list(buckets.values())
    if order != ORDER_PRIORITY:
        raise ValueError(f"order: must be one of {', '.join(ORDERS)}, got {order!r}")
    ceiling = _effective_priority(priority, critical, critical_priority)
    grouped: dict[tuple[int, int], list[Candidate]] = {}
    for pod in pods:
        if pod.qos not in _QOS_RANK or not _preempts(critical, priority, pod):
            continue
        level = _effective_priority(pod.priority, pod.critical, critical_priority)
        if level >= ceiling:
            continue
        grouped.setdefault((level, _QOS_RANK[pod.qos]), []).append(pod)
    return [grouped[key] for key in sorted(grouped)]


def pods_to_preempt(
    preemptor: Mapping[str, Any],
    pods: Sequence[Candidate],
    reqs: Requirements,
    *,
    order: str = ORDER_QOS,
    critical_priority: int = SYSTEM_CRITICAL_PRIORITY,
) -> list[Candidate]:
    """`getPodsToPreempt`, generalised to ordered groups; eviction order least protected group first.

    Each group gives up only what is needed assuming every less protected group is evicted entirely,
    starting from the most protected group: minimal impact on the most protected pods first. With the
    three QoS buckets this is upstream's algorithm exactly. Raises NoVictims with upstream's text.
    """
    groups = _groups(preemptor, pods, order, critical_priority)
    remaining = [reqs]
    for group in groups:
        remaining.append(subtract(remaining[-1], group))
    if remaining[-1]:
        raise NoVictims(NO_VICTIMS + requirements_string(remaining[-1]))
    chosen: list[list[Candidate]] = [[] for _ in groups]
    freed: list[Candidate] = []
    for i in range(len(groups) - 1, -1, -1):
        chosen[i] = by_distance(groups[i], subtract(remaining[i], freed))
        freed.extend(chosen[i])
    return [pod for group in chosen for pod in group]


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
    kubelet: dict[str, int]  # GetResourceRequest view: what it frees as a victim
    scheduler: dict[str, int]  # computePodResourceRequest view: what it holds on the node
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


def _facts(pod: Mapping[str, Any]) -> _Facts:
    """Reads a pod; a direct path for well-formed API objects, the checked accessors for anything else."""
    meta, spec, status = pod.get("metadata"), pod.get("spec"), pod.get("status") or {}
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
        kubelet, scheduler = request_views(pod)
        return _Facts(
            pod,
            kubelet,
            scheduler,
            status.get("phase") in TERMINAL_PHASES,
            meta.get("deletionTimestamp") is not None,
            (source is not None and source != API_SOURCE) or MIRROR_POD_ANNOTATION in annotations,
            priority,
        )
    kubelet, scheduler = request_views(pod)
    return _Facts(
        pod,
        kubelet,
        scheduler,
        is_terminal(pod),
        is_terminating(pod),
        is_static_pod(pod) or is_mirror_pod(pod),
        priority_of(pod),
    )


def _active_pods(pod: Mapping[str, Any], pods: Iterable[Any]) -> list[_Facts]:
    """The other admitted pods: not terminal, not the pod itself, in admission order."""
    active = []
    ref = pod_ref(pod)
    for i, other in enumerate(pods):
        if not isinstance(other, dict):
            raise InvalidObject(f"pods[{i}]: must be an object")
        try:
            facts = _facts(other)
        except InvalidObject as err:
            raise InvalidObject(f"pods[{i}] ({describe(other)}): {err}") from None
        if facts.terminal or same_ref(ref, other):
            continue
        active.append(facts)
    return sorted(active, key=_Facts.admission_key)


def _candidates(active: Sequence[_Facts], critical_priority: int) -> list[Candidate]:
    """Terminating, mirror and static pods hold resources but are never victims (module docstring)."""
    out = []
    for f in active:
        if f.terminating or f.static_or_mirror:
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


def admit_pod(
    pod: Mapping[str, Any],
    node: Mapping[str, Any],
    pods: Iterable[Mapping[str, Any]],
    *,
    order: str = ORDER_QOS,
    critical_priority: int = SYSTEM_CRITICAL_PRIORITY,
) -> Admission:
    """Kubelet admission of `pod` on `node` given every pod bound to the node (any phase).

    A pod that does not fit only for resource reasons and is critical is admitted after choosing
    victims; a non-resource reason means no eviction. Raises InvalidObject for unreadable input.
    """
    if order not in ORDERS:
        raise ValueError(f"order: must be one of {', '.join(ORDERS)}, got {order!r}")
    allocatable = _with_prefix("node", node_allocatable, node)
    try:
        wrong_os = os_mismatch(pod, node)
    except InvalidObject as err:
        raise InvalidObject(f"pod {describe(pod)}: {err}") from None
    if wrong_os is not None:  # rejected before the predicates: preemption cannot help
        return Admission(False, False, [wrong_os], [], None, rejection=(wrong_os.reason, wrong_os.message))
    active = _active_pods(pod, pods)
    used = total(f.scheduler for f in active)
    try:
        request = dict(request_views(pod)[1])
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
    """The contract's victim entry: namespace, name, uid, qosClass, priority."""
    meta = victim.pod.get("metadata") if isinstance(victim.pod.get("metadata"), Mapping) else {}
    return {
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "qosClass": victim.qos,
        "priority": victim.priority,
    }
