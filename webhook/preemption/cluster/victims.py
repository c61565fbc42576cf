"""`SelectVictimsOnNode` (DefaultPreemption): the fewest, least important pods to remove from one node.

Greedy, as upstream: remove every lower-priority pod, check that the preemptor then fits, and add pods
back ("reprieve") from the most important down, PDB-violating pods first, keeping each one that still
leaves room. The result is minimal in the sense that putting any single victim back makes the preemptor
not fit; it is not a knapsack optimum, and upstream does not want one.
"""

from __future__ import annotations

from dataclasses import dataclass

from webhook.preemption.cluster.filter import UNRESOLVABLE, Failure, NodeFit
from webhook.preemption.cluster.pdb import PdbIndex, split_by_pdb_violation
from webhook.preemption.cluster.snapshot import PodInfo
from webhook.preemption.predicates import resource_reasons
from webhook.preemption.resources import add, subtract, total

NO_VICTIMS = "No preemption victims found for incoming pod"


@dataclass(frozen=True, slots=True)
class Victims:
    pods: tuple[PodInfo, ...]  # most important first: pods[0] is the highest-priority victim
    pdb_violations: int


def importance_key(pod: PodInfo, now: float) -> tuple[int, float, str, int]:
    """Sort ascending = most important first (`MoreImportantPod`): priority descending, then earlier start.

    A pod that has not started counts as starting `now` (the youngest). Full ties are arbitrary upstream
    (`sort.Slice` is not stable; no release to 1.37 compares UIDs); we take UID ascending, then snapshot
    order, for a deterministic answer.
    """
    start = pod.start_time if pod.start_time is not None else now
    return (-pod.priority, start, pod.uid, pod.index)


def _covers(bigger: dict[str, int], smaller: dict[str, int]) -> bool:
    """`bigger` requests at least as much as `smaller` of every resource `smaller` names."""
    return all(bigger.get(name, 0) >= amount for name, amount in smaller.items())


def select_victims(
    preemptor: PodInfo,
    fit: NodeFit,
    pdbs: PdbIndex,
    now: float,
) -> Victims | Failure:
    """The victims on `fit.node`, or the status that makes the node no candidate."""
    node = fit.node
    lower = [p for p in node.pods if p.priority < preemptor.priority]
    if not lower:
        return Failure(UNRESOLVABLE, (NO_VICTIMS,))
    kept = [p for p in node.pods if p.priority >= preemptor.priority]
    # The same sum either way; add up the shorter list (usually the kept pods: few outrank the preemptor).
    if len(kept) < len(lower):
        used = add(total(p.requests for p in kept), fit.nominated_used)
    else:
        used = subtract(fit.base_used, total(p.requests for p in lower))
    failure = fit.failure(used, kept)
    if failure is not None:
        return failure
    lower.sort(key=lambda p: importance_key(p, now))
    violating, non_violating = split_by_pdb_violation(lower, pdbs)
    victims: list[PodInfo] = []
    violations = 0
    # Requests already rejected (only the minimal ones). Fit is monotone in the used resources, and
    # `used` only grows, so a pod asking at least as much of every resource is rejected without a check.
    rejected: list[dict[str, int]] = []
    for group, counts in ((violating, 1), (non_violating, 0)):
        if fit.ports:
            for pod in group:
                trial = add(used, pod.requests)
                kept.append(pod)
                if fit.fits(trial, kept):
                    used = trial
                else:
                    kept.pop()
                    victims.append(pod)
                    violations += counts
        else:  # the hot path: resources only, so the pods kept need not be listed
            requests, allocatable = preemptor.requests, fit.allocatable
            for pod in group:
                if any(_covers(pod.requests, smaller) for smaller in rejected):
                    victims.append(pod)  # asks at least as much as a pod already rejected: rejected too
                    violations += counts
                    continue
                trial = add(used, pod.requests)
                if resource_reasons(requests, allocatable, trial):
                    rejected = [r for r in rejected if not _covers(r, pod.requests)]
                    rejected.append(pod.requests)
                    victims.append(pod)
                    violations += counts
                else:
                    used = trial
    if not victims:
        # Cannot happen with monotone filters (removing all lower pods fitted, but some pod was needed
        # since the node did not fit as it stood); upstream reports it as an error, and so do we.
        return Failure("Error", (f"expected at least one victim pod on node {node.name}",))
    if violating and non_violating:
        victims.sort(key=lambda p: importance_key(p, now))  # upstream #128307
    return Victims(tuple(victims), violations)
