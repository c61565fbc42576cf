"""Property tests of kubelet admission: victims free enough, protected pods are never chosen, and
malformed objects fail with `InvalidObject` (a one-line message), never another exception."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.preemption.kubelet_objects import node as make_node
from tests.preemption.kubelet_objects import pod as make_pod
from webhook.preemption.node.admission import admit_to_node
from webhook.preemption.resources import InvalidObject

CRITICAL = 2_000_000_000
# Modest in the default run; `-m fuzz` runs every property on many more scenarios.
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck))

priorities = st.one_of(st.none(), st.integers(0, 1000), st.sampled_from([CRITICAL, CRITICAL + 1000]))


ANNOTATIONS = [
    None,
    {"kubernetes.io/config.mirror": "x"},
    {"kubernetes.io/config.source": "file"},
    {"o": "x"},
]
PHASES = ["Running", "Running", "Running", "Pending", "Succeeded", "Failed"]
pod_fields = st.tuples(
    st.one_of(st.none(), st.integers(0, 2000)),  # cpu (m)
    st.one_of(st.none(), st.integers(0, 2048)),  # memory (Mi)
    priorities,
    st.booleans(),  # guaranteed
    st.sampled_from(PHASES),
    st.sampled_from(ANNOTATIONS),
    st.integers(0, 5),  # 0: terminating
    st.integers(0, 59),  # creation second
)


def build_pod(name: str, fields: tuple) -> dict[str, Any]:
    cpu, memory, priority, guaranteed, phase, annotations, deleting, second = fields
    return make_pod(
        name,
        None if cpu is None else f"{cpu}m",
        None if memory is None else f"{memory}Mi",
        priority=priority,
        guaranteed=guaranteed and cpu is not None and memory is not None,
        phase=phase,
        annotations=annotations,
        deleting=deleting == 0,
        created=f"2026-01-01T00:00:{second:02d}Z",
    )


@st.composite
def scenarios(draw) -> tuple[dict, list[dict], dict]:
    pods_allowed, cpu, memory, fields, own = draw(
        st.tuples(
            st.integers(1, 14),
            st.integers(1, 8),
            st.integers(1, 8),
            st.lists(pod_fields, max_size=12),
            pod_fields,
        )
    )
    node = make_node(pods=pods_allowed, cpu=str(cpu), memory=f"{memory}Gi")
    existing = [build_pod(f"p{i}", f) for i, f in enumerate(fields)]
    preemptor = build_pod("preemptor", own)
    preemptor["status"] = {"phase": "Pending"}
    preemptor["metadata"].pop("deletionTimestamp", None)
    return node, existing, preemptor


def _by_name(existing: list[dict]) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in existing}


def _protected(p: dict) -> bool:
    annotations = p["metadata"].get("annotations") or {}
    priority = p["spec"].get("priority")
    return (
        "kubernetes.io/config.mirror" in annotations
        or annotations.get("kubernetes.io/config.source", "api") != "api"
        or (priority is not None and priority >= CRITICAL)
    )


def _own_priority(preemptor: dict) -> int:
    own = preemptor["spec"].get("priority")
    return (CRITICAL if _protected(preemptor) else 0) if own is None else own


def check_victims_free_enough_and_are_never_protected(node, existing, preemptor, order) -> None:
    got = admit_to_node(preemptor, node, existing, order=order)
    if got.fits:
        assert got.admit and got.victims == []  # a pod that fits gets no victims
        return
    if not got.victims:
        assert not got.admit
        return
    assert got.admit and got.error is None
    assert _protected(preemptor)  # only critical pods preempt
    by_name = _by_name(existing)
    names = [v["name"] for v in got.victims]
    assert len(set(names)) == len(names)
    for name in names:
        victim = by_name[name]
        annotations = victim["metadata"].get("annotations") or {}
        assert "kubernetes.io/config.mirror" not in annotations
        assert annotations.get("kubernetes.io/config.source", "api") == "api"
        # A critical victim only for a strictly higher priority (upstream: node- over cluster-critical).
        assert victim["spec"].get("priority", 0) < CRITICAL or victim["spec"]["priority"] < _own_priority(
            preemptor
        )
        # a terminating pod may be a victim (upstream's active list holds it), marked so nobody evicts it
        marked = next(v["terminating"] for v in got.victims if v["name"] == name)
        assert marked is ("deletionTimestamp" in victim["metadata"])
        assert victim["status"]["phase"] not in ("Succeeded", "Failed")
    # Once the victims are gone the pod fits (no overhead here, so what a victim frees is what it holds).
    remaining = [p for p in existing if p["metadata"]["name"] not in names]
    assert admit_to_node(preemptor, node, remaining, order=order).fits


def check_priority_order_never_takes_equal_or_higher_priority(node, existing, preemptor) -> None:
    got = admit_to_node(preemptor, node, existing, order="priority")
    for victim in got.victims:
        assert (victim["priority"] or 0) < _own_priority(preemptor)


def check_orders_agree_within_one_priority(node, existing, preemptor) -> None:
    """The priority-aware order is upstream's QoS order when every candidate has one priority below
    the preemptor's."""
    if _own_priority(preemptor) <= 7:
        return
    same = [
        {**p, "metadata": {k: v for k, v in p["metadata"].items() if k != "annotations"}} for p in existing
    ]
    for p in same:
        p["spec"] = {**p["spec"], "priority": 7}
    qos = admit_to_node(preemptor, node, same, order="qos")
    prio = admit_to_node(preemptor, node, same, order="priority")
    assert (qos.admit, qos.victims, qos.error) == (prio.admit, prio.victims, prio.error)


