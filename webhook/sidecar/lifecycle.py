"""Pod lifecycle as the sidecar sees it from the API, in the spirit of the kubelet's pod worker.

The kubelet keeps a pod's resources until its pod worker reaches "terminated"; a pod that is being deleted
or whose containers still run after a terminal phase is "terminating" and still holds everything it
requested. The sidecar only sees the API object, so it derives the same states from it:

* desired: bound to the node, not deleted, no container running yet (phase Pending or unset); it holds its
  requests, because the kubelet counts every admitted pod whether or not its containers have started.
* active: running (phase Running or Unknown), not deleted.
* terminating: deletionTimestamp set (`is_terminating`, the same predicate the kubelet's admission uses),
  or a terminal phase with a container still running.
* terminated: a terminal phase (Succeeded / Failed) with no container running; holds nothing.

A pod removed from the API holds nothing either (it is simply absent from the view).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from webhook.k8s import TERMINAL_PHASES
from webhook.preemption.pods import is_mirror_pod, is_static_pod, is_terminating

DESIRED = "desired"
ACTIVE = "active"
TERMINATING = "terminating"
TERMINATED = "terminated"
STATES = (DESIRED, ACTIVE, TERMINATING, TERMINATED)


def _statuses(pod: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    status = pod.get("status") or {}
    for key in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"):
        for item in status.get(key) or ():
            if isinstance(item, Mapping):
                yield item


def has_running_containers(pod: Mapping[str, Any]) -> bool:
    """True if any container status says running (the API's view of "could have running containers")."""
    return any(isinstance((s.get("state") or {}).get("running"), Mapping) for s in _statuses(pod))


def phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def lifecycle_state(pod: Mapping[str, Any]) -> str:
    """One of STATES; see the module docstring for the rules."""
    running = has_running_containers(pod)
    if phase(pod) in TERMINAL_PHASES:
        return TERMINATING if running else TERMINATED
    if is_terminating(pod):
        return TERMINATING
    if phase(pod) == "Pending" and not running:
        return DESIRED
    return ACTIVE


def holds_resources(pod: Mapping[str, Any]) -> bool:
    """Resources stay held until the pod is terminated, as with the kubelet's pod worker."""
    return lifecycle_state(pod) != TERMINATED


def is_static(pod: Mapping[str, Any]) -> bool:
    """Static pods reach the API only as mirror pods; either mark makes a pod static here."""
    return is_mirror_pod(pod) or is_static_pod(pod)


def state_counts(pods: Iterable[Mapping[str, Any]]) -> dict[tuple[str, bool], int]:
    """Pods per (state, static), every combination present (zero when absent) so gauges reset."""
    counts = {(state, static): 0 for state in STATES for static in (False, True)}
    for pod in pods:
        counts[(lifecycle_state(pod), is_static(pod))] += 1
    return counts
