"""`admit_to_node`: the kubelet's admission of one pod on a node, end to end."""

from __future__ import annotations

import pytest

from tests.preemption.kubelet_objects import critical, node, pod
from webhook.preemption.node.admission import admit_to_node
from webhook.preemption.resources import InvalidObject

NODE_CRITICAL = 2_000_001_000
CLUSTER_CRITICAL = 2_000_000_000


def victim_names(admission) -> list[str]:
    return [v["name"] for v in admission.victims]


def test_a_pod_that_fits_is_admitted_without_victims():
    got = admit_to_node(pod("new", "1"), node(), [pod("a", "1"), pod("b", "1")])
    assert (got.admit, got.fits, got.reasons, got.victims, got.error, got.rejection) == (
        True,
        True,
        [],
        [],
        None,
        None,
    )


def test_a_non_critical_pod_is_rejected_with_the_first_reason():
    got = admit_to_node(pod("new", "2", "9Gi", priority=1000), node(), [pod("a", "3", priority=0)])
    assert (got.admit, got.fits, got.victims, got.error) == (False, False, [], None)
    assert [r.reason for r in got.reasons] == ["OutOfcpu", "OutOfmemory"]
    assert got.rejection == (
        "OutOfcpu",
        "Node didn't have enough resource: cpu, requested: 2000, used: 3000, capacity: 4000",
    )


def test_a_critical_pod_is_admitted_after_preemption():
    pods = [pod("a", "3", priority=0), pod("b", "500m", priority=0)]
    got = admit_to_node(critical(cpu="1"), node(), pods)
    assert (got.admit, got.fits, got.error, got.rejection) == (True, False, None, None)
    assert [r.reason for r in got.reasons] == ["OutOfcpu"]
    assert got.requirements == [("cpu", 500)]
    assert got.victims == [
        {
            "namespace": "default",
            "name": "b",
            "uid": "uid-default-b",
            "qosClass": "Burstable",
            "priority": 0,
            "terminating": False,
        }
    ]


def test_a_non_resource_reason_means_no_eviction_and_changes_the_reported_reason():
    pods = [pod("a", "4", priority=0)]
    got = admit_to_node(critical(cpu="1", nodeSelector={"zone": "z1"}), node(), pods)
    assert (got.admit, got.victims, got.error) == (False, [], None)
    assert [r.reason for r in got.reasons] == ["OutOfcpu", "NodeAffinity"]
    assert got.rejection == (
        "NodeAffinity",
        "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
    )


def test_no_victims_gives_upstreams_error_texts():
    got = admit_to_node(critical(cpu="1"), node(), [critical("other", cpu="4")])
    error = (
        "preemption: error finding a set of pods to preempt: "
        "no set of running pods found to reclaim resources: [(res: cpu, q: 1000), ]"
    )
    assert (got.admit, got.error) == (False, error)
    assert got.rejection == (
        "UnexpectedAdmissionError",
        "Unexpected error while attempting to recover from admission failure: " + error,
    )


def test_terminal_pods_hold_nothing():
    pods = [pod("done", "4", phase="Succeeded"), pod("failed", "4", phase="Failed")]
    assert admit_to_node(pod("new", "4"), node(), pods).fits


def test_terminating_pods_hold_resources_and_are_victims_marked_terminating():
    """As upstream: the active-pod list holds terminating pods, so the kubelet kills one again and admits;
    the victim is marked terminating so that an evictor waits for it instead of evicting it."""
    dying = pod("dying", "3", priority=0, deleting=True)
    got = admit_to_node(critical(cpu="2"), node(), [dying])
    assert (got.fits, got.admit, got.error) == (False, True, None)
    assert [(v["name"], v["terminating"]) for v in got.victims] == [("dying", True)]
    dying = pod("dying", "2", priority=0, deleting=True)
    got = admit_to_node(critical(cpu="2"), node(), [dying, pod("alive", "1", priority=0)])
    assert got.requirements == [("cpu", 1000)]
    assert got.admit and [(v["name"], v["terminating"]) for v in got.victims] == [("alive", False)]


