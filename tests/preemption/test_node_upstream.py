"""Upstream's pkg/kubelet/preemption/preemption_test.go tables, ported case by case.

Upstream compares victim lists as multisets; these tests also pin the eviction order that algorithm A
produces (worked out in the reference), since the sidecar evicts in that order.
"""

from __future__ import annotations

import pytest

from tests.preemption.kubelet_fixtures import (
    ALL_PODS,
    BEST_EFFORT,
    BURSTABLE,
    CLUSTER_CRITICAL,
    GUARANTEED,
    HIGH_PRIORITY_BURSTABLE,
    HIGH_REQUEST_BURSTABLE,
    HIGH_REQUEST_GUARANTEED,
    NODE_CRITICAL,
    TINY_BURSTABLE,
    candidates,
    failure_reasons,
    names,
    requirement_list,
)
from webhook.preemption.node.admission import handle_admission_failure
from webhook.preemption.node.victim_search import (
    Candidate,
    NoVictims,
    distance,
    pods_to_preempt,
    smaller_resource_request,
    subtract,
)
from webhook.preemption.resources import pod_requests

ALL_SIX = [
    CLUSTER_CRITICAL,
    BEST_EFFORT,
    BURSTABLE,
    HIGH_REQUEST_BURSTABLE,
    GUARANTEED,
    HIGH_REQUEST_GUARANTEED,
]
FIVE = [BEST_EFFORT, BURSTABLE, HIGH_REQUEST_BURSTABLE, GUARANTEED, HIGH_REQUEST_GUARANTEED]
NO_SET = "no set of running pods found to reclaim resources: "

# (name, preemptor, input pods, (cpu m, memory Mi, pods), expected eviction order or error text)
GET_PODS_TO_PREEMPT = [
    ("no requirements", CLUSTER_CRITICAL, [], (0, 0, 0), []),
    ("no pods", CLUSTER_CRITICAL, [], (0, 0, 1), NO_SET + "[(res: pods, q: 1), ]"),
    ("equal pods and resources requirements", CLUSTER_CRITICAL, [BURSTABLE], (100, 100, 1), [BURSTABLE]),
    (
        "higher requirements than pod requests",
        CLUSTER_CRITICAL,
        [BURSTABLE],
        (200, 200, 2),
        NO_SET + "[(res: cpu, q: 100), (res: memory, q: 104857600), (res: pods, q: 1), ]",
    ),
    (
        "choose between bestEffort and burstable",
        CLUSTER_CRITICAL,
        [BURSTABLE, BEST_EFFORT],
        (0, 0, 1),
        [BEST_EFFORT],
    ),
    (
        "choose between burstable and guaranteed",
        CLUSTER_CRITICAL,
        [BURSTABLE, GUARANTEED],
        (0, 0, 1),
        [BURSTABLE],
    ),
    (
        "choose lower request burstable if it meets requirements",
        CLUSTER_CRITICAL,
        [BEST_EFFORT, HIGH_REQUEST_BURSTABLE, BURSTABLE],
        (100, 100, 0),
        [BURSTABLE],
    ),
    (
        "choose higher request burstable if lower does not meet requirements",
        CLUSTER_CRITICAL,
        [BEST_EFFORT, BURSTABLE, HIGH_REQUEST_BURSTABLE],
        (150, 150, 0),
        [HIGH_REQUEST_BURSTABLE],
    ),
    ("multiple pods required", CLUSTER_CRITICAL, FIVE, (350, 350, 0), [HIGH_REQUEST_BURSTABLE, BURSTABLE]),
    (
        "evict guaranteed when we have to, and dont evict the extra burstable",
        CLUSTER_CRITICAL,
        FIVE,
        (0, 550, 0),
        [HIGH_REQUEST_BURSTABLE, HIGH_REQUEST_GUARANTEED],
    ),
    (
        "evict cluster critical pod for node critical pod",
        NODE_CRITICAL,
        [CLUSTER_CRITICAL],
        (100, 0, 0),
        [CLUSTER_CRITICAL],
    ),
    (
        "can not evict node critical pod for cluster critical pod",
        CLUSTER_CRITICAL,
        [NODE_CRITICAL],
        (100, 0, 0),
        NO_SET + "[(res: cpu, q: 100), ]",
    ),
    # PR #135866 cases that hold under upstream's algorithm too.
    (
        "PR: evict guaranteed when we have to, and dont evict the high request guaranteed pod",
        CLUSTER_CRITICAL,
        [BEST_EFFORT, HIGH_REQUEST_BURSTABLE, GUARANTEED, HIGH_REQUEST_GUARANTEED],
        (0, 350, 0),
        [HIGH_REQUEST_BURSTABLE, GUARANTEED],
    ),
    (
        "PR: evict the high priority pod when we have to, and dont evict the extra guaranteed",
        CLUSTER_CRITICAL,
        [BEST_EFFORT, GUARANTEED, HIGH_REQUEST_BURSTABLE, HIGH_PRIORITY_BURSTABLE],
        (0, 500, 0),
        [HIGH_REQUEST_BURSTABLE, HIGH_PRIORITY_BURSTABLE],
    ),
]


