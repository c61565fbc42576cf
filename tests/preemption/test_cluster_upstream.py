"""Upstream's DefaultPreemption test tables, ported (default_preemption_test.go, preemption_test.go).

Ids are the reference's (DR = TestDryRunPreemption, SB = TestSelectBestCandidate, PF = TestPostFilter,
E = TestPodEligibleToPreemptOthers, P = TestPreempt, NW = TestNodesWherePreemptionMightHelp). Rows that
need filters this planner does not model (inter-pod affinity, topology spread, extenders, PreFilter
extension errors, workload-aware preemption) are left out: DR1, DR7, DR8, PF7, PF11, PF12, PF13-18, P2-P6.
"""

from __future__ import annotations

import pytest

from tests.preemption.planner_data.builders import (
    HIGH,
    LOW,
    MID,
    NEG,
    VERY_HIGH,
    VL,
    L,
    M,
    S,
    candidate_map,
    node,
    pdb,
    pod,
    preemptor,
    run,
    snapshot,
)
from webhook.preemption.cluster.filter import UNRESOLVABLE, UNSCHEDULABLE, Failure
from webhook.preemption.cluster.planner import (
    FITS,
    NO_CANDIDATES,
    NOT_ELIGIBLE,
    PREEMPT,
    eligibility,
    potential_nodes,
)
from webhook.preemption.semantics import Semantics

U = Failure(UNSCHEDULABLE, ("Insufficient cpu",))
UU = Failure(UNRESOLVABLE, ("node(s) didn't match Pod's node affinity/selector",))
TWO = [node("node1"), node("node2")]
FIVE = [node(f"node{i}") for i in range(1, 6)]

# --- TestDryRunPreemption -------------------------------------------------------------------------------
# (id, nodes, existing pods, pdbs, preemptor, plan options, expected {node: (victims, NumPDBViolations)})
DRY_RUN = [
    (
        "DR2",
        TWO,
        [pod("p1", "node1", MID, L), pod("p2", "node2", MID, L)],
        [],
        pod("pre", "", HIGH, L),
        {},
        {"node1": (["p1"], 0), "node2": (["p2"], 0)},
    ),
    (
        "DR3",
        TWO,
        [pod("p1", "node1", MID, L), pod("p2", "node2", MID, L)],
        [],
        pod("pre", "", LOW, L),
        {},
        {},
    ),
    (
        "DR4",
        TWO,
        [pod("p1.1", "node1", LOW, S), pod("p1.2", "node1", MID, L), pod("p2", "node2", MID, L)],
        [],
        pod("pre", "", HIGH, L),
        {},
        {"node1": (["p1.2"], 0), "node2": (["p2"], 0)},
    ),
    (
        "DR5",
        TWO,
        [
            pod("p1.1", "node1", MID, S),
            pod("p1.2", "node1", LOW, S),
            pod("p1.3", "node1", MID, M),
            pod("p1.4", "node1", HIGH, S),
            pod("p2", "node2", HIGH, L),
        ],
        [],
        pod("pre", "", HIGH, L),
        {},
        {"node1": (["p1.2", "p1.3"], 0)},
    ),
    (
        "DR6",
        TWO,
        [
            pod("p1.1", "node1", LOW, S, start=5),
            pod("p1.2", "node1", LOW, S, start=4),
            pod("p1.3", "node1", MID, M, start=3),
            pod("p1.4", "node1", HIGH, S, start=2),
            pod("p2", "node2", HIGH, L, start=1),
        ],
        [],
        pod("pre", "", HIGH, L),
        {},
        {"node1": (["p1.1", "p1.3"], 0)},
    ),
    (
        "DR9",
        [node("node1")],
        [
            pod("p1.1", "node1", MID, M, labels={"app": "foo"}),
            pod("p1.2", "node1", MID, M, labels={"app": "foo"}),
        ],
        [pdb("pdb", {"app": "foo"}, 1)],
        pod("pre", "", HIGH, VL),
        {},
        {"node1": (["p1.1", "p1.2"], 1)},
    ),
    (
        "DR10",
        [node("node1")],
        [
            pod("p1.1", "node1", MID, M, labels={"app": "foo"}),
            pod("p1.2", "node1", MID, M, labels={"app": "foo"}),
        ],
        [pdb("pdb", {"app": "foo"}, 1, disrupted=["p2"])],
        pod("pre", "", HIGH, VL),
        {},
        {"node1": (["p1.1", "p1.2"], 1)},
    ),
    (
        "DR11",
        [node("node1")],
        [
            pod("p1.1", "node1", MID, M, labels={"app": "foo"}),
            pod("p1.2", "node1", MID, M, labels={"app": "foo"}),
        ],
        [pdb("pdb", {"app": "foo"}, 1, disrupted=["p1.2"])],
        pod("pre", "", HIGH, VL),
        {},
        {"node1": (["p1.1", "p1.2"], 0)},
    ),
    (
        "DR12",
        [node("node1")],
        [pod(f"p1.{i}", "node1", MID, M, labels={"app": "foo"}) for i in (1, 2, 3)],
        [pdb("pdb", {"app": "foo"}, 1, disrupted=["p1.3"])],
        pod("pre", "", HIGH, VL),
        {},
        {"node1": (["p1.1", "p1.2", "p1.3"], 1)},
    ),
    (
        "DR13",
        FIVE,
        [pod(f"p{i}", f"node{i}", MID, L) for i in range(1, 6)],
        [],
        pod("pre", "", HIGH, L),
        {"sample": True, "min_candidate_percentage": 40, "min_candidate_absolute": 1, "offset": 4},
        {"node1": (["p1"], 0), "node5": (["p5"], 0)},
    ),
    (
        "DR14",
        FIVE,
        [pod(f"p{i}", f"node{i}", VERY_HIGH if i in (2, 5) else MID, L) for i in range(1, 6)],
        [],
        pod("pre", "", HIGH, L),
        {"sample": True, "min_candidate_percentage": 40, "min_candidate_absolute": 1, "offset": 4},
        {"node1": (["p1"], 0), "node3": (["p3"], 0)},
    ),
    (
        "DR16",
        FIVE,
        [
            pod(f"p{i}", f"node{i}", MID, L, labels={"app": "foo"} if i in (1, 2, 5) else None)
            for i in range(1, 6)
        ],
        [pdb("pdb", {"app": "foo"}, 0)],
        pod("pre", "", HIGH, L),
        {"sample": True, "min_candidate_percentage": 40, "min_candidate_absolute": 2, "offset": 4},
        {"node1": (["p1"], 1), "node3": (["p3"], 0), "node5": (["p5"], 1)},
    ),
]


