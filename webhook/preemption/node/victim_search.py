"""Which running pods the kubelet evicts for a critical pod (pkg/kubelet/preemption/preemption.go).

Two orders:
* "qos" (upstream, `getPodsToPreempt`): candidates are bucketed by QoS class only; priority is just the
  `Preemptable` filter. Eviction order BestEffort, Burstable, Guaranteed.
* "priority" (this project's priority-aware order, kubernetes issue #135857): candidates are grouped by
  (priority, QoS) from the least protected group up; a pod of equal or higher priority than the
  preemptor is never a victim. Within one priority this is exactly the QoS order.

Both use upstream's greedy `getPodsToPreemptByDistance`, its `smallerResourceRequest` tie-break and its
swap-remove, so victim identity and order match upstream, and its error texts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.k8s import SYSTEM_CRITICAL_PRIORITY
from webhook.preemption.pods import is_critical, priority_of
from webhook.preemption.qos import BEST_EFFORT, BURSTABLE, GUARANTEED, qos_class
from webhook.preemption.quantities import CPU, MEMORY
from webhook.preemption.resources import pod_requests
from webhook.preemption.semantics import CURRENT, Semantics

ORDER_QOS = "qos"
ORDER_PRIORITY = "priority"
ORDERS = (ORDER_QOS, ORDER_PRIORITY)

NO_VICTIMS = "no set of running pods found to reclaim resources: "

_QOS_RANK = {BEST_EFFORT: 1, BURSTABLE: 2, GUARANTEED: 3}

Requirements = list[tuple[str, int]]
"""`admissionRequirementList`: (resource, amount still needed), in the order of the failure reasons."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A pod that could be preempted, with its kubelet-view requests (`GetResourceRequest`) computed once."""

    pod: Mapping[str, Any]
    requests: Mapping[str, int]
    qos: str
    priority: int | None
    critical: bool = False

    @classmethod
    def of(
        cls,
        pod: Mapping[str, Any],
        critical_priority: int = SYSTEM_CRITICAL_PRIORITY,
        semantics: Semantics = CURRENT,
    ) -> Candidate:
        requests = pod_requests(pod, semantics)
        return cls(pod, requests, qos_class(pod), priority_of(pod), is_critical(pod, critical_priority))

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
