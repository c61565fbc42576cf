"""Upstream behaviour that changed between the Kubernetes versions we support, each pinned per version.

Ported tables (v1.33.3 source): `TestPodResourceRequests` (component-helpers resource/helpers_test.go,
the in-place resize cases), `TestPodAdmissionBasedOnSupplementalGroupsPolicy`
(pkg/kubelet/lifecycle/predicate_test.go) and `TestFitError_Error` (pkg/scheduler/framework/types_test.go).
The admission scenarios follow `HandlePodAdditions` (kubelet.go: other pods at their allocation) and
`GetResourceRequestQuantity` (pkg/api/v1/resource/helpers.go: what a victim frees, by spec).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.preemption.kubelet_objects import critical, node, pod
from tests.preemption.planner_data import builders as sched
from webhook.preemption.cluster.planner import FITS, PREEMPT, PlanOptions, fit_error_message, plan
from webhook.preemption.node.admission import admit_to_node
from webhook.preemption.resources import kubelet_admission_requests, pod_requests, scheduler_pod_requests
from webhook.preemption.semantics import CURRENT, Semantics, node_semantics, parse_version, semantics_of

V1_30, V1_31, V1_32, V1_33, V1_34 = (Semantics((1, minor)) for minor in (30, 31, 32, 33, 34))

INFEASIBLE = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
DEFERRED = [{"type": "PodResizePending", "status": "True", "reason": "Deferred"}]
IN_PROGRESS = [{"type": "PodResizeInProgress", "status": "True"}]


def resized(
    containers: list[tuple[str, dict[str, str]]],
    statuses: list[dict[str, Any]],
    conditions: list[dict[str, Any]] | None = None,
    *,
    init: list[tuple[str, dict[str, str]]] = (),  # type: ignore[assignment]
    init_statuses: list[dict[str, Any]] = (),  # type: ignore[assignment]
) -> dict[str, Any]:
    """A pod as `TestPodResourceRequests` builds it: named containers, statuses, resize conditions."""
    spec: dict[str, Any] = {
        "containers": [{"name": n, "resources": {"requests": r}} for n, r in containers],
    }
    if init:
        spec["initContainers"] = [
            {"name": n, "restartPolicy": "Always", "resources": {"requests": r}} for n, r in init
        ]
    status: dict[str, Any] = {"containerStatuses": statuses, "initContainerStatuses": list(init_statuses)}
    if conditions:
        status["conditions"] = conditions
    return {"metadata": {"name": "p"}, "spec": spec, "status": status}


def cs(name: str, running: dict[str, str] | None = None, allocated: dict[str, str] | None = None) -> dict:
    out: dict[str, Any] = {"name": name}
    if running is not None:
        out["resources"] = {"requests": running}
    if allocated is not None:
        out["allocatedResources"] = allocated
    return out


# (upstream description, pod, requests with UseStatusResources (1.33+), without (before 1.33))
POD_RESOURCE_REQUESTS = [
    (
        "resized, infeasible",
        resized([("container-1", {"cpu": "4"})], [cs("container-1", {"cpu": "2"})], INFEASIBLE),
        {"cpu": 2000},
        {"cpu": 4000},
    ),
    (
        "resized, infeasible & in-progress",
        resized([("container-1", {"cpu": "6"})], [cs("container-1", {"cpu": "2"}, {"cpu": "4"})], INFEASIBLE),
        {"cpu": 4000},
        {"cpu": 6000},
    ),
    (
        "resized, no resize status",
        resized([("container-1", {"cpu": "4"})], [cs("container-1", {"cpu": "2"})]),
        {"cpu": 4000},
        {"cpu": 4000},
    ),
    (
        "resized: per-resource 3-way maximum",
        resized(
            [("container-1", {"cpu": "30m", "memory": "20M", "ephemeral-storage": "10G"})],
            [
                cs(
                    "container-1",
                    {"cpu": "10m", "memory": "30M", "ephemeral-storage": "20G"},
                    {"cpu": "20m", "memory": "10M", "ephemeral-storage": "30G"},
                )
            ],
        ),
        {"cpu": 30, "memory": 30 * 10**6, "ephemeral-storage": 30 * 10**9},
        {"cpu": 30, "memory": 20 * 10**6, "ephemeral-storage": 10 * 10**9},
    ),
    (
        "resized, restartable init container, infeasible",
        resized(
            [],
            [],
            INFEASIBLE,
            init=[("restartable-init-1", {"cpu": "4"})],
            init_statuses=[cs("restartable-init-1", {"cpu": "2"})],
        ),
        {"cpu": 2000},
        {"cpu": 4000},
    ),
    (
        "resized, restartable init container, no resize status",
        resized(
            [],
            [],
            init=[("restartable-init-1", {"cpu": "4"})],
            init_statuses=[cs("restartable-init-1", {"cpu": "2"})],
        ),
        {"cpu": 4000},
        {"cpu": 4000},
    ),
    # Not in upstream's table: the conditions 1.33 sets. Deferred and in progress count the largest.
    (
        "resize deferred: spec 3, allocated and running 1",
        resized([("c", {"cpu": "3"})], [cs("c", {"cpu": "1"}, {"cpu": "1"})], DEFERRED),
        {"cpu": 3000},
        {"cpu": 3000},
    ),
    (
        "resize in progress: scaling down, still running 3",
        resized([("c", {"cpu": "1"})], [cs("c", {"cpu": "3"}, {"cpu": "1"})], IN_PROGRESS),
        {"cpu": 3000},
        {"cpu": 1000},
    ),
    (
        "only the first PodResizePending condition counts",
        resized([("c", {"cpu": "3"})], [cs("c", {"cpu": "1"}, {"cpu": "1"})], DEFERRED + INFEASIBLE),
        {"cpu": 3000},
        {"cpu": 3000},
    ),
    (
        "a status without resources counts the spec",
        resized([("c", {"cpu": "3"})], [cs("c")], INFEASIBLE),
        {"cpu": 3000},
        {"cpu": 3000},
    ),
]


@pytest.mark.parametrize(
    ("p", "with_status", "spec_only"),
    [c[1:] for c in POD_RESOURCE_REQUESTS],
    ids=[c[0] for c in POD_RESOURCE_REQUESTS],
)
def test_pod_resource_requests_scheduler_view(p, with_status, spec_only):
    """1.33+ (InPlacePodVerticalScaling on): status counts; 1.31/1.32: the spec only."""
    for version in (V1_33, V1_34):
        assert scheduler_pod_requests(p, version) == {**with_status, "pods": 1}
    for version in (V1_31, V1_32):
        assert scheduler_pod_requests(p, version) == {**spec_only, "pods": 1}
    # A pod being placed counts by its spec in every version (computePodResourceRequest).
    assert scheduler_pod_requests(p, V1_33, on_node=False) == {**spec_only, "pods": 1}


# (name, pod, the kubelet's admission view from 1.33: its allocated pod, at least what runs)
KUBELET_VIEW = [
    (
        "resize deferred: allocated 1, running 1, spec 3",
        resized([("c", {"cpu": "3"})], [cs("c", {"cpu": "1"}, {"cpu": "1"})], DEFERRED),
        {"cpu": 1000},
    ),
    (
        "resize infeasible: allocated 1, spec 8",
        resized([("c", {"cpu": "8"})], [cs("c", {"cpu": "1"}, {"cpu": "1"})], INFEASIBLE),
        {"cpu": 1000},
    ),
    (
        "resize in progress up: allocated 3, running 1",
        resized([("c", {"cpu": "3"})], [cs("c", {"cpu": "1"}, {"cpu": "3"})], IN_PROGRESS),
        {"cpu": 3000},
    ),
    (
        "resize in progress down: allocated 1, still running 3",
        resized([("c", {"cpu": "1"})], [cs("c", {"cpu": "3"}, {"cpu": "1"})], IN_PROGRESS),
        {"cpu": 3000},
    ),
    (
        "allocated only (no running resources reported yet)",
        resized([("c", {"cpu": "3"})], [cs("c", None, {"cpu": "1"})], DEFERRED),
        {"cpu": 1000},
    ),
    (
        "running only: the spec is the allocation",
        resized([("c", {"cpu": "2"})], [cs("c", {"cpu": "1"})]),
        {"cpu": 2000},
    ),
    (
        "resized sidecar: allocated 1, spec 4",
        resized(
            [("c", {"cpu": "1"})],
            [cs("c", {"cpu": "1"}, {"cpu": "1"})],
            DEFERRED,
            init=[("s", {"cpu": "4"})],
            init_statuses=[cs("s", {"cpu": "1"}, {"cpu": "1"})],
        ),
        {"cpu": 2000},
    ),
]


@pytest.mark.parametrize(("p", "want"), [c[1:] for c in KUBELET_VIEW], ids=[c[0] for c in KUBELET_VIEW])
def test_kubelet_admission_counts_allocated_pods(p, want):
    """1.33+: `HandlePodAdditions` admits against `getAllocatedPods`; before, the spec (= the scheduler's)."""
    assert kubelet_admission_requests(p, V1_33) == {**want, "pods": 1}
    assert kubelet_admission_requests(p, V1_32) == scheduler_pod_requests(p, V1_32)
    # What the pod frees as a preemption victim is its spec in every version.
    assert pod_requests(p, V1_34) == scheduler_pod_requests(p, V1_34, on_node=False)


def with_status(p: dict[str, Any], running: str, allocated: str, conditions: list[dict[str, Any]]) -> dict:
    p["status"].update(
        containerStatuses=[cs("c", {"cpu": running}, {"cpu": allocated})], conditions=conditions
    )
    return p


def test_a_deferred_resize_holds_its_allocation_for_the_kubelet():
    """The issue's case: a pod resized 1 -> 3 cpu, deferred, still allocated 1 cpu. The 1.33 kubelet
    admits a 2-cpu critical pod on a 4-cpu node without evicting anything; before 1.33 it counted 3 cpu."""
    big = with_status(pod("resized", "3", created="2026-01-01T00:00:00Z"), "1", "1", DEFERRED)
    got = admit_to_node(critical(cpu="2"), node(), [big], semantics=V1_33)
    assert (got.admit, got.fits, got.victims) == (True, True, [])
    older = admit_to_node(critical(cpu="2"), node(), [big], semantics=V1_32)
    assert (older.admit, older.fits, [v["name"] for v in older.victims]) == (True, False, ["resized"])


def test_kubelet_preemption_counts_victims_by_spec():
    """A pod scaling down 3 -> 1 cpu still holds 3 (running), but as a victim the 1.33 kubelet counts its
    spec (1 cpu): to free 2 cpu it evicts both pods, although the resized one alone would do."""
    shrinking = with_status(pod("shrinking", "1", created="2026-01-01T00:00:00Z"), "3", "1", IN_PROGRESS)
    other = pod("other", "1", created="2026-01-01T00:00:01Z")
    got = admit_to_node(critical(cpu="2"), node(), [shrinking, other], semantics=V1_33)
    assert got.reasons[0].used == 4000
    assert sorted(v["name"] for v in got.victims) == ["other", "shrinking"]
    older = admit_to_node(critical(cpu="2"), node(), [shrinking, other], semantics=V1_32)
    assert (older.fits, older.victims) == (True, [])  # 1.32 counts the spec: 1 + 1 cpu used


def test_sidecar_victims_follow_the_kubelets_version():
    """A victim with a 1-cpu container and a 1-cpu sidecar holds 2 cpu. Before 1.34 the kubelet's
    preemption counts it as freeing 1 cpu (largest single init container), from 1.34 as 2 (KEP-753)."""
    sidecar = {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}
    with_sidecar = pod("with-sidecar", "1", created="2026-01-01T00:00:00Z", initContainers=[sidecar])
    plain = pod("plain", "1", created="2026-01-01T00:00:01Z")
    preemptor = critical(cpu="3")  # 4 cpu, 3 used: 2 cpu to free
    on_1_33 = admit_to_node(preemptor, node(), [with_sidecar, plain], semantics=V1_33)
    on_1_34 = admit_to_node(preemptor, node(), [with_sidecar, plain], semantics=V1_34)
    assert on_1_33.reasons[0].used == on_1_34.reasons[0].used == 3000  # admission: KEP-753 in both
    assert sorted(v["name"] for v in on_1_33.victims) == ["plain", "with-sidecar"]
    assert [v["name"] for v in on_1_34.victims] == ["with-sidecar"]


def test_the_node_says_which_kubelet_decides():
    sidecar = {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}
    pods = [pod("with-sidecar", "1", initContainers=[sidecar]), pod("plain", "1")]
    n = node()
    n["status"]["nodeInfo"] = {"kubeletVersion": "v1.34.1"}
    assert [v["name"] for v in admit_to_node(critical(cpu="3"), n, pods).victims] == ["with-sidecar"]
    n["status"]["nodeInfo"] = {"kubeletVersion": "v1.33.3"}
    assert len(admit_to_node(critical(cpu="3"), n, pods).victims) == 2


NODE_WITH_FEATURE = {**node(), "status": {**node()["status"], "features": {"supplementalGroupsPolicy": True}}}
NODE_WITHOUT_FEATURE = node()
STRICT = {"securityContext": {"supplementalGroupsPolicy": "Strict"}}

# TestPodAdmissionBasedOnSupplementalGroupsPolicy: (name, emulated version, node, pod uses Strict, rejected)
SUPPLEMENTAL_GROUPS = [
    ("feature=Beta, node=feature not supported, pod=in use: it should REJECT", V1_33, False, True, True),
    ("feature=Beta, node=feature supported, pod=in use: it should ADMIT", V1_33, True, True, False),
    ("feature=Beta, node=feature not supported, pod=not in use: it should ADMIT", V1_33, False, False, False),
    ("feature=Beta, node=feature supported, pod=not in use: it should ADMIT", V1_33, True, False, False),
    (
        "feature=Alpha, node=feature not supported, pod=feature used: it should ADMIT",
        V1_32,
        False,
        True,
        False,
    ),
    (
        "feature=Alpha, node=feature not supported, pod=feature not used: it should ADMIT",
        V1_32,
        False,
        False,
        False,
    ),
    ("feature=Alpha, node=feature supported, pod=feature used: it should ADMIT", V1_32, True, True, False),
    (
        "feature=Alpha, node=feature supported, pod=feature not used: it should ADMIT",
        V1_32,
        True,
        False,
        False,
    ),
    (
        "feature=NotReleased, node=feature not supported, pod=feature used: it should ADMIT",
        V1_30,
        False,
        True,
        False,
    ),
    (
        "feature=NotReleased, node=feature not supported, pod=feature not used: it should ADMIT",
        V1_30,
        False,
        False,
        False,
    ),
]


@pytest.mark.parametrize(
    ("version", "supported", "strict", "rejected"),
    [c[1:] for c in SUPPLEMENTAL_GROUPS],
    ids=[c[0] for c in SUPPLEMENTAL_GROUPS],
)
def test_pod_admission_based_on_supplemental_groups_policy(version, supported, strict, rejected):
    n = NODE_WITH_FEATURE if supported else NODE_WITHOUT_FEATURE
    p = pod("p", "100m", **(STRICT if strict else {}))
    got = admit_to_node(p, n, [], semantics=version)
    if rejected:
        assert got.rejection == (
            "SupplementalGroupsPolicyNotSupported",
            "SupplementalGroupsPolicy=Strict is not supported in this node",
        )
        assert not got.admit
    else:
        assert (got.admit, got.rejection) == (True, None)


def test_supplemental_groups_policy_is_checked_before_resources_so_nothing_is_preempted():
    full = [pod("filler", "4", created="2026-01-01T00:00:00Z")]
    strict_critical = critical(cpu="1", **STRICT)
    got = admit_to_node(strict_critical, NODE_WITHOUT_FEATURE, full, semantics=V1_33)
    assert (got.admit, got.victims, got.rejection[0]) == (False, [], "SupplementalGroupsPolicyNotSupported")
    older = admit_to_node(strict_critical, NODE_WITHOUT_FEATURE, full, semantics=V1_32)
    assert (older.admit, [v["name"] for v in older.victims]) == (True, ["filler"])
    merge = critical(cpu="1", securityContext={"supplementalGroupsPolicy": "Merge"})
    assert [v["name"] for v in admit_to_node(merge, NODE_WITHOUT_FEATURE, full, semantics=V1_33).victims] == [
        "filler"
    ]


# TestFitError_Error: (name, all nodes, node -> reason, PreFilter message, PostFilter message, want)
FIT_ERRORS = [
    (
        "nodes failed Prefilter plugin",
        3,
        {"node1": "Node(s) failed PreFilter plugin FalsePreFilter"},
        "Node(s) failed PreFilter plugin FalsePreFilter",
        "",
        "0/3 nodes are available: Node(s) failed PreFilter plugin FalsePreFilter.",
    ),
    (
        "nodes failed Prefilter plugin and the preemption also failed",
        3,
        {"node1": "Node(s) failed PreFilter plugin FalsePreFilter"},
        "Node(s) failed PreFilter plugin FalsePreFilter",
        "Error running PostFilter plugin FailedPostFilter",
        "0/3 nodes are available: Node(s) failed PreFilter plugin FalsePreFilter. "
        "Error running PostFilter plugin FailedPostFilter",
    ),
    (
        "nodes failed one Filter plugin with an empty PostFilterMsg",
        3,
        {f"node{i}": "Node(s) failed Filter plugin FalseFilter-1" for i in (1, 2, 3)},
        "",
        "",
        "0/3 nodes are available: 3 Node(s) failed Filter plugin FalseFilter-1.",
    ),
    (
        "nodes failed one Filter plugin with a non-empty PostFilterMsg",
        3,
        {f"node{i}": "Node(s) failed Filter plugin FalseFilter-1" for i in (1, 2, 3)},
        "",
        "Error running PostFilter plugin FailedPostFilter",
        "0/3 nodes are available: 3 Node(s) failed Filter plugin FalseFilter-1. "
        "Error running PostFilter plugin FailedPostFilter",
    ),
    (
        "nodes failed two Filter plugins with an empty PostFilterMsg",
        3,
        {
            "node1": "Node(s) failed Filter plugin FalseFilter-1",
            "node2": "Node(s) failed Filter plugin FalseFilter-1",
            "node3": "Node(s) failed Filter plugin FalseFilter-2",
        },
        "",
        "",
        "0/3 nodes are available: 1 Node(s) failed Filter plugin FalseFilter-2, "
        "2 Node(s) failed Filter plugin FalseFilter-1.",
    ),
    (
        "nodes failed two Filter plugins with a non-empty PostFilterMsg",
        3,
        {
            "node1": "Node(s) failed Filter plugin FalseFilter-1",
            "node2": "Node(s) failed Filter plugin FalseFilter-1",
            "node3": "Node(s) failed Filter plugin FalseFilter-2",
        },
        "",
        "Error running PostFilter plugin FailedPostFilter",
        "0/3 nodes are available: 1 Node(s) failed Filter plugin FalseFilter-2, "
        "2 Node(s) failed Filter plugin FalseFilter-1. Error running PostFilter plugin FailedPostFilter",
    ),
    (
        "failed to Permit on node",
        1,
        {"node1": "Node failed Permit plugin Permit-1"},
        "",
        "",
        "0/1 nodes are available: 1 Node failed Permit plugin Permit-1.",
    ),
    (
        "failed to Reserve on node",
        1,
        {"node1": "Node failed Reserve plugin Reserve-1"},
        "",
        "",
        "0/1 nodes are available: 1 Node failed Reserve plugin Reserve-1.",
    ),
    # Not upstream's table: counts take part in the order ("10 ..." sorts before "2 ...").
    (
        "the whole strings are sorted, counts included",
        12,
        {**{f"a{i}": "Insufficient cpu" for i in range(10)}, "b1": "Another reason", "b2": "Another reason"},
        "",
        "",
        "0/12 nodes are available: 10 Insufficient cpu, 2 Another reason.",
    ),
]


@pytest.mark.parametrize(
    ("num", "statuses", "pre", "post", "want"), [c[1:] for c in FIT_ERRORS], ids=[c[0] for c in FIT_ERRORS]
)
def test_fit_error_error(num, statuses, pre, post, want):
    histogram: dict[str, int] = {}
    for reason in statuses.values():
        histogram[reason] = histogram.get(reason, 0) + 1
    assert fit_error_message(num, histogram, pre, post) == want


def test_planner_counts_a_resized_pod_as_the_schedulers_version_does():
    """node1 (500m) holds a pod whose spec asks 400m: deferred (allocated 100m) it still holds 400m,
    infeasible it holds 100m, so a 300m preemptor fits without preemption; before 1.33 only the spec counts."""
    resized_pod = sched.pod("resized", "node1", sched.LOW, {"cpu": "400m"}, start=1)
    pre_obj = sched.pod("pre", "", sched.HIGH, {"cpu": "300m"})
    pre = sched.preemptor(pre_obj)

    def outcome(conditions: list[dict[str, Any]], semantics: Semantics) -> tuple[str, list[str]]:
        p = with_status(dict(resized_pod, status=dict(resized_pod["status"])), "100m", "100m", conditions)
        objects = [(f"doc {i}", o) for i, o in enumerate([sched.node("node1"), p])]
        snap = sched.build_snapshot(objects, sched.resolve, semantics=semantics)
        result = plan(pre, snap, PlanOptions(now=sched.NOW))
        return result.outcome, [v.name for v in result.victims]

    assert outcome(DEFERRED, V1_33) == (PREEMPT, ["resized"])
    assert outcome(INFEASIBLE, V1_33) == (FITS, [])
    assert outcome(INFEASIBLE, V1_32) == (PREEMPT, ["resized"])


VERSIONS = [
    ("v1.33.3", (1, 33, 3)),
    ("1.34.0", (1, 34, 0)),
    ("v1.34.2", (1, 34, 2)),
    ("v1.31.2-gke.1200", (1, 31, 2)),
    ("v1.35.0-alpha.1", (1, 35, 0)),
    ("v1.24.0-alpha.1.724+abc", (1, 24, 0)),
    ("1.36", (1, 36, 0)),
    ("", None),
    ("kubemark", None),
    (None, None),
]


@pytest.mark.parametrize(("text", "want"), VERSIONS)
def test_parse_version(text, want):
    assert parse_version(text) == want
    assert semantics_of(text) == (CURRENT if want is None else Semantics(want))


def test_a_node_without_a_kubelet_version_is_taken_as_the_current_version():
    """Unknown means the newest stable minor we follow (1.37), not the version the e2e suites run."""
    assert node_semantics(node()) == CURRENT == Semantics((1, 37, 0))
    assert Semantics((1, 33)) == Semantics((1, 33, 0))
    assert node_semantics({**node(), "status": {"nodeInfo": {"kubeletVersion": "v1.32.4"}}}) == Semantics(
        (1, 32, 4)
    )


@pytest.mark.parametrize(
    ("kubelet", "victims"),
    [("v1.33.3", 2), ("v1.34.1", 1), ("v1.35.4", 1), ("v1.36.0", 1), ("v1.37.0", 1), (None, 1)],
)
def test_a_node_that_says_nothing_is_the_newest_kubelet_we_follow(kubelet, victims):
    """The sidecar-formula victim (#132277, 1.34): 1.37 and a Node without a version answer as 1.34+."""
    sidecar = {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}
    pods = [pod("with-sidecar", "1", initContainers=[sidecar]), pod("plain", "1")]
    n = node()
    if kubelet is not None:
        n["status"]["nodeInfo"] = {"kubeletVersion": kubelet}
    assert len(admit_to_node(critical(cpu="3"), n, pods).victims) == victims
