"""Which pods the sidecar acts for: critical pods the kubelet rejected for lack of resources.

The kubelet records a rejection as phase Failed with the predicate's reason: `OutOf<resource>` for an
InsufficientResourceError (`OutOfcpu`, `OutOfmemory`, `OutOfpods`, `OutOfephemeral-storage`,
`OutOfnvidia.com/gpu`, ...), or `UnexpectedAdmissionError` when its own critical-pod preemption failed
(for example because every candidate was at or above the sidecar's lower threshold, or the kubelet's kill
timed out). Non-resource rejections (NodeAffinity, NodePorts, TaintToleration, ...) cannot be fixed by
evicting pods, exactly as upstream's HandleAdmissionFailure gives up on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.preemption.pods import is_terminating, priority_of
from webhook.sidecar.lifecycle import is_static, phase

OUT_OF_PREFIX = "OutOf"
UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"


@dataclass(frozen=True, slots=True)
class Rejection:
    """A rejected pod the sidecar should make room for; `resource` is None for UnexpectedAdmissionError."""

    pod: Mapping[str, Any]
    reason: str
    resource: str | None


def rejected_resource(reason: str) -> str | None:
    """`OutOfcpu` -> `cpu`; other reasons -> None."""
    if reason.startswith(OUT_OF_PREFIX) and len(reason) > len(OUT_OF_PREFIX):
        return reason[len(OUT_OF_PREFIX) :]
    return None


def is_resource_rejection(reason: str) -> bool:
    return reason == UNEXPECTED_ADMISSION_ERROR or rejected_resource(reason) is not None


def rejection(pod: Mapping[str, Any], node_name: str, critical_priority: int) -> Rejection | None:
    """The Rejection if the sidecar should act for `pod`, else None.

    Static and mirror pods are left to the kubelet (it already preempts for them, and the sidecar could not
    recreate them); a pod already being deleted needs no room.
    """
    if (pod.get("spec") or {}).get("nodeName") != node_name:
        return None
    if phase(pod) != "Failed" or is_terminating(pod) or is_static(pod):
        return None
    reason = str((pod.get("status") or {}).get("reason") or "")
    if not is_resource_rejection(reason):
        return None
    priority = priority_of(pod)
    if priority is None or priority < critical_priority:
        return None
    return Rejection(pod=pod, reason=reason, resource=rejected_resource(reason))
