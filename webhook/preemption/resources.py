"""Pod requests and node allocatable as the kubelet and the scheduler count them.

Built on `quantities` (fields, quantities and their sums in nano units, rounded up only at the end) and
`containers` (what the containers request, by mode); here pod-level resources and overhead on top, the
fast path for the common pod, and the views each side reads (victim, admission, scheduler).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from webhook.k8s import InvalidObject as InvalidObject  # raised by every reader of objects here
from webhook.preemption.containers import (
    KUBELET,
    SCHEDULER,
    SCHEDULER_POD_LEVEL,
    SPEC,
    aggregate_container_requests,
    is_resize_infeasible,
    legacy_container_requests,
)
from webhook.preemption.quantities import (
    CPU,
    HUGEPAGES_PREFIX,
    MEMORY,
    PODS,
    add_into,
    field,
    from_nano,
    max_of,
    nano_cached,
    resource_list,
    spec_of,
    type_name,
)
from webhook.preemption.semantics import CURRENT, Semantics


def is_supported_pod_level_resource(name: str) -> bool:
    return name in (CPU, MEMORY) or name.startswith(HUGEPAGES_PREFIX)


def pod_level_resources(pod: Mapping[str, Any]) -> tuple[dict[str, int], dict[str, int]] | None:
    """(requests, limits) of `spec.resources` when pod-level resources are set (`IsPodLevelResourcesSet`).

    The model is PodLevelResources on (beta, default on since 1.34).
    """
    spec = spec_of(pod)
    resources = field(spec, "resources", "spec")
    if resources is None:
        return None
    requests = resource_list(resources, "requests", "spec.resources")
    limits = resource_list(resources, "limits", "spec.resources")
    if limits:  # API defaulting of missing pod-level requests (`defaultPodRequests`), both rules
        # 1. a resource the containers request: their aggregate (hugepages come from the limit instead)
        for name, nano in aggregate_container_requests(pod).items():
            hugepages = name.startswith(HUGEPAGES_PREFIX)
            if name not in requests and is_supported_pod_level_resource(name) and not hugepages:
                requests[name] = nano
        # 2. any other resource with a pod-level limit: the limit
        for name, nano in limits.items():
            if name not in requests and is_supported_pod_level_resource(name):
                requests[name] = nano
    if any(is_supported_pod_level_resource(n) for n in (*requests, *limits)):
        return requests, limits
    return None


class _Unusual(Exception):
    """The fast path met something it does not handle; the checked path decides (and names errors)."""


def _plain_requests(pod: Any, mode: str = SPEC) -> dict[str, int]:
    """Summed container requests (nano) of the common pod: well-formed, string quantities, no init
    containers, overhead or pod-level resources; with a status `mode`, a container whose status reports
    resources counts as `effective_requests` says. Anything else raises _Unusual."""
    if type(pod) is not dict:
        raise _Unusual
    spec = pod.get("spec")
    if spec is None:
        return {}
    if type(spec) is not dict or "initContainers" in spec or "overhead" in spec or "resources" in spec:
        raise _Unusual
    containers = spec.get("containers")
    if containers is None:
        return {}
    if type(containers) is not list:
        raise _Unusual
    statuses = _plain_statuses(pod) if mode != SPEC else None
    infeasible: bool | None = None  # read only when a status differs from the spec
    result: dict[str, int] = {}
    for container in containers:
        if type(container) is not dict:
            raise _Unusual
        resources = container.get("resources")
        if resources is None:
            reqs: dict[str, int] = {}
        elif type(resources) is not dict:
            raise _Unusual
        else:
            reqs = {}
            requests = resources.get("requests")
            if requests is not None:
                _add_quantities(reqs, requests, {})
            limits = resources.get("limits")
            if limits:  # a limit without a request is the request (API server defaulting)
                _add_quantities(reqs, limits, requests or {})
        if statuses:
            found = statuses.get(container.get("name"))  # type: ignore[arg-type]
            if found is not None and not _unchanged(reqs, requests_of(container), found):
                if infeasible is None:
                    infeasible = mode == SCHEDULER and is_resize_infeasible(pod)
                reqs = _plain_effective(reqs, found, mode, infeasible)
        add_into(result, reqs)
    return result


def requests_of(container: dict[str, Any]) -> Any:
    resources = container.get("resources")
    return resources.get("requests") if type(resources) is dict else None


def _unchanged(spec_requests: dict[str, int], raw: Any, cs: dict[str, Any]) -> bool:
    """The steady state, read without parsing: the status reports exactly the spec's requests (and the
    limits added none), so every view is the spec."""
    if type(raw) is not dict or len(raw) != len(spec_requests):
        return False
    resources = cs.get("resources")
    if type(resources) is not dict or resources.get("requests") != raw:
        return False
    allocated = cs.get("allocatedResources")
    return allocated is None or allocated == raw


def _plain_statuses(pod: dict[str, Any]) -> dict[str, dict[str, Any]] | None:
    """Container statuses by name for the fast path; None when there are none."""
    status = pod.get("status")
    if not status:
        return None
    if type(status) is not dict:
        raise _Unusual
    items = status.get("containerStatuses")
    if not items:
        return None
    if type(items) is not list:
        raise _Unusual
    out: dict[str, dict[str, Any]] = {}
    for cs in items:
        if type(cs) is not dict:
            raise _Unusual
        name = cs.get("name")
        if type(name) is str:
            out[name] = cs
    return out


def _plain_effective(
    spec_requests: dict[str, int], cs: dict[str, Any], mode: str, infeasible: bool
) -> dict[str, int]:
    """`effective_requests` for well-formed statuses; anything unusual leaves the fast path."""
    raw_allocated, resources = cs.get("allocatedResources"), cs.get("resources")
    allocated: dict[str, int] = {}
    if raw_allocated is not None:
        _add_quantities(allocated, raw_allocated, {})
    if resources is None:
        if mode == KUBELET and raw_allocated is not None:
            return allocated
        return spec_requests
    if type(resources) is not dict:
        raise _Unusual
    running: dict[str, int] = {}
    raw_running = resources.get("requests")
    if raw_running is not None:
        _add_quantities(running, raw_running, {})
    if mode == KUBELET:
        base = allocated if raw_allocated is not None else spec_requests
        if base == running or not running:
            return base if not allocated or base is allocated else max_of(base, allocated)
        return max_of(base, running, allocated)
    if infeasible:
        return max_of(running, allocated)
    if running == spec_requests and (not allocated or allocated == spec_requests):
        return spec_requests  # the steady state: nothing resized
    return max_of(spec_requests, running, allocated)


def _add_quantities(result: dict[str, int], quantities: Any, skip: dict[str, Any]) -> None:
    """Add well-formed quantities (names not in `skip`) to `result`; anything unusual leaves the fast path."""
    if type(quantities) is not dict:
        raise _Unusual
    for name, value in quantities.items():
        if name in skip:
            continue
        if type(name) is not str or type(value) is not str:
            raise _Unusual
        nano = nano_cached(value)
        if nano is None or nano < 0:
            raise _Unusual
        result[name] = result.get(name, 0) + nano


def _reported(nano: Mapping[str, int]) -> dict[str, int]:
    """Nano units to what Kubernetes reports, plus `pods: 1`."""
    view = {name: from_nano(name, q) for name, q in nano.items()}
    view[PODS] = 1
    return view


def _scheduler_view(pod: Mapping[str, Any], mode: str, fast: bool = True) -> dict[str, int]:
    """`PodRequests` as the scheduler and the kubelet's fit check count a pod: containers, the supported
    pod-level requests on top, overhead always."""
    if mode == SCHEDULER_POD_LEVEL and not _pod_level_status(pod):
        mode = SCHEDULER  # no pod-level status maps: the 1.33-1.35 arithmetic, fast path included
    if fast and mode != SCHEDULER_POD_LEVEL:
        try:
            return _reported(_plain_requests(pod, mode))
        except _Unusual:
            pass
    spec = spec_of(pod)
    overhead = resource_list(spec, "overhead", "spec")
    if mode == SCHEDULER_POD_LEVEL:
        requests = _pod_level_aggregate(pod)
    else:
        requests = aggregate_container_requests(pod, mode)
    pod_level = pod_level_resources(pod)
    if pod_level is not None:
        effective = pod_level[0]
        if mode == SCHEDULER_POD_LEVEL and pod_level[0]:
            effective = _effective_pod_level(pod, pod_level[0], overhead)
        requests.update((n, q) for n, q in effective.items() if is_supported_pod_level_resource(n))
    add_into(requests, overhead)
    return _reported(requests)


def _pod_level_status(pod: Mapping[str, Any]) -> bool:
    """The kubelet reports pod-level status maps (`status.resources` or `status.allocatedResources`)."""
    status = pod.get("status") if isinstance(pod, dict) else None
    return isinstance(status, dict) and (
        status.get("resources") is not None or status.get("allocatedResources") is not None
    )


def _pod_level_running(status: Mapping[str, Any]) -> dict[str, int] | None:
    resources = field(status, "resources", "status")
    if resources is None or resources.get("requests") is None:
        return None
    return resource_list(resources, "requests", "status.resources")


def _pod_level_aggregate(pod: Mapping[str, Any]) -> dict[str, int]:
    """`AggregateContainerRequests` from 1.36: with both pod-level maps reported (they already hold the
    containers' aggregate), max(spec, running, allocated) of the aggregates (running and allocated only
    when the resize is Infeasible); otherwise the containers' own statuses, as before."""
    status = field(pod, "status", "pod", default={})
    running = _pod_level_running(status)
    if status.get("allocatedResources") is None or running is None:
        return aggregate_container_requests(pod, SCHEDULER)
    allocated = resource_list(status, "allocatedResources", "status")
    if is_resize_infeasible(pod):
        return max_of(running, allocated)
    return max_of(aggregate_container_requests(pod, SPEC), running, allocated)


