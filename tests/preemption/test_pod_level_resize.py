"""In-place resize of pod-level resources (1.36, kubernetes PR #137684): the scheduler counts a pod on a
node by its pod-level status too. The cases of upstream's TestAggregateContainerRequestsAndLimits and
TestPodRequestsAndLimitsVerticalScalingWrappers (component-helpers/resource/helpers_test.go) with
`InPlacePodLevelResourcesVerticalScalingEnabled`, as our table: each row says what 1.35 (gate off) and
1.36 (beta, on) count, in millicores.
"""

from __future__ import annotations

import pytest

from webhook.preemption.resources import scheduler_pod_requests
from webhook.preemption.semantics import Semantics

V1_35, V1_36, V1_37 = Semantics((1, 35, 4)), Semantics((1, 36, 0)), Semantics((1, 37, 0))
INFEASIBLE = {"type": "PodResizePending", "status": "True", "reason": "Infeasible"}


def pod(
    container: dict,
    *,
    pod_level: dict | None = None,
    container_status: dict | None = None,
    allocated: dict | None = None,
    running: dict | None = None,
    conditions: list | None = None,
) -> dict:
    spec: dict = {"containers": [{"name": "c1", "resources": container}]}
    if pod_level is not None:
        spec["resources"] = pod_level
    status: dict = {}
    if container_status is not None:
        status["containerStatuses"] = [{"name": "c1", **container_status}]
    if allocated is not None:
        status["allocatedResources"] = allocated
    if running is not None:
        status["resources"] = running
    if conditions:
        status["conditions"] = conditions
    return {"spec": spec, "status": status}


C1 = {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}

# (name, pod, cpu counted by 1.35, cpu counted by 1.36)
CASES = [
    (
        "aggregate container request resolves directly from pod status when PLR vertical scaling enabled",
        pod(C1, allocated={"cpu": "4"}, running={"requests": {"cpu": "3"}, "limits": {"cpu": "5"}}),
        1000,
        4000,
    ),
    (
        "falls back to container status aggregation when podAllocatedResources is nil",
        pod(
            C1,
            container_status={
                "allocatedResources": {"cpu": "6"},
                "resources": {"requests": {"cpu": "5"}, "limits": {"cpu": "7"}},
            },
            running={"requests": {"cpu": "3"}, "limits": {"cpu": "7"}},
        ),
        6000,
        6000,
    ),
    (
        "falls back to container status aggregation when podResources is nil",
        pod(
            C1,
            container_status={
                "allocatedResources": {"cpu": "6"},
                "resources": {"requests": {"cpu": "5"}, "limits": {"cpu": "8"}},
            },
            allocated={"cpu": "6"},
        ),
        6000,
        6000,
    ),
    (
        "pod level requests with PLR vertical scaling enabled and status populated",
        pod(
            C1,
            pod_level={"requests": {"cpu": "2"}, "limits": {"cpu": "4"}},
            allocated={"cpu": "3"},
            running={"requests": {"cpu": "3.5"}, "limits": {"cpu": "5"}},
        ),
        2000,
        3500,
    ),
    (
        "pod level requests with PLR vertical scaling enabled and infeasible resize",
        pod(
            C1,
            pod_level={"requests": {"cpu": "10"}, "limits": {"cpu": "20"}},
            allocated={"cpu": "3"},
            running={"requests": {"cpu": "4"}, "limits": {"cpu": "8"}},
            conditions=[INFEASIBLE],
        ),
        10000,
        4000,
    ),
    (
        "a pod-level resize not yet actuated: the spec is the largest",
        pod(
            C1,
            pod_level={"requests": {"cpu": "3"}, "limits": {"cpu": "4"}},
            allocated={"cpu": "2"},
            running={"requests": {"cpu": "2"}},
        ),
        3000,
        3000,
    ),
    ("no status at all: the spec", pod(C1), 1000, 1000),
]


@pytest.mark.parametrize(("obj", "on_1_35", "on_1_36"), [pytest.param(*row[1:], id=row[0]) for row in CASES])
def test_pod_level_status_counts_from_1_36(obj, on_1_35, on_1_36):
    assert scheduler_pod_requests(obj, V1_35)["cpu"] == on_1_35
    assert scheduler_pod_requests(obj, V1_36)["cpu"] == on_1_36
    assert scheduler_pod_requests(obj, V1_37)["cpu"] == on_1_36
    assert (
        scheduler_pod_requests(obj, V1_36, on_node=False)["cpu"]
        == scheduler_pod_requests(obj, V1_35, on_node=False)["cpu"]
    )


def test_the_pod_level_status_includes_the_overhead():
    """`subtractResourceList(status, overhead)`: the status maps hold the overhead, counted once."""
    obj = pod(
        C1,
        pod_level={"requests": {"cpu": "2"}},
        allocated={"cpu": "2500m"},
        running={"requests": {"cpu": "2500m"}},
    )
    obj["spec"]["overhead"] = {"cpu": "500m"}
    assert scheduler_pod_requests(obj, V1_36)["cpu"] == 2500  # max(2, 2.5 - 0.5, 2.5 - 0.5) + 0.5


def test_plan_sees_the_resized_pod_on_1_36():
    """A node of 4 cpu holding a pod resized at pod level from 2 to 3.5 cpu: a 1-cpu pod fits it for
    the 1.35 scheduler, not for the 1.36 one (and it may not preempt the pod of higher priority)."""
    from tests.preemption.planner_data.builders import HIGH, LOW, node, run
    from tests.preemption.planner_data.builders import pod as planner_pod

    resized = planner_pod("resized", "node1", HIGH, {"cpu": "1"})
    resized["spec"]["resources"] = {"requests": {"cpu": "2"}}
    resized["status"].update(allocatedResources={"cpu": "3500m"}, resources={"requests": {"cpu": "3500m"}})
    objects = [node("node1", {"cpu": "4", "memory": "1Gi"}), resized]
    on_1_35 = run(planner_pod("pre", "", LOW, {"cpu": "1"}), objects, semantics=V1_35)
    on_1_36 = run(planner_pod("pre", "", LOW, {"cpu": "1"}), objects, semantics=V1_36)
    assert (on_1_35.outcome, on_1_35.node) == ("fits", "node1")
    assert (on_1_36.outcome, on_1_36.node) == ("no-candidates", None)
    assert on_1_36.message.startswith("0/1 nodes are available: 1 Insufficient cpu. preemption: ")
