"""Upstream default_preemption_test.go conventions, as Kubernetes object dicts.

Priorities neg/low/mid/high/veryHigh; resource presets S/M/L/VL (cpu millicores / memory bytes); test
nodes get `pods: 32` unless the allocatable names pods (`st.MakeNode().Capacity`); start time tN is N
seconds after the epoch (upstream: N nanoseconds; only the order matters).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from webhook.policy.class_model import StaticClassStore
from webhook.preemption.cluster.filter import same_info
from webhook.preemption.cluster.planner import Plan, PlanOptions, plan
from webhook.preemption.cluster.priority import resolve_priority
from webhook.preemption.cluster.snapshot import PodInfo, Snapshot, build_snapshot, read_pod
from webhook.preemption.semantics import CURRENT, Semantics

NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000
S = {"cpu": "100m", "memory": "100"}
M = {"cpu": "200m", "memory": "200"}
L = {"cpu": "300m", "memory": "300"}
VL = {"cpu": "500m", "memory": "500"}
NONE: dict[str, str] = {}
NOW = 1_000_000_000.0  # what a missing start time counts as: later than every tN
CLASSES = StaticClassStore().snapshot()


def t(n: int) -> str:
    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%SZ")


def node(
    name: str,
    alloc: dict[str, str] | None = None,
    *,
    labels: dict[str, str] | None = None,
    taints: Sequence[dict[str, str]] = (),
    unschedulable: bool = False,
) -> dict[str, Any]:
    allocatable = dict(VL if alloc is None else alloc)
    allocatable.setdefault("pods", "32")
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = list(taints)
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": spec,
        "status": {"allocatable": allocatable, "capacity": dict(allocatable)},
    }


def pod(
    name: str,
    on: str = "",
    priority: int | None = None,
    req: dict[str, str] | None = None,
    *,
    labels: dict[str, str] | None = None,
    start: int | None = None,
    namespace: str = "default",
    uid: str | None = None,
    nominated: str = "",
    terminating: bool = False,
    preempted: bool = False,
    policy: str | None = None,
    class_name: str | None = None,
    host_ports: Sequence[int] = (),
    phase: str = "Running",
    **spec: Any,
) -> dict[str, Any]:
    """A pod on node `on` ("" = pending); `preempted` adds DisruptionTarget/PreemptionByScheduler."""
    container: dict[str, Any] = {"name": "c", "image": "pause"}
    if req:
        container["resources"] = {"requests": dict(req)}
    if host_ports:
        container["ports"] = [{"containerPort": p, "hostPort": p} for p in host_ports]
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}"}
    if labels:
        meta["labels"] = dict(labels)
    if terminating:
        meta["deletionTimestamp"] = t(100)
    body: dict[str, Any] = {"containers": [container], **spec}
    if on:
        body["nodeName"] = on
    if priority is not None:
        body["priority"] = priority
    if policy is not None:
        body["preemptionPolicy"] = policy
    if class_name is not None:
        body["priorityClassName"] = class_name
    status: dict[str, Any] = {"phase": phase if on else "Pending"}
    if start is not None:
        status["startTime"] = t(start)
    if nominated:
        status["nominatedNodeName"] = nominated
    if preempted:
        status["conditions"] = [
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body, "status": status}


def pdb(
    name: str,
    match_labels: dict[str, str] | None = None,
    allowed: int = 0,
    *,
    disrupted: Iterable[str] = (),
    namespace: str = "default",
    selector: Any = "match_labels",
) -> dict[str, Any]:
    """`selector` overrides match_labels: None = no selector, {} = the empty selector, or a raw selector."""
    spec: dict[str, Any] = {}
    if selector == "match_labels":
        spec["selector"] = {"matchLabels": dict(match_labels or {})}
    elif selector is not None:
        spec["selector"] = selector
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
        "status": {"disruptionsAllowed": allowed, "disruptedPods": {p: t(1) for p in disrupted}},
    }


def resolve(obj: Any, namespace: str) -> tuple[int, str]:
    return resolve_priority(obj, namespace, CLASSES)


def preemptor(obj: dict[str, Any]) -> PodInfo:
    info = read_pod(obj, "pod", -1, resolve)
    assert info is not None
    return info


def snapshot(
    objects: Sequence[dict[str, Any]], pre: PodInfo | None = None, semantics: Semantics = CURRENT
) -> Snapshot:
    exclude = (lambda p: same_info(p, pre)) if pre is not None else None
    docs = [(f"doc {i}", o) for i, o in enumerate(objects, 1)]
    return build_snapshot(docs, resolve, exclude=exclude, semantics=semantics)


def run(pre_obj: dict[str, Any], objects: Sequence[dict[str, Any]], **options: Any) -> Plan:
    """Plan `pre_obj` on `objects` with options (now defaults to NOW; `diagnosis` is passed to plan;
    `semantics`, the scheduler's version, to the snapshot)."""
    diagnosis = options.pop("diagnosis", None)
    semantics = options.pop("semantics", CURRENT)
    options.setdefault("now", NOW)
    pre = preemptor(pre_obj)
    return plan(pre, snapshot(objects, pre, semantics), PlanOptions(**options), diagnosis)


def candidate_map(result: Plan) -> dict[str, tuple[list[str], int]]:
    """node -> (victim names sorted, NumPDBViolations), as upstream's dry-run tests compare them."""
    return {
        c.node.name: (sorted(p.name for p in c.victims.pods), c.victims.pdb_violations)
        for c in result.candidates
    }
