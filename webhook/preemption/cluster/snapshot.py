"""A cluster snapshot indexed for the preemption planner: what the scheduler's cache would hold.

Input is what `kubectl get nodes,pods,pdb -A -o json` prints (plus, optionally, PriorityClasses). The
index is built once: every pod's priority, start time and requests are read here, and every node's used
resources are summed here, so the planner's hot loop only does integer arithmetic on small dicts.

Records are compact: a pod keeps only what preemption reads (identity, labels, priority, start time,
requests, node, nomination, host ports), a node only its name, labels and spec, so the objects of a dump can
be dropped as soon as they are read (`SnapshotBuilder`) and a big cluster is never held whole.

Like the scheduler's pod informer (field selector `status.phase!=Succeeded,status.phase!=Failed`),
terminal pods are left out; pods still terminating (deletionTimestamp set) are in, as they hold resources
until the kubelet reports them gone.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from webhook.policy.class_model import PriorityClass
from webhook.preemption.cluster.pdb import InvalidPdb, Pdb
from webhook.preemption.predicates import host_port_conflicts, is_terminal
from webhook.preemption.resources import InvalidObject, node_allocatable, scheduler_pod_requests, total
from webhook.preemption.semantics import CURRENT, Semantics, Version, kubelet_version, parse_version
from webhook.preemption.validate import check_node

DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


class InvalidSnapshot(ValueError):
    """One bad object: the message names the source document, the object and the field."""


# (pod dict, namespace) -> (priority, preemptionPolicy); raises ValueError with a field-naming message.
PriorityResolver = Callable[[Mapping[str, Any], str], tuple[int, str]]


@dataclass(slots=True, eq=False)
class PodInfo:
    """A pod with the fields preemption reads, parsed once. Identity (not value) equality.

    `obj` is the whole object for the pod being planned (the filters read it); for a snapshot pod it is
    only what the filters read of the pods already on a node: its host ports (`host_ports_of`).
    """

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
    obj: dict[str, Any]  # metadata.name, metadata.labels and spec: what the static filters read
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
    semantics: Semantics = CURRENT  # the scheduler's version

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
            except InvalidObject as err:
                raise InvalidSnapshot(f"{source}: PriorityClass: {err}") from None
    return out


def build_snapshot(
    objects: Iterable[tuple[str, Any]],
    resolve: PriorityResolver,
    *,
    exclude: Callable[[PodInfo], bool] | None = None,
    semantics: Semantics = CURRENT,
) -> Snapshot:
    """Index (source, object) pairs. Kinds other than Node, Pod, PodDisruptionBudget are ignored.

    `exclude` drops pods (the preemptor itself, when the dump already contains it as a pending pod).
    `semantics`: the scheduler's version (how a resized pod counts).
    """
    builder = SnapshotBuilder(resolve, semantics=semantics)
    for source, obj in objects:
        builder.add(source, obj)
    return builder.finish(resolve, exclude=exclude)


class SnapshotBuilder:
    """Indexes objects one at a time and keeps only compact records, so the caller can read a dump as a
    stream and drop every object once added.

    PriorityClasses may come after the pods in a dump (`kubectl get nodes,pods,pdb,pc`): with
    `classes_known=False`, a pod without `spec.priority` (which needs the classes) is kept whole until
    `finish`; every pod the API server has admitted carries its priority and is read at once with
    `resolve`, which then only reads the pod's own fields.
    """

    def __init__(
        self, resolve: PriorityResolver, *, classes_known: bool = True, semantics: Semantics | None = None
    ) -> None:
        """`semantics`: the scheduler's version; None: taken from the nodes (`follow_nodes`)."""
        self.resolve = resolve
        self.classes_known = classes_known
        self.semantics = CURRENT if semantics is None else semantics
        self._from_nodes = semantics is None
        self._node_version: Version | None = None
        self.nodes: list[NodeInfo] = []
        self.pdbs: list[Pdb] = []
        self.classes: list[PriorityClass] = []
        self._pods: list[PodInfo | tuple[str, dict[str, Any]]] = []  # a tuple: priority resolved at finish
        self._seen_nodes: set[str] = set()

    @property
    def pod_count(self) -> int:
        return len(self._pods)

    def add(self, source: str, obj: Any) -> None:
        if not isinstance(obj, dict):
            raise InvalidSnapshot(f"{source}: expected a Kubernetes object, got {type(obj).__name__}")
        kind = obj.get("kind")
        if kind == "Pod":
            self._add_pod(source, obj)
        elif kind == "Node":
            node = read_node(obj, source, len(self.nodes))
            if node.name in self._seen_nodes:
                raise InvalidSnapshot(f"{source}: Node {node.name} appears twice")
            self._seen_nodes.add(node.name)
            self.nodes.append(node)
            if self._from_nodes:
                self._follow_node(obj)
        elif kind == "PodDisruptionBudget":
            try:
                self.pdbs.append(Pdb.from_object(obj))
            except InvalidPdb as err:
                raise InvalidSnapshot(f"{source}: PodDisruptionBudget: {err}") from None
        elif kind == "PriorityClass":
            self.classes.extend(snapshot_classes([(source, obj)]))
        elif not isinstance(kind, str) or not kind:
            raise InvalidSnapshot(f"{source}: kind: missing")

    def set_semantics(self, semantics: Semantics) -> None:
        """The scheduler's version as the API server states it (`GET /version`): the nodes no longer count."""
        self.semantics, self._from_nodes = semantics, False

    def _follow_node(self, obj: dict[str, Any]) -> None:
        """A snapshot file states no scheduler version; its nodes state their kubelets'. The scheduler is
        at least as new as the newest kubelet (version skew policy) and clusters mostly run one version,
        so the newest kubelet version stands for it. Pods are read with the version known when they are
        read: `kubectl get nodes,pods` lists the nodes first."""
        version = parse_version(kubelet_version(obj))
        if version is not None and (self._node_version is None or version > self._node_version):
            self._node_version = version
            self.semantics = Semantics(version)

    def _add_pod(self, source: str, obj: dict[str, Any]) -> None:
        spec = obj.get("spec")
        if self.classes_known or (isinstance(spec, dict) and spec.get("priority") is not None):
            pod = read_pod(obj, source, len(self._pods), self.resolve, whole=False, semantics=self.semantics)
            if pod is not None:
                self._pods.append(pod)
        else:
            self._pods.append((source, obj))

    def finish(
        self, resolve: PriorityResolver, *, exclude: Callable[[PodInfo], bool] | None = None
    ) -> Snapshot:
        """The index: deferred pods read with `resolve` (classes now known), pods grouped per node."""
        pods: list[PodInfo] = []
        for index, item in enumerate(self._pods):
            if isinstance(item, tuple):
                pod = read_pod(item[1], item[0], index, resolve, whole=False, semantics=self.semantics)
                if pod is None:
                    continue
            else:
                pod = item
            if not (exclude and exclude(pod)):
                pods.append(pod)
        self._pods = []
        nodes = self.nodes
        by_name = {n.name: n for n in nodes}
        nominated: dict[str, list[PodInfo]] = {}
        for pod in pods:
            if pod.node_name:
                node = by_name.get(pod.node_name)
                if node is not None:  # pods on nodes not in the snapshot are ignored, like the scheduler
                    node.pods.append(pod)
            elif pod.nominated_node:
                nominated.setdefault(pod.nominated_node, []).append(pod)
        for node in nodes:
            node.used = total(p.requests for p in node.pods)
        return Snapshot(nodes, self.pdbs, nominated, pods, self.semantics)


