"""kube-scheduler DefaultPreemption (`Evaluator.Preempt`) on a snapshot: where a pod would be nominated
and which pods would be deleted for it.

Pipeline, as upstream: (0) the pod fits somewhere as things stand, so no preemption; (1) eligibility;
(2) nodes where preemption might help; (3) dry run (`SelectVictimsOnNode`) over the candidate nodes;
(4) `pickOneNodeForPreemption`; (5) lower-priority pods nominated to the chosen node lose the nomination.

Deliberate choices where upstream is random or version-dependent (see docs/planner.md):
nodes are examined sequentially (upstream with parallelism 1) in snapshot order; by default ALL potential
nodes are examined from offset 0 (no candidate limit), `sample=True` applies upstream's limits (10 %, at
least 100) from the given offset (the command draws it at random); the final tie-break is examination
order; equal victims are ordered by UID (ours: upstream leaves full ties unordered); a pod without
start time counts as starting at `now`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from webhook.k8s import PREEMPT_NEVER
from webhook.preemption.cluster.filter import UNRESOLVABLE, UNSCHEDULABLE, Failure, NodeFit, node_status
from webhook.preemption.cluster.pdb import PdbIndex
from webhook.preemption.cluster.pick import NodeCandidate, pick_one, why_not
from webhook.preemption.cluster.snapshot import NodeInfo, PodInfo, Snapshot
from webhook.preemption.cluster.victims import Victims, select_victims

# DefaultPreemptionArgs v1 defaults.
MIN_CANDIDATE_NODES_PERCENTAGE = 10
MIN_CANDIDATE_NODES_ABSOLUTE = 100

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_NODES = "no nodes available to schedule pods"  # ErrNoNodesAvailable: no FitError, no PostFilter
ABSENT = Failure(UNRESOLVABLE, ("not in the Filter diagnosis",))
NOT_EXAMINED = "not examined: the candidate sample was complete"
DROPPED = "a candidate, dropped: the list of PDB-violating candidates was full"

PROGRESS_EVERY = 64  # nodes between two progress calls

# Outcomes.
PREEMPT = "preempt"  # a node was nominated, victims to delete
FITS = "fits"  # no preemption needed: the pod fits a node as the cluster stands
NOT_ELIGIBLE = "not-eligible"  # the pod may not preempt (now); an existing nomination is kept
NO_CANDIDATES = "no-candidates"  # preemption cannot help; an existing nomination is cleared


@dataclass(frozen=True, slots=True)
class PlanOptions:
    now: float  # what a missing status.startTime counts as
    sample: bool = False  # apply the candidate limits below (upstream behaviour)
    min_candidate_percentage: int = MIN_CANDIDATE_NODES_PERCENTAGE
    min_candidate_absolute: int = MIN_CANDIDATE_NODES_ABSOLUTE
    # With sample: where to start, modulo the number of potential nodes. Upstream draws it at random for
    # every attempt; the caller does that (this module stays deterministic).
    offset: int = 0
    pdb_newest: bool = False  # PDB matching rules of the newest upstream (see pdb.PdbIndex)
    # Told (nodes examined, nodes to examine) now and then during the dry run: a big cluster takes seconds.
    progress: Callable[[int, int], None] | None = None


@dataclass(slots=True)
class Plan:
    outcome: str
    node: str | None
    victims: tuple[PodInfo, ...] = ()
    pdb_violations: int = 0
    nominated_to_clear: tuple[PodInfo, ...] = ()
    # What the scheduler writes in the pod's PodScheduled condition: the Filter's FitError ("0/N nodes are
    # available: ...") and then the PostFilter's part (`preemption`). FITS: our own words (no condition).
    message: str = ""
    preemption: str = ""  # the PostFilter message: "preemption: ..." ("" when a node was nominated)
    summary: str = ""  # our one-line account, for --explain (the nomination kept or cleared, the victims)
    # node name -> why it is not the answer; candidates: node -> victims, for --explain
    excluded: dict[str, str] = field(default_factory=dict)
    candidates: list[NodeCandidate] = field(default_factory=list)


def num_candidates(num_nodes: int, percentage: int, absolute: int) -> int:
    """`calculateNumCandidates`: percentage of the potential nodes, at least `absolute`, at most all."""
    n = num_nodes * percentage // 100
    if n < absolute:
        n = absolute
    return min(n, num_nodes)


def eligibility(preemptor: PodInfo, snapshot: Snapshot, statuses: Mapping[str, Failure | None]) -> str | None:
    """`PodEligibleToPreemptOthers`: None when the pod may preempt, else upstream's reason.

    Current rule (#114623, #92600): only lower-priority pods terminating BECAUSE the scheduler preempted
    them block a nominated pod from preempting again, and a hopeless nominated node lifts the block.
    """
    if preemptor.preemption_policy == PREEMPT_NEVER:
        return "not eligible due to preemptionPolicy=Never."
    nominated = preemptor.nominated_node
    if not nominated:
        return None
    status = statuses.get(nominated)
    node = snapshot.node(nominated)
    if node is None or (status is not None and status.code == UNRESOLVABLE):
        return None
    for pod in node.pods:
        if pod.priority < preemptor.priority and pod.terminating_by_preemption:
            return "not eligible due to a terminating pod on the nominated node."
    return None


def diagnose(preemptor: PodInfo, snapshot: Snapshot) -> tuple[dict[str, NodeFit], dict[str, Failure | None]]:
    """Per node: the fit checker, and the Filter status as the cluster stands (None: the pod fits)."""
    fits: dict[str, NodeFit] = {}
    statuses: dict[str, Failure | None] = {}
    for node in snapshot.nodes:
        fit = NodeFit(preemptor, node, snapshot.nominated.get(node.name, ()), snapshot.semantics)
        fits[node.name] = fit
        statuses[node.name] = node_status(preemptor, node, fit)
    return fits, statuses


def potential_nodes(snapshot: Snapshot, statuses: Mapping[str, Failure | None]) -> list[NodeInfo]:
    """`NodesForStatusCode(Unschedulable)`: nodes whose status is exactly Unschedulable, snapshot order.

    A node missing from `statuses` is UnschedulableAndUnresolvable (today's absent-node default).
    """
    out = []
    for node in snapshot.nodes:
        status = statuses.get(node.name, ABSENT)
        if status is not None and status.code == UNSCHEDULABLE:
            out.append(node)
    return out


def plan(
    preemptor: PodInfo,
    snapshot: Snapshot,
    options: PlanOptions,
    diagnosis: Mapping[str, Failure | None] | None = None,
) -> Plan:
    """The scheduler's preemption decision for `preemptor` (a pending pod) on `snapshot`.

    `diagnosis` replaces our Filter statuses (for filters this planner does not model, and for upstream
    tests that state them); a node missing from it counts as UnschedulableAndUnresolvable.
    """
    if not snapshot.nodes:
        return Plan(NO_CANDIDATES, None, message=NO_NODES, summary=NO_NODES)
    fits, statuses = diagnose(preemptor, snapshot)
    if diagnosis is not None:
        statuses = {n.name: diagnosis.get(n.name, ABSENT) for n in snapshot.nodes}

    fitting = [n.name for n in snapshot.nodes if statuses[n.name] is None]
    if fitting:
        excluded = {name: "fits without preemption" for name in fitting}
        message = (
            f"no preemption needed: the pod fits {len(fitting)} node(s) as they stand "
            f"(first: {fitting[0]}); the scheduler's scoring chooses among them"
        )
        return Plan(FITS, fitting[0], message=message, summary=message, excluded=excluded)

    # The Filter's FitError: every node's reasons, counted (the scheduler's NodeToStatus).
    filtered: Counter[str] = Counter()
    for status in statuses.values():
        if status is not None and status is not ABSENT:
            filtered.update(status.reasons)
    num_nodes = len(snapshot.nodes)

    def whole(post_filter: str) -> str:
        return fit_error_message(num_nodes, filtered, post_filter_msg=post_filter)

    excluded = {name: "; ".join(s.reasons) for name, s in statuses.items() if s is not None}
    reason = eligibility(preemptor, snapshot, statuses)
    if reason is not None:
        kept = f" It stays nominated to {preemptor.nominated_node}." if preemptor.nominated_node else ""
        post = f"preemption: {reason}"
        return Plan(
            NOT_ELIGIBLE, None, message=whole(post), preemption=post, summary=post + kept, excluded=excluded
        )

    potential = potential_nodes(snapshot, statuses)
    # The PostFilter's FitError histogram: hopeless nodes say so, dry-run failures replace the filter reasons.
    histogram: Counter[str] = Counter()
    for name, status in statuses.items():
        if status is not None and status.code != UNSCHEDULABLE:
            histogram[NOT_HELPFUL] += 1
            excluded[name] = f"{NOT_HELPFUL}: {'; '.join(status.reasons)}"

    candidates, dry_run_failures = dry_run(preemptor, potential, fits, snapshot, options)
    for name, failure in dry_run_failures.items():
        histogram.update(failure.reasons)
        excluded[name] = "; ".join(failure.reasons)
    best = pick_one(candidates, options.now)
    if best is None:
        post = "preemption: " + fit_error_message(num_nodes, histogram)
        summary = post
        if preemptor.nominated_node:  # upstream returns an empty nomination, which clears the old one
            summary += f" Its nomination to {preemptor.nominated_node} is cleared."
        return Plan(
            NO_CANDIDATES,
            None,
            message=whole(post),
            preemption=post,
            summary=summary,
            excluded=excluded,
            candidates=candidates,
        )

    excluded.pop(best.node.name, None)
    for candidate in candidates:
        if candidate is not best:
            excluded[candidate.node.name] = f"candidate, not chosen: {why_not(candidate, best, options.now)}"
    to_clear = tuple(p for p in snapshot.nominated.get(best.node.name, ()) if p.priority < preemptor.priority)
    victims = best.victims
    violations = f", {victims.pdb_violations} of them PDB-violating" if victims.pdb_violations else ""
    return Plan(
        PREEMPT,
        best.node.name,
        victims.pods,
        victims.pdb_violations,
        to_clear,
        # PostFilter succeeded: its message is empty and the condition says the Filter's part alone.
        message=whole(""),
        summary=f"preempt {len(victims.pods)} pod(s) on {best.node.name}{violations}",
        excluded=excluded,
        candidates=candidates,
    )


def fit_error_message(
    num_all_nodes: int, reasons: Mapping[str, int], pre_filter_msg: str = "", post_filter_msg: str = ""
) -> str:
    """`FitError.Error`: "0/N nodes are available:" and the "<count> <reason>" strings sorted as whole
    strings (so the counts take part in the order), or the PreFilter message instead; then the
    PostFilter message."""
    message = f"0/{num_all_nodes} nodes are available:"
    if pre_filter_msg:
        message += f" {pre_filter_msg}."
    else:
        histogram = sorted(f"{count} {reason}" for reason, count in reasons.items())
        if histogram:
            message += f" {', '.join(histogram)}."
    if post_filter_msg:
        message += f" {post_filter_msg}"
    return message


def dry_run(
    preemptor: PodInfo,
    potential: Sequence[NodeInfo],
    fits: dict[str, NodeFit],
    snapshot: Snapshot,
    options: PlanOptions,
) -> tuple[list[NodeCandidate], dict[str, Failure]]:
    """`DryRunPreemption`, sequential: (non-violating ++ violating candidates, failures per node).

    Each list is capped at k, and the walk stops once a non-violating candidate exists and k candidates
    were collected; without `sample`, k is every potential node, so every one is examined.
    """
    n = len(potential)
    failures: dict[str, Failure] = {}
    if n == 0:
        return [], failures
    if options.sample:
        k = num_candidates(n, options.min_candidate_percentage, options.min_candidate_absolute)
        offset = options.offset % n
    else:
        k, offset = n, 0
    pdbs = PdbIndex(snapshot.pdbs, empty_selector_matches_all=options.pdb_newest)
    good: list[NodeCandidate] = []
    bad: list[NodeCandidate] = []
    examined = 0
    progress = options.progress
    for i in range(n):
        node = potential[(offset + i) % n]
        examined += 1
        if progress is not None and examined % PROGRESS_EVERY == 0:
            progress(examined, n)
        fit = fits[node.name]
        result = select_victims(preemptor, fit, pdbs, options.now)
        if isinstance(result, Victims):
            bucket = good if result.pdb_violations == 0 else bad
            if len(bucket) < k:
                bucket.append(NodeCandidate(node, result))
            else:  # upstream drops it too: the list is capped at k
                failures[node.name] = Failure(UNSCHEDULABLE, (DROPPED,))
            if good and len(good) + len(bad) >= k:
                break
        else:
            failures[node.name] = result
    for i in range(examined, n):
        failures[potential[(offset + i) % n].name] = Failure(UNSCHEDULABLE, (NOT_EXAMINED,))
    return good + bad, failures
