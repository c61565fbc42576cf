"""Pod requests, quantities and node allocatable as the kubelet and the scheduler count them."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.preemption.quantities import InvalidQuantity, parse_quantity
from webhook.preemption.resources import (
    InvalidObject,
    add,
    node_allocatable,
    pod_requests,
    scheduler_pod_requests,
    subtract,
    total,
)
from webhook.preemption.semantics import Semantics

V1_31, V1_33, V1_34 = Semantics((1, 31)), Semantics((1, 33)), Semantics((1, 34))

GI = 1024**3
MI = 1024**2

# (resource, value, expected): cpu in millicores, others in base units, always rounded up.
QUANTITIES = [
    ("cpu", "100m", 100),
    ("cpu", "1", 1000),
    ("cpu", "0.5", 500),
    ("cpu", ".5", 500),
    ("cpu", "1.", 1000),
    ("cpu", "+2", 2000),
    ("cpu", "0.1m", 1),  # below a millicore rounds up, never to zero
    ("cpu", "1500u", 2),
    ("cpu", "1e3", 1_000_000),
    ("cpu", "1E-3", 1),
    ("cpu", 2, 2000),  # a YAML/JSON number
    ("cpu", 0.1, 100),  # read by its literal text, not as a binary float (which would round up to 101)
    ("memory", "1Mi", MI),
    ("memory", "1.5Gi", 3 * GI // 2),
    ("memory", "1k", 1000),
    ("memory", "1Ki", 1024),
    ("memory", "1M", 10**6),
    ("memory", "1E", 10**18),
    ("memory", "1Ei", 2**60),
    ("memory", "100n", 1),
    ("memory", "0", 0),
    ("memory", "1e30", 2**63 - 1),  # capped at int64 as apimachinery does
    ("ephemeral-storage", "10Gi", 10 * GI),
    ("nvidia.com/gpu", "2", 2),
    ("hugepages-2Mi", "4Mi", 4 * MI),
    ("pods", "110", 110),
]


@pytest.mark.parametrize(("resource", "value", "expected"), QUANTITIES)
def test_parse_quantity(resource, value, expected):
    assert parse_quantity(resource, value) == expected


BAD_QUANTITIES = [
    ("cpu", "abc", "cpu: invalid quantity 'abc'"),
    ("cpu", "", "cpu: invalid quantity ''"),
    ("cpu", "1.2.3", "cpu: invalid quantity '1.2.3'"),
    ("cpu", " 1", "cpu: invalid quantity ' 1'"),
    ("cpu", "1_000", "cpu: invalid quantity '1_000'"),
    ("cpu", "NaN", "cpu: invalid quantity 'NaN'"),
    ("cpu", float("inf"), "cpu: invalid quantity inf"),
    ("memory", "1mi", "memory: invalid quantity '1mi'"),
    ("memory", "1Xi", "memory: invalid quantity '1Xi'"),
    ("memory", "-1Gi", "memory: quantity '-1Gi' must not be negative"),
    ("memory", True, "memory: quantity must be a string or a number, got bool"),
    ("memory", None, "memory: quantity must be a string or a number, got NoneType"),
    ("memory", [1], "memory: quantity must be a string or a number, got list"),
]


@pytest.mark.parametrize(("resource", "value", "message"), BAD_QUANTITIES)
def test_invalid_quantity_names_resource_and_value(resource, value, message):
    with pytest.raises(InvalidQuantity) as err:
        parse_quantity(resource, value)
    assert str(err.value) == message
    assert isinstance(err.value, ValueError)


def container(name: str = "c", restart: str | None = None, **requests: Any) -> dict[str, Any]:
    c: dict[str, Any] = {
        "name": name,
        "resources": {"requests": {k.replace("_", "-"): v for k, v in requests.items()}},
    }
    if restart:
        c["restartPolicy"] = restart
    return c


def pod(containers=(), init=(), overhead=None, pod_level=None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    if overhead is not None:
        spec["overhead"] = overhead
    if pod_level is not None:
        spec["resources"] = pod_level
    return {"metadata": {"name": "p"}, "spec": spec}


# (name, pod, kubelet view, scheduler view[, kubelet view before 1.34]) — `pods: 1` is added to every
# expectation. The kubelet view is what a preemption victim frees (`GetResourceRequest`): from 1.34 the
# KEP-753 sidecar formula with pod-level resources (kubernetes PR #132277), before that the containers
# summed and the largest single init container, sidecars included, pod-level resources ignored.
REQUESTS = [
    ("no containers", pod(), {}, {}),
    ("container without requests", pod([{"name": "c"}]), {}, {}),
    ("one container", pod([container(cpu="100m", memory="1Gi")]), {"cpu": 100, "memory": GI}, None),
    (
        "containers are summed",
        pod([container(cpu="100m", memory="100Mi"), container(cpu="200m", ephemeral_storage="1Gi")]),
        {"cpu": 300, "memory": 100 * MI, "ephemeral-storage": GI},
        None,
    ),
    (
        "sum is rounded once, not per container",
        pod([container(cpu="0.5m"), container(cpu="0.5m")]),
        {"cpu": 1},
        None,
    ),
    (
        "init container larger than the sum wins per resource",
        pod([container(cpu="100m", memory="1Gi")], init=[container(cpu="2", memory="1Mi")]),
        {"cpu": 2000, "memory": GI},
        None,
    ),
    (
        "init containers are not summed",
        pod([container(cpu="100m")], init=[container(cpu="1"), container(cpu="1")]),
        {"cpu": 1000},
        None,
    ),
    (
        "restartable init container adds to the steady state",
        pod([container(cpu="1")], init=[container(restart="Always", cpu="1")]),
        {"cpu": 2000},
        None,
        {"cpu": 1000},
    ),
    (
        "multiple restartable init containers",
        pod(
            [container(cpu="1")],
            init=[container(restart="Always", cpu="1"), container(restart="Always", cpu="2")],
        ),
        {"cpu": 4000},
        None,
        {"cpu": 2000},
    ),
    (
        "regular init after a sidecar runs next to it",
        pod([container(cpu="1")], init=[container(restart="Always", cpu="1"), container(cpu="5")]),
        {"cpu": 6000},
        None,
        {"cpu": 5000},
    ),
    (
        "regular init before a sidecar does not",
        pod([container(cpu="1")], init=[container(cpu="5"), container(restart="Always", cpu="1")]),
        {"cpu": 5000},
        None,
    ),
    (
        "init restartPolicy other than Always is a regular init container",
        pod([container(cpu="1")], init=[container(restart="Never", cpu="1")]),
        {"cpu": 1000},
        None,
    ),
    (
        "overhead: kubelet only on non-zero totals, scheduler always",
        pod([container(cpu="100m")], overhead={"cpu": "10m", "memory": "5Mi"}),
        {"cpu": 110},
        {"cpu": 110, "memory": 5 * MI},
    ),
    (
        "overhead on a pod with no requests",
        pod([{"name": "c"}], overhead={"cpu": "10m"}),
        {},
        {"cpu": 10},
    ),
    (
        "pod-level resources replace container requests (kubelet skips containers entirely)",
        pod(
            [container(cpu="100m", memory="100Mi", ephemeral_storage="1Gi", **{"nvidia.com/gpu": "1"})],
            pod_level={"requests": {"cpu": "1", "memory": "1Gi"}},
        ),
        {"cpu": 1000, "memory": GI},
        {"cpu": 1000, "memory": GI, "ephemeral-storage": GI, "nvidia.com/gpu": 1},
        {"cpu": 100, "memory": 100 * MI, "ephemeral-storage": GI, "nvidia.com/gpu": 1},
    ),
    (
        "pod-level cpu only: kubelet memory is zero",
        pod([container(cpu="100m", memory="100Mi")], pod_level={"requests": {"cpu": "1"}}),
        {"cpu": 1000},
        {"cpu": 1000, "memory": 100 * MI},
        {"cpu": 100, "memory": 100 * MI},
    ),
    (
        "pod-level limits only count as pod-level resources set",
        pod([container(cpu="100m")], pod_level={"limits": {"cpu": "1"}}),
        {"cpu": 100},
        {"cpu": 100},
    ),
    (
        "pod-level with unsupported resources only is ignored",
        pod([container(cpu="100m")], pod_level={"requests": {"ephemeral-storage": "1Gi"}}),
        {"cpu": 100},
        None,
    ),
    (
        "pod-level hugepages are supported",
        pod([container(cpu="100m")], pod_level={"requests": {"cpu": "1", "hugepages-2Mi": "4Mi"}}),
        {"cpu": 1000, "hugepages-2Mi": 4 * MI},
        {"cpu": 1000, "hugepages-2Mi": 4 * MI},
        {"cpu": 100},
    ),
    (
        "overhead with pod-level resources",
        pod([container(cpu="100m")], overhead={"cpu": "10m"}, pod_level={"requests": {"cpu": "1"}}),
        {"cpu": 1010},
        {"cpu": 1010},
        {"cpu": 110},
    ),
    (
        "extended resources and hugepages are kept",
        pod([container(**{"example.com/foo": "3", "hugepages-1Gi": "2Gi"})]),
        {"example.com/foo": 3, "hugepages-1Gi": 2 * GI},
        None,
    ),
]


@pytest.mark.parametrize(
    ("p", "kubelet", "scheduler", "kubelet_before_1_34"),
    [(*c[1:4], c[4] if len(c) > 4 else None) for c in REQUESTS],
    ids=[c[0] for c in REQUESTS],
)
def test_pod_requests(p, kubelet, scheduler, kubelet_before_1_34):
    assert pod_requests(p, V1_34) == {**kubelet, "pods": 1}
    for older in (V1_33, V1_31):
        want = kubelet if kubelet_before_1_34 is None else kubelet_before_1_34
        assert pod_requests(p, older) == {**want, "pods": 1}
    for version in (V1_31, V1_33, V1_34):
        want = kubelet if scheduler is None else scheduler
        assert scheduler_pod_requests(p, version) == {**want, "pods": 1}


BAD_PODS = [
    ("not an object", [], "pod: must be an object, got a list"),
    ("spec not an object", {"spec": "x"}, "pod.spec: must be an object, got a string"),
    ("containers not a list", {"spec": {"containers": "x"}}, "spec.containers: must be a list, got a string"),
    (
        "container not an object",
        {"spec": {"containers": [1]}},
        "spec.containers[0]: must be an object, got int",
    ),
    (
        "resources not an object",
        {"spec": {"containers": [{"resources": [1]}]}},
        "spec.containers[0].resources: must be an object, got a list",
    ),
    (
        "requests not an object",
        {"spec": {"containers": [{"resources": {"requests": "1"}}]}},
        "spec.containers[0].resources.requests: must be an object, got a string",
    ),
    (
        "bad init container quantity",
        {"spec": {"containers": [], "initContainers": [{"resources": {"requests": {"memory": "x"}}}]}},
        "spec.initContainers[0].resources.requests.memory: invalid quantity 'x'",
    ),
    (
        "bad overhead",
        {"spec": {"overhead": {"cpu": "-1"}}},
        "spec.overhead.cpu: quantity '-1' must not be negative",
    ),
    (
        "bad pod-level request",
        {"spec": {"resources": {"requests": {"cpu": "lots"}}}},
        "spec.resources.requests.cpu: invalid quantity 'lots'",
    ),
]


@pytest.mark.parametrize(("p", "message"), [c[1:] for c in BAD_PODS], ids=[c[0] for c in BAD_PODS])
def test_malformed_pod_names_the_field(p, message):
    for read in (pod_requests, scheduler_pod_requests):
        with pytest.raises(InvalidObject) as err:
            read(p, V1_34)
        assert str(err.value) == message


def test_node_allocatable():
    node = {
        "status": {"allocatable": {"cpu": "3800m", "memory": "7Gi", "pods": "110", "nvidia.com/gpu": "4"}}
    }
    assert node_allocatable(node) == {"cpu": 3800, "memory": 7 * GI, "pods": 110, "nvidia.com/gpu": 4}
    assert node_allocatable({"metadata": {"name": "n"}}) == {}
    with pytest.raises(InvalidObject, match=r"^status.allocatable.cpu: invalid quantity 'x'$"):
        node_allocatable({"status": {"allocatable": {"cpu": "x"}}})
    with pytest.raises(InvalidObject, match=r"^node: must be an object, got a string$"):
        node_allocatable("n")


def test_add_subtract_total_take_the_union_of_keys():
    a = {"cpu": 100, "memory": 5}
    b = {"cpu": 30, "pods": 1}
    assert add(a, b) == {"cpu": 130, "memory": 5, "pods": 1}
    assert subtract(a, b) == {"cpu": 70, "memory": 5, "pods": -1}
    assert total([a, b, b]) == {"cpu": 160, "memory": 5, "pods": 2}
    assert total([]) == {}
    assert a == {"cpu": 100, "memory": 5}  # inputs untouched


def test_errors_echo_at_most_a_prefix_of_a_huge_value():
    with pytest.raises(InvalidQuantity) as err:
        parse_quantity("cpu", "x" * 10_000)
    assert str(err.value) == f"cpu: invalid quantity '{'x' * 59}..."
    with pytest.raises(InvalidQuantity) as err:
        pod_requests({"spec": {"containers": [{"resources": {"requests": {"r" * 500: "bad"}}}]}})
    assert str(err.value) == f"spec.containers[0].resources.requests.{'r' * 60}...: invalid quantity 'bad'"


def test_an_unprintable_resource_name_is_quoted_so_the_error_stays_one_line():
    with pytest.raises(InvalidQuantity) as err:
        pod_requests({"spec": {"containers": [{"resources": {"requests": {"\n": ""}}}]}})
    assert str(err.value) == "spec.containers[0].resources.requests.'\\n': invalid quantity ''"