@pytest.mark.parametrize(
    ("nodes", "pods", "pdbs", "pre", "options", "expected"),
    [pytest.param(*row[1:], id=row[0]) for row in DRY_RUN],
)
def test_dry_run_preemption(nodes, pods, pdbs, pre, options, expected):
    result = run(pre, [*nodes, *pods, *pdbs], **options)
    assert candidate_map(result) == expected


def test_dry_run_dr16_evaluates_node2_but_drops_it_because_the_violating_list_is_full():
    _, nodes, pods, pdbs, pre, options, _ = next(r for r in DRY_RUN if r[0] == "DR16")
    result = run(pre, [*nodes, *pods, *pdbs], **options)
    assert "dropped" in result.excluded["node2"]
    assert result.excluded["node4"].startswith("not examined")  # stopped after node3


def test_dry_run_victims_keep_importance_order_not_name_order():
    """DR6: the real order is importance order (the upstream test sorts by name before comparing)."""
    _, nodes, pods, pdbs, pre, options, _ = next(r for r in DRY_RUN if r[0] == "DR6")
    result = run(pre, [*nodes, *pods, *pdbs], **options)
    assert [p.name for p in result.victims] == ["p1.3", "p1.1"]


@pytest.mark.parametrize(
    ("offset", "expected"), [(4, {"node1", "node5"}), (1, {"node2", "node3"}), (3, {"node4", "node5"})]
)
def test_dry_run_dr15_successive_cycles_start_at_their_offset(offset, expected):
    objects = [*FIVE, *(pod(f"p{i}", f"node{i}", MID, L) for i in range(1, 6))]
    options = {"sample": True, "min_candidate_percentage": 40, "min_candidate_absolute": 1, "offset": offset}
    assert set(candidate_map(run(pod("tp", "", HIGH, L), objects, **options))) == expected


