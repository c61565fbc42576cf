"""Properties of the planner on random small clusters, checked against plain arithmetic.

The oracle below recomputes "does the pod fit" from the objects with integer sums (cpu millicores, memory
bytes, pod count), independently of the planner and of the predicates it uses.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.preemption.planner_data.builders import node, pdb, pod, run
from webhook.preemption.cluster.pick import score_functions
from webhook.preemption.cluster.planner import FITS, NO_CANDIDATES, NOT_ELIGIBLE, PREEMPT, Plan

PRIORITIES = (-5, 0, 5, 10, 20)
APPS = ("a", "b", None)
NOW = 1_000_000_000.0


@st.composite
def clusters(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    objects: list[dict[str, Any]] = []
    for n in range(draw(st.integers(1, 4))):
        name = f"node{n}"
        alloc = {
            "cpu": f"{draw(st.sampled_from((500, 1000)))}m",
            "memory": str(draw(st.sampled_from((500, 1000)))),
            "pods": str(draw(st.integers(2, 8))),
        }
        tainted = draw(st.booleans()) and draw(st.booleans()) and draw(st.booleans())
        taints = [{"key": "k", "value": "v", "effect": "NoSchedule"}] if tainted else []
        objects.append(node(name, alloc, taints=taints))
        for i in range(draw(st.integers(1, 6))):
            app = draw(st.sampled_from(APPS))
            objects.append(
                pod(
                    f"p{n}-{i}",
                    name,
                    draw(st.sampled_from(PRIORITIES)),
                    {"cpu": f"{draw(st.integers(0, 10)) * 50}m", "memory": str(draw(st.integers(0, 8)) * 50)},
                    labels={"app": app} if app else None,
                    start=draw(st.none() | st.integers(0, 5)),
                    host_ports=[8080] if draw(st.integers(0, 9)) == 0 else (),
                )
            )
        if draw(st.integers(0, 4)) == 0:
            objects.append(
                pod(f"nominated{n}", "", draw(st.sampled_from(PRIORITIES)), {"cpu": "100m"}, nominated=name)
            )
    for app in ("a", "b"):
        if draw(st.booleans()):
            objects.append(pdb(f"pdb-{app}", {"app": app}, draw(st.integers(0, 1))))
    pre = pod(
        "pre",
        "",
        draw(st.sampled_from((0, 10, 20, 20, 20))),
        {"cpu": f"{draw(st.integers(4, 16)) * 50}m", "memory": str(draw(st.integers(0, 10)) * 50)},
        host_ports=[8080] if draw(st.integers(0, 4)) == 0 else (),
    )
    return pre, objects


def _cpu(q: str) -> int:
    return int(q.removesuffix("m"))


def fits(pre: dict[str, Any], node_obj: dict[str, Any], present: list[dict[str, Any]]) -> bool:
    """The oracle: requested resources, pod count and host ports, with `present` on the node."""
    alloc = node_obj["status"]["allocatable"]
    if len(present) + 1 > int(alloc["pods"]):
        return False
    want = _requests(pre)
    if want["cpu"] > 0 and sum(_requests(p)["cpu"] for p in present) + want["cpu"] > _cpu(alloc["cpu"]):
        return False
    if want["memory"] > 0 and sum(_requests(p)["memory"] for p in present) + want["memory"] > int(
        alloc["memory"]
    ):
        return False
    return not (_ports(pre) & {port for p in present for port in _ports(p)})


def _requests(p: dict[str, Any]) -> dict[str, int]:
    req = p["spec"]["containers"][0].get("resources", {}).get("requests", {})
    return {"cpu": _cpu(req.get("cpu", "0m")), "memory": int(req.get("memory", "0"))}


def _ports(p: dict[str, Any]) -> set[int]:
    return {port["hostPort"] for port in p["spec"]["containers"][0].get("ports", ())}


def _on(objects: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == "Pod" and o["spec"].get("nodeName") == name]


def _present(objects, name, pre_priority, removed=frozenset()):
    """Pods counted on the node: those running there minus `removed`, plus nominated ones >= the preemptor."""
    running = [p for p in _on(objects, name) if p["metadata"]["name"] not in removed]
    nominated = [
        o
        for o in objects
        if o["kind"] == "Pod"
        and o["status"].get("nominatedNodeName") == name
        and o["spec"]["priority"] >= pre_priority
    ]
    return running + nominated


def _static_ok(node_obj: dict[str, Any]) -> bool:
    return not node_obj["spec"].get("taints")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_plan_properties(cluster):
    pre, objects = cluster
    result: Plan = run(pre, objects, now=NOW)
    prio = pre["spec"]["priority"]
    nodes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Node"}
    if result.outcome == FITS:
        assert _static_ok(nodes[result.node]) and fits(
            pre, nodes[result.node], _present(objects, result.node, prio)
        )
        return
    assert result.outcome in (PREEMPT, NO_CANDIDATES)  # policy is PreemptLowerPriority, no nominations
    assert not any(_static_ok(n) and fits(pre, n, _present(objects, name, prio)) for name, n in nodes.items())
    if result.outcome == NO_CANDIDATES:
        # no node passing the static filters has lower-priority pods whose removal would make room
        for name, n in nodes.items():
            lower = {p["metadata"]["name"] for p in _on(objects, name) if p["spec"]["priority"] < prio}
            if _static_ok(n) and lower:
                assert not fits(pre, n, _present(objects, name, prio, lower))
        return
    victims = {p.name for p in result.victims}
    chosen = nodes[result.node]
    assert _static_ok(chosen)
    assert victims and victims <= {p["metadata"]["name"] for p in _on(objects, result.node)}
    assert all(p.priority < prio for p in result.victims)
    # the pod fits once the victims are gone...
    assert fits(pre, chosen, _present(objects, result.node, prio, victims))
    # ...and the set is minimal: any single victim put back makes it not fit
    for v in victims:
        assert not fits(pre, chosen, _present(objects, result.node, prio, victims - {v}))
    # victims are reported most important first
    assert [p.priority for p in result.victims] == sorted((p.priority for p in result.victims), reverse=True)
    # the chosen candidate is best by upstream's criteria, lexicographically
    scores = [tuple(f(c) for f in score_functions(NOW)) for c in result.candidates]
    best = next(
        tuple(f(c) for f in score_functions(NOW)) for c in result.candidates if c.node.name == result.node
    )
    assert best == max(scores)
    assert result.pdb_violations <= len(victims)


@settings(max_examples=60, deadline=None)
@given(clusters())
def test_never_policy_never_preempts(cluster):
    pre, objects = cluster
    pre["spec"]["preemptionPolicy"] = "Never"
    result = run(pre, objects, now=NOW)
    assert result.outcome in (FITS, NOT_ELIGIBLE)
    assert result.victims == ()


@settings(max_examples=60, deadline=None)
@given(clusters(), st.integers(0, 10))
def test_sampling_with_enough_candidates_finds_the_same_node(cluster, offset):
    """With k >= the number of potential nodes (the default 100), sampling only rotates the walk, and the
    walk stops early only when every node is a candidate: the chosen node's score is the same."""
    pre, objects = cluster
    full = run(pre, objects, now=NOW)
    sampled = run(pre, objects, now=NOW, sample=True, offset=offset)
    assert sampled.outcome == full.outcome
    if full.outcome == PREEMPT:

        def score(r):
            return next(
                tuple(f(c) for f in score_functions(NOW)) for c in r.candidates if c.node.name == r.node
            )

        assert score(sampled) == score(full)
        assert {c.node.name for c in sampled.candidates} == {c.node.name for c in full.candidates}


@pytest.mark.fuzz
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_plan_properties_long(cluster):
    test_plan_properties.hypothesis.inner_test(cluster)