def read_node(obj: dict[str, Any], source: str, index: int) -> NodeInfo:
    name = _name(obj, source, "Node")
    try:
        check_node(obj)  # every field the filters read later (spec, taints), so they never fail mid-plan
        allocatable = node_allocatable(obj)
    except InvalidObject as err:
        raise InvalidSnapshot(f"{source}: Node {name}: {err}") from None
    labels = obj["metadata"].get("labels") or {}
    kept = {"metadata": {"name": name, "labels": labels}, "spec": obj.get("spec") or {}}
    return NodeInfo(kept, sys.intern(name), allocatable, index)


def read_pod(
    obj: dict[str, Any],
    source: str,
    index: int,
    resolve: PriorityResolver,
    *,
    whole: bool = True,
    semantics: Semantics = CURRENT,
) -> PodInfo | None:
    """The pod as preemption reads it, or None for a terminal pod (Succeeded/Failed).

    `whole` keeps the object itself (the pod being planned, counted by its spec); otherwise only its host
    ports are kept, and its requests are what it holds on its node (resize: `semantics`).
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
        requests = scheduler_pod_requests(obj, semantics, on_node=not whole)
        start_time = None if start is None else parse_time(start)
        kept = obj if whole else host_ports_of(spec)
    except InvalidStartTime:
        raise _bad(source, namespace, name, f"status.startTime: not an RFC 3339 time: {start!r}") from None
    except ValueError as err:
        raise _bad(source, namespace, name, str(err)) from None
    uid = meta.get("uid") or ""
    return PodInfo(
        kept,
        sys.intern(namespace),
        name,
        uid if type(uid) is str else str(uid),
        labels,
        priority,
        policy,
        start_time,
        requests,
        sys.intern(node_name),
        nominated,
        meta.get("deletionTimestamp") is not None and _preempted_by_scheduler(status),
        index,
    )


NO_HOST_PORTS: dict[str, Any] = {}


def host_ports_of(spec: dict[str, Any]) -> dict[str, Any]:
    """What NodePorts reads of a pod already on a node, its containers' ports, checked here so that bad
    input names its pod; NO_HOST_PORTS (shared) for the usual pod without host ports."""
    containers = spec.get("containers")
    if not containers:
        return NO_HOST_PORTS
    plain = type(containers) is list
    if plain:
        for container in containers:
            if type(container) is not dict:
                plain = False
                break
            for port in container.get("ports") or ():
                if type(port) is not dict or port.get("hostPort"):
                    plain = False
                    break
    if plain:
        return NO_HOST_PORTS
    ports = [{"ports": c.get("ports")} if isinstance(c, dict) else c for c in containers]
    stub = {"spec": {"containers": ports}}
    host_port_conflicts(stub, [stub])  # raises InvalidObject naming the field
    return stub


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
