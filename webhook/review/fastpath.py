"""A cheap type check that accepts a review only where the marshmallow schemas surely would.

Marshmallow is the authority on what a well-formed review is and words every error; running it on each
review, though, costs more than the decision itself. Reviews from an API server are always well formed,
so they take this path, and anything it is unsure of goes to the schemas (tests hold the two together).
"""

from __future__ import annotations

from typing import Any

from webhook.k8s import INT32_MAX, INT32_MIN, OPERATIONS, POD_RESOURCE, PRIORITY_CLASS_RESOURCE

# Defined here, not in `schema`, so that a well-formed review never loads marshmallow (start-up time).
API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")


def qualified_resource(gvr: dict[str, Any]) -> str:
    """`pods`, `priorityclasses.scheduling.k8s.io`: the name upstream's messages and our checks use."""
    group = gvr.get("group") or ""
    return f"{gvr['resource']}.{group}" if group else gvr["resource"]


_ABSENT = object()


def _optional(value: Any, kind: type, *, nullable: bool = True) -> bool:
    return value is _ABSENT or (nullable and value is None) or type(value) is kind


def _int32(value: Any) -> bool:
    return type(value) is int and INT32_MIN <= value <= INT32_MAX


def _meta_ok(meta: Any) -> bool:
    if meta is _ABSENT or meta is None:
        return True
    if type(meta) is not dict:
        return False
    for key in ("name", "generateName", "namespace"):
        if not _optional(meta.get(key, _ABSENT), str, nullable=False):
            return False
    annotations = meta.get("annotations")
    if annotations is None:
        return True
    return type(annotations) is dict and all(
        type(k) is str and type(v) is str for k, v in annotations.items()
    )


def pod_ok(pod: dict[str, Any]) -> bool:
    if not _meta_ok(pod.get("metadata", _ABSENT)):
        return False
    spec = pod.get("spec")
    if spec is None:
        return True
    if type(spec) is not dict:
        return False
    priority = spec.get("priority")
    return (
        (priority is None or _int32(priority))
        and _optional(spec.get("priorityClassName", _ABSENT), str)
        and _optional(spec.get("preemptionPolicy", _ABSENT), str)
    )


def _priority_class_ok(pc: dict[str, Any]) -> bool:
    value = pc.get("value", _ABSENT)
    return (
        _meta_ok(pc.get("metadata", _ABSENT))
        and (value is _ABSENT or _int32(value))
        and _optional(pc.get("globalDefault", _ABSENT), bool)
        and _optional(pc.get("preemptionPolicy", _ABSENT), str)
        and _optional(pc.get("description", _ABSENT), str)
    )


OBJECT_CHECKS = {POD_RESOURCE: pod_ok, PRIORITY_CLASS_RESOURCE: _priority_class_ok}


def well_formed(body: dict[str, Any]) -> bool:
    """True only if the schemas would accept `body` as it is (no coercion, no defaults beyond absence)."""
    if body.get("apiVersion") not in API_VERSIONS or body.get("kind") != "AdmissionReview":
        return False
    req = body.get("request")
    if type(req) is not dict:
        return False
    uid, gvr = req.get("uid"), req.get("resource")
    if type(uid) is not str or not uid or type(gvr) is not dict or type(gvr.get("resource")) is not str:
        return False
    if not (
        _optional(gvr.get("group", _ABSENT), str, nullable=False)
        and _optional(gvr.get("version", _ABSENT), str, nullable=False)
    ):
        return False
    if type(req.get("operation")) is not str or req["operation"] not in OPERATIONS:
        return False
    for key in ("subResource", "namespace", "name"):
        if not _optional(req.get(key, _ABSENT), str, nullable=False):
            return False
    if not _optional(req.get("dryRun", _ABSENT), bool, nullable=False):
        return False
    objects = (req.get("object"), req.get("oldObject"))
    if any(obj is not None and type(obj) is not dict for obj in objects):
        return False
    check = OBJECT_CHECKS.get(qualified_resource(gvr))
    if check is None or req.get("subResource"):
        return True
    return all(obj is None or check(obj) for obj in objects)
