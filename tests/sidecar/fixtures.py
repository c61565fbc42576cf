"""Pod and node builders for the sidecar tests (plain dicts, as the API serves them)."""

from __future__ import annotations

import datetime
import itertools
import json
from typing import Any

from webhook.k8s import MIRROR_POD_ANNOTATION
from webhook.sidecar import record as rec

NODE = "node-a"
_serial = itertools.count(1)


def node(name: str = NODE, cpu: str = "1", memory: str = "1Gi", pods: str = "110") -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": allocatable, "capacity": dict(allocatable)},
    }


def pod(
    name: str,
    *,
    cpu: str | None = None,
    memory: str | None = None,
    limits: bool = False,
    priority: int | None = 0,
    class_name: str | None = None,
    namespace: str = "default",
    node_name: str | None = NODE,
    phase: str = "Running",
    reason: str | None = None,
    deleting: bool = False,
    running: bool | None = None,
    mirror: bool = False,
    controller: bool = False,
    labels: dict[str, str] | None = None,
    record: rec.Record | None = None,
    grace: int | None = None,
    created: str | None = None,
    started: str | None = None,
) -> dict[str, Any]:
    """A pod bound to `node_name`; `running` defaults to True for phase Running."""
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    resources: dict[str, Any] = {"requests": requests} if requests else {}
    if limits and requests:
        resources["limits"] = dict(requests)
    serial = next(_serial)
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "creationTimestamp": created or f"2026-01-01T00:{serial // 60 % 60:02d}:{serial % 60:02d}Z",
        "labels": dict(labels or {}),
        "annotations": {},
    }
    if mirror:
        meta["annotations"][MIRROR_POD_ANNOTATION] = "hash"
        meta["annotations"]["kubernetes.io/config.source"] = "file"
    if record is not None:
        meta["annotations"][rec.ANNOTATION] = record.to_annotation()
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T01:00:00Z"
    if controller:
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "ds-uid", "controller": True}
        ]
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox", "resources": resources}]}
    if node_name is not None:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    if class_name is not None:
        spec["priorityClassName"] = class_name
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    status: dict[str, Any] = {"phase": phase}
    if started:
        status["startTime"] = started
    if reason:
        status["reason"] = reason
        status["message"] = f"Pod was rejected: {reason}"
    if running is None:
        running = phase == "Running"
    if running:
        status["containerStatuses"] = [
            {"name": "c", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


KUBELET_VERSIONS = ("1.33", "1.24")
PREEMPTED_MESSAGE = "Preempted in order to admit critical pod"
PREEMPTED_CONDITION_MESSAGE = "Pod was preempted by Kubelet to accommodate a critical pod."


def rejection_message(reason: str, version: str = "1.33", requested: int = 500) -> str:
    """The message a real kubelet writes with `reason` (seen with the hollow-node kubelet, see
    tests/e2e/test_kubelet_victims.py): the predicate's message after `Pod was rejected: ` (1.33) or
    `Pod ` (1.24)."""
    if reason.startswith("OutOf"):
        resource = reason.removeprefix("OutOf")
        text = (
            f"Node didn't have enough resource: {resource}, requested: {requested}, used: 800, capacity: 1000"
        )
    elif reason == "UnexpectedAdmissionError":
        text = (
            "Unexpected error while attempting to recover from admission failure: preemption: error finding "
            "a set of pods to preempt: no set of running pods found to reclaim resources: [(res: cpu, q: 300), ]"
        )
    else:
        text = f"Predicate {reason} failed: node(s) didn't match Pod's node affinity/selector"
    return f"Pod was rejected: {text}" if version != "1.24" else f"Pod {text}"


def rejected(
    name: str,
    *,
    cpu: str = "500m",
    memory: str | None = None,
    priority: int = 2_000_000_000,
    reason: str = "OutOfcpu",
    kubelet_version: str = "1.33",
    **kw: Any,
) -> dict[str, Any]:
    """A pod the kubelet rejected, critical at the default threshold, as a real kubelet of
    `kubelet_version` writes it: phase Failed, reason, message, startTime (now, as the kubelet stamps it), no
    container statuses; 1.33 keeps `qosClass`, 1.24 drops it."""
    obj = pod(
        name, cpu=cpu, memory=memory, priority=priority, phase="Failed", reason=reason, running=False, **kw
    )
    status = obj["status"]
    status["message"] = rejection_message(reason, kubelet_version)
    # The kubelet stamps the rejection with its own clock.
    status.setdefault("startTime", datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    if kubelet_version != "1.24":
        status["qosClass"] = "Guaranteed" if kw.get("limits") else "Burstable"
    return obj


def preempted(name: str, *, kubelet_version: str = "1.33", **kw: Any) -> dict[str, Any]:
    """A pod the kubelet itself preempted for a critical pod, as each version leaves it in the API: 1.24
    phase Failed, reason `Preempting`; 1.33 a `DisruptionTarget` condition and, its containers having
    exited 0, phase Succeeded. The object stays; its containers are terminated."""
    obj = pod(name, phase="Failed" if kubelet_version == "1.24" else "Succeeded", running=False, **kw)
    status = obj["status"]
    status["containerStatuses"] = [
        {"name": "c", "state": {"terminated": {"exitCode": 0, "finishedAt": "2026-01-01T00:10:00Z"}}}
    ]
    if kubelet_version == "1.24":
        status["reason"], status["message"] = "Preempting", PREEMPTED_MESSAGE
    else:
        status.pop("reason", None)
        status.pop("message", None)
        status["conditions"] = [
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "TerminationByKubelet",
                "message": PREEMPTED_CONDITION_MESSAGE,
            }
        ]
    return obj


def record_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(rec.ANNOTATION)
    return None if value is None else json.loads(value)
