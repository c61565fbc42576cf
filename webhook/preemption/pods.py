"""Pod identity as the kubelet sees it: static, mirror, priority, criticality (pkg/kubelet/types)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.k8s import (
    CONFIG_SOURCE_ANNOTATION,
    MIRROR_POD_ANNOTATION,
    SYSTEM_CRITICAL_PRIORITY,
    pod_ref,
)
from webhook.preemption.quantities import InvalidObject, field, shown, shown_name, spec_of

API_SOURCE = "api"


def _annotations(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = field(pod, "metadata", "pod", default={})
    annotations: Mapping[str, Any] = field(meta, "annotations", "metadata", default={})
    return annotations


def is_mirror_pod(pod: Mapping[str, Any]) -> bool:
    """`IsMirrorPod`: the `kubernetes.io/config.mirror` annotation is present (any value)."""
    return MIRROR_POD_ANNOTATION in _annotations(pod)


def is_static_pod(pod: Mapping[str, Any]) -> bool:
    """`IsStaticPod`: `kubernetes.io/config.source` is set and is not "api" (a file or http manifest)."""
    source = _annotations(pod).get(CONFIG_SOURCE_ANNOTATION)
    return source is not None and source != API_SOURCE


def priority_of(pod: Mapping[str, Any]) -> int | None:
    """`spec.priority`, None when unset (upstream keeps nil distinct from 0)."""
    value = spec_of(pod).get("priority")
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidObject(f"spec.priority: must be an integer, got {shown(value)}")
    return value


def is_terminating(pod: Mapping[str, Any]) -> bool:
    """`metadata.deletionTimestamp` is set: deletion was requested and the pod is shutting down."""
    meta = field(pod, "metadata", "pod", default={})
    return meta.get("deletionTimestamp") is not None


def describe(pod: Any) -> str:
    """`namespace/name` for messages."""
    ns, name, _ = pod_ref(pod) if isinstance(pod, Mapping) else ("", "", "")
    return shown_name(f"{ns}/{name}" if ns else (name or "<unnamed>"))


def is_critical(pod: Mapping[str, Any], critical_priority: int = SYSTEM_CRITICAL_PRIORITY) -> bool:
    """`IsCriticalPod`: static, mirror, or priority at least `critical_priority` (namespace is irrelevant)."""
    if is_static_pod(pod) or is_mirror_pod(pod):
        return True
    priority = priority_of(pod)
    return priority is not None and priority >= critical_priority


def preemptable(
    preemptor: Mapping[str, Any],
    preemptee: Mapping[str, Any],
    critical_priority: int = SYSTEM_CRITICAL_PRIORITY,
) -> bool:
    """`Preemptable`: critical beats non-critical; otherwise strictly higher priority, nil never compares."""
    if is_critical(preemptor, critical_priority) and not is_critical(preemptee, critical_priority):
        return True
    a, b = priority_of(preemptor), priority_of(preemptee)
    return a is not None and b is not None and a > b
