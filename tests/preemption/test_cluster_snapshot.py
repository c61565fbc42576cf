"""Indexing a snapshot: what the scheduler's cache would hold, and how each pod is read."""

from __future__ import annotations

import pytest

from tests.preemption.planner_data.builders import HIGH, LOW, MID, L, S, node, pod, snapshot
from webhook.policy.class_model import PriorityClass, StaticClassStore
from webhook.preemption.cluster.priority import resolve_priority
from webhook.preemption.cluster.snapshot import InvalidSnapshot, build_snapshot, parse_time, snapshot_classes


def test_pods_are_grouped_per_node_with_used_resources_summed():
    snap = snapshot([node("node1"), node("node2"), pod("a", "node1", LOW, L), pod("b", "node1", MID, S)])
    node1, node2 = snap.nodes
    assert [p.name for p in node1.pods] == ["a", "b"]
    assert node1.used == {"cpu": 400, "memory": 400, "pods": 2}
    assert (node2.pods, node2.used) == ([], {})


def test_terminal_pods_and_pods_on_unknown_nodes_are_left_out():
    snap = snapshot(
        [
            node("node1"),
            pod("done", "node1", LOW, L, phase="Succeeded"),
            pod("failed", "node1", LOW, L, phase="Failed"),
            pod("ghost", "gone-node", LOW, L),
        ]
    )
    assert snap.nodes[0].pods == []
    assert [p.name for p in snap.pods] == ["ghost"]


def test_only_unbound_pods_are_nominated():
    snap = snapshot(
        [
            node("node1"),
            pod("pending", "", HIGH, nominated="node1"),
            {**pod("bound", "node1", HIGH), "status": {"phase": "Running", "nominatedNodeName": "node1"}},
        ]
    )
    assert [p.name for p in snap.nominated["node1"]] == ["pending"]
    assert [p.name for p in snap.nodes[0].pods] == ["bound"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1970-01-01T00:00:10Z", 10.0),
        ("1970-01-01T02:00:10+02:00", 10.0),
        ("1970-01-01T00:00:10.5Z", 10.5),
        ("1970-01-01T00:00:10", 10.0),  # no zone: UTC, as the API server writes times
    ],
)
def test_start_times(raw, expected):
    assert parse_time(raw) == expected


def test_terminating_by_preemption_reads_only_the_first_disruption_target_condition():
    first_other = pod("a", "node1", LOW, terminating=True)
    first_other["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"},
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"},
    ]
    not_deleted = pod("b", "node1", LOW, preempted=True)
    marked = pod("c", "node1", LOW, terminating=True, preempted=True)
    snap = snapshot([node("node1"), first_other, not_deleted, marked])
    assert [p.terminating_by_preemption for p in snap.nodes[0].pods] == [False, False, True]


def test_snapshot_pods_without_priority_get_what_admission_gives_them():
    objects = [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "normal"},
            "value": 50,
            "globalDefault": True,
        },
        node("node1"),
        pod("unset", "node1"),
        pod("critical", "node1", class_name="system-node-critical"),
        pod("explicit", "node1", 7),
    ]
    sources = [(f"doc {i}", o) for i, o in enumerate(objects)]
    classes = StaticClassStore(snapshot_classes(sources)).snapshot()
    snap = build_snapshot(sources, lambda obj, ns: resolve_priority(obj, ns, classes))
    assert [p.priority for p in snap.nodes[0].pods] == [50, 2000001000, 7]


def test_bad_snapshot_class_names_the_document():
    bad = {"kind": "PriorityClass", "metadata": {"name": "x"}, "value": "high"}
    with pytest.raises(InvalidSnapshot, match=r"^doc: PriorityClass: value: must be a 32-bit integer"):
        snapshot_classes([("doc", bad)])


def test_non_object_documents_are_rejected():
    with pytest.raises(InvalidSnapshot, match="doc: expected a Kubernetes object, got list"):
        build_snapshot([("doc", [])], lambda obj, ns: (0, "PreemptLowerPriority"))


def test_other_kinds_are_ignored():
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}
    assert snapshot([service, node("node1")]).nodes[0].name == "node1"


def test_priority_class_objects_do_not_need_to_come_first():
    objects = [
        pod("p", "node1", class_name="late"),
        {"kind": "PriorityClass", "metadata": {"name": "late"}, "value": 3},
    ]
    sources = [("d", o) for o in objects]
    assert snapshot_classes(sources) == [PriorityClass("late", 3)]
