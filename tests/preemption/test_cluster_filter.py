"""The Filter diagnosis per node: which failures preemption can fix, in upstream plugin order."""

from __future__ import annotations

import pytest

from tests.preemption.planner_data.builders import HIGH, LOW, L, M, S, node, pod, preemptor, snapshot
from webhook.preemption.cluster.filter import UNRESOLVABLE, UNSCHEDULABLE
from webhook.preemption.cluster.planner import diagnose
from webhook.preemption.semantics import Semantics

V1_33, V1_34 = Semantics((1, 33)), Semantics((1, 34))

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
NO_EXECUTE = {"key": "dedicated", "value": "gpu", "effect": "NoExecute"}
PREFER = {"key": "dedicated", "value": "gpu", "effect": "PreferNoSchedule"}
TOLERATE = [{"key": "dedicated", "operator": "Equal", "value": "gpu"}]
AFFINITY_A = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
        }
    }
}

# (id, node kwargs, pods on the node, preemptor kwargs, expected (code, reasons) or None when it fits)
STATUS = [
    ("fits", {}, [], {}, None),
    (
        "insufficient-cpu",
        {},
        [("p", LOW, L)],
        {"req": L},
        (UNSCHEDULABLE, ("Insufficient cpu", "Insufficient memory")),
    ),
    (
        "too-many-pods",
        {"alloc": {"cpu": "1", "pods": "1"}},
        [("p", LOW, None)],
        {"req": {}},
        (UNSCHEDULABLE, ("Too many pods",)),
    ),
    (
        "request-above-allocatable",
        {"alloc": {"cpu": "200m", "memory": "1000"}},
        [],
        {"req": L},
        (UNRESOLVABLE, ("Insufficient cpu",)),
    ),
    (
        "extended-resource-missing-on-node",
        {},
        [],
        {"req": {"example.com/gpu": "1"}},
        (UNRESOLVABLE, ("Insufficient example.com/gpu",)),
    ),
    ("cordoned", {"unschedulable": True}, [], {}, (UNRESOLVABLE, ("node(s) were unschedulable",))),
    (
        "cordoned-but-tolerated",
        {"unschedulable": True},
        [],
        {
            "tolerations": [
                {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
            ]
        },
        None,
    ),
    (
        "node-name",
        {},
        [],
        {"nodeName": "elsewhere"},
        (UNRESOLVABLE, ("node(s) didn't match the requested node name",)),
    ),
    (
        "no-schedule-taint",
        {"taints": [TAINT]},
        [],
        {},
        (UNRESOLVABLE, ("node(s) had untolerated taint {dedicated: gpu}",)),
    ),
    (
        "no-execute-taint",
        {"taints": [NO_EXECUTE]},
        [],
        {},
        (UNRESOLVABLE, ("node(s) had untolerated taint {dedicated: gpu}",)),
    ),
    ("prefer-no-schedule-is-only-scoring", {"taints": [PREFER]}, [], {}, None),
    ("taint-tolerated", {"taints": [TAINT, NO_EXECUTE]}, [], {"tolerations": TOLERATE}, None),
    (
        "node-selector",
        {"labels": {"zone": "b"}},
        [],
        {"nodeSelector": {"zone": "a"}},
        (UNRESOLVABLE, ("node(s) didn't match Pod's node affinity/selector",)),
    ),
    (
        "required-node-affinity",
        {"labels": {"zone": "b"}},
        [],
        {"affinity": AFFINITY_A},
        (UNRESOLVABLE, ("node(s) didn't match Pod's node affinity/selector",)),
    ),
    ("node-affinity-matches", {"labels": {"zone": "a"}}, [], {"affinity": AFFINITY_A}, None),
    (
        "host-port-conflict",
        {},
        [("p", LOW, S, [8080])],
        {"host_ports": [8080]},
        (UNSCHEDULABLE, ("node(s) didn't have free ports for the requested pod ports",)),
    ),
    ("host-port-free", {}, [("p", LOW, S, [9090])], {"host_ports": [8080]}, None),
    # Only the first failing plugin counts: the port conflict (resolvable) hides the oversize request.
    (
        "ports-before-resources",
        {"alloc": {"cpu": "200m", "memory": "1000"}},
        [("p", LOW, None, [8080])],
        {"host_ports": [8080], "req": L},
        (UNSCHEDULABLE, ("node(s) didn't have free ports for the requested pod ports",)),
    ),
    # ...and a static filter hides everything after it.
    (
        "taint-before-resources",
        {"taints": [TAINT]},
        [("p", LOW, L)],
        {"req": L},
        (UNRESOLVABLE, ("node(s) had untolerated taint {dedicated: gpu}",)),
    ),
    (
        "unschedulable-before-node-name",
        {"unschedulable": True},
        [],
        {"nodeName": "elsewhere"},
        (UNRESOLVABLE, ("node(s) were unschedulable",)),
    ),
]


@pytest.mark.parametrize(
    ("node_kw", "pods", "pre_kw", "expected"), [pytest.param(*row[1:], id=row[0]) for row in STATUS]
)
def test_node_status(node_kw, pods, pre_kw, expected):
    """The scheduler from 1.34 (a request above allocatable is unresolvable, #131345)."""
    assert node_status_of(node_kw, pods, pre_kw, V1_34) == expected


def node_status_of(node_kw, pods, pre_kw, semantics):
    objects = [node("node1", **node_kw)]
    for name, prio, req, *ports in pods:
        objects.append(pod(name, "node1", prio, req, host_ports=ports[0] if ports else ()))
    pre_kw = dict(pre_kw)
    pre = preemptor(pod("pre", "", HIGH, pre_kw.pop("req", S), **pre_kw))
    _, statuses = diagnose(pre, snapshot(objects, pre, semantics))
    status = statuses["node1"]
    return None if status is None else (status.code, status.reasons)


@pytest.mark.parametrize(
    ("node_kw", "pre_kw", "reason"),
    [
        ({"alloc": {"cpu": "200m", "memory": "1000"}}, {"req": L}, "Insufficient cpu"),
        ({}, {"req": {"example.com/gpu": "1"}}, "Insufficient example.com/gpu"),
    ],
)
def test_a_request_above_allocatable_is_unresolvable_from_1_34(node_kw, pre_kw, reason):
    """1.33 (and before): plain Unschedulable, preemption is tried there in vain; 1.34+: #131345."""
    assert node_status_of(node_kw, [], pre_kw, V1_33) == (UNSCHEDULABLE, (reason,))
    assert node_status_of(node_kw, [], pre_kw, V1_34) == (UNRESOLVABLE, (reason,))


def test_terminal_pods_hold_nothing():
    objects = [
        node("node1"),
        pod("done", "node1", LOW, L, phase="Succeeded"),
        pod("failed", "node1", LOW, L, phase="Failed"),
    ]
    pre = preemptor(pod("pre", "", HIGH, L))
    assert diagnose(pre, snapshot(objects, pre))[1]["node1"] is None


def test_terminating_pods_still_hold_their_resources():
    objects = [node("node1"), pod("going", "node1", LOW, L, terminating=True)]
    pre = preemptor(pod("pre", "", HIGH, L))
    status = diagnose(pre, snapshot(objects, pre))[1]["node1"]
    assert status is not None and status.code == UNSCHEDULABLE


def test_nominated_pods_of_lower_priority_do_not_count_and_higher_ones_do():
    base = [node("node1"), pod("p", "node1", LOW, M)]
    pre = preemptor(pod("pre", "", HIGH, L))
    low = diagnose(pre, snapshot([*base, pod("n", "", LOW, M, nominated="node1")], pre))[1]["node1"]
    same = diagnose(pre, snapshot([*base, pod("n", "", HIGH, M, nominated="node1")], pre))[1]["node1"]
    assert low is None
    assert same is not None and same.reasons == ("Insufficient cpu", "Insufficient memory")


def test_the_preemptor_itself_is_not_counted_when_the_dump_contains_it():
    """A dump taken while the pod is pending lists it (nominated, unbound): it must not occupy its own node."""
    objects = [node("node1"), pod("p", "node1", LOW, M), pod("pre", "", HIGH, L, nominated="node1")]
    pre = preemptor(pod("pre", "", HIGH, L, nominated="node1"))
    assert diagnose(pre, snapshot(objects, pre))[1]["node1"] is None
