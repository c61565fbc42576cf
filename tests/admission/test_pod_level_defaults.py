"""Pod-level resource defaulting (`defaultPodRequests`, `defaultHugePagePodLimits`), ported from upstream's
`TestPodResourcesDefaults` (pkg/apis/core/v1/defaults_test.go, v1.33.3), the cases with PodLevelResources on.

Two rules fill a missing pod-level request, both only when pod-level limits are set: a resource the
containers request gets the containers' aggregate request (KEP-753 formula; hugepages excepted), any
other resource with a pod-level limit gets the limit. Hugepages limits come from the containers' limits
first. As upstream's test, quantities compare by value (`Quantity.Cmp`).
"""

from __future__ import annotations

from typing import Any

import pytest

from webhook.objects.defaults import default_pod
from webhook.preemption.quantities import parse_quantity


def c(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "resources": resources}


H2, H1G = "hugepages-2Mi", "hugepages-1Gi"
TWO_LIMITED = [c(limits={"cpu": "2m", "memory": "1Mi"}), c(limits={"cpu": "1m", "memory": "5Mi"})]
UNSUPPORTED = [c(limits={"storage": "1Mi"}), c(limits={"ephemeral-storage": "5Mi"})]
HUGE = [c(limits={"cpu": "2m", H2: "4Mi"}), c(limits={"cpu": "1m", H2: "2Mi"})]

# (upstream case name, pod-level resources, containers, expected pod-level requests; None: no requests)
CASES = [
    (
        "pod requests=unset limits=set, container resources=unset",
        {"limits": {"cpu": "2m", "memory": "1Mi"}},
        [],
        {"cpu": "2m", "memory": "1Mi"},
    ),
    ("pod limits=nil, container requests=unset limits=set", {"limits": None}, TWO_LIMITED, None),
    ("pod limits=empty map, container requests=unset limits=set", {"limits": {}}, TWO_LIMITED, None),
    (
        "pod requests=empty map limits=set, container requests=unset limits=set",
        {"requests": {}, "limits": {"cpu": "5m", "memory": "7Mi"}},
        TWO_LIMITED,
        {"cpu": "3m", "memory": "6Mi"},
    ),
    (
        "pod requests=nil limits=set, container requests=unset limits=set",
        {"requests": None, "limits": {"cpu": "5m", "memory": "7Mi"}},
        TWO_LIMITED,
        {"cpu": "3m", "memory": "6Mi"},
    ),
    (
        "pod requests=unset limits=set, container requests=unset limits=set",
        {"limits": {"cpu": "5m", "memory": "7Mi"}},
        TWO_LIMITED,
        {"cpu": "3m", "memory": "6Mi"},
    ),
    (
        "pod requests=unset limits=set, container requests=set limits=unset",
        {"limits": {"cpu": "4m", "memory": "8Mi"}},
        [c(requests={"cpu": "1m", "memory": "1Mi"}), c(requests={"cpu": "1m", "memory": "2Mi"})],
        {"cpu": "2m", "memory": "3Mi"},
    ),
    (
        "pod requests=unset cpu limits=set, container resources=unset",
        {"limits": {"cpu": "4m"}},
        [c(), c()],
        {"cpu": "4m"},
    ),
    (
        "pod requests=unset limits=set, container requests=set limits=set",
        {"limits": {"cpu": "4m", "memory": "8Mi"}},
        [
            c(requests={"cpu": "1m", "memory": "1Mi"}, limits={"cpu": "2m", "memory": "1Mi"}),
            c(requests={"cpu": "1m", "memory": "2Mi"}, limits={"cpu": "1m", "memory": "5Mi"}),
        ],
        {"cpu": "2m", "memory": "3Mi"},
    ),
    (
        "pod requests=unset limits=set, container memory requests=set limits=unset",
        {"limits": {"cpu": "4m", "memory": "8Mi"}},
        [c(requests={"memory": "1Mi"}), c(requests={"memory": "5Mi"})],
        {"cpu": "4m", "memory": "6Mi"},
    ),
    (
        "pod limits=set, container unsupported requests=set limits=set",
        {"limits": {"cpu": "2m", "memory": "1Mi"}},
        UNSUPPORTED,
        {"cpu": "2m", "memory": "1Mi"},
    ),
    (
        "pod unsupported resources limits=set, container unsupported requests=set limits=set",
        {"limits": {"storage": "1Mi"}},
        UNSUPPORTED,
        None,
    ),
    (
        "pod supported and unsupported resources limits=set, container unsupported requests=set limits=set",
        {"limits": {"cpu": "2m", "memory": "1Mi", "storage": "1Mi"}},
        UNSUPPORTED,
        {"cpu": "2m", "memory": "1Mi"},
    ),
    (
        "pod hugepages requests=unset limits=unset, container hugepages requests=unset limits=set",
        {"limits": {"cpu": "5m"}},
        HUGE,
        {"cpu": "3m", H2: "6Mi"},
    ),
    (
        "pod hugepages requests=unset limits=set, container hugepages requests=unset limits=set",
        {"limits": {"cpu": "5m", H2: "10Mi"}},
        HUGE,
        {"cpu": "3m", H2: "10Mi"},
    ),
    (
        "pod hugepages requests=set limits=set, container hugepages requests=unset limits=set",
        {"limits": {"cpu": "5m", H2: "10Mi"}, "requests": {"cpu": "5m", H2: "10Mi"}},
        HUGE,
        {"cpu": "5m", H2: "10Mi"},
    ),
    (
        "pod hugepages requests=set limits=set, container hugepages requests=unset limits=unset",
        {"limits": {"cpu": "5m", H2: "10Mi"}, "requests": {"cpu": "5m", H2: "10Mi"}},
        [c()],
        {"cpu": "5m", H2: "10Mi"},
    ),
    (
        "pod hugepages requests=unset limits=set, container hugepages requests=unset limits=set "
        "different hugepagesizes between pod and container level",
        {"limits": {"cpu": "5m", H2: "10Mi"}},
        [c(limits={"cpu": "2m", H1G: "1Gi"}), c(limits={"cpu": "1m", H2: "2Mi"})],
        {"cpu": "3m", H2: "10Mi", H1G: "1Gi"},
    ),
]