# --- TestSelectBestCandidate (pickOneNodeForPreemption); preemptor requests VL -------------------------------
THREE = [node("node1"), node("node2"), node("node3")]
SELECT_BEST = [
    (
        "SB2",
        THREE,
        [
            ("node1", MID, M, 0),
            ("node1", MID, L, 0),
            ("node2", MID, M, 0),
            ("node2", LOW, M, 0),
            ("node3", LOW, M, 0),
            ("node3", LOW, M, 0),
        ],
        HIGH,
        "node3",
    ),
    (
        "SB3",
        THREE,
        [
            ("node1", MID, M, 0),
            ("node1", MID, L, 0),
            ("node2", MID, L, 0),
            ("node2", LOW, M, 0),
            ("node3", MID, M, 0),
            ("node3", MID, M, 0),
        ],
        HIGH,
        "node2",
    ),
    (
        "SB4",
        THREE,
        [
            ("node1", MID, S, 0),
            ("node1", NEG, S, 0),
            ("node1", MID, S, 0),
            ("node1", NEG, S, 0),
            ("node2", MID, L, 0),
            ("node2", NEG, M, 0),
            ("node3", MID, M, 0),
            ("node3", NEG, S, 0),
            ("node3", LOW, S, 0),
        ],
        HIGH,
        "node2",
    ),
    (
        "SB5",
        THREE,
        [
            ("node1", MID, S, 0),
            ("node1", NEG, S, 0),
            ("node1", NEG, S, 0),
            ("node2", MID, L, 0),
            ("node2", NEG, M, 0),
            ("node3", MID, M, 0),
            ("node3", NEG, S, 0),
            ("node3", LOW, S, 0),
        ],
        HIGH,
        "node2",
    ),
    (
        "SB6",
        [*THREE, node("node4")],
        [
            ("node1", MID, S, 0),
            ("node1", LOW, S, 0),
            ("node1", LOW, S, 0),
            ("node2", HIGH, L, 0),
            ("node3", MID, M, 0),
            ("node3", LOW, S, 0),
            ("node3", LOW, S, 0),
            ("node3", LOW, M, 0),
            ("node4", MID, M, 0),
            ("node4", MID, S, 0),
            ("node4", MID, S, 0),
            ("node4", NEG, S, 0),
        ],
        VERY_HIGH,
        "node1",
    ),
    (
        "SB7",
        THREE,
        [
            ("node1", MID, M, 2),
            ("node1", MID, M, 2),
            ("node2", MID, M, 3),
            ("node2", MID, M, 3),
            ("node3", MID, M, 1),
            ("node3", MID, M, 1),
        ],
        HIGH,
        "node2",
    ),
    (
        "SB8",
        THREE,
        [
            ("node1", MID, M, 4),
            ("node1", MID, M, 2),
            ("node2", MID, M, 5),
            ("node2", MID, M, 1),
            ("node3", MID, M, 3),
            ("node3", MID, M, 6),
        ],
        HIGH,
        "node3",
    ),
    (
        "SB9",
        THREE,
        [
            ("node1", LOW, M, 4),
            ("node1", MID, M, 2),
            ("node2", MID, M, 6),
            ("node2", LOW, M, 1),
            ("node3", LOW, M, 3),
            ("node3", MID, M, 5),
        ],
        HIGH,
        "node2",
    ),
]


@pytest.mark.parametrize(
    ("nodes", "pods", "priority", "expected"), [pytest.param(*row[1:], id=row[0]) for row in SELECT_BEST]
)
def test_select_best_candidate(nodes, pods, priority, expected):
    existing = [pod(f"p{i}", on, prio, req, start=start) for i, (on, prio, req, start) in enumerate(pods)]
    result = run(pod("pre", "", priority, VL), [*nodes, *existing])
    assert result.outcome == PREEMPT
    assert result.node == expected
    # every lower pod with a request has to go (the preemptor takes the whole node)
    assert sorted(p.name for p in result.victims) == sorted(
        p["metadata"]["name"] for p in existing if p["spec"]["nodeName"] == expected
    )