@pytest.mark.parametrize(
    ("preemptor", "inputs", "reqs", "expected"),
    [case[1:] for case in GET_PODS_TO_PREEMPT],
    ids=[case[0] for case in GET_PODS_TO_PREEMPT],
)
def test_get_pods_to_preempt(preemptor, inputs, reqs, expected):
    pods = candidates(*inputs)
    if isinstance(expected, str):
        with pytest.raises(NoVictims) as err:
            pods_to_preempt(ALL_PODS[preemptor], pods, requirement_list(*reqs))
        assert str(err.value) == expected
    else:
        assert names(pods_to_preempt(ALL_PODS[preemptor], pods, requirement_list(*reqs))) == expected


def test_pr_only_case_differs_under_upstream_order():
    """PR #135866's "can not evict high priority burstable pod for guaranteed pod" fails under algorithm A
    (nil priority never compares); the priority-aware order (unset priority counts as 0) passes it."""
    pods = candidates(GUARANTEED, HIGH_PRIORITY_BURSTABLE)
    reqs = requirement_list(100, 0, 0)
    preemptor = ALL_PODS[CLUSTER_CRITICAL]
    assert names(pods_to_preempt(preemptor, pods, reqs)) == [HIGH_PRIORITY_BURSTABLE]
    assert names(pods_to_preempt(preemptor, pods, reqs, order="priority")) == [GUARANTEED]


def test_benchmark_case_is_the_error_path():
    """BenchmarkGetPodsToPreempt: a non-critical preemptor can preempt none of 110 tiny pods."""
    pods = [Candidate.of(ALL_PODS[TINY_BURSTABLE]) for _ in range(110)]
    with pytest.raises(NoVictims, match=r"\(res: cpu, q: 110\)"):
        pods_to_preempt(ALL_PODS[BEST_EFFORT], pods, requirement_list(110, 0, 0))


# (name, input pods, admit pod, (cpu, mem, pods, other), error?, killed, returned reasons via GetReason())
HANDLE_ADMISSION_FAILURE = [
    (
        "critical pods cannot be preempted - no other failure reason",
        [CLUSTER_CRITICAL],
        CLUSTER_CRITICAL,
        (0, 0, 1, False),
        "preemption: error finding a set of pods to preempt: " + NO_SET + "[(res: pods, q: 1), ]",
        [],
        [],
    ),
    (
        "non-critical pod should not trigger eviction - no other failure reason",
        [BURSTABLE],
        GUARANTEED,
        (0, 1, 0, False),
        None,
        [],
        ["Insufficient memory"],
    ),
    (
        "best effort pods are not preempted when attempting to free resources - no other failure reason",
        [BEST_EFFORT],
        CLUSTER_CRITICAL,
        (0, 1, 0, False),
        "preemption: error finding a set of pods to preempt: " + NO_SET + "[(res: memory, q: 1048576), ]",
        [],
        [],
    ),
    (
        "multiple pods evicted - no other failure reason",
        ALL_SIX,
        CLUSTER_CRITICAL,
        (0, 550, 0, False),
        None,
        [HIGH_REQUEST_BURSTABLE, HIGH_REQUEST_GUARANTEED],
        [],
    ),
    (
        "non-critical pod should not trigger eviction - with other failure reason",
        [BURSTABLE],
        GUARANTEED,
        (0, 1, 0, True),
        None,
        [],
        ["Insufficient memory", "mock predicate error reason"],
    ),
    (
        "critical pods cannot be preempted - with other failure reason",
        [CLUSTER_CRITICAL],
        CLUSTER_CRITICAL,
        (0, 0, 1, True),
        None,
        [],
        ["mock predicate error reason"],
    ),
]


