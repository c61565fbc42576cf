"""The fixtures of upstream's pkg/kubelet/preemption/preemption_test.go, as dicts.

Each pod has a name (upstream sets GenerateName only) so that assertions can name victims.
"""

from __future__ import annotations

from typing import Any

from webhook.preemption.node.victim_search import Candidate, Requirements
from webhook.preemption.predicates import Reason, insufficient, predicate_failure

MI = 1024 * 1024
MAX_PODS = 110

TINY_BURSTABLE = "tiny"
BEST_EFFORT = "bestEffort"
CLUSTER_CRITICAL = "cluster-critical"
NODE_CRITICAL = "node-critical"
BURSTABLE = "burstable"
GUARANTEED = "guaranteed"
HIGH_REQUEST_BURSTABLE = "high-request-burstable"
HIGH_REQUEST_GUARANTEED = "high-request-guaranteed"
HIGH_PRIORITY_BURSTABLE = "high-priority-burstable"  # PR #135866 only


def pod_with_resources(
    name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = dict(requests)
    if limits:
        resources["limits"] = dict(limits)
    return {
        "metadata": {"name": name, "annotations": {}},
        "spec": {"containers": [{"name": f"{name}-container", "resources": resources}]},
    }


def _all_pods() -> dict[str, dict[str, Any]]:
    small = {"cpu": "100m", "memory": "100Mi"}
    high = {"cpu": "300m", "memory": "300Mi"}
    pods = {
        TINY_BURSTABLE: pod_with_resources(TINY_BURSTABLE, {"cpu": "1m", "memory": "1Mi"}),
        BEST_EFFORT: pod_with_resources(BEST_EFFORT),
        CLUSTER_CRITICAL: pod_with_resources(CLUSTER_CRITICAL, small),
        NODE_CRITICAL: pod_with_resources(NODE_CRITICAL, small),
        BURSTABLE: pod_with_resources(BURSTABLE, small),
        GUARANTEED: pod_with_resources(GUARANTEED, small, small),
        HIGH_REQUEST_BURSTABLE: pod_with_resources(HIGH_REQUEST_BURSTABLE, high),
        HIGH_REQUEST_GUARANTEED: pod_with_resources(HIGH_REQUEST_GUARANTEED, high, high),
        HIGH_PRIORITY_BURSTABLE: pod_with_resources(
            HIGH_PRIORITY_BURSTABLE, {"cpu": "200m", "memory": "200Mi"}
        ),
    }
    for name, cls, value in (
        (CLUSTER_CRITICAL, "system-cluster-critical", 2_000_000_000),
        (NODE_CRITICAL, "system-node-critical", 2_000_000_100),  # the test's value, not the class's
    ):
        pods[name]["metadata"]["namespace"] = "kube-system"
        pods[name]["spec"]["priorityClassName"] = cls
        pods[name]["spec"]["priority"] = value
    pods[HIGH_PRIORITY_BURSTABLE]["spec"]["priority"] = 100
    return pods


ALL_PODS = _all_pods()


def candidates(*names: str) -> list[Candidate]:
    return [Candidate.of(ALL_PODS[n]) for n in names]


def names(pods: list[Candidate]) -> list[str]:
    return [p.pod["metadata"]["name"] for p in pods]


def requirement_list(cpu: int, memory_mi: int, pods: int) -> Requirements:
    """`getAdmissionRequirementList`: cpu (m), memory (Mi), pods, each only when > 0."""
    out: Requirements = []
    if cpu > 0:
        out.append(("cpu", cpu))
    if memory_mi > 0:
        out.append(("memory", memory_mi * MI))
    if pods > 0:
        out.append(("pods", pods))
    return out


def failure_reasons(cpu: int, memory_mi: int, pods: int, other: bool) -> list[Reason]:
    """`getPredicateFailureReasons`: insufficient amounts cpu (m), memory (Mi), pods, then a mock predicate."""
    out: list[Reason] = []
    if cpu > 0:
        out.append(insufficient("cpu", cpu, cpu * 5 // 4, cpu * 5 // 4))
    if memory_mi > 0:
        m = memory_mi * MI
        out.append(insufficient("memory", m, m * 5 // 4, m * 5 // 4))
    if pods > 0:
        out.append(insufficient("pods", pods, pods + 1, pods + 1))
    if other:
        out.append(predicate_failure("mock predicate error name", "mock predicate error reason"))
    return out