def test_select_best_candidate_sb1_full_tie_goes_to_the_node_examined_first():
    """Upstream: Go map order (either node). Ours: examination order, i.e. snapshot order."""
    existing = [pod("p1", "node1", MID, L, start=0), pod("p2", "node2", MID, L, start=0)]
    assert run(pod("pre", "", HIGH, L), [*TWO, *existing]).node == "node1"
    assert run(pod("pre", "", HIGH, L), [node("node2"), node("node1"), *existing]).node == "node2"
    result = run(pod("pre", "", HIGH, L), [*TWO, *existing])
    assert "tied on every criterion" in result.excluded["node2"]


# --- TestPostFilter -----------------------------------------------------------------------------------------
ONE_POD_NODE = {"pods": "1"}


def test_pf1_preempts_the_unset_priority_pod():
    result = run(pod("pre", "", 1000), [node("node1", ONE_POD_NODE), pod("p1", "node1")])
    assert (result.outcome, result.node, [p.name for p in result.victims]) == (PREEMPT, "node1", ["p1"])
    assert result.victims[0].priority == 0  # nil priority is 0


def test_pf2_equal_priority_gives_no_victims_and_clears_the_nomination():
    result = run(pod("pre", ""), [node("node1", ONE_POD_NODE), pod("p1", "node1")])
    assert (result.outcome, result.node) == (NO_CANDIDATES, None)
    assert result.preemption == (
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )
    # The pod's PodScheduled condition: the Filter's FitError, then the PostFilter's part.
    assert result.message == (
        "0/1 nodes are available: 1 Too many pods. "
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )


