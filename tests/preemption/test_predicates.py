"""The kubelet's admission predicates: resource fit (`noderesources.Fits`) and the non-resource checks."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.preemption.predicates import (
    Reason,
    host_port_conflicts,
    is_terminal,
    node_name_mismatch,
    node_selector_mismatch,
    non_resource_reasons,
    resource_reasons,
    untolerated_taint,
)

ALLOC = {"cpu": 1000, "memory": 1000, "ephemeral-storage": 1000, "pods": 3, "example.com/foo": 2}


def out_of(resource: str, requested: int, used: int, capacity: int) -> tuple[str, str]:
    return (
        f"OutOf{resource}",
        f"Node didn't have enough resource: {resource}, requested: {requested}, used: {used}, capacity: {capacity}",
    )


# (name, pod request, used, expected [(reason, message)])
FIT = [
    ("fits", {"cpu": 500, "memory": 500, "pods": 1}, {"cpu": 500, "memory": 500, "pods": 2}, []),
    ("too many pods", {"pods": 1}, {"pods": 3}, [out_of("pods", 1, 3, 3)]),
    ("cpu", {"cpu": 300, "pods": 1}, {"cpu": 900, "pods": 1}, [out_of("cpu", 300, 900, 1000)]),
    (
        "upstream order: pods, cpu, memory, ephemeral-storage, then scalars",
        {"example.com/foo": 3, "ephemeral-storage": 2000, "memory": 2000, "cpu": 2000, "pods": 1},
        {"pods": 3},
        [
            out_of("pods", 1, 3, 3),
            out_of("cpu", 2000, 0, 1000),
            out_of("memory", 2000, 0, 1000),
            out_of("ephemeral-storage", 2000, 0, 1000),
            out_of("example.com/foo", 3, 0, 2),
        ],
    ),
    (
        "scalar resources sorted by name",
        {"z.io/b": 1, "a.io/a": 1, "hugepages-2Mi": 1, "pods": 1},
        {},
        [out_of("a.io/a", 1, 0, 0), out_of("hugepages-2Mi", 1, 0, 0), out_of("z.io/b", 1, 0, 0)],
    ),
    ("zero request fits an overcommitted node", {"cpu": 0, "pods": 1}, {"cpu": 5000, "pods": 1}, []),
    ("exactly the remainder fits", {"cpu": 100, "pods": 1}, {"cpu": 900, "pods": 2}, []),
    ("native resources that are not scalar are not checked", {"storage": 10**9, "pods": 1}, {}, []),
]


@pytest.mark.parametrize(("request_", "used", "expected"), [c[1:] for c in FIT], ids=[c[0] for c in FIT])
def test_resource_reasons(request_, used, expected):
    got = resource_reasons(request_, ALLOC, used)
    assert [(r.reason, r.message) for r in got] == expected
    for r in got:
        assert r.is_resource and r.insufficient_amount > 0
        assert r.short == f"Insufficient {r.resource}"


def test_node_without_the_pods_resource_admits_nothing():
    got = resource_reasons({"pods": 1}, {"cpu": 1000}, {})
    assert [(r.reason, r.message) for r in got] == [out_of("pods", 1, 0, 0)]


def test_reason_dict_shape():
    r = resource_reasons({"cpu": 300}, {"cpu": 1000, "pods": 10}, {"cpu": 900, "pods": 1})[0]
    assert r.as_dict() == {
        "reason": "OutOfcpu",
        "message": "Node didn't have enough resource: cpu, requested: 300, used: 900, capacity: 1000",
        "resource": "cpu",
        "requested": 300,
        "used": 900,
        "capacity": 1000,
    }
    assert r.insufficient_amount == 200


NODE = {
    "metadata": {"name": "node-a", "labels": {"zone": "z1", "disk": "ssd", "cores": "8"}},
    "spec": {"taints": []},
}


def with_spec(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c"}], **spec},
    }


def test_node_name():
    assert node_name_mismatch(with_spec(), NODE) is None
    assert node_name_mismatch(with_spec(nodeName="node-a"), NODE) is None
    assert node_name_mismatch(with_spec(nodeName="node-b"), NODE) == Reason(
        "NodeName", "Predicate NodeName failed: node(s) didn't match the requested node name"
    )


def required(*terms: Any) -> dict[str, Any]:
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


# (name, pod spec, matches)
AFFINITY = [
    ("nothing required", {}, True),
    ("nodeSelector matches", {"nodeSelector": {"zone": "z1"}}, True),
    ("nodeSelector value differs", {"nodeSelector": {"zone": "z2"}}, False),
    ("nodeSelector label missing", {"nodeSelector": {"gpu": "yes"}}, False),
    ("In", {"affinity": required({"matchExpressions": [expr("zone", "In", "z1", "z2")]})}, True),
    ("In without the value", {"affinity": required({"matchExpressions": [expr("zone", "In", "z3")]})}, False),
    ("NotIn", {"affinity": required({"matchExpressions": [expr("zone", "NotIn", "z3")]})}, True),
    (
        "NotIn on a missing label",
        {"affinity": required({"matchExpressions": [expr("gpu", "NotIn", "x")]})},
        True,
    ),
    ("Exists", {"affinity": required({"matchExpressions": [expr("disk", "Exists")]})}, True),
    ("DoesNotExist", {"affinity": required({"matchExpressions": [expr("disk", "DoesNotExist")]})}, False),
    ("Gt", {"affinity": required({"matchExpressions": [expr("cores", "Gt", "4")]})}, True),
    ("Lt", {"affinity": required({"matchExpressions": [expr("cores", "Lt", "4")]})}, False),
    (
        "Gt on a non-integer label",
        {"affinity": required({"matchExpressions": [expr("zone", "Gt", "4")]})},
        False,
    ),
    (
        "Exists with values is invalid",
        {"affinity": required({"matchExpressions": [expr("disk", "Exists", "x")]})},
        False,
    ),
    ("unknown operator", {"affinity": required({"matchExpressions": [expr("disk", "Like", "ssd")]})}, False),
    (
        "requirements are ANDed",
        {"affinity": required({"matchExpressions": [expr("zone", "In", "z1"), expr("disk", "In", "hdd")]})},
        False,
    ),
    (
        "terms are ORed",
        {
            "affinity": required(
                {"matchExpressions": [expr("disk", "In", "hdd")]},
                {"matchExpressions": [expr("zone", "In", "z1")]},
            )
        },
        True,
    ),
    ("no terms match nothing", {"affinity": required()}, False),
    ("an empty term matches nothing", {"affinity": required({})}, False),
    (
        "matchFields on the node name",
        {"affinity": required({"matchFields": [expr("metadata.name", "In", "node-a")]})},
        True,
    ),
    (
        "matchFields NotIn",
        {"affinity": required({"matchFields": [expr("metadata.name", "NotIn", "node-a")]})},
        False,
    ),
    (
        "matchFields on another field",
        {"affinity": required({"matchFields": [expr("metadata.uid", "In", "node-a")]})},
        False,
    ),
    (
        "nodeSelector and affinity must both match",
        {
            "nodeSelector": {"zone": "z2"},
            "affinity": required({"matchExpressions": [expr("zone", "In", "z1")]}),
        },
        False,
    ),
    (
        "preferred affinity is not a requirement",
        {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}]}}},
        True,
    ),
]


@pytest.mark.parametrize(("spec", "matches"), [c[1:] for c in AFFINITY], ids=[c[0] for c in AFFINITY])
def test_node_selector_and_required_affinity(spec, matches):
    got = node_selector_mismatch(with_spec(**spec), NODE)
    if matches:
        assert got is None
    else:
        assert got == Reason(
            "NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
        )


def ports_pod(*ports: dict[str, Any], init_ports: tuple = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "ports": list(ports)}]}
    if init_ports:
        spec["initContainers"] = [{"name": "i", "ports": list(init_ports)}]
    return {"metadata": {"name": "p"}, "spec": spec}


# (name, wanted ports, existing ports, conflict)
PORTS = [
    ("no host ports", [{"containerPort": 80}], [{"containerPort": 80, "hostPort": 80}], False),
    ("same port", [{"containerPort": 80, "hostPort": 80}], [{"containerPort": 80, "hostPort": 80}], True),
    ("different port", [{"hostPort": 81}], [{"hostPort": 80}], False),
    ("different protocol", [{"hostPort": 53, "protocol": "UDP"}], [{"hostPort": 53}], False),
    ("TCP is the default protocol", [{"hostPort": 53, "protocol": "TCP"}], [{"hostPort": 53}], True),
    (
        "different host IPs",
        [{"hostPort": 80, "hostIP": "10.0.0.1"}],
        [{"hostPort": 80, "hostIP": "10.0.0.2"}],
        False,
    ),
    ("wanted on every IP", [{"hostPort": 80}], [{"hostPort": 80, "hostIP": "10.0.0.2"}], True),
    (
        "taken on every IP",
        [{"hostPort": 80, "hostIP": "10.0.0.1"}],
        [{"hostPort": 80, "hostIP": "0.0.0.0"}],
        True,
    ),
    (
        "host port 0 is no host port",
        [{"hostPort": 0, "containerPort": 80}],
        [{"hostPort": 0, "containerPort": 80}],
        False,
    ),
]


@pytest.mark.parametrize(
    ("wanted", "existing", "conflict"), [c[1:] for c in PORTS], ids=[c[0] for c in PORTS]
)
def test_host_ports(wanted, existing, conflict):
    got = host_port_conflicts(ports_pod(*wanted), [ports_pod(*existing)])
    if conflict:
        assert got == Reason(
            "NodePorts",
            "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports",
        )
    else:
        assert got is None


def test_init_container_ports_are_not_host_ports_upstream():
    """`getContainerPorts` reads regular containers only."""
    assert (
        host_port_conflicts(ports_pod(init_ports=({"hostPort": 80},)), [ports_pod({"hostPort": 80})]) is None
    )


def tainted(*taints: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "n"}, "spec": {"taints": list(taints)}}


NO_EXECUTE = {"key": "dedicated", "value": "db", "effect": "NoExecute"}
NO_SCHEDULE = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}

# (name, taints, tolerations, untolerated with the kubelet's NoExecute filter)
TAINTS = [
    ("no taints", [], [], False),
    ("untolerated NoExecute", [NO_EXECUTE], [], True),
    ("NoSchedule is the scheduler's business", [NO_SCHEDULE], [], False),
    ("Equal with the value", [NO_EXECUTE], [{"key": "dedicated", "operator": "Equal", "value": "db"}], False),
    ("Equal is the default operator", [NO_EXECUTE], [{"key": "dedicated", "value": "db"}], False),
    ("Equal with another value", [NO_EXECUTE], [{"key": "dedicated", "value": "web"}], True),
    ("Exists on the key", [NO_EXECUTE], [{"key": "dedicated", "operator": "Exists"}], False),
    ("Exists without a key tolerates everything", [NO_EXECUTE], [{"operator": "Exists"}], False),
    (
        "effect must match when set",
        [NO_EXECUTE],
        [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        True,
    ),
    (
        "unknown operator tolerates nothing",
        [NO_EXECUTE],
        [{"key": "dedicated", "operator": "Gte", "value": "db"}],
        True,
    ),
    (
        "every NoExecute taint must be tolerated",
        [NO_EXECUTE, {"key": "x", "effect": "NoExecute"}],
        [{"key": "dedicated", "value": "db"}],
        True,
    ),
]


@pytest.mark.parametrize(
    ("taints", "tolerations", "untolerated"), [c[1:] for c in TAINTS], ids=[c[0] for c in TAINTS]
)
def test_untolerated_taint(taints, tolerations, untolerated):
    got = untolerated_taint(with_spec(tolerations=tolerations), tainted(*taints))
    if untolerated:
        assert got == Reason(
            "TaintToleration",
            "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate",
        )
        assert got.short == "node(s) had taints that the pod didn't tolerate"
    else:
        assert got is None


def test_scheduler_effects():
    """The planner passes NoSchedule too."""
    assert untolerated_taint(with_spec(), tainted(NO_SCHEDULE)) is None
    assert (
        untolerated_taint(with_spec(), tainted(NO_SCHEDULE), effects=("NoSchedule", "NoExecute")) is not None
    )


def test_non_resource_reasons_order_and_static_pods():
    node = {**tainted(NO_EXECUTE), "metadata": {"name": "node-a", "labels": {}}}
    pod = with_spec(nodeName="node-b", nodeSelector={"zone": "z1"})
    pod["spec"]["containers"][0]["ports"] = [{"hostPort": 80}]
    others = [ports_pod({"hostPort": 80})]
    assert [r.reason for r in non_resource_reasons(pod, node, others)] == [
        "NodeAffinity",
        "NodeName",
        "NodePorts",
        "TaintToleration",
    ]
    pod["metadata"]["annotations"] = {"kubernetes.io/config.source": "file"}
    assert [r.reason for r in non_resource_reasons(pod, node, others)] == [
        "NodeAffinity",
        "NodeName",
        "NodePorts",
    ]


@pytest.mark.parametrize(
    ("phase", "terminal"),
    [
        ("Succeeded", True),
        ("Failed", True),
        ("Running", False),
        ("Pending", False),
        ("Unknown", False),
        (None, False),
    ],
)
def test_is_terminal(phase, terminal):
    assert is_terminal({"status": {"phase": phase}} if phase else {}) is terminal