def _effective_pod_level(
    pod: Mapping[str, Any], spec_requests: dict[str, int], overhead: Mapping[str, int]
) -> dict[str, int]:
    """`effectivePodLevelResources` (1.36): the pod-level requests as the largest of spec, running and
    allocated (the two status maps without the overhead they include); the spec is left out when the
    resize is Infeasible."""
    status = field(pod, "status", "pod", default={})
    lists: list[dict[str, int]] = [] if is_resize_infeasible(pod) else [spec_requests]
    for found in (_pod_level_running(status), resource_list(status, "allocatedResources", "status")):
        if found:
            lists.append({n: q - overhead.get(n, 0) for n, q in found.items()})
    return max_of(*lists)


def _victim_view(pod: Mapping[str, Any], semantics: Semantics, fast: bool = True) -> dict[str, int]:
    """The kubelet's `GetResourceRequest` (by spec): from 1.34 `PodRequests` without overhead, the
    containers skipped entirely when pod-level resources are set; before, `legacy_container_requests`.
    Overhead is added only to non-zero totals."""
    if fast:
        try:
            return _reported(_plain_requests(pod))  # no init containers, overhead or pod-level: all agree
        except _Unusual:
            pass
    spec = spec_of(pod)
    overhead = resource_list(spec, "overhead", "spec")
    if semantics.victim_requests_pod_requests:
        pod_level = pod_level_resources(pod)
        if pod_level is not None:
            requests = {n: q for n, q in pod_level[0].items() if is_supported_pod_level_resource(n)}
        else:
            requests = aggregate_container_requests(pod)
    else:
        requests = legacy_container_requests(pod)
    for name, q in overhead.items():
        if requests.get(name, 0) != 0:
            requests[name] += q
    return _reported(requests)