def check_input_order_does_not_matter(node, existing, preemptor, rnd: random.Random) -> None:
    shuffled = list(existing)
    rnd.shuffle(shuffled)
    a = admit_to_node(preemptor, node, existing)
    b = admit_to_node(preemptor, node, shuffled)
    assert (a.admit, a.victims, a.error, a.reasons) == (b.admit, b.victims, b.error, b.reasons)


@SETTINGS
@given(scenarios(), st.sampled_from(["qos", "priority"]))
def test_victims_free_enough_and_are_never_protected(scenario, order):
    check_victims_free_enough_and_are_never_protected(*scenario, order)


@SETTINGS
@given(scenarios())
def test_priority_order_never_takes_equal_or_higher_priority(scenario):
    check_priority_order_never_takes_equal_or_higher_priority(*scenario)


@SETTINGS
@given(scenarios())
def test_orders_agree_within_one_priority(scenario):
    check_orders_agree_within_one_priority(*scenario)


@SETTINGS
@given(scenarios(), st.randoms(use_true_random=False))
def test_the_decision_does_not_depend_on_input_order(scenario, rnd):
    check_input_order_does_not_matter(*scenario, rnd)


@pytest.mark.fuzz
@FUZZ
@given(scenarios(), st.randoms(use_true_random=False))
def test_fuzz_every_property(scenario, rnd):
    for order in ("qos", "priority"):
        check_victims_free_enough_and_are_never_protected(*scenario, order)
    check_priority_order_never_takes_equal_or_higher_priority(*scenario)
    check_orders_agree_within_one_priority(*scenario)
    check_input_order_does_not_matter(*scenario, rnd)


junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=4), st.one_of(st.text(max_size=4), st.integers()), max_size=2),
)


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


def _replace(obj: Any, path: tuple, value: Any) -> None:
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_malformed_objects_give_invalid_object_never_another_error(data):
    pod = make_pod(
        "victim",
        "1",
        "1Gi",
        priority=0,
        ports=None,
        tolerations=[{"key": "k", "operator": "Exists"}],
        nodeSelector={"a": "b"},
        overhead={"cpu": "10m"},
    )
    pod["spec"]["containers"][0]["ports"] = [{"hostPort": 80, "containerPort": 80}]
    pod["spec"]["initContainers"] = [
        {"name": "i", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}
    ]
    node = make_node(labels={"a": "b"}, taints=[{"key": "k", "effect": "NoExecute"}])
    preemptor = make_pod("preemptor", "3500m", priority=CRITICAL, nodeSelector={"a": "b"})
    target = data.draw(st.sampled_from(["pod", "node", "preemptor"]))
    obj = {"pod": pod, "node": node, "preemptor": preemptor}[target]
    path = data.draw(st.sampled_from(_paths(obj)))
    assume(path[-1] not in ("name", "namespace", "uid", "apiVersion", "kind"))
    _replace(obj, path, data.draw(junk))
    try:
        got = admit_to_node(preemptor, node, [pod])
    except InvalidObject as err:
        message = str(err)
        assert message and "\n" not in message
        return
    assert isinstance(got.admit, bool)
