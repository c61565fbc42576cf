"""Pod and node builders for the sidecar tests (plain dicts, as the API serves them)."""

from __future__ import annotations

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


def rejected(
    name: str,
    *,
    cpu: str = "500m",
    memory: str | None = None,
    priority: int = 2_000_000_000,
    reason: str = "OutOfcpu",
    **kw: Any,
) -> dict[str, Any]:
    """A pod the kubelet rejected (phase Failed, reason `reason`), critical at the default threshold."""
    return pod(
        name, cpu=cpu, memory=memory, priority=priority, phase="Failed", reason=reason, running=False, **kw
    )


def record_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(rec.ANNOTATION)
    return None if value is None else json.loads(value)