def pod_requests(pod: Mapping[str, Any], semantics: Semantics = CURRENT) -> dict[str, int]:
    """What a preemption victim frees in the kubelet's arithmetic (`GetResourceRequest`), plus `pods: 1`.

    By spec in every version: the kubelet's preemption reads its active pods as the API has them.
    """
    return _victim_view(pod, semantics)


def scheduler_pod_requests(
    pod: Mapping[str, Any], semantics: Semantics = CURRENT, *, on_node: bool = True
) -> dict[str, int]:
    """The scheduler's request for a pod (`PodInfo.calculateResource`), plus `pods: 1`.

    A pod on a node counts by its status too from 1.33 (SCHEDULER mode); a pod being placed
    (`on_node=False`, `computePodResourceRequest`) by its spec.
    """
    if not (on_node and semantics.status_resources):
        return _scheduler_view(pod, SPEC)
    return _scheduler_view(pod, SCHEDULER_POD_LEVEL if semantics.pod_level_status_resources else SCHEDULER)


def kubelet_admission_requests(pod: Mapping[str, Any], semantics: Semantics = CURRENT) -> dict[str, int]:
    """What an admitted pod holds when the kubelet admits another one, plus `pods: 1`: from 1.33 the
    kubelet counts its allocated pods (KUBELET mode: the larger of allocated and running), before that
    the spec."""
    return _scheduler_view(pod, KUBELET if semantics.status_resources else SPEC)


