"""PodDisruptionBudget accounting in victim selection (`filterPodsWithPDBViolation`, classic and newest)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests.preemption.planner_data.builders import pdb as pdb_obj
from webhook.preemption.cluster.pdb import InvalidPdb, Pdb, PdbIndex, parse_selector, split_by_pdb_violation


@dataclass
class V:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    namespace: str = "default"


def pdbs(*objs) -> list[Pdb]:
    return [Pdb.from_object(o) for o in objs]


def split(victims, budgets, newest=False):
    violating, ok = split_by_pdb_violation(victims, PdbIndex(budgets, empty_selector_matches_all=newest))
    return [v.name for v in violating], [v.name for v in ok]


FOO = {"app": "foo"}

# (id, victims in importance order, PDBs, newest rules?, expected (violating, non-violating))
SPLIT = [
    (
        "budget-consumed-in-order",
        [V("a", FOO), V("b", FOO), V("c", FOO)],
        [pdb_obj("p", FOO, 1)],
        False,
        (["b", "c"], ["a"]),
    ),
    ("zero-budget-violates-all", [V("a", FOO), V("b", FOO)], [pdb_obj("p", FOO, 0)], False, (["a", "b"], [])),
    ("negative-budget", [V("a", FOO)], [pdb_obj("p", FOO, -2)], False, (["a"], [])),
    ("other-namespace-ignored", [V("a", FOO, "other")], [pdb_obj("p", FOO, 0)], False, ([], ["a"])),
    ("label-mismatch", [V("a", {"app": "bar"})], [pdb_obj("p", FOO, 0)], False, ([], ["a"])),
    (
        "disrupted-pod-neither-counts-nor-consumes",
        [V("a", FOO), V("b", FOO)],
        [pdb_obj("p", FOO, 1, disrupted=["a"])],
        False,
        ([], ["a", "b"]),
    ),
    ("classic-unlabeled-pod-matches-nothing", [V("a")], [pdb_obj("p", selector={})], False, ([], ["a"])),
    (
        "classic-empty-selector-matches-nothing",
        [V("a", FOO)],
        [pdb_obj("p", selector={})],
        False,
        ([], ["a"]),
    ),
    (
        "newest-empty-selector-matches-all",
        [V("a", FOO), V("b")],
        [pdb_obj("p", selector={})],
        True,
        (["a", "b"], []),
    ),
    (
        "nil-selector-matches-nothing-classic",
        [V("a", FOO)],
        [pdb_obj("p", selector=None)],
        False,
        ([], ["a"]),
    ),
    ("nil-selector-matches-nothing-newest", [V("a", FOO)], [pdb_obj("p", selector=None)], True, ([], ["a"])),
    # Overlap: classic decrements every matching PDB, so the second pod sees both budgets spent.
    (
        "classic-overlap-decrements-all",
        [V("a", {"app": "foo", "tier": "x"}), V("b", {"tier": "x"})],
        [pdb_obj("p1", FOO, 0), pdb_obj("p2", {"tier": "x"}, 1)],
        False,
        (["a", "b"], []),
    ),
    # Newest stops at the first PDB going negative: p2 is not decremented for a, so b still fits p2.
    (
        "newest-overlap-stops-at-first-violation",
        [V("a", {"app": "foo", "tier": "x"}), V("b", {"tier": "x"})],
        [pdb_obj("p1", FOO, 0), pdb_obj("p2", {"tier": "x"}, 1)],
        True,
        (["a"], ["b"]),
    ),
    (
        "match-expressions",
        [
            V("a", {"app": "foo", "env": "prod"}),
            V("b", {"app": "foo", "env": "dev"}),
            V("c", {"env": "prod"}),
        ],
        [
            pdb_obj(
                "p",
                selector={
                    "matchExpressions": [
                        {"key": "app", "operator": "Exists"},
                        {"key": "env", "operator": "NotIn", "values": ["dev"]},
                    ]
                },
            )
        ],
        False,
        (["a"], ["b", "c"]),
    ),
    (
        "match-labels-and-expressions-both-apply",
        [V("a", {"app": "foo", "env": "prod"}), V("b", FOO)],
        [
            pdb_obj(
                "p",
                selector={
                    "matchLabels": FOO,
                    "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "staging"]}],
                },
            )
        ],
        False,
        (["a"], ["b"]),
    ),
    (
        "does-not-exist",
        [V("a", FOO), V("b", {"app": "foo", "canary": "1"})],
        [pdb_obj("p", selector={"matchExpressions": [{"key": "canary", "operator": "DoesNotExist"}]})],
        False,
        (["a"], ["b"]),
    ),
    (
        "pdbs-keep-list-order-for-newest",
        [V("a", {"x": "1", "y": "1"}), V("b", {"x": "1"})],
        [pdb_obj("py", {"y": "1"}, 0), pdb_obj("px", {"x": "1"}, 1)],
        True,
        (["a"], ["b"]),
    ),
]


@pytest.mark.parametrize(
    ("victims", "budgets", "newest", "expected"), [pytest.param(*row[1:], id=row[0]) for row in SPLIT]
)
def test_split_by_pdb_violation(victims, budgets, newest, expected):
    assert split(victims, pdbs(*budgets), newest) == expected


def test_budgets_are_fresh_for_every_split():
    """Upstream recomputes per node: one node's consumption never leaks into another's."""
    index = PdbIndex(pdbs(pdb_obj("p", FOO, 1)))
    assert split_by_pdb_violation([V("a", FOO)], index)[0] == []
    assert split_by_pdb_violation([V("b", FOO)], index)[0] == []


def test_from_object_reads_status_and_defaults():
    got = Pdb.from_object({"metadata": {"name": "p"}, "spec": {"selector": {"matchLabels": FOO}}})
    assert (got.namespace, got.disruptions_allowed, got.disrupted_pods) == ("default", 0, frozenset())


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"metadata": {}}, "metadata.name: must be a non-empty string"),
        ({"metadata": {"name": "p"}, "status": {"disruptionsAllowed": "1"}}, "status.disruptionsAllowed"),
        ({"metadata": {"name": "p"}, "status": {"disruptionsAllowed": True}}, "status.disruptionsAllowed"),
        ({"metadata": {"name": "p"}, "spec": []}, "spec: must be an object"),
        ({"metadata": {"name": "p"}, "status": {"disruptedPods": ["a"]}}, "status.disruptedPods"),
    ],
)
def test_from_object_rejects_bad_fields(obj, message):
    with pytest.raises(InvalidPdb, match=message):
        Pdb.from_object(obj)


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ({"matchLabels": {"a": 1}}, r"spec.selector.matchLabels.a: must be a string"),
        ({"matchExpressions": {}}, r"spec.selector.matchExpressions: must be a list"),
        ({"matchExpressions": [{"key": "a", "operator": "Has"}]}, r"matchExpressions\[0\].operator"),
        (
            {"matchExpressions": [{"key": "a", "operator": "In"}]},
            r"matchExpressions\[0\].values: must be non-empty",
        ),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}, r"must be empty"),
        ({"matchExpressions": [{"operator": "Exists"}]}, r"matchExpressions\[0\].key"),
    ],
)
def test_selector_errors_name_the_field(selector, message):
    with pytest.raises(InvalidPdb, match=message):
        parse_selector(selector, "spec.selector")