@pytest.mark.parametrize("diagnosis", [{"node1": UU}, {}], ids=["PF3-unresolvable", "PF4-absent"])
def test_pf3_pf4_unresolvable_or_absent_node_is_not_helpful(diagnosis):
    result = run(pod("pre", "", 1000), [node("node1", ONE_POD_NODE), pod("p1", "node1")], diagnosis=diagnosis)
    assert (result.outcome, result.node) == (NO_CANDIDATES, None)
    assert (
        result.preemption
        == "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )


def test_pf5_picks_the_node_with_the_lower_priority_victim():
    objects = [
        node("node1", ONE_POD_NODE),
        node("node2", ONE_POD_NODE),
        pod("p1", "node1", 1000),
        pod("p2", "node2", 0),
    ]
    result = run(pod("pre", "", 100), objects)
    assert (result.node, [p.name for p in result.victims]) == ("node2", ["p2"])


def test_pf6_victims_are_resorted_so_the_highest_priority_victim_counts():
    """#128307: node1 evicts [p1 (1000, PDB-ok), p2 (0, PDB-violating)]; its top victim is p1, so node2 wins."""
    key = "test.kubernetes.io/is-violating-pdb"
    objects = [
        node("node1", ONE_POD_NODE),
        node("node2", ONE_POD_NODE),
        pod("p1", "node1", 1000, labels={key: "non-violating"}),
        pod("p2", "node1", 0, labels={key: "violating"}),
        pod("p3", "node2", 100, labels={key: "violating"}),
        pdb("violating-pdb", {key: "violating"}, 0),
        pdb("non-violating-pdb", {key: "non-violating"}, 2147483647),
    ]
    result = run(pod("pre", "", 10000), objects)
    assert (result.node, [p.name for p in result.victims], result.pdb_violations) == ("node2", ["p3"], 1)
    node1 = next(c for c in result.candidates if c.node.name == "node1")
    assert [p.name for p in node1.victims.pods] == ["p1", "p2"]  # importance order, not violating-first


SMALL_NODE = {"cpu": "200m", "memory": "400"}


def test_pf8_dry_run_reports_insufficient_cpu_when_the_filter_said_unschedulable():
    objects = [
        node("node1", SMALL_NODE),
        node("node2", SMALL_NODE),
        pod("p1", "node1", 0),
        pod("p2", "node2", 0),
    ]
    result = run(pod("pre", "", 1000, L), objects, diagnosis={"node1": U, "node2": U})
    assert (result.outcome, result.node) == (NO_CANDIDATES, None)
    assert result.preemption == "preemption: 0/2 nodes are available: 2 Insufficient cpu."


def test_pf8_without_injected_statuses_a_request_above_allocatable_is_unresolvable():
    """Since #131345 (1.34) NodeResourcesFit itself returns UnschedulableAndUnresolvable for such a
    request; the 1.33 scheduler tries preemption there in vain (the dry run reports the filter)."""
    objects = [
        node("node1", SMALL_NODE),
        node("node2", SMALL_NODE),
        pod("p1", "node1", 0),
        pod("p2", "node2", 0),
    ]
    result = run(pod("pre", "", 1000, L), objects, semantics=Semantics((1, 34)))
    assert (
        result.preemption
        == "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    assert result.message == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    result = run(pod("pre", "", 1000, L), objects, semantics=Semantics((1, 33)))
    assert result.preemption == "preemption: 0/2 nodes are available: 2 Insufficient cpu."


def test_pf9_histogram_of_dry_run_failures():
    objects = [
        node("node1", ONE_POD_NODE),
        node("node2", SMALL_NODE),
        node("node3", ONE_POD_NODE),
        pod("p1", "node1", 1000),
        pod("p2", "node2", 0),
        pod("p3", "node3", 1000),
    ]
    result = run(pod("pre", "", 1000, L), objects, diagnosis={"node1": U, "node2": U, "node3": U})
    assert result.preemption == (
        "preemption: 0/3 nodes are available: 1 Insufficient cpu, 2 No preemption victims found for incoming pod."
    )


def test_pf10_mixes_dry_run_failures_and_unhelpful_nodes():
    objects = [
        *(node(f"node{i}", SMALL_NODE) for i in range(1, 5)),
        pod("p1", "node1", 0),
        pod("p2", "node2", 0),
    ]
    result = run(pod("pre", "", 1000, L), objects, diagnosis={"node1": U, "node2": U, "node4": UU})
    assert result.preemption == (
        "preemption: 0/4 nodes are available: 2 Insufficient cpu, 2 Preemption is not helpful for scheduling."
    )


# --- TestPodEligibleToPreemptOthers ------------------------------------------------------------------------
ELIGIBILITY = [
    ("E1", pod("pre", "", HIGH, nominated="node1"), [pod("p1", "node1", LOW, terminating=True)], UU, True),
    ("E2", pod("pre", "", HIGH), [], None, True),
    ("E3", pod("pre", "", HIGH, policy="Never"), [], None, False),
    (
        "E4",
        pod("pre", "", HIGH, nominated="node1"),
        [pod("p1", "node1", LOW, terminating=True, preempted=True)],
        U,
        False,
    ),
    ("E5", pod("pre", "", HIGH, nominated="node1"), [pod("p1", "node1", LOW, terminating=True)], U, True),
]


@pytest.mark.parametrize(
    ("pre", "pods", "status", "expected"), [pytest.param(*row[1:], id=row[0]) for row in ELIGIBILITY]
)
def test_pod_eligible_to_preempt_others(pre, pods, status, expected):
    info = preemptor(pre)
    snap = snapshot([node("node1"), *pods], info)
    assert (eligibility(info, snap, {"node1": status}) is None) is expected


def test_e3_message_is_upstreams():
    info = preemptor(pod("pre", "", HIGH, policy="Never"))
    assert eligibility(info, snapshot([]), {}) == "not eligible due to preemptionPolicy=Never."


def test_e4_waiting_for_its_victims_keeps_the_nomination():
    objects = [node("node1", ONE_POD_NODE), pod("p1", "node1", LOW, terminating=True, preempted=True)]
    result = run(pod("pre", "", HIGH, nominated="node1"), objects)
    assert (result.outcome, result.node) == (NOT_ELIGIBLE, None)
    assert result.summary == (
        "preemption: not eligible due to a terminating pod on the nominated node. It stays nominated to node1."
    )
    assert result.message == (
        "0/1 nodes are available: 1 Too many pods. "
        "preemption: not eligible due to a terminating pod on the nominated node."
    )


def test_a_higher_priority_terminating_pod_does_not_block():
    objects = [
        node("node1", ONE_POD_NODE),
        pod("p1", "node1", VERY_HIGH, terminating=True, preempted=True),
        node("node2", ONE_POD_NODE),
        pod("p2", "node2", LOW),
    ]
    result = run(pod("pre", "", HIGH, nominated="node1"), objects)
    assert (result.outcome, result.node) == (PREEMPT, "node2")


# --- TestPreempt (nodes VL, every node Unschedulable) ---------------------------------------------------------
P1_OBJECTS = [
    *THREE,
    pod("p1.1", "node1", LOW, S),
    pod("p1.2", "node1", LOW, S),
    pod("p2.1", "node2", HIGH, L),
    pod("p3.1", "node3", MID, M),
]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [("PreemptLowerPriority", "node1"), (None, "node1"), ("Never", None)],
    ids=["P1", "P8-nil-policy", "P7-never"],
)
def test_preempt(policy, expected):
    result = run(pod("pre", "", HIGH, VL, policy=policy), P1_OBJECTS)
    assert result.node == expected
    assert [p.name for p in result.victims] == (["p1.1", "p1.2"] if expected else [])


def test_preempt_again_with_the_victims_terminating_does_nothing():
    first = run(pod("pre", "", HIGH, VL), P1_OBJECTS)
    marked = [
        pod(
            o["metadata"]["name"],
            o["spec"]["nodeName"],
            o["spec"]["priority"],
            S,
            terminating=True,
            preempted=True,
        )
        if o["kind"] == "Pod" and o["metadata"]["name"] in {v.name for v in first.victims}
        else o
        for o in P1_OBJECTS
    ]
    again = run(pod("pre", "", HIGH, VL, nominated=first.node), marked)
    assert (again.outcome, again.node) == (NOT_ELIGIBLE, None)


# --- TestNodesWherePreemptionMightHelp -------------------------------------------------------------------
# Statuses as upstream states them per node (U = Unschedulable, UU = UnschedulableAndUnresolvable).
NODES_WHERE_PREEMPTION_MIGHT_HELP = [
    ("NW1", ["UU", "UU", "UU", "UU"], set()),
    ("NW2", ["U", "UU", "UU", "U"], {"node1", "node4"}),
    ("NW3", ["UU", "U", "U", "U"], {"node2", "node3", "node4"}),
    ("NW4", ["UU", "U", "U", "U"], {"node2", "node3", "node4"}),
    ("NW5", ["UU", "U", "U", "U"], {"node2", "node3", "node4"}),
    ("NW6", ["UU", "UU", "UU", "U"], {"node4"}),
    ("NW7", ["U", "UU", "U", "U"], {"node1", "node3", "node4"}),
    ("NW8", ["U", "UU", "U", "UU"], {"node1", "node3"}),
    ("NW9", ["U", "UU", "U", "UU"], {"node1", "node3"}),
]
FOUR = [node(f"node{i}") for i in range(1, 5)]


@pytest.mark.parametrize(
    ("codes", "expected"), [pytest.param(*r[1:], id=r[0]) for r in NODES_WHERE_PREEMPTION_MIGHT_HELP]
)
def test_nodes_where_preemption_might_help_from_stated_statuses(codes, expected):
    statuses = {f"node{i}": (U if c == "U" else UU) for i, c in enumerate(codes, 1)}
    assert {n.name for n in potential_nodes(snapshot(FOUR), statuses)} == expected


# The same rows with the statuses produced by the real filters: each upstream reason that this planner
# models is produced as such; the others are stood in for by a modelled filter with the same code.
ZONE_NODE = {"labels": {"zone": "a"}}
REASONS = {
    "nodeaffinity": (UNRESOLVABLE, {"labels": {"zone": "b"}}),  # pod selects zone=a
    "nodename": (UNRESOLVABLE, {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}),  # stand-in
    "taint": (UNRESOLVABLE, {"taints": [{"key": "k", "value": "v", "effect": "NoExecute"}]}),
    "unschedulable": (UNRESOLVABLE, {"unschedulable": True}),
    "insufficient": (UNSCHEDULABLE, {}),  # a lower-priority pod fills the node
    "host-port": (UNSCHEDULABLE, {}),  # a lower-priority pod holds the host port
}
NW_REAL = [
    ("NW1", ["nodeaffinity", "nodename", "taint", "nodeaffinity"], set()),
    ("NW2", ["host-port", "nodename", "unschedulable", "insufficient"], {"node1", "node4"}),
    ("NW4", ["taint", "insufficient", "insufficient", "host-port"], {"node2", "node3", "node4"}),
    ("NW6", ["nodeaffinity", "unschedulable", "taint", "insufficient"], {"node4"}),
    ("NW8", ["insufficient", "unschedulable", "host-port", "nodename"], {"node1", "node3"}),
]


@pytest.mark.parametrize(("reasons", "expected"), [pytest.param(*r[1:], id=r[0]) for r in NW_REAL])
def test_nodes_where_preemption_might_help_from_real_filters(reasons, expected):
    objects = []
    for i, reason in enumerate(reasons, 1):
        name = f"node{i}"
        _, shape = REASONS[reason]
        objects.append(
            node(
                name,
                labels=shape.get("labels", ZONE_NODE["labels"]),
                taints=shape.get("taints", ()),
                unschedulable=shape.get("unschedulable", False),
            )
        )
        if reason == "host-port":
            objects.append(pod(f"p{i}", name, LOW, S, host_ports=[8080]))
        else:
            objects.append(pod(f"p{i}", name, LOW, L))
    pre = pod("pre", "", HIGH, L, nodeSelector={"zone": "a"}, host_ports=[8080])
    result = run(pre, objects)
    assert {c.node.name for c in result.candidates} == expected
    for i, reason in enumerate(reasons, 1):
        helpful = REASONS[reason][0] == UNSCHEDULABLE
        assert result.excluded.get(f"node{i}", "").startswith("Preemption is not helpful") is not helpful


def test_the_pod_fits_as_things_stand_so_nothing_is_preempted():
    result = run(pod("pre", "", HIGH, S), [node("node1"), pod("p1", "node1", LOW, S)])
    assert (result.outcome, result.node, result.victims) == (FITS, "node1", ())
    assert result.message.startswith("no preemption needed")


def test_nominated_pods_of_higher_priority_occupy_the_node_and_lower_ones_lose_their_nomination():
    objects = [
        node("node1"),
        pod("p1", "node1", LOW, L),
        pod("n-high", "", VERY_HIGH, M, nominated="node1"),
        pod("n-low", "", LOW, VL, nominated="node1"),
    ]
    # 300 (p1) + 200 (nominated, higher) + 300 > 500: preemption needed although only p1 runs there
    result = run(pod("pre", "", HIGH, L), objects)
    assert (result.node, [p.name for p in result.victims]) == ("node1", ["p1"])
    assert [p.name for p in result.nominated_to_clear] == ["n-low"]
    # the lower nominated pod is never a victim and never counts as present
    without_high = run(pod("pre", "", HIGH, L), [o for o in objects if o["metadata"]["name"] != "n-high"])
    assert without_high.outcome == PREEMPT and [p.name for p in without_high.victims] == ["p1"]


# --- Legacy 2020 generic_scheduler_test.go rows whose expectation changed -----------------------------------
def test_l2_a_node_without_victims_is_no_candidate_any_more():
    """2020: machine3 (empty) won at once with 0 victims. Today, with every node stated Unschedulable,
    machine3 yields "No preemption victims found" and machine1/machine2 tie (ours: the first examined)."""
    objects = [
        node("machine1"),
        node("machine2"),
        node("machine3"),
        pod("m1.1", "machine1", MID, L),
        pod("m2.1", "machine2", MID, L),
    ]
    diagnosis = {"machine1": U, "machine2": U, "machine3": U}
    result = run(pod("pre", "", HIGH, L), objects, diagnosis=diagnosis)
    assert (result.node, [p.name for p in result.victims]) == ("machine1", ["m1.1"])
    assert result.excluded["machine3"] == "No preemption victims found for incoming pod"
    # without stated statuses our own Filter sees that machine3 simply fits: no preemption at all
    assert run(pod("pre", "", HIGH, L), objects).outcome == FITS


def test_a_victim_already_terminating_is_still_listed_and_counted():
    objects = [
        node("node1"),
        pod("going", "node1", LOW, L, terminating=True),
        node("node2"),
        pod("p", "node2", LOW, L),
    ]
    result = run(pod("pre", "", HIGH, L), objects)
    # node2 needs one victim of priority 0 too; both tie until the adjusted sums, equal as well: first examined
    assert (result.node, [p.name for p in result.victims]) == ("node1", ["going"])


def test_no_candidates_clears_the_pods_own_nomination():
    result = run(
        pod("pre", "", LOW, nominated="node1"), [node("node1", ONE_POD_NODE), pod("p1", "node1", HIGH)]
    )
    assert result.outcome == NO_CANDIDATES
    assert result.summary == (
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
        " Its nomination to node1 is cleared."
    )