def request_views(
    pod: Mapping[str, Any], semantics: Semantics = CURRENT
) -> tuple[dict[str, int], dict[str, int]]:
    """(what the pod frees as a kubelet preemption victim, what it holds for the kubelet's admission)."""
    return _victim_view(pod, semantics), kubelet_admission_requests(pod, semantics)


def _checked_request_views(
    pod: Mapping[str, Any], semantics: Semantics = CURRENT
) -> tuple[dict[str, int], dict[str, int]]:
    """`request_views` without the fast path (tests compare the two)."""
    mode = KUBELET if semantics.status_resources else SPEC
    return _victim_view(pod, semantics, fast=False), _scheduler_view(pod, mode, fast=False)


def node_allocatable(node: Mapping[str, Any]) -> dict[str, int]:
    """`status.allocatable` parsed (cpu millicores, others base units)."""
    if not isinstance(node, dict):
        raise InvalidObject(f"node: must be an object, got {type_name(node)}")
    status = field(node, "status", "node", default={})
    return {n: from_nano(n, q) for n, q in resource_list(status, "allocatable", "status").items()}


def add(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    """Per-resource sum; keys are the union."""
    out = dict(a)
    add_into(out, b)
    return out


def subtract(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    """Per-resource difference `a - b`; keys are the union (may go negative)."""
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) - v
    return out


def total(requests: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Sum of many request maps (a node's used resources)."""
    out: dict[str, int] = {}
    for r in requests:
        add_into(out, r)
    return out


def is_native_resource(name: str) -> bool:
    """No domain, or the `kubernetes.io/` domain (`IsNativeResource`)."""
    return "/" not in name or name.startswith("kubernetes.io/")


def is_extended_resource(name: str) -> bool:
    """`IsExtendedResourceName`: a domain-qualified name outside kubernetes.io, not a quota name."""
    return not is_native_resource(name) and not name.startswith("requests.")


def is_scalar_resource(name: str) -> bool:
    """Resources the scheduler counts besides cpu/memory/ephemeral-storage/pods (`IsScalarResourceName`)."""
    return (
        is_extended_resource(name)
        or name.startswith(HUGEPAGES_PREFIX)
        or name.startswith("kubernetes.io/")
        or name.startswith("attachable-volumes-")
    )
