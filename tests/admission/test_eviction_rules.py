"""The sidecar's evictions: allowed only of pods on the node its token names (policy and /validate)."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.policy.class_model import StaticClassStore
from webhook.policy.eviction_rules import NO_CLAIM, NO_CLUSTER, NODE_CLAIM, decide_eviction, node_claim
from webhook.review import Stage, handle_review

CLASSES = StaticClassStore().snapshot()
OTHER_NODE = "the sidecar of node node-a may not change pod ns/web, which is not on its node"


@pytest.mark.parametrize(
    ("claim", "pod_node", "allowed", "message"),
    [
        ("node-a", "node-a", True, ""),
        ("node-a", "node-b", False, OTHER_NODE),
        ("node-a", "", False, OTHER_NODE),  # not scheduled: on no node, so not on the sidecar's
        ("node-a", None, True, ""),  # no such pod: the eviction itself answers 404
        ("", "node-a", False, NO_CLAIM),
        ("", None, False, NO_CLAIM),
        (
            "node-A",
            "node-a",
            False,
            "the sidecar of node node-A may not change pod ns/web, which is not on its node",
        ),
    ],
)
def test_decide_eviction(claim: str, pod_node: str | None, allowed: bool, message: str) -> None:
    decision = decide_eviction(claim, "ns", "web", pod_node)
    assert decision.allowed is allowed
    assert decision.message == message
    if not allowed:
        assert (decision.code, decision.reason) == (403, "Forbidden")


@pytest.mark.parametrize(
    ("extra", "claim"),
    [
        ({NODE_CLAIM: ["node-a"]}, "node-a"),
        ({NODE_CLAIM: ["node-a"], "authentication.kubernetes.io/pod-name": ["p"]}, "node-a"),
        ({}, ""),
        (None, ""),
        ({NODE_CLAIM: []}, ""),
        ({NODE_CLAIM: ["a", "b"]}, ""),
        ({NODE_CLAIM: "node-a"}, ""),
        ({NODE_CLAIM: [1]}, ""),
        (["node-a"], ""),
    ],
)
def test_node_claim(extra: Any, claim: str) -> None:
    assert node_claim(extra) == claim


class Pods:
    """A PodNodes of fixed answers, recording what was asked."""

    def __init__(self, nodes: dict[tuple[str, str], str]) -> None:
        self.nodes = nodes
        self.asked: list[tuple[str, str]] = []

    def node_of(self, namespace: str, name: str) -> str | None:
        self.asked.append((namespace, name))
        return self.nodes.get((namespace, name))


def eviction_review(
    name: str = "web", extra: Any = None, operation: str = "CREATE", **overrides: Any
) -> dict:
    user: dict[str, Any] = {"username": "system:serviceaccount:pw:pw-sidecar"}
    if extra is not None:
        user["extra"] = extra
    req = {
        "uid": "u-1",
        "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "subResource": "eviction",
        "operation": operation,
        "namespace": "ns",
        "name": name,
        "object": {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": "ns"},
        },
        "userInfo": user,
        **overrides,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


@pytest.mark.parametrize(
    ("name", "extra", "allowed", "message"),
    [
        ("web", {NODE_CLAIM: ["node-a"]}, True, ""),
        (
            "far",
            {NODE_CLAIM: ["node-a"]},
            False,
            "the sidecar of node node-a may not change pod ns/far, which is not on its node",
        ),
        ("gone", {NODE_CLAIM: ["node-a"]}, True, ""),
        ("web", None, False, NO_CLAIM),
        (
            "web",
            {NODE_CLAIM: ["node-b"]},
            False,
            "the sidecar of node node-b may not change pod ns/web, which is not on its node",
        ),
    ],
)
@pytest.mark.parametrize("stage", [Stage.VALIDATE, Stage.ADMIT])
def test_validate_decides_evictions_from_the_looked_up_node(
    name: str, extra: Any, allowed: bool, message: str, stage: Stage
) -> None:
    pods = Pods({("ns", "web"): "node-a", ("ns", "far"): "node-b"})
    response, _, _ = handle_review(eviction_review(name, extra), stage, CLASSES, pods=pods)
    assert response["response"]["allowed"] is allowed
    assert "patch" not in response["response"]
    if not allowed:
        assert response["response"]["status"] == {
            "status": "Failure",
            "code": 403,
            "reason": "Forbidden",
            "message": message,
        }
    assert pods.asked == ([("ns", name)] if extra else [])  # no claim: refused before any lookup


def test_the_schema_path_reads_the_claim_too() -> None:
    body = eviction_review("far", {NODE_CLAIM: ["node-a"]})
    body["request"]["dryRun"] = "true"  # coerced by the schemas, refused by the fast path
    _, request, decision = handle_review(body, Stage.VALIDATE, CLASSES, pods=Pods({("ns", "far"): "node-b"}))
    assert request.node_claim == "node-a" and not decision.allowed


def test_without_a_cluster_validate_refuses_evictions() -> None:
    _, _, decision = handle_review(eviction_review(extra={NODE_CLAIM: ["node-a"]}), Stage.VALIDATE, CLASSES)
    assert (decision.allowed, decision.code, decision.message) == (False, 403, NO_CLUSTER)


@pytest.mark.parametrize("stage", [Stage.MUTATE])
def test_mutate_and_other_operations_leave_evictions_alone(stage: Stage) -> None:
    pods = Pods({})
    _, _, decision = handle_review(eviction_review("far", {NODE_CLAIM: ["x"]}), stage, CLASSES, pods=pods)
    assert decision.allowed and pods.asked == []
    _, _, decision = handle_review(
        eviction_review("far", {NODE_CLAIM: ["x"]}, operation="UPDATE"), Stage.VALIDATE, CLASSES, pods=pods
    )
    assert decision.allowed and pods.asked == []
