"""Cheap type checks of the object fields the decisions read, one per shape of object.

The fast path accepts a review only where the marshmallow schemas (`schema`) surely would; these are its
per-object halves, named by the routes (`routes.Route.shape`). Tests hold each to its schema.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from webhook.k8s import INT32_MAX, INT32_MIN

ABSENT = object()

POD, PRIORITY_CLASS, POD_GROUP = "pod", "priorityclass", "podgroup"


def optional(value: Any, kind: type, *, nullable: bool = True) -> bool:
    return value is ABSENT or (nullable and value is None) or type(value) is kind


def _int32(value: Any) -> bool:
    return type(value) is int and INT32_MIN <= value <= INT32_MAX


def _meta_ok(meta: Any) -> bool:
    if meta is ABSENT or meta is None:
        return True
    if type(meta) is not dict:
        return False
    for key in ("name", "generateName", "namespace"):
        if not optional(meta.get(key, ABSENT), str, nullable=False):
            return False
    annotations = meta.get("annotations")
    if annotations is None:
        return True
    return type(annotations) is dict and all(
        type(k) is str and type(v) is str for k, v in annotations.items()
    )


def pod_ok(pod: dict[str, Any]) -> bool:
    return _priority_fields_ok(pod, ("priorityClassName", "preemptionPolicy"))


def pod_group_ok(group: dict[str, Any]) -> bool:
    """A PodGroup: the two priority fields of its spec (a pod's, without preemptionPolicy)."""
    return _priority_fields_ok(group, ("priorityClassName",))


def _priority_fields_ok(obj: dict[str, Any], strings: tuple[str, ...]) -> bool:
    """Metadata we read, and a spec (if any) whose `priority` is an int32 and whose `strings` are strings."""
    if not _meta_ok(obj.get("metadata", ABSENT)):
        return False
    spec = obj.get("spec")
    if spec is None:
        return True
    if type(spec) is not dict:
        return False
    priority = spec.get("priority")
    return (priority is None or _int32(priority)) and all(
        optional(spec.get(key, ABSENT), str) for key in strings
    )


def priority_class_ok(pc: dict[str, Any]) -> bool:
    value = pc.get("value", ABSENT)
    return (
        _meta_ok(pc.get("metadata", ABSENT))
        and (value is ABSENT or _int32(value))
        and optional(pc.get("globalDefault", ABSENT), bool)
        and optional(pc.get("preemptionPolicy", ABSENT), str)
        and optional(pc.get("description", ABSENT), str)
    )


CHECKS: dict[str, Callable[[dict[str, Any]], bool]] = {
    POD: pod_ok,
    PRIORITY_CLASS: priority_class_ok,
    POD_GROUP: pod_group_ok,
}
