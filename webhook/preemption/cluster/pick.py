"""`pickOneNodeForPreemption`: the candidate node the scheduler nominates.

Criteria in upstream order; after each one only the candidates with the best score stay, and the first
criterion that leaves one candidate decides. Upstream's last resort is Go map iteration order (random);
ours is candidate order, i.e. the order the nodes were examined in (snapshot order from the offset).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from webhook.preemption.cluster.snapshot import NodeInfo
from webhook.preemption.cluster.victims import Victims

# MaxInt32 + 1, added per victim so that negative priorities never make more victims look better.
PRIORITY_OFFSET = 2**31


@dataclass(frozen=True, slots=True)
class NodeCandidate:
    node: NodeInfo
    victims: Victims


def earliest_start_of_top_priority(victims: Victims, now: float) -> float:
    """`GetEarliestPodStartTime`: earliest start among the victims with the highest priority."""
    top = victims.pods[0].priority
    return min((p.start_time if p.start_time is not None else now) for p in victims.pods if p.priority == top)


def score_functions(now: float) -> tuple[Callable[[NodeCandidate], float], ...]:
    """Higher is better, in upstream order."""
    return (
        lambda c: -c.victims.pdb_violations,
        lambda c: -c.victims.pods[0].priority,
        lambda c: -sum(p.priority + PRIORITY_OFFSET for p in c.victims.pods),
        lambda c: -len(c.victims.pods),
        lambda c: earliest_start_of_top_priority(c.victims, now),
    )


def pick_one(candidates: Sequence[NodeCandidate], now: float) -> NodeCandidate | None:
    if not candidates:
        return None
    remaining = list(candidates)
    for score in score_functions(now):
        if len(remaining) == 1:
            break
        scores = [score(c) for c in remaining]
        best = max(scores)
        remaining = [c for c, s in zip(remaining, scores, strict=True) if s == best]
    return remaining[0]


CRITERIA = (
    "more PDB violations",
    "a higher highest victim priority",
    "a larger sum of victim priorities (each + 2^31)",
    "more victims",
    "its most important victims started earlier",
)


def why_not(candidate: NodeCandidate, best: NodeCandidate, now: float) -> str:
    """The first criterion on which `candidate` lost to `best` (for --explain)."""
    for text, score in zip(CRITERIA, score_functions(now), strict=True):
        if score(candidate) < score(best):
            return text
    return "tied on every criterion; the node examined first wins"
