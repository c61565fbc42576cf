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
import re
from decimal import ROUND_CEILING, Decimal
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
        _default_pod_level(spec)
    return spec


def _default_pod_level(spec: dict[str, Any]) -> None:
    """`defaultHugePagePodLimits`, then `defaultPodRequests` (after the containers were defaulted):
    hugepages limits from the containers' aggregate; then each missing pod-level request from the
    containers' aggregate request of that resource (rule 1, not hugepages), else from the pod-level
    limit (rule 2). Both only when pod-level limits are set."""
    resources = dict(spec["resources"])
    limits, requests = resources.get("limits"), resources.get("requests")
    if (limits is not None and not isinstance(limits, dict)) or (
        requests is not None and not isinstance(requests, dict)
    ):
        return
    limits, requests = dict(limits or {}), dict(requests or {})
    if limits or requests:
        for name, value in _aggregate(spec, "limits").items():
            if name.startswith(_HUGEPAGES) and name not in limits:
                limits[name] = value
    if not limits:
        return
    for name, value in _aggregate(spec, "requests").items():
        if name not in requests and _pod_level_supported(name) and not name.startswith(_HUGEPAGES):
            requests[name] = value
    for name, value in limits.items():
        if name not in requests and _pod_level_supported(name):
            requests[name] = value
    resources["limits"] = limits
    if requests:
        resources["requests"] = requests
    spec["resources"] = resources


def _aggregate(spec: dict[str, Any], key: str) -> dict[str, str]:
    """`AggregateContainerRequests`/`Limits` of the pod-level resources (KEP-753 sidecar formula), as
    quantity strings; resources with an unreadable quantity are left out (validation names them)."""
    total: dict[str, Decimal] = {}
    sidecars: dict[str, Decimal] = {}
    peak: dict[str, Decimal] = {}
    for kind in ("containers", "initContainers"):
        items = spec.get(kind)
        for c in items if isinstance(items, list) else []:
            own = _quantities(c, key)
            if kind == "containers":
                _add(total, own)
            elif isinstance(c, dict) and c.get("restartPolicy") == "Always":
                _add(total, own)
                _add(sidecars, own)
                _max(peak, sidecars)
            else:
                use = dict(own)
                _add(use, sidecars)
                _max(peak, use)
    _max(total, peak)
    return {name: _format(name, value) for name, value in total.items()}


def _quantities(container: Any, key: str) -> dict[str, Decimal]:
    resources = container.get("resources") if isinstance(container, dict) else None
    values = resources.get(key) if isinstance(resources, dict) else None
    out: dict[str, Decimal] = {}
    for name, value in (values if isinstance(values, dict) else {}).items():
        number = _parse(value)
        if _pod_level_supported(name) and number is not None:
            out[name] = number
    return out


def _add(total: dict[str, Decimal], more: dict[str, Decimal]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, Decimal(0)) + value


def _max(total: dict[str, Decimal], other: dict[str, Decimal]) -> None:
    for name, value in other.items():
        if name not in total or value > total[name]:
            total[name] = value


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(r"([+]?(?:\d+(?:\.\d*)?|\.\d+))([eE][+-]?\d+|[numkMGTPE]|[KMGTPE]i)?")


def _parse(value: Any) -> Decimal | None:
    """A quantity (string or number) as a Decimal; None when it is not one (validation reports it)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    match = _QUANTITY.fullmatch(value if isinstance(value, str) else repr(value))
    if match is None:
        return None
    number, suffix = Decimal(match.group(1)), match.group(2) or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number.scaleb(_DECIMAL[suffix])
    return number.scaleb(int(suffix[1:]))


def _format(name: str, value: Decimal) -> str:
    """A canonical quantity: memory and hugepages in the largest binary suffix that is exact, anything
    else (or a fraction) in the largest decimal suffix that is exact."""
    if name != "cpu" and value == value.to_integral_value() and value > 0:
        for suffix, size in reversed(_BINARY.items()):
            if value % size == 0:
                return f"{int(value // size)}{suffix}"
    for suffix, exponent in reversed(_DECIMAL.items()):
        scaled = value.scaleb(-exponent)
        if scaled == scaled.to_integral_value():
            return f"{int(scaled)}{suffix}"
    return f"{int(value.scaleb(9).to_integral_value(rounding=ROUND_CEILING))}n"


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