def test_mirror_pods_count_and_are_never_victims():
    mirror = pod("etcd", "3", namespace="kube-system", annotations={"kubernetes.io/config.mirror": "abc"})
    got = admit_to_node(critical(cpu="2"), node(), [mirror, pod("a", "500m", priority=0)])
    assert not got.admit
    assert got.reasons[0].used == 3500
    assert got.requirements == [("cpu", 1500)]
    assert got.error.endswith("[(res: cpu, q: 1000), ]")  # what is left once every candidate is gone


def test_static_pods_are_critical_without_priority():
    static = pod("static", "2", annotations={"kubernetes.io/config.source": "file"})
    got = admit_to_node(static, node(), [pod("a", "3", priority=0)])
    assert (got.admit, victim_names(got)) == (True, ["a"])


@pytest.mark.parametrize("same", ["uid", "name"])
def test_the_pod_itself_is_not_one_of_the_others(same):
    new = pod("new", "3")
    listed = dict(new) if same == "uid" else {**new, "metadata": {"name": "new", "namespace": "default"}}
    assert admit_to_node(new, node(), [listed]).fits
    assert not admit_to_node(new, node(), [pod("new", "3", namespace="other")]).fits


def test_extended_resources_the_node_does_not_advertise_are_ignored():
    new = pod("new", "1", extra={"example.com/cluster-thing": "5"})
    assert admit_to_node(new, node(), []).fits


def test_extended_resources_the_node_advertises_are_checked_and_freed():
    holder = pod("holder", "100m", priority=0, extra={"nvidia.com/gpu": "2"})
    other = pod("other", "100m", priority=0)
    new = critical(cpu="100m", extra={"nvidia.com/gpu": "1"})
    got = admit_to_node(new, node(**{"nvidia.com/gpu": "2"}), [holder, other])
    assert [r.reason for r in got.reasons] == ["OutOfnvidia.com/gpu"]
    assert (got.admit, victim_names(got)) == (True, ["holder"])


def test_used_counts_overhead_always_and_victims_free_it_only_with_requests():
    """Fit uses the scheduler's request (overhead always); victims free `GetResourceRequest` (overhead only on
    non-zero totals), as upstream: a BestEffort pod with overhead holds memory but frees none."""
    be = pod("be", priority=0, overhead={"memory": "1Gi"})
    full = pod("full", "100m", "7Gi", priority=0)
    got = admit_to_node(critical(cpu="100m", memory="512Mi"), node(), [be, full])
    assert got.reasons[0].used == 8 * 1024**3
    assert victim_names(got) == ["full"]


def test_too_many_pods_evicts_best_effort_first():
    pods = [
        pod("g", "1", "1Gi", priority=0, guaranteed=True),
        pod("be", priority=0),
        pod("bu", "1", priority=0),
    ]
    got = admit_to_node(critical(cpu=None), node(pods=3), pods)
    assert [r.reason for r in got.reasons] == ["OutOfpods"]
    assert victim_names(got) == ["be"]


def test_identical_candidates_tie_break_on_admission_order_not_input_order():
    """Admission order is creation time: upstream's tie-break then picks the last scanned, i.e. the newest pod."""
    pods = [
        pod("c", "1", priority=0, created="2026-01-03T00:00:00Z"),
        pod("a", "1", priority=0, created="2026-01-01T00:00:00Z"),
        pod("b", "1", priority=0, created="2026-01-02T00:00:00Z"),
        pod("filler", "1", "1Gi", priority=0, guaranteed=True, created="2026-01-01T00:00:00Z"),
    ]
    for order in (pods, pods[::-1]):
        assert victim_names(admit_to_node(critical(cpu="1"), node(), order)) == ["c"]


def issue_135857_node() -> tuple[dict, list[dict]]:
    """A full node (pod count) with a BestEffort system-cluster-critical pod and a low-priority Burstable one."""
    pods = [
        pod(
            "metrics-agent",
            namespace="kube-system",
            priority=CLUSTER_CRITICAL,
            priorityClassName="system-cluster-critical",
        ),
        pod("batch-job", "100m", "64Mi", priority=0),
    ]
    return node(pods=2), pods


def test_issue_135857_upstream_order_evicts_the_cluster_critical_best_effort_pod():
    n, pods = issue_135857_node()
    preemptor = critical(
        "node-agent", cpu="100m", priority=NODE_CRITICAL, priorityClassName="system-node-critical"
    )
    got = admit_to_node(preemptor, n, pods, order="qos")
    assert victim_names(got) == ["metrics-agent"]


