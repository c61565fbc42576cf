"""Workload CREATE/UPDATE through the server's code path: a warning by default, a denial when opted in."""

from __future__ import annotations

import copy

import pytest

from tests.admission.test_review_manifests import workload
from webhook.objects.workloads import WORKLOADS
from webhook.policy.class_model import PriorityClass, StaticClassStore
from webhook.policy.pod_rules import PodOptions
from webhook.review import Stage, handle_review

CLASSES = StaticClassStore([PriorityClass(name="high", value=1000)]).snapshot()
DENY = PodOptions(deny_unadmittable_workloads=True)
GOLD = {"spec": {"priorityClassName": "gold", "containers": [{"name": "c", "image": "nginx"}]}}
HIGH = {"spec": {"priorityClassName": "high", "containers": [{"name": "c", "image": "nginx"}]}}
MESSAGE = "pods created by {kind} shop/web will be forbidden: no PriorityClass with name gold was found"


def review(kind: str, obj: dict, operation: str = "CREATE", old: dict | None = None, sub: str = "") -> dict:
    group, resource, _ = WORKLOADS[kind]
    request = {
        "uid": "u-1",
        "kind": {"group": group, "version": "v1", "kind": kind},
        "resource": {"group": group, "version": "v1", "resource": resource},
        "operation": operation,
        "namespace": "shop",
        "name": "web",
        "object": obj,
        "oldObject": old,
    }
    if sub:
        request["subResource"] = sub
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


@pytest.mark.parametrize("kind", sorted(WORKLOADS))
@pytest.mark.parametrize("stage", [Stage.VALIDATE, Stage.ADMIT])
def test_a_workload_whose_pods_would_be_forbidden_is_warned_about(kind, stage):
    response, _, _ = handle_review(review(kind, workload(kind, GOLD)), stage, CLASSES)
    assert response["response"]["allowed"] is True
    assert response["response"]["warnings"] == [MESSAGE.format(kind=kind)]
    assert "patch" not in response["response"], "a workload is never mutated"


@pytest.mark.parametrize("kind", sorted(WORKLOADS))
def test_with_the_option_it_is_denied(kind):
    response, _, _ = handle_review(review(kind, workload(kind, GOLD)), Stage.VALIDATE, CLASSES, DENY)
    answer = response["response"]
    assert answer["allowed"] is False
    assert answer["status"] == {
        "status": "Failure",
        "code": 403,
        "reason": "Forbidden",
        "message": MESSAGE.format(kind=kind),
    }


@pytest.mark.parametrize("kind", sorted(WORKLOADS))
def test_a_workload_whose_pods_would_be_admitted_passes_silently(kind):
    response, _, _ = handle_review(review(kind, workload(kind, HIGH)), Stage.VALIDATE, CLASSES, DENY)
    assert response["response"] == {"uid": "u-1", "allowed": True}


def test_the_mutating_endpoint_leaves_workloads_alone():
    response, _, _ = handle_review(
        review("Deployment", workload("Deployment", GOLD)), Stage.MUTATE, CLASSES, DENY
    )
    assert response["response"] == {"uid": "u-1", "allowed": True}


def test_an_update_that_leaves_the_pods_priority_alone_is_not_blocked():
    """A class deleted after the rollout must not block scaling or relabelling the Deployment."""
    old = workload("Deployment", GOLD)
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 5
    new["metadata"]["labels"] = {"team": "a"}
    response, _, _ = handle_review(review("Deployment", new, "UPDATE", old), Stage.VALIDATE, CLASSES, DENY)
    assert response["response"]["allowed"] is True and "warnings" not in response["response"]
    changed = workload("Deployment", HIGH)
    response, _, _ = handle_review(
        review("Deployment", new, "UPDATE", changed), Stage.VALIDATE, CLASSES, DENY
    )
    assert response["response"]["allowed"] is False


@pytest.mark.parametrize(
    "obj",
    [
        {
            "kind": "Deployment",
            "spec": {"template": {"spec": {"priority": "high"}}},
        },  # wrong type: no opinion
        {"kind": "Deployment", "spec": {"template": "x"}},
        {"kind": "Deployment", "spec": []},
        {"kind": "Deployment"},
    ],
)
def test_shapes_the_api_server_would_refuse_itself_get_no_opinion(obj):
    response, _, _ = handle_review(review("Deployment", obj), Stage.VALIDATE, CLASSES, DENY)
    assert response["response"] == {"uid": "u-1", "allowed": True}


def test_subresources_and_deletes_are_not_checked():
    obj = workload("Deployment", GOLD)
    for body in (review("Deployment", obj, sub="scale"), review("Deployment", None, "DELETE", obj)):
        response, _, _ = handle_review(body, Stage.VALIDATE, CLASSES, DENY)
        assert response["response"]["allowed"] is True
