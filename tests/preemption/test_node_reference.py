"""The optimised code against straight ports of upstream's Go, on random inputs.

`by_distance` computes distances per distinct request vector and compares (memory, cpu) tuples;
`request_views` has a direct path for plain pods. Both must give exactly what the plain versions give,
victim identity and order included.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.preemption.containers import SCHEDULER, SPEC
from webhook.preemption.node.victim_search import (
    Candidate,
    NoVictims,
    by_distance,
    distance,
    pods_to_preempt,
    requirements_string,
    smaller_resource_request,
    subtract,
)
from webhook.preemption.pods import preemptable
from webhook.preemption.qos import BEST_EFFORT, BURSTABLE, GUARANTEED
from webhook.preemption.resources import (
    _checked_request_views,
    _scheduler_view,
    request_views,
    scheduler_pod_requests,
)
from webhook.preemption.semantics import Semantics

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def upstream_by_distance(pods: list[Candidate], reqs: list[tuple[str, int]]) -> list[Candidate]:
    """getPodsToPreemptByDistance, line by line."""
    pods = list(pods)
    evict = []
    while reqs:
        if not pods:
            raise NoVictims("no set of running pods found to reclaim resources: " + requirements_string(reqs))
        best_distance, best_index = float(len(reqs) + 1), 0
        for i, pod in enumerate(pods):
            dist = distance(reqs, pod)
            if dist < best_distance or (
                best_distance == dist and smaller_resource_request(pod, pods[best_index])
            ):
                best_distance, best_index = dist, i
        reqs = subtract(reqs, [pods[best_index]])
        evict.append(pods[best_index])
        pods[best_index] = pods[-1]
        pods.pop()
    return evict


def upstream_get_pods_to_preempt(preemptor: dict, pods: list[Candidate], reqs) -> list[Candidate]:
    """getPodsToPreempt (algorithm A), line by line."""
    be = [p for p in pods if preemptable(preemptor, p.pod) and p.qos == BEST_EFFORT]
    bu = [p for p in pods if preemptable(preemptor, p.pod) and p.qos == BURSTABLE]
    gu = [p for p in pods if preemptable(preemptor, p.pod) and p.qos == GUARANTEED]
    rest = subtract(reqs, be + bu + gu)
    if rest:
        raise NoVictims("no set of running pods found to reclaim resources: " + requirements_string(rest))
    g = upstream_by_distance(gu, subtract(reqs, be + bu))
    b = upstream_by_distance(bu, subtract(reqs, be + g))
    e = upstream_by_distance(be, subtract(reqs, b + g))
    return e + b + g


# Few distinct values, so that ties (and the swap-remove tie-break) are common.
amounts = st.sampled_from([None, "0", "100m", "100m", "250m", "1"])
memories = st.sampled_from([None, "0", "64Mi", "64Mi", "128Mi", "1Gi"])


@st.composite
def candidate(draw, i: int) -> Candidate:
    cpu, memory = draw(amounts), draw(memories)
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    resources: dict[str, Any] = {"requests": requests}
    if draw(st.booleans()):
        resources["limits"] = dict(requests)
    pod = {
        "metadata": {"name": f"p{i}"},
        "spec": {
            "priority": draw(st.sampled_from([None, 0, 5, 2_000_000_000])),
            "containers": [{"resources": resources}],
        },
    }
    return Candidate.of(pod)


@st.composite
def searches(draw):
    pods = [draw(candidate(i)) for i in range(draw(st.integers(0, 25)))]
    reqs = []
    for name, top in (("cpu", 2000), ("memory", 2 * 1024**3), ("pods", 6)):
        if draw(st.booleans()):
            reqs.append((name, draw(st.integers(1, top))))
    draw(st.randoms(use_true_random=False)).shuffle(reqs)
    return pods, reqs


def outcome(fn, *args):
    try:
        return [p.pod["metadata"]["name"] for p in fn(*args)]
    except NoVictims as err:
        return str(err)


def check_search(search, preemptor_priority: int) -> None:
    pods, reqs = search
    assert outcome(by_distance, pods, reqs) == outcome(upstream_by_distance, pods, reqs)
    preemptor = {"metadata": {"name": "preemptor"}, "spec": {"priority": preemptor_priority}}
    ours = outcome(pods_to_preempt, preemptor, pods, reqs)
    assert ours == outcome(upstream_get_pods_to_preempt, preemptor, pods, reqs)


PREEMPTOR_PRIORITIES = st.sampled_from([2_000_000_000, 2_000_001_000])


@SETTINGS
@given(searches(), PREEMPTOR_PRIORITIES)
def test_victim_search_is_upstreams(search, preemptor_priority):
    check_search(search, preemptor_priority)


@pytest.mark.fuzz
@settings(max_examples=5000, deadline=None, suppress_health_check=list(HealthCheck))
@given(searches(), PREEMPTOR_PRIORITIES)
def test_fuzz_victim_search_is_upstreams(search, preemptor_priority):
    check_search(search, preemptor_priority)


quantity = st.one_of(
    st.sampled_from(["0", "1", "100m", "0.5m", "1.5", "64Mi", "1Gi", "1e3", "2k", "7"]),
    st.integers(0, 10**6),
)
resource_names = st.sampled_from(["cpu", "memory", "ephemeral-storage", "nvidia.com/gpu", "hugepages-2Mi"])
requests = st.dictionaries(resource_names, quantity, max_size=4)


@SETTINGS
@given(
    st.lists(st.one_of(st.none(), requests), max_size=4),
    st.booleans(),
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.just("spec"), requests), st.one_of(st.none(), st.just("spec"), requests)
        ),
        max_size=4,
    ),
    st.sampled_from([None, "Infeasible", "Deferred"]),
    st.sampled_from([Semantics((1, 32)), Semantics((1, 33)), Semantics((1, 34))]),
)
def test_request_views_fast_path_matches_the_checked_path(containers, with_spec, statuses, resize, semantics):
    pod: dict[str, Any] = {"metadata": {"name": "p"}}
    if with_spec:
        pod["spec"] = {
            "containers": [
                {"name": f"c{i}", "resources": {} if r is None else {"requests": r}}
                for i, r in enumerate(containers)
            ]
        }
    # In-place resize: container statuses reporting running and allocated resources.
    reported = []
    for i, (running, allocated) in enumerate(statuses):
        status: dict[str, Any] = {"name": f"c{i}"}
        spec_requests = containers[i] if i < len(containers) and containers[i] is not None else {}
        running = dict(spec_requests) if running == "spec" else running  # the steady state: as the spec
        allocated = dict(spec_requests) if allocated == "spec" else allocated
        if running is not None:
            status["resources"] = {"requests": running}
        if allocated is not None:
            status["allocatedResources"] = allocated
        reported.append(status)
    pod["status"] = {"containerStatuses": reported}
    if resize:
        pod["status"]["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": resize}]
    assert request_views(pod, semantics) == _checked_request_views(pod, semantics)
    checked = _scheduler_view(pod, SCHEDULER if semantics.status_resources else SPEC, fast=False)
    assert scheduler_pod_requests(pod, semantics) == checked
