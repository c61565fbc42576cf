"""Criticality and preemptability as pkg/kubelet/types/pod_update.go defines them."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.preemption.node.victim_search import Candidate, NoVictims, pods_to_preempt
from webhook.preemption.pods import is_critical, is_mirror_pod, is_static_pod, preemptable


def pod(priority: int | None = None, namespace: str = "default", **annotations: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if priority is not None:
        spec["priority"] = priority
    return {"metadata": {"name": "p", "namespace": namespace, "annotations": annotations}, "spec": spec}


def annotated(key: str, value: str, priority: int | None = None) -> dict[str, Any]:
    p = pod(priority)
    p["metadata"]["annotations"] = {key: value}
    return p


STATIC = annotated("kubernetes.io/config.source", "file")
HTTP_STATIC = annotated("kubernetes.io/config.source", "http")
API_SOURCED = annotated("kubernetes.io/config.source", "api")
MIRROR = annotated("kubernetes.io/config.mirror", "")
CLUSTER = pod(2_000_000_000, "kube-system")
NODE = pod(2_000_001_000, "kube-system")
LEGACY = annotated("scheduler.alpha.kubernetes.io/critical-pod", "")

# (name, pod, critical)
CRITICAL = [
    ("no priority", pod(), False),
    ("just below the threshold", pod(1_999_999_999), False),
    ("at the threshold", pod(2_000_000_000), True),
    ("namespace does not matter", pod(2_000_000_000, "default"), True),
    ("file static pod", STATIC, True),
    ("http static pod", HTTP_STATIC, True),
    ("config.source api is not static", API_SOURCED, False),
    ("mirror pod, any value", MIRROR, True),
    (
        "the removed legacy annotation is not critical",
        {**LEGACY, "metadata": {**LEGACY["metadata"], "namespace": "kube-system"}},
        False,
    ),
]


@pytest.mark.parametrize(("p", "critical"), [c[1:] for c in CRITICAL], ids=[c[0] for c in CRITICAL])
def test_is_critical(p, critical):
    assert is_critical(p) is critical


def test_static_and_mirror():
    assert is_static_pod(STATIC) and not is_mirror_pod(STATIC)
    assert is_mirror_pod(MIRROR) and not is_static_pod(MIRROR)
    assert not is_static_pod(pod()) and not is_mirror_pod(pod())


# (name, preemptor, preemptee, preemptable)
PREEMPTABLE = [
    ("critical over non-critical without priorities", STATIC, pod(), True),
    ("critical over non-critical", CLUSTER, pod(5), True),
    ("node-critical over cluster-critical", NODE, CLUSTER, True),
    ("not between equal critical priorities", CLUSTER, pod(2_000_000_000), False),
    ("not cluster-critical over node-critical", CLUSTER, NODE, False),
    ("a nil-priority static pod cannot preempt a critical pod", STATIC, CLUSTER, False),
    ("nor a mirror pod", STATIC, MIRROR, False),
    ("higher priority, neither critical", pod(10), pod(5), True),
    ("equal priority", pod(5), pod(5), False),
    ("nil preemptor priority", pod(), pod(5), False),
    ("nil preemptee priority", pod(10), pod(), False),
]


@pytest.mark.parametrize(
    ("a", "b", "expected"), [c[1:] for c in PREEMPTABLE], ids=[c[0] for c in PREEMPTABLE]
)
def test_preemptable(a, b, expected):
    assert preemptable(a, b) is expected


def test_a_critical_threshold_of_its_own():
    assert is_critical(pod(5000), critical_priority=5000)
    assert preemptable(pod(5000), pod(4999), critical_priority=5000)


def test_pods_of_an_unknown_qos_class_are_never_candidates():
    """`sortPodsByQOS` drops any class other than the three."""
    odd = {**pod(0), "status": {"qosClass": "Platinum"}}
    odd["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    with pytest.raises(NoVictims, match=r"\[\(res: cpu, q: 100\), \]"):
        pods_to_preempt(CLUSTER, [Candidate.of(odd)], [("cpu", 100)])