def _values(requests: dict[str, Any]) -> dict[str, int]:
    return {name: parse_quantity(name, value) for name, value in requests.items()}


@pytest.mark.parametrize(
    ("resources", "containers", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_pod_resources_defaults(resources, containers, want):
    spec: dict[str, Any] = {"containers": containers, "resources": resources}
    got = default_pod({"spec": spec})["spec"]["resources"].get("requests")
    if want is None:
        assert not got
    else:
        assert _values(got) == _values(want)


def test_pod_level_defaulting_does_not_change_its_input():
    pod = {"spec": {"resources": {"limits": {"cpu": "5m"}}, "containers": [c(limits={"cpu": "2m"})]}}
    default_pod(pod)
    assert pod == {"spec": {"resources": {"limits": {"cpu": "5m"}}, "containers": [c(limits={"cpu": "2m"})]}}


def test_aggregated_requests_print_as_canonical_quantities():
    pod = {"spec": {"resources": {"limits": {"cpu": "5"}}, "containers": TWO_LIMITED}}
    assert default_pod(pod)["spec"]["resources"]["requests"] == {"cpu": "3m", "memory": "6Mi"}


def test_rule_one_aggregates_with_the_sidecar_formula():
    """Not in upstream's table: a sidecar adds to the steady state; a later init container runs beside it."""
    sidecar = {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "200m"}}}
    init = {"name": "i", "resources": {"requests": {"cpu": "500m"}}}
    spec = {
        "resources": {"limits": {"cpu": "1"}},
        "initContainers": [sidecar, init],
        "containers": [c({"cpu": "100m"})],
    }
    assert default_pod({"spec": spec})["spec"]["resources"]["requests"] == {"cpu": "700m"}