def test_issue_135857_priority_order_evicts_the_low_priority_pod():
    n, pods = issue_135857_node()
    preemptor = critical(
        "node-agent", cpu="100m", priority=NODE_CRITICAL, priorityClassName="system-node-critical"
    )
    got = admit_to_node(preemptor, n, pods, order="priority")
    assert victim_names(got) == ["batch-job"]
    assert got.victims[0]["priority"] == 0


def test_priority_order_takes_higher_groups_only_when_needed_and_evicts_lowest_first():
    pods = [
        pod("high-g", "1", "1Gi", priority=1000, guaranteed=True),
        pod("low-bu", "1", priority=10),
        pod("mid-be", priority=500),
        pod("filler", "1", priority=CLUSTER_CRITICAL - 1),
    ]
    got = admit_to_node(critical(cpu="3"), node(), pods, order="priority")
    assert got.requirements == [("cpu", 2000)]
    assert victim_names(got) == ["low-bu", "high-g"]
    # QoS-only: the Burstable bucket alone covers it, so the near-critical "filler" goes and "high-g" stays.
    assert victim_names(admit_to_node(critical(cpu="3"), node(), pods, order="qos")) == ["low-bu", "filler"]


def test_priority_order_never_takes_equal_priority():
    pods = [pod("peer", "3", priority=CLUSTER_CRITICAL - 1)]
    preemptor = pod("p", "2", priority=CLUSTER_CRITICAL - 1)
    for order in ("qos", "priority"):
        got = admit_to_node(preemptor, node(), pods, order=order, critical_priority=CLUSTER_CRITICAL - 1)
        assert not got.admit and got.victims == []


def test_critical_priority_is_configurable():
    pods = [pod("a", "4", priority=0)]
    assert not admit_to_node(pod("p", "1", priority=5000), node(), pods).admit
    assert admit_to_node(pod("p", "1", priority=5000), node(), pods, critical_priority=5000).admit


def test_unknown_order_is_refused():
    with pytest.raises(ValueError, match="order: must be one of qos, priority, got 'random'"):
        admit_to_node(pod("p"), node(), [], order="random")


@pytest.mark.parametrize(
    ("pods", "message"),
    [
        ([1], r"^pods\[0\]: must be an object$"),
        (
            [pod("bad", "lots")],
            r"^pods\[0\] \(default/bad\): spec.containers\[0\].resources.requests.cpu: invalid quantity 'lots'$",
        ),
        (
            [{**pod("bad"), "status": "Running"}],
            r"^pods\[0\] \(default/bad\): pod.status: must be an object, got a string$",
        ),
    ],
)
def test_malformed_pods_name_the_pod_and_field(pods, message):
    with pytest.raises(InvalidObject, match=message):
        admit_to_node(pod("new"), node(), pods)


def test_malformed_node_names_the_field():
    with pytest.raises(InvalidObject, match=r"^node: status.allocatable.memory: invalid quantity 'big'$"):
        admit_to_node(pod("new"), node(memory="big"), [])


@pytest.mark.parametrize(
    ("labels", "spec_os", "node_os", "reason"),
    [
        ({"kubernetes.io/os": "windows"}, None, None, "PodOSSelectorNodeLabelDoesNotMatch"),
        ({"kubernetes.io/os": "windows"}, None, "windows", None),
        ({"kubernetes.io/os": "linux"}, None, None, None),
        ({}, {"name": "windows"}, None, "PodOSNotSupported"),
        ({}, {"name": "windows"}, "windows", None),
        ({}, {"name": "linux"}, "linux", None),
    ],
)
def test_os_checks_come_first_and_never_preempt(labels, spec_os, node_os, reason):
    preemptor = critical(cpu="1")
    preemptor["metadata"]["labels"] = labels
    if spec_os:
        preemptor["spec"]["os"] = spec_os
    n = node(labels={"kubernetes.io/os": node_os} if node_os else {})
    got = admit_to_node(preemptor, n, [pod("a", "4", priority=0)])
    if reason is None:
        assert got.admit and [v["name"] for v in got.victims] == ["a"]
    else:
        assert (got.admit, got.victims, [r.reason for r in got.reasons]) == (False, [], [reason])
        assert got.rejection == (got.reasons[0].reason, got.reasons[0].message)
