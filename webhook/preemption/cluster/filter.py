"""The scheduler's Filter diagnosis for one node, reduced to what preemption needs.

Upstream records, per node, the status of the FIRST failing Filter plugin (default order: NodeUnschedulable,
NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit). A status `Unschedulable` means
removing pods might help, so the node is dry-run; `UnschedulableAndUnresolvable` means it cannot, so the
node is skipped. The predicates themselves are the node-side module's (one implementation of "does this
pod fit"); this module only orders them and assigns the scheduler's codes and reason texts.

Modelled filters: the four static ones, host ports, and resources. Volume, inter-pod affinity and topology
spread filters are not modelled (a snapshot of nodes, pods and PDBs does not carry what they need).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.k8s import same_ref
from webhook.preemption.cluster.snapshot import NodeInfo, PodInfo
from webhook.preemption.predicates import (
    host_port_conflicts,
    node_name_mismatch,
    node_selector_mismatch,
    resource_reasons,
    tolerates,
    untolerated_taint,
)
from webhook.preemption.quantities import PODS
from webhook.preemption.resources import add, total
from webhook.preemption.semantics import CURRENT, Semantics

UNSCHEDULABLE = "Unschedulable"
UNRESOLVABLE = "UnschedulableAndUnresolvable"

# Upstream reason strings (the texts of the scheduler's FitError histogram).
REASON_UNSCHEDULABLE_NODE = "node(s) were unschedulable"
REASON_NODE_NAME = "node(s) didn't match the requested node name"
REASON_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_HOST_PORTS = "node(s) didn't have free ports for the requested pod ports"
REASON_TOO_MANY_PODS = "Too many pods"
REASON_UNTOLERATED_TAINTS = "node(s) had untolerated taint(s)"  # 1.34.2+, 1.35.0+
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"
# TaintToleration's Filter looks at NoSchedule and NoExecute taints (PreferNoSchedule only scores).
FILTER_TAINT_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True, slots=True)
class Failure:
    """A failed Filter: the scheduler's status code and its reason texts."""

    code: str
    reasons: tuple[str, ...]


def static_failure(
    pod: Mapping[str, Any], node: Mapping[str, Any], semantics: Semantics = CURRENT
) -> Failure | None:
    """The filters that removing pods cannot fix, in upstream plugin order."""
    spec = node.get("spec") or {}
    if spec.get("unschedulable") and _intolerant_of_unschedulable(pod):
        return Failure(UNRESOLVABLE, (REASON_UNSCHEDULABLE_NODE,))
    if node_name_mismatch(pod, node) is not None:
        return Failure(UNRESOLVABLE, (REASON_NODE_NAME,))
    if untolerated_taint(pod, node, effects=FILTER_TAINT_EFFECTS) is not None:
        return Failure(UNRESOLVABLE, (taint_reason(pod, node, semantics),))
    if node_selector_mismatch(pod, node) is not None:
        return Failure(UNRESOLVABLE, (REASON_NODE_AFFINITY,))
    return None


def _intolerant_of_unschedulable(pod: Mapping[str, Any]) -> bool:
    """NodeUnschedulable lets pods through that tolerate `node.kubernetes.io/unschedulable:NoSchedule`."""
    cordon = {"spec": {"taints": [{"key": UNSCHEDULABLE_TAINT_KEY, "effect": "NoSchedule"}]}}
    return untolerated_taint(pod, cordon, effects=("NoSchedule",)) is not None


def taint_reason(pod: Mapping[str, Any], node: Mapping[str, Any], semantics: Semantics = CURRENT) -> str:
    """`node(s) had untolerated taint(s)` from 1.34.2/1.35.0; before, `node(s) had untolerated taint
    {key: value}` naming the first such taint (so the FitError histogram counted each taint apart)."""
    if semantics.taint_reason_generic:
        return REASON_UNTOLERATED_TAINTS
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in FILTER_TAINT_EFFECTS and not any(tolerates(t, taint) for t in tolerations):
            return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"
    return "node(s) had untolerated taint"


