"""TaintToleration's Filter reason by version: the cases of upstream's TestTaintTolerationFilter.

Up to 1.34.1 the reason names the first untolerated taint (`node(s) had untolerated taint {key: value}`);
from 1.34.2 (kubernetes PR #135023) and 1.35.0 (#134740) it is `node(s) had untolerated taint(s)`.
"""

from __future__ import annotations

import pytest

from tests.preemption.planner_data.builders import HIGH, LOW, VL, L, S, node, pod, preemptor, run, snapshot
from webhook.preemption.cluster.filter import UNRESOLVABLE
from webhook.preemption.cluster.planner import diagnose
from webhook.preemption.semantics import CURRENT, Semantics, semantics_of

USER1 = {"key": "dedicated", "value": "user1", "effect": "NoSchedule"}
USER2 = {"key": "dedicated", "value": "user2", "effect": "NoSchedule"}
FOO_BAR = {"key": "foo", "value": "bar", "effect": "NoSchedule"}
FOO_BAR_PREFER = {"key": "foo", "value": "bar", "effect": "PreferNoSchedule"}
FOO_BAR_EXECUTE = {"key": "foo", "value": "bar", "effect": "NoExecute"}


def tol(key: str, value: str = "", effect: str = "", operator: str = "Equal") -> dict[str, str]:
    out = {"key": key, "operator": operator, "effect": effect}
    if value:
        out["value"] = value
    return out


# (name, node taints, pod tolerations, the first untolerated taint's `{key: value}` or None when it fits)
FILTER = [
    (
        "a pod having no tolerations can't be scheduled onto a node with nonempty taints",
        [USER1],
        [],
        "dedicated: user1",
    ),
    (
        "a pod which can be scheduled on a dedicated node assigned to user1",
        [USER1],
        [tol("dedicated", "user1", "NoSchedule")],
        None,
    ),
    (
        "a pod which can't be scheduled on a dedicated node assigned to user2",
        [USER2],
        [tol("dedicated", "user1", "NoSchedule")],
        "dedicated: user2",
    ),
    (
        "a toleration with operator Exists tolerates the taint",
        [FOO_BAR],
        [tol("foo", effect="NoSchedule", operator="Exists")],
        None,
    ),
    (
        "multiple tolerations, multiple taints, all tolerated",
        [USER2, FOO_BAR],
        [tol("dedicated", "user2", "NoSchedule"), tol("foo", effect="NoSchedule", operator="Exists")],
        None,
    ),
    (
        "key and value match but the (non-empty) effect does not",
        [FOO_BAR],
        [tol("foo", "bar", "PreferNoSchedule")],
        "foo: bar",
    ),
    ("an empty toleration effect matches a NoSchedule taint", [FOO_BAR], [tol("foo", "bar")], None),
    (
        "a PreferNoSchedule taint is only scored",
        [FOO_BAR_PREFER],
        [tol("dedicated", "user2", "NoSchedule")],
        None,
    ),
    ("no toleration, a PreferNoSchedule taint", [FOO_BAR_PREFER], [], None),
    ("a NoExecute taint is filtered too", [FOO_BAR_EXECUTE], [], "foo: bar"),
    (
        "the first untolerated taint is named",
        [FOO_BAR_PREFER, USER2, FOO_BAR],
        [tol("foo", "bar")],
        "dedicated: user2",
    ),
]

OLD_FORM = ["v1.33.3", "v1.34.0", "v1.34.1", "1.34.1-gke.100"]
NEW_FORM = ["v1.34.2", "v1.34.7", "v1.35.0", "v1.35.4", "v1.36.0", "v1.37.1", None]


def reason_on(version, taints, tolerations):
    semantics = semantics_of(version)
    objects = [node("node1", taints=taints)]
    pre = preemptor(pod("pre", "", HIGH, S, tolerations=tolerations))
    status = diagnose(pre, snapshot(objects, pre, semantics))[1]["node1"]
    return None if status is None else (status.code, status.reasons)


