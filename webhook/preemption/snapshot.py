"""A cluster snapshot indexed for the preemption planner: what the scheduler's cache would hold.

Input is what `kubectl get nodes,pods,pdb -A -o json` prints (plus, optionally, PriorityClasses). The
index is built once: every pod's priority, start time and requests are read here, and every node's used
resources are summed here, so the planner's hot loop only does integer arithmetic on small dicts.

Like the scheduler's pod informer (field selector `status.phase!=Succeeded,status.phase!=Failed`),
terminal pods are left out; pods still terminating (deletionTimestamp set) are in, as they hold resources
until the kubelet reports them gone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from webhook.policy.classes import InvalidObject as InvalidClass
from webhook.policy.classes import PriorityClass
from webhook.preemption.pdb import InvalidPdb, Pdb
from webhook.preemption.predicates import is_terminal
from webhook.preemption.resources import InvalidObject, node_allocatable, scheduler_pod_requests, total
from webhook.preemption.validate import check_node

DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


class InvalidSnapshot(ValueError):
    """One bad object: the message names the source document, the object and the field."""


# (pod dict, namespace) -> (priority, preemptionPolicy); raises ValueError with a field-naming message.
PriorityResolver = Callable[[Mapping[str, Any], str], tuple[int, str]]


@dataclass(slots=True, eq=False)
class PodInfo:
    """A pod with the fields preemption reads, parsed once. Identity (not value) equality."""

    obj: dict[str, Any]
    namespace: str
    name: str
    uid: str
    labels: dict[str, str]
    priority: int
    preemption_policy: str
    start_time: float | None  # status.startTime as a POSIX timestamp; None: not started ("now")
    requests: dict[str, int]  # scheduler requests incl. "pods": 1
    node_name: str
    nominated_node: str
    terminating_by_preemption: bool  # deletionTimestamp set and DisruptionTarget=True/PreemptionByScheduler
    index: int  # position in the snapshot: the last, deterministic tie-break

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(slots=True, eq=False)
class NodeInfo:
    obj: dict[str, Any]
    name: str
    allocatable: dict[str, int]
    index: int
    pods: list[PodInfo] = field(default_factory=list)
    used: dict[str, int] = field(default_factory=dict)  # Σ requests of `pods`, incl. the pod count


@dataclass(slots=True)
class Snapshot:
    nodes: list[NodeInfo]
    pdbs: list[Pdb]
    nominated: dict[str, list[PodInfo]]  # node name -> unbound pods with status.nominatedNodeName
    pods: list[PodInfo]

    def node(self, name: str) -> NodeInfo | None:
        for node in self.nodes:
            if node.name == name:
                return node
        return None


def snapshot_classes(objects: Iterable[tuple[str, Any]]) -> list[PriorityClass]:
    """The PriorityClasses in a snapshot (a dump may include `priorityclasses`)."""
    out: list[PriorityClass] = []
    for source, obj in objects:
        if isinstance(obj, dict) and obj.get("kind") == "PriorityClass":
            try:
                out.append(PriorityClass.from_object(obj))
            except InvalidClass as err:
                raise InvalidSnapshot(f"{source}: PriorityClass: {err}") from None
    return out


def build_snapshot(
    objects: Iterable[tuple[str, Any]],
    resolve: PriorityResolver,
    *,
    exclude: Callable[[PodInfo], bool] | None = None,
) -> Snapshot:
    """Index (source, object) pairs. Kinds other than Node, Pod, PodDisruptionBudget are ignored.

    `exclude` drops pods (the preemptor itself, when the dump already contains it as a pending pod).
    """
    nodes: list[NodeInfo] = []
    pdbs: list[Pdb] = []
    pods: list[PodInfo] = []
    seen_nodes: set[str] = set()
    for source, obj in objects:
        if not isinstance(obj, dict):
            raise InvalidSnapshot(f"{source}: expected a Kubernetes object, got {type(obj).__name__}")
        kind = obj.get("kind")
        if kind == "Node":
            node = read_node(obj, source, len(nodes))
            if node.name in seen_nodes:
                raise InvalidSnapshot(f"{source}: Node {node.name} appears twice")
            seen_nodes.add(node.name)
            nodes.append(node)
        elif kind == "Pod":
            pod = read_pod(obj, source, len(pods), resolve)
            if pod is not None and not (exclude and exclude(pod)):
                pods.append(pod)
        elif kind == "PodDisruptionBudget":
            try:
                pdbs.append(Pdb.from_object(obj))
            except InvalidPdb as err:
                raise InvalidSnapshot(f"{source}: PodDisruptionBudget: {err}") from None
        elif not isinstance(kind, str) or not kind:
            raise InvalidSnapshot(f"{source}: kind: missing")
    by_name = {n.name: n for n in nodes}
    nominated: dict[str, list[PodInfo]] = {}
    for pod in pods:
        if pod.node_name:
            node = by_name.get(pod.node_name)
            if node is not None:  # pods bound to nodes not in the snapshot are ignored, like the scheduler
                node.pods.append(pod)
        elif pod.nominated_node:
            nominated.setdefault(pod.nominated_node, []).append(pod)
    for node in nodes:
        node.used = total(p.requests for p in node.pods)
    return Snapshot(nodes, pdbs, nominated, pods)


def read_node(obj: dict[str, Any], source: str, index: int) -> NodeInfo:
    name = _name(obj, source, "Node")
    try:
        check_node(obj)  # every field the filters read later (spec, taints), so they never fail mid-plan
        allocatable = node_allocatable(obj)
    except InvalidObject as err:
        raise InvalidSnapshot(f"{source}: Node {name}: {err}") from None
    return NodeInfo(obj, name, allocatable, index)


def read_pod(obj: dict[str, Any], source: str, index: int, resolve: PriorityResolver) -> PodInfo | None:
    """The pod as preemption reads it, or None for a terminal pod (Succeeded/Failed).

    Runs once per pod of the snapshot: checks are inline and error texts are only built on an error.
    """
    name = _name(obj, source, "Pod")
    meta = obj["metadata"]
    namespace = meta.get("namespace") or "default"
    if not isinstance(namespace, str):
        raise _bad(source, "default", name, "metadata.namespace: must be a string")
    if obj.get("status") is not None and not isinstance(obj["status"], dict):  # is_terminal reads it
        raise _bad(source, namespace, name, "status: must be an object")
    if is_terminal(obj):
        return None
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict) or not all(type(v) is str for v in labels.values()):
        raise _bad(source, namespace, name, "metadata.labels: must be a map of strings")
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if not isinstance(spec, dict) or not isinstance(status, dict):
        part = "spec" if not isinstance(spec, dict) else "status"
        raise _bad(source, namespace, name, f"{part}: must be an object")
    node_name = spec.get("nodeName") or ""
    nominated = status.get("nominatedNodeName") or ""
    if type(node_name) is not str or type(nominated) is not str:
        field_name = "spec.nodeName" if type(node_name) is not str else "status.nominatedNodeName"
        raise _bad(source, namespace, name, f"{field_name}: must be a string")
    start = status.get("startTime")
    try:
        priority, policy = resolve(obj, namespace)
        requests = scheduler_pod_requests(obj)
        start_time = None if start is None else parse_time(start)
    except InvalidStartTime:
        raise _bad(source, namespace, name, f"status.startTime: not an RFC 3339 time: {start!r}") from None
    except ValueError as err:
        raise _bad(source, namespace, name, str(err)) from None
    uid = meta.get("uid") or ""
    return PodInfo(
        obj,
        namespace,
        name,
        uid if type(uid) is str else str(uid),
        labels,
        priority,
        policy,
        start_time,
        requests,
        node_name,
        nominated,
        meta.get("deletionTimestamp") is not None and _preempted_by_scheduler(status),
        index,
    )


def _bad(source: str, namespace: str, name: str, detail: str) -> InvalidSnapshot:
    return InvalidSnapshot(f"{source}: Pod {namespace}/{name}: {detail}")


def _name(obj: dict[str, Any], source: str, kind: str) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise InvalidSnapshot(f"{source}: {kind}: metadata: must be an object")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidSnapshot(f"{source}: {kind}: metadata.name: must be a non-empty string")
    return name


class InvalidStartTime(ValueError):
    """A time that is not RFC 3339."""


def parse_time(raw: Any) -> float:
    """RFC 3339 (`2024-01-02T03:04:05Z`) to a POSIX timestamp; a time without zone is taken as UTC."""
    if not isinstance(raw, str):
        raise InvalidStartTime(raw)
    try:
        parsed = datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidStartTime(raw) from None
    if parsed.tzinfo is None:
        return (parsed - datetime(1970, 1, 1)).total_seconds()
    return parsed.timestamp()


def _preempted_by_scheduler(status: dict[str, Any]) -> bool:
    """`PodTerminatingByPreemption` (given a deletionTimestamp): only the FIRST DisruptionTarget
    condition is examined, as upstream."""
    for cond in status.get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type") == DISRUPTION_TARGET:
            return cond.get("status") == "True" and cond.get("reason") == PREEMPTION_BY_SCHEDULER
    return False
