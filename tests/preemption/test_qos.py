"""QoS classes as `GetPodQOS`/`ComputePodQOS` (pkg/apis/core/v1/helper/qos) compute them."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.preemption.qos import BEST_EFFORT, BURSTABLE, GUARANTEED, qos_class
from webhook.preemption.resources import InvalidObject


def res(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if requests is not None:
        out["requests"] = requests
    if limits is not None:
        out["limits"] = limits
    return out


def pod(
    *containers: dict[str, Any], init: tuple = (), pod_level: dict | None = None, status: str | None = None
):
    spec: dict[str, Any] = {
        "containers": [{"name": f"c{i}", "resources": r} for i, r in enumerate(containers)]
    }
    if init:
        spec["initContainers"] = [{"name": f"i{i}", **r} for i, r in enumerate(init)]
    if pod_level is not None:
        spec["resources"] = pod_level
    out: dict[str, Any] = {"metadata": {"name": "p"}, "spec": spec}
    if status is not None:
        out["status"] = {"qosClass": status}
    return out


CPU_MEM = {"cpu": "100m", "memory": "100Mi"}
G = res(CPU_MEM, CPU_MEM)
BU = res({"cpu": "100m"})
BE = res()

QOS = [
    ("no containers", pod(), BEST_EFFORT),
    ("one best-effort container", pod(BE), BEST_EFFORT),
    ("requests and limits equal for cpu and memory", pod(G), GUARANTEED),
    ("two guaranteed containers", pod(G, G), GUARANTEED),
    (
        "equal values written differently",
        pod(res({"cpu": "1", "memory": "1Gi"}, {"cpu": "1000m", "memory": "1024Mi"})),
        GUARANTEED,
    ),
    (
        "guaranteed plus an extended resource",
        pod(res({**CPU_MEM, "nvidia.com/gpu": "1"}, {**CPU_MEM, "nvidia.com/gpu": "1"})),
        GUARANTEED,
    ),
    (
        "only an extended resource is best-effort",
        pod(res({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"})),
        BEST_EFFORT,
    ),
    ("only ephemeral-storage is best-effort", pod(res({"ephemeral-storage": "1Gi"})), BEST_EFFORT),
    ("requests only", pod(BU), BURSTABLE),
    ("requests below limits", pod(res(CPU_MEM, {"cpu": "200m", "memory": "100Mi"})), BURSTABLE),
    ("cpu only, requests equal limits", pod(res({"cpu": "1"}, {"cpu": "1"})), BURSTABLE),
    ("limits only (not defaulted)", pod(res(limits=CPU_MEM)), BURSTABLE),
    ("guaranteed and best-effort containers", pod(G, BE), BURSTABLE),
    (
        "zero requests equal zero limits",
        pod(res({"cpu": "0", "memory": "0"}, {"cpu": "0", "memory": "0"})),
        BEST_EFFORT,
    ),
    ("guaranteed init container with a guaranteed container", pod(G, init=({"resources": G},)), GUARANTEED),
    ("burstable init container", pod(G, init=({"resources": BU},)), BURSTABLE),
    (
        "best-effort sidecar next to a guaranteed container",
        pod(G, init=({"resources": BE, "restartPolicy": "Always"},)),
        BURSTABLE,
    ),
    ("pod-level guaranteed decides alone", pod(BE, pod_level=G), GUARANTEED),
    ("pod-level requests only", pod(G, pod_level=res({"cpu": "1"})), BURSTABLE),
    ("pod-level present but empty is best-effort", pod(G, pod_level={}), BEST_EFFORT),
    ("status.qosClass wins", pod(BE, status=GUARANTEED), GUARANTEED),
    ("empty status.qosClass is ignored", pod(G, status=""), GUARANTEED),
]


@pytest.mark.parametrize(("p", "expected"), [c[1:] for c in QOS], ids=[c[0] for c in QOS])
def test_qos_class(p, expected):
    assert qos_class(p) == expected


@pytest.mark.parametrize(
    ("p", "message"),
    [
        (pod(res({"cpu": "x"})), "spec.containers[0].resources.requests.cpu: invalid quantity 'x'"),
        (
            pod(res(limits={"memory": "-1"})),
            "spec.containers[0].resources.limits.memory: quantity '-1' must not be negative",
        ),
        ({"spec": {"containers": [{"resources": "x"}]}}, "spec.containers[0].resources: must be an object"),
        ({"spec": {"resources": {"limits": []}}}, "spec.resources.limits: must be an object, got a list"),
    ],
)
def test_malformed_resources_name_the_field(p, message):
    with pytest.raises(InvalidObject) as err:
        qos_class(p)
    assert str(err.value) == message