@pytest.mark.parametrize(
    ("taints", "tolerations", "first"), [pytest.param(*row[1:], id=row[0]) for row in FILTER]
)
@pytest.mark.parametrize("version", OLD_FORM + NEW_FORM)
def test_taint_toleration_filter(version, taints, tolerations, first):
    got = reason_on(version, taints, tolerations)
    if first is None:
        assert got is None
    elif version in OLD_FORM:
        assert got == (UNRESOLVABLE, (f"node(s) had untolerated taint {{{first}}}",))
    else:
        assert got == (UNRESOLVABLE, ("node(s) had untolerated taint(s)",))


@pytest.mark.parametrize(
    ("version", "generic"),
    [
        ((1, 33, 9), False),
        ((1, 34, 0), False),
        ((1, 34, 1), False),
        ((1, 34, 2), True),
        ((1, 35, 0), True),
        ((1, 36, 0), True),
        ((1, 37, 0), True),
    ],
)
def test_the_gate_names_a_patch_per_minor(version, generic):
    assert Semantics(version).taint_reason_generic is generic


def test_the_unknown_version_is_the_newest_we_follow():
    assert Semantics((1, 37, 0)) == CURRENT
    assert CURRENT.taint_reason_generic


@pytest.mark.parametrize(
    ("version", "taint_reasons"),
    [
        (
            "v1.34.1",
            "1 node(s) had untolerated taint {dedicated: user1}, 1 node(s) had untolerated taint {foo: bar}",
        ),
        ("v1.34.2", "2 node(s) had untolerated taint(s)"),
        ("v1.35.0", "2 node(s) had untolerated taint(s)"),
    ],
)
def test_plans_message_counts_the_taints_as_the_version_words_them(version, taint_reasons):
    """The whole PodScheduled message: before 1.34.2 each taint is its own reason in the histogram; from
    1.34.2 the tainted nodes are counted together."""
    objects = [
        node("node1", taints=[USER1]),
        node("node2", taints=[FOO_BAR]),
        node("node3"),
        pod("p", "node3", HIGH, L),
    ]
    result = run(pod("pre", "", LOW, VL), objects, semantics=semantics_of(version))
    assert result.node is None
    assert result.message == (
        f"0/3 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, {taint_reasons}. "
        "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
        "2 Preemption is not helpful for scheduling."
    )


def kubelet(version):
    n = node("node1", taints=[USER1])
    n["status"]["nodeInfo"] = {"kubeletVersion": version}
    return n


@pytest.mark.parametrize(
    ("versions", "reason"),
    [
        (["v1.34.1"], "node(s) had untolerated taint {dedicated: user1}"),
        (["v1.34.2"], "node(s) had untolerated taint(s)"),
        (["v1.33.3", "v1.34.1"], "node(s) had untolerated taint {dedicated: user1}"),
        (["v1.34.1", "v1.35.0"], "node(s) had untolerated taint(s)"),
        ([None], "node(s) had untolerated taint(s)"),
    ],
)
def test_a_snapshot_file_follows_its_newest_kubelet(tmp_path, capsys, versions, reason):
    """`plan --cluster`: no scheduler version in a dump, the newest kubelet stands for it (skew policy)."""
    import json

    from webhook.cli import main

    nodes = []
    for i, version in enumerate(versions):
        n = kubelet(version) if version else node("node1", taints=[USER1])
        n["metadata"]["name"] = f"node{i}"
        nodes.append(n)
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}))
    pre = tmp_path / "pre.json"
    pre.write_text(json.dumps(pod("pre", "", HIGH, S)))
    assert main(["plan", "--cluster", str(cluster), "--pod", str(pre)]) == 1
    message = json.loads(capsys.readouterr().out)["message"]
    assert message.startswith(
        f"0/{len(versions)} nodes are available: {len(versions)} {reason}. preemption: "
    )