def resource_failure(
    requests: Mapping[str, int],
    allocatable: Mapping[str, int],
    used: Mapping[str, int],
    semantics: Semantics = CURRENT,
) -> Failure | None:
    """NodeResourcesFit: `Insufficient <r>` / `Too many pods`; from 1.34 any request above allocatable is
    UnschedulableAndUnresolvable (upstream #131345), since no removal can ever make room."""
    found = resource_reasons(requests, allocatable, used)
    if not found:
        return None
    texts = tuple(REASON_TOO_MANY_PODS if r.resource == PODS else f"Insufficient {r.resource}" for r in found)
    oversize = semantics.oversize_unresolvable and any(
        r.resource != PODS and (r.requested or 0) > allocatable.get(r.resource or "", 0) for r in found
    )
    return Failure(UNRESOLVABLE if oversize else UNSCHEDULABLE, texts)


def declares_host_ports(pod: Mapping[str, Any]) -> bool:
    """Whether NodePorts can fail at all for this pod: a cheap gate before the per-pod port scan."""
    spec = pod.get("spec") or {}
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or ():
            for port in (c or {}).get("ports") or ():
                if isinstance(port, dict) and port.get("hostPort"):
                    return True
    return False


class NodeFit:
    """Whether the preemptor fits a node given which pods stay; the dry run calls this many times.

    Pods nominated to the node with priority >= the preemptor's count as present (upstream
    `RunFilterPluginsWithNominatedPods`, pass 1; with monotone filters pass 2 adds nothing).
    """

    __slots__ = (
        "allocatable",
        "base_used",
        "node",
        "nominated_objs",
        "nominated_used",
        "ports",
        "preemptor",
        "semantics",
    )

    def __init__(
        self,
        preemptor: PodInfo,
        node: NodeInfo,
        nominated: Sequence[PodInfo],
        semantics: Semantics = CURRENT,
    ) -> None:
        self.preemptor = preemptor
        self.semantics = semantics
        self.node = node
        self.allocatable = node.allocatable
        counted = [p for p in nominated if p.priority >= preemptor.priority and not same_info(p, preemptor)]
        self.nominated_used = total(p.requests for p in counted)
        self.base_used = add(node.used, self.nominated_used)
        self.nominated_objs = [p.obj for p in counted]
        self.ports = declares_host_ports(preemptor.obj)

    def failure(self, used: Mapping[str, int], present: Sequence[PodInfo]) -> Failure | None:
        """The first failing filter among NodePorts and NodeResourcesFit, with these pods present."""
        if self.ports:
            objs = [p.obj for p in present] + self.nominated_objs
            if host_port_conflicts(self.preemptor.obj, objs) is not None:
                return Failure(UNSCHEDULABLE, (REASON_HOST_PORTS,))
        return resource_failure(self.preemptor.requests, self.allocatable, used, self.semantics)

    def fits(self, used: Mapping[str, int], present: Sequence[PodInfo]) -> bool:
        """`failure(...) is None`, without building the reason texts (the dry run's inner loop)."""
        if self.ports:
            objs = [p.obj for p in present] + self.nominated_objs
            if host_port_conflicts(self.preemptor.obj, objs) is not None:
                return False
        return not resource_reasons(self.preemptor.requests, self.allocatable, used)


def same_info(a: PodInfo, b: PodInfo) -> bool:
    """The same pod: by UID when both have one (a dump), else by namespace/name (hand-written files)."""
    return same_ref((a.namespace, a.name, a.uid), (b.namespace, b.name, b.uid))


def node_status(preemptor: PodInfo, node: NodeInfo, fit: NodeFit) -> Failure | None:
    """The node's Filter status for the preemptor as things stand: None when it fits right away."""
    failure = static_failure(preemptor.obj, node.obj, fit.semantics)
    if failure is not None:
        return failure
    return fit.failure(fit.base_used, node.pods)
