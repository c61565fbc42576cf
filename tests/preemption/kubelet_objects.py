"""Builders for Node and Pod objects as `kubectl get -o json` prints them."""

from __future__ import annotations

from typing import Any


def node(
    name: str = "node-a", pods: int = 110, labels: dict[str, str] | None = None, taints=(), **alloc: str
):
    allocatable = {"cpu": "4", "memory": "8Gi", "pods": str(pods)}
    allocatable.update({k.replace("_", "-"): v for k, v in alloc.items()})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"taints": list(taints)},
        "status": {"allocatable": allocatable},
    }


def pod(
    name: str,
    cpu: str | None = None,
    memory: str | None = None,
    *,
    namespace: str = "default",
    priority: int | None = None,
    guaranteed: bool = False,
    phase: str = "Running",
    node_name: str = "node-a",
    created: str | None = None,
    annotations: dict[str, str] | None = None,
    deleting: bool = False,
    extra: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    requests.update(extra or {})
    resources: dict[str, Any] = {"requests": requests} if requests else {}
    if guaranteed:
        resources["limits"] = dict(requests)
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"}
    if created:
        meta["creationTimestamp"] = created
    if annotations:
        meta["annotations"] = annotations
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    body: dict[str, Any] = {
        "nodeName": node_name,
        "containers": [{"name": "c", "resources": resources}],
        **spec,
    }
    if priority is not None:
        body["priority"] = priority
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body, "status": {"phase": phase}}


def critical(
    name: str = "critical", cpu: str | None = "1", memory: str | None = None, **kw: Any
) -> dict[str, Any]:
    kw.setdefault("priority", 2_000_000_000)
    kw.setdefault("namespace", "kube-system")
    return pod(name, cpu, memory, **kw)
