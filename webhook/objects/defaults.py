"""The API server's defaulting of what our decisions read, for objects that never went through one.

A manifest from a repository is not what the cluster stores: the API server copies limits into missing
requests (so a container with only `nvidia.com/gpu: 1` in its limits requests one GPU), gives
PriorityClasses `preemptionPolicy: PreemptLowerPriority`, and fills host ports of host-network pods.
Offline commands default their input here so that they decide on what the cluster would decide on.

Upstream: pkg/apis/core/v1/defaults.go (SetDefaults_Pod, SetDefaults_PodSpec) and
pkg/apis/scheduling/v1/defaults.go (SetDefaults_PriorityClass). Inputs of the wrong shape are returned
as they are: the callers' own checks name the bad field.
"""

from __future__ import annotations

import copy
from typing import Any

from webhook.k8s import PREEMPT_LOWER_PRIORITY

# Pod-level resources (`spec.resources`) cover these only (IsSupportedPodLevelResource).
_POD_LEVEL = ("cpu", "memory")
_HUGEPAGES = "hugepages-"


def requests_from_limits(resources: Any) -> Any:
    """`resources.requests` with every resource that has a limit and no request set to the limit.

    The raw `requests` map (possibly None) when there is nothing to add; never mutates its input.
    """
    if not isinstance(resources, dict):
        return None
    requests, limits = resources.get("requests"), resources.get("limits")
    if not isinstance(limits, dict) or not limits:
        return requests
    if requests is not None and not isinstance(requests, dict):
        return requests
    missing = {k: v for k, v in limits.items() if k not in (requests or {})}
    if not missing:
        return requests
    return {**(requests or {}), **missing}


def _default_resources(holder: dict[str, Any], supported: Any = None) -> None:
    resources = holder.get("resources")
    if not isinstance(resources, dict):
        return
    requests = requests_from_limits(resources)
    if requests is resources.get("requests"):
        return
    if supported is not None:
        own = resources.get("requests") or {}
        requests = {k: v for k, v in requests.items() if k in own or supported(k)}
        if requests == own:
            return
    holder["resources"] = {**resources, "requests": requests}


def _pod_level_supported(name: Any) -> bool:
    return isinstance(name, str) and (name in _POD_LEVEL or name.startswith(_HUGEPAGES))


def default_pod_spec(spec: Any) -> Any:
    """A defaulted copy of a PodSpec (a pod's or a template's); the input itself when it is not a map."""
    if not isinstance(spec, dict):
        return spec
    spec = copy.deepcopy(spec)
    host_network = spec.get("hostNetwork") is True
    for key in ("initContainers", "containers"):
        containers = spec.get(key)
        if not isinstance(containers, list):
            continue
        for container in containers:
            if not isinstance(container, dict):
                continue
            _default_resources(container)
            if host_network:
                _default_host_ports(container)
    if isinstance(spec.get("resources"), dict):
        requested = {
            name
            for key in ("initContainers", "containers")
            for c in (spec.get(key) if isinstance(spec.get(key), list) else [])
            if isinstance(c, dict) and isinstance(c.get("resources"), dict)
            for name in (c["resources"].get("requests") or {})
        }
        _default_resources(spec, lambda name: _pod_level_supported(name) and name not in requested)
    return spec


def _default_host_ports(container: dict[str, Any]) -> None:
    """With hostNetwork the container port is the host port (SetDefaults_PodSpec)."""
    ports = container.get("ports")
    if not isinstance(ports, list):
        return
    for port in ports:
        if isinstance(port, dict) and not port.get("hostPort") and isinstance(port.get("containerPort"), int):
            port["hostPort"] = port["containerPort"]


def default_pod(pod: Any) -> Any:
    """A defaulted copy of a Pod (the spec only: the rest is never copied)."""
    if not isinstance(pod, dict) or not isinstance(pod.get("spec"), dict):
        return pod
    return {**pod, "spec": default_pod_spec(pod["spec"])}


def default_priority_class(pc: Any) -> Any:
    """`preemptionPolicy` defaults to PreemptLowerPriority."""
    if not isinstance(pc, dict) or pc.get("preemptionPolicy") is not None:
        return pc
    return {**pc, "preemptionPolicy": PREEMPT_LOWER_PRIORITY}


def pod_to_create(pod: Any) -> Any:
    """A pod as a CREATE would store it, for commands that need a name: defaulted, and a pod with only
    `generateName` named by its prefix (the API server appends five random characters)."""
    pod = default_pod(pod)
    if not isinstance(pod, dict) or not isinstance(pod.get("metadata"), dict):
        return pod
    meta = pod["metadata"]
    if not meta.get("name") and isinstance(meta.get("generateName"), str) and meta["generateName"]:
        pod = {**pod, "metadata": {**meta, "name": meta["generateName"]}}
    return pod
