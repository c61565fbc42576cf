"""AdmissionReviews as the API server sends them, for the server tests."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

POD_GVR = {"group": "", "version": "v1", "resource": "pods"}
PC_GVR = {"group": "scheduling.k8s.io", "version": "v1", "resource": "priorityclasses"}


def pod(name: str = "web", class_name: str | None = "high", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": [{"name": "c", "image": "nginx"}], **spec}
    if class_name is not None:
        body["priorityClassName"] = class_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": body,
    }


def priority_class(name: str, value: int, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **fields,
    }


def review(
    obj: dict[str, Any] | None,
    *,
    operation: str = "CREATE",
    gvr: dict[str, str] = POD_GVR,
    old: dict[str, Any] | None = None,
    version: str = "admission.k8s.io/v1",
    uid: str | None = None,
) -> dict[str, Any]:
    namespace = "default" if gvr is POD_GVR else ""
    name = ((obj or old or {}).get("metadata") or {}).get("name", "")
    return {
        "apiVersion": version,
        "kind": "AdmissionReview",
        "request": {
            "uid": uid or str(uuid.uuid4()),
            "kind": {
                "group": gvr["group"],
                "version": "v1",
                "kind": "Pod" if gvr is POD_GVR else "PriorityClass",
            },
            "resource": gvr,
            "operation": operation,
            "namespace": namespace,
            "name": name,
            "object": obj,
            "oldObject": old,
            "dryRun": False,
        },
    }


def eviction_review(node: str | None, namespace: str = "ns", name: str = "web") -> dict[str, Any]:
    """The sidecar's eviction of a pod as the API server sends it to /validate; `node` is the node its
    token is bound to (None: a token without one)."""
    user: dict[str, Any] = {"username": "system:serviceaccount:pw:pw-sidecar"}
    if node is not None:
        user["extra"] = {"authentication.kubernetes.io/node-name": [node]}
    request = {
        "uid": "e-1",
        "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "subResource": "eviction",
        "operation": "CREATE",
        "namespace": namespace,
        "name": name,
        "object": {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}},
        "userInfo": user,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def patch_ops(response: dict[str, Any]) -> list[dict[str, Any]]:
    body = response["response"]
    if "patch" not in body:
        return []
    assert body["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(body["patch"]))
