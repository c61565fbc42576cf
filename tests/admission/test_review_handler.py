"""The AdmissionReview envelope: versions, uid echo, patches, and one-line errors for malformed bodies."""

from __future__ import annotations

import base64
import copy
import json

import jsonpatch
import pytest

from webhook.policy.class_model import StaticClassStore
from webhook.review import MalformedReview, Stage, handle_review

CLASSES = StaticClassStore().snapshot()


def review(api_version="admission.k8s.io/v1", **request):
    req = {
        "uid": "0df28fbd-5f5f-11e8-bc74-36e6bb280816",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "operation": "CREATE",
        "namespace": "default",
        "object": {"metadata": {"name": "web"}, "spec": {"containers": [{"name": "c"}]}},
        "oldObject": None,
        "dryRun": False,
        "userInfo": {"username": "admin"},
    }
    req.update(request)
    return {"apiVersion": api_version, "kind": "AdmissionReview", "request": req}


@pytest.mark.parametrize("api_version", ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"])
def test_answers_in_the_request_version_with_uid(api_version):
    body = review(api_version)
    response, _, _ = handle_review(body, Stage.MUTATE, CLASSES)
    assert response["apiVersion"] == api_version and response["kind"] == "AdmissionReview"
    assert response["response"]["uid"] == body["request"]["uid"]
    assert response["response"]["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["response"]["patch"]))
    pod = jsonpatch.apply_patch(body["request"]["object"], patch)
    assert pod["spec"]["priority"] == 0 and pod["spec"]["preemptionPolicy"] == "PreemptLowerPriority"


def test_validating_answers_never_carry_a_patch():
    response, _, _ = handle_review(review(), Stage.VALIDATE, CLASSES)
    assert "patch" not in response["response"] and "patchType" not in response["response"]


def test_denial_status():
    body = review(object={"metadata": {"name": "web"}, "spec": {"priorityClassName": "gold"}})
    response, _, _ = handle_review(body, Stage.MUTATE, CLASSES)
    assert response["response"]["allowed"] is False
    assert response["response"]["status"] == {
        "status": "Failure",
        "code": 403,
        "reason": "Forbidden",
        "message": 'pods "web" is forbidden: no PriorityClass with name gold was found',
    }


def test_admit_stage_is_mutate_then_validate():
    body = review(object={"metadata": {"name": "web"}, "spec": {}})
    mutated, _, _ = handle_review(body, Stage.MUTATE, CLASSES)
    admitted, _, _ = handle_review(body, Stage.ADMIT, CLASSES)
    assert admitted == mutated


def test_other_resources_are_allowed_untouched():
    body = review(resource={"group": "apps", "version": "v1", "resource": "deployments"}, object={"spec": 1})
    response, _, _ = handle_review(body, Stage.MUTATE, CLASSES)
    assert response["response"] == {"uid": body["request"]["uid"], "allowed": True}


def without(path):
    body = review()
    *parents, last = path
    target = body
    for key in parents:
        target = target[key]
    del target[last]
    return body


def replaced(path, value):
    body = review()
    *parents, last = path
    target = body
    for key in parents:
        target = target[key]
    target[last] = value
    return body


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "body: must be a JSON object (an AdmissionReview)"),
        ("review", "body: must be a JSON object (an AdmissionReview)"),
        ({}, "apiVersion: Missing data for required field."),
        (replaced(["apiVersion"], "admission.k8s.io/v2"), "apiVersion: Must be one of"),
        (replaced(["kind"], "Pod"), "kind: Must be equal to AdmissionReview."),
        (without(["request"]), "request: Missing data for required field."),
        (replaced(["request"], None), "request: Field may not be null."),
        (without(["request", "uid"]), "request.uid: Missing data for required field."),
        (replaced(["request", "uid"], ""), "request.uid: Shorter than minimum length 1."),
        (replaced(["request", "uid"], 7), "request.uid: Not a valid string."),
        (replaced(["request", "operation"], "PATCH"), "request.operation: Must be one of"),
        (without(["request", "resource"]), "request.resource: Missing data for required field."),
        (replaced(["request", "object"], []), "request.object: Not a valid mapping type."),
        (replaced(["request", "dryRun"], "maybe"), "request.dryRun: Not a valid boolean."),
        (
            replaced(["request", "object"], {"spec": {"priority": "high"}}),
            "request.object.spec.priority: Not a valid integer.",
        ),
        (
            replaced(["request", "object"], {"spec": {"priority": True}}),
            "request.object.spec.priority: Not a valid integer.",
        ),
        (
            replaced(["request", "object"], {"spec": {"priority": 1.5}}),
            "request.object.spec.priority: Not a valid integer.",
        ),
        (
            replaced(["request", "object"], {"spec": {"priority": 2**31}}),
            "request.object.spec.priority: Must be greater than or equal to",
        ),
        (
            replaced(["request", "object"], {"spec": {"priorityClassName": 3}}),
            "request.object.spec.priorityClassName: Not a valid string.",
        ),
        (replaced(["request", "object"], {"spec": []}), "request.object.spec: Invalid input type."),
        (
            replaced(["request", "object"], {"metadata": {"annotations": {"a": 1}}}),
            "request.object.metadata.annotations.a.value: Not a valid string.",
        ),
    ],
)
def test_malformed_reviews_name_the_field(body, message):
    with pytest.raises(MalformedReview) as err:
        handle_review(copy.deepcopy(body), Stage.MUTATE, CLASSES)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_priority_class_object_types_are_checked():
    body = review(
        resource={"group": "scheduling.k8s.io", "version": "v1", "resource": "priorityclasses"},
        object={"metadata": {"name": "x"}, "value": "10"},
    )
    with pytest.raises(MalformedReview, match=r"^request.object.value: Not a valid integer."):
        handle_review(body, Stage.VALIDATE, CLASSES)


def test_subresource_objects_are_not_inspected():
    body = review(subResource="status", object={"spec": {"priority": "not ours to judge"}})
    response, _, _ = handle_review(body, Stage.MUTATE, CLASSES)
    assert response["response"]["allowed"] is True and "patch" not in response["response"]