@pytest.mark.parametrize(
    ("inputs", "admit", "failure", "error", "killed", "returned"),
    [case[1:] for case in HANDLE_ADMISSION_FAILURE],
    ids=[case[0] for case in HANDLE_ADMISSION_FAILURE],
)
def test_handle_admission_failure(inputs, admit, failure, error, killed, returned):
    handled = handle_admission_failure(ALL_PODS[admit], candidates(*inputs), failure_reasons(*failure))
    assert handled.error == error
    assert names(handled.victims) == killed
    assert [r.short for r in handled.reasons] == returned


def test_handle_admission_failure_with_kill_errors_still_chooses_the_same_victims():
    """Upstream's "multiple pods with eviction error": kill errors are swallowed and the pod admitted.
    The decision here is pure; the sidecar performs (and tolerates failing) evictions."""
    handled = handle_admission_failure(
        ALL_PODS[CLUSTER_CRITICAL], candidates(*ALL_SIX), failure_reasons(0, 550, 0, False)
    )
    assert handled.error is None and handled.reasons == []
    assert names(handled.victims) == [HIGH_REQUEST_BURSTABLE, HIGH_REQUEST_GUARANTEED]
    assert handled.requirements == [("memory", 550 * 1024 * 1024)]


# (name, requirements (cpu, mem, pods), pod, expected distance)
DISTANCE = [
    ("no requirements", (0, 0, 0), BURSTABLE, 0.0),
    ("no requests, some requirements", (100, 100, 1), BEST_EFFORT, 2.0),
    ("equal requests and requirements", (100, 100, 1), BURSTABLE, 0.0),
    ("higher requests than requirements", (50, 50, 0), BURSTABLE, 0.0),
]


@pytest.mark.parametrize(("reqs", "pod", "expected"), [c[1:] for c in DISTANCE], ids=[c[0] for c in DISTANCE])
def test_admission_requirements_distance(reqs, pod, expected):
    assert distance(requirement_list(*reqs), Candidate.of(ALL_PODS[pod])) == expected


# (name, initial (cpu, mem, pods), pod, expected (cpu, mem, pods))
SUBTRACT = [
    ("subtract a pod from no requirements", (0, 0, 0), BURSTABLE, (0, 0, 0)),
    ("subtract no requests from some requirements", (100, 100, 1), BEST_EFFORT, (100, 100, 0)),
    ("equal requests and requirements", (100, 100, 1), BURSTABLE, (0, 0, 0)),
    ("subtract higher requests than requirements", (50, 50, 0), BURSTABLE, (0, 0, 0)),
    ("subtract lower requests than requirements", (200, 200, 1), BURSTABLE, (100, 100, 0)),
]


@pytest.mark.parametrize(
    ("initial", "pod", "expected"), [c[1:] for c in SUBTRACT], ids=[c[0] for c in SUBTRACT]
)
def test_admission_requirements_subtract(initial, pod, expected):
    got = subtract(requirement_list(*initial), [Candidate.of(ALL_PODS[pod])])
    assert got == requirement_list(*expected)


def _requests_pod(name: str, **requests: str) -> Candidate:
    pod = {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]},
    }
    return Candidate.of(pod)


SMALLER = {
    "no-requests": {},
    "low-memory": {"memory": "50Mi", "cpu": "100m"},
    "high-memory": {"memory": "200Mi", "cpu": "100m"},
    "high-cpu": {"memory": "50Mi", "cpu": "200m"},
    "high-storage": {"storage": "300Mi"},
    "low-storage": {"storage": "200Mi"},
}

# (name, pod1, pod2, expected)
SMALLER_RESOURCE_REQUEST = [
    ("some requests vs no requests should return false", "low-memory", "no-requests", False),
    ("lower memory should return true", "low-memory", "high-memory", True),
    ("memory priority over CPU", "high-memory", "high-cpu", False),
    ("equal resource request should return true", "low-memory", "low-memory", True),
    ("resource type other than CPU and memory are ignored", "high-storage", "low-storage", True),
]


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [c[1:] for c in SMALLER_RESOURCE_REQUEST],
    ids=[c[0] for c in SMALLER_RESOURCE_REQUEST],
)
def test_smaller_resource_request(a, b, expected):
    assert (
        smaller_resource_request(_requests_pod(a, **SMALLER[a]), _requests_pod(b, **SMALLER[b])) is expected
    )


def test_every_victim_supplies_one_pod():
    """Each pod frees exactly one `pods` slot, whatever it requests (BestEffort included)."""
    for name in (BEST_EFFORT, BURSTABLE, GUARANTEED):
        assert pod_requests(ALL_PODS[name])["pods"] == 1
