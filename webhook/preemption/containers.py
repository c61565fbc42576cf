"""What a pod's containers request, in nano units, by how a pod counts (`mode`): the spec only, the
scheduler's view of the API object, or the kubelet's view of its allocated pod (in-place resize); the
KEP-753 sidecar formula and, before 1.34, the kubelet's older sum-or-largest-init rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.k8s import InvalidObject
from webhook.preemption.quantities import (
    add_into,
    field,
    max_into,
    max_of,
    resource_list,
    spec_of,
    type_name,
)


def _containers(spec: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = field(spec, key, "spec", list, [])
    for i, c in enumerate(items):
        if not isinstance(c, dict):
            raise InvalidObject(f"spec.{key}[{i}]: must be an object, got {type_name(c)}")
    return items


def container_requests(container: Mapping[str, Any], path: str) -> dict[str, int]:
    """`resources.requests` of one container, nano units, as the API server stores them: a resource
    with a limit and no request requests its limit."""
    resources = field(container, "resources", path, default={})
    requests = resource_list(resources, "requests", f"{path}.resources")
    for name, nano in resource_list(resources, "limits", f"{path}.resources").items():
        requests.setdefault(name, nano)
    return requests


# How a pod already on a node counts (`PodResourcesOptions.UseStatusResources`, in-place resize):
SPEC = "spec"  # the spec only: a pending pod, or resize off (before 1.33)
SCHEDULER = "scheduler"  # the scheduler's view of the API object: largest of spec, allocated, running
KUBELET = "kubelet"  # the kubelet's view of its allocated pod: largest of allocated and running
# SCHEDULER, and the pod-level status maps too (1.36+, `InPlacePodLevelResourcesVerticalScalingEnabled`)
SCHEDULER_POD_LEVEL = "scheduler-pod-level"

RESIZE_PENDING = "PodResizePending"
INFEASIBLE = "Infeasible"


def is_resize_infeasible(pod: Mapping[str, Any]) -> bool:
    """`IsPodResizeInfeasible`: the FIRST `PodResizePending` condition has reason `Infeasible`."""
    status = field(pod, "status", "pod", default={})
    for i, cond in enumerate(field(status, "conditions", "status", list, [])):
        if not isinstance(cond, dict):
            raise InvalidObject(f"status.conditions[{i}]: must be an object, got {type_name(cond)}")
        if cond.get("type") == RESIZE_PENDING:
            return bool(cond.get("reason") == INFEASIBLE)
    return False


_Statuses = dict[str, tuple[dict[str, Any], str]]


def _statuses(pod: Mapping[str, Any]) -> _Statuses:
    """Container statuses by name (init statuses win a name clash, as upstream's map), with their path."""
    status = field(pod, "status", "pod", default={})
    out: _Statuses = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for i, cs in enumerate(field(status, key, "status", list, [])):
            if not isinstance(cs, dict):
                raise InvalidObject(f"status.{key}[{i}]: must be an object, got {type_name(cs)}")
            name = cs.get("name")
            if isinstance(name, str):
                out[name] = (cs, f"status.{key}[{i}]")
    return out


def effective_requests(
    spec_requests: dict[str, int],
    name: Any,
    statuses: _Statuses,
    mode: str,
    infeasible: bool,
) -> dict[str, int]:
    """One container's requests (nano) as `mode` counts them.

    SCHEDULER is `determineContainerReqs` on the API object: with a status that reports resources,
    max(running, allocated) when the resize is Infeasible, else max(spec, running, allocated). KUBELET
    is the same function on the kubelet's pod, whose spec is its allocation
    (`UpdatePodFromAllocation`): `allocatedResources` when reported, then at least what runs.
    """
    if mode == SPEC:
        return spec_requests
    found = statuses.get(name) if isinstance(name, str) else None
    if found is None:
        return spec_requests
    cs, path = found
    allocated = resource_list(cs, "allocatedResources", path)
    resources = field(cs, "resources", path)
    if mode == KUBELET:
        base = allocated if cs.get("allocatedResources") is not None else spec_requests
        if resources is None:
            return base
        return max_of(base, resource_list(resources, "requests", f"{path}.resources"), allocated)
    if resources is None:
        return spec_requests
    running = resource_list(resources, "requests", f"{path}.resources")
    if infeasible:
        return max_of(running, allocated)
    return max_of(spec_requests, running, allocated)


def aggregate_container_requests(pod: Mapping[str, Any], mode: str = SPEC) -> dict[str, int]:
    """`AggregateContainerRequests` (KEP-753 sidecar formula), nano units; absent keys stay absent.

    Sidecars (init containers with restartPolicy Always) run for the pod's whole life, so they add to the
    steady state and to every later init container's peak. With a status `mode`, regular containers and
    sidecars count as `effective_requests` says (regular init containers are never resized).
    """
    spec = spec_of(pod)
    statuses: _Statuses = {} if mode == SPEC else _statuses(pod)
    infeasible = mode == SCHEDULER and bool(statuses) and is_resize_infeasible(pod)
    result: dict[str, int] = {}
    for i, c in enumerate(_containers(spec, "containers")):
        reqs = container_requests(c, f"spec.containers[{i}]")
        add_into(result, effective_requests(reqs, c.get("name"), statuses, mode, infeasible))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for i, c in enumerate(_containers(spec, "initContainers")):
        reqs = container_requests(c, f"spec.initContainers[{i}]")
        if c.get("restartPolicy") == "Always":
            reqs = effective_requests(reqs, c.get("name"), statuses, mode, infeasible)
            add_into(result, reqs)
            add_into(sidecars, reqs)
            use = sidecars
        else:
            use = dict(reqs)
            add_into(use, sidecars)
        max_into(init_peak, use)
    max_into(result, init_peak)
    return result


def legacy_container_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """The kubelet's `GetResourceRequestQuantity` before 1.34, nano units: the containers summed, and
    at least the largest single init container, sidecars counted as any init container."""
    spec = spec_of(pod)
    result: dict[str, int] = {}
    for i, c in enumerate(_containers(spec, "containers")):
        add_into(result, container_requests(c, f"spec.containers[{i}]"))
    for i, c in enumerate(_containers(spec, "initContainers")):
        max_into(result, container_requests(c, f"spec.initContainers[{i}]"))
    return result
