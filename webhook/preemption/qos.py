"""Pod QoS class exactly as `v1qos.GetPodQOS` computes it (pkg/apis/core/v1/helper/qos).

Only cpu and memory count. Init containers (sidecars included) count like regular ones. With pod-level
resources (`spec.resources` present; PodLevelResources is on in the modelled version) they alone decide.
Inputs are taken as the API server stores them, i.e. already defaulted: a container with limits only has
had its requests copied from the limits by the API server, so a raw manifest with limits only is
Burstable here (no defaulting is re-done).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.preemption.quantities import CPU, MEMORY, InvalidObject, field, quantity_nano, spec_of

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"


def _raw(resources: Mapping[str, Any], key: str, path: str) -> dict[str, Any]:
    value: dict[str, Any] = field(resources, key, path, default={})
    return value


def resource_qos(resources: Any, path: str) -> str:
    """`resourceQOS`: the class of one set of resource requirements."""
    if resources is None:
        resources = {}
    if not isinstance(resources, Mapping):
        raise InvalidObject(f"{path}: must be an object")
    requests = _raw(resources, "requests", path)
    limits = _raw(resources, "limits", path)
    if not requests and not limits:
        return BEST_EFFORT
    qos: str | None = None
    for res in (CPU, MEMORY):
        req = quantity_nano(requests[res], f"{path}.requests.{res}") if res in requests else 0
        lim = quantity_nano(limits[res], f"{path}.limits.{res}") if res in limits else 0
        if req != lim:
            return BURSTABLE
        best_effort = req == 0
        if qos is None:
            qos = BEST_EFFORT if best_effort else GUARANTEED
        elif best_effort != (qos == BEST_EFFORT):
            return BURSTABLE
    return qos or BEST_EFFORT


def compute_pod_qos(pod: Mapping[str, Any]) -> str:
    """`ComputePodQOS`: from the spec only."""
    spec = spec_of(pod)
    pod_level = field(spec, "resources", "spec")
    if pod_level is not None:
        return resource_qos(pod_level, "spec.resources")
    pod_qos: str | None = None
    for key in ("initContainers", "containers"):
        for i, container in enumerate(field(spec, key, "spec", list, [])):
            if not isinstance(container, Mapping):
                raise InvalidObject(f"spec.{key}[{i}]: must be an object")
            qos = resource_qos(container.get("resources"), f"spec.{key}[{i}].resources")
            if qos == BURSTABLE:
                return BURSTABLE
            if pod_qos is None:
                pod_qos = qos
            elif pod_qos != qos:
                return BURSTABLE
    return pod_qos or BEST_EFFORT


def qos_class(pod: Mapping[str, Any]) -> str:
    """`GetPodQOS`: `status.qosClass` when set (any string, as upstream), else computed from the spec."""
    status = field(pod, "status", "pod", default={})
    recorded = status.get("qosClass")
    if isinstance(recorded, str) and recorded:
        return recorded
    return compute_pod_qos(pod)
