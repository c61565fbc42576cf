"""PodGroup priority at admission: upstream's TestAdmitPodGroup as our table, through the server's path.

Upstream: plugin/pkg/admission/priority/admission_test.go, `TestAdmitPodGroup` (PodGroup in
scheduling.k8s.io/v1alpha2, namespace `default`, name `test-podgroup`, `schedulingPolicy.basic: {}`).
Each row runs in every API version the cluster may serve PodGroups in (v1alpha2 in 1.36, v1beta1 in
1.37). Upstream's row "feature gate disabled, skips validation" is the chart's switch: with
`admission.podGroups.enabled=false` (the default) no PodGroup reaches the webhook
(tests/chart/test_webhooks.py); the webhook itself always resolves what it is sent.
"""

from __future__ import annotations

import base64
import copy
import json

import jsonpatch
import pytest

from webhook.k8s import POD_GROUP_VERSIONS
from webhook.policy.class_model import PriorityClass, StaticClassStore
from webhook.review import Stage, handle_review

DEFAULT1 = PriorityClass(name="default1", value=1000, global_default=True)
NONDEFAULT1 = PriorityClass(name="nondefault1", value=2000, description="Just a test priority class")
BOTH = (DEFAULT1, NONDEFAULT1)


def pod_group(class_name: str = "", priority: int | None = None) -> dict:
    spec: dict = {"schedulingPolicy": {"basic": {}}}
    if class_name:
        spec["priorityClassName"] = class_name
    if priority is not None:
        spec["priority"] = priority
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "test-podgroup", "namespace": "default"},
        "spec": spec,
    }


def review(obj: dict, operation: str, version: str) -> dict:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "pg-1",
            "kind": {"group": "scheduling.k8s.io", "version": version, "kind": "PodGroup"},
            "resource": {"group": "scheduling.k8s.io", "version": version, "resource": "podgroups"},
            "operation": operation,
            "namespace": "default",
            "name": "",
            "object": obj,
            "oldObject": copy.deepcopy(obj) if operation == "UPDATE" else None,
        },
    }


FORBIDDEN = 'podgroups.scheduling.k8s.io "test-podgroup" is forbidden: '

# (name, classes, pod group, operation, expected (priorityClassName, priority) | None unchanged, denial)
ADMIT_POD_GROUP = [
    (
        "pod group with empty priorityClassName, accepted and set to global default",
        BOTH,
        pod_group(""),
        "CREATE",
        ("default1", 1000),
        None,
    ),
    (
        "pod group with explicit priorityClassName, accepted",
        BOTH,
        pod_group("nondefault1"),
        "CREATE",
        ("nondefault1", 2000),
        None,
    ),
    (
        "pod group with non-existent priorityClassName, rejected",
        BOTH,
        pod_group("non-existent"),
        "CREATE",
        None,
        "no PriorityClass with name non-existent was found",
    ),
    (
        "pod group with no priorityClassName and no global default, accepted and priority should be zero",
        (NONDEFAULT1,),
        pod_group(""),
        "CREATE",
        (None, 0),
        None,
    ),
    (
        "pod group create with pre-set Priority matching computed value, accepted",
        BOTH,
        pod_group("nondefault1", 2000),
        "CREATE",
        ("nondefault1", 2000),
        None,
    ),
    (
        "pod group create with pre-set Priority not matching computed value, rejected",
        BOTH,
        pod_group("nondefault1", 9999),
        "CREATE",
        None,
        "the integer value of priority (9999) must not be provided in pod group spec; "
        "priority admission controller computed 2000 from the given PriorityClass name",
    ),
    (
        "update operation is a no-op, admission does not mutate pod group on update",
        BOTH,
        pod_group("non-existent"),
        "UPDATE",
        None,
        None,
    ),
]


@pytest.mark.parametrize("version", POD_GROUP_VERSIONS)
@pytest.mark.parametrize("stage", [Stage.MUTATE, Stage.ADMIT])
@pytest.mark.parametrize(
    ("classes", "group", "operation", "expected", "denial"),
    [pytest.param(*row[1:], id=row[0]) for row in ADMIT_POD_GROUP],
)
def test_admit_pod_group(version, stage, classes, group, operation, expected, denial):
    store = StaticClassStore(classes).snapshot()
    response, _, _ = handle_review(review(group, operation, version), stage, store)
    answer = response["response"]
    assert answer["uid"] == "pg-1"
    if denial is not None:
        assert answer["allowed"] is False
        assert answer["status"] == {
            "status": "Failure",
            "code": 403,
            "reason": "Forbidden",
            "message": FORBIDDEN + denial,
        }
        return
    assert answer["allowed"] is True
    if expected is None:
        assert "patch" not in answer, "an UPDATE leaves the PodGroup as it is"
        return
    patch = json.loads(base64.b64decode(answer["patch"])) if "patch" in answer else []
    stored = jsonpatch.apply_patch(group, patch)
    assert (stored["spec"].get("priorityClassName"), stored["spec"]["priority"]) == expected
    assert "preemptionPolicy" not in stored["spec"], "PodGroup's preemptionPolicy is a separate alpha field"
    again, _, _ = handle_review(review(stored, operation, version), stage, store)
    assert "patch" not in again["response"], "the mutation is idempotent (reinvocationPolicy IfNeeded)"


def test_a_system_class_resolves_as_for_pods():
    store = StaticClassStore().snapshot()
    response, _, _ = handle_review(
        review(pod_group("system-cluster-critical"), "CREATE", "v1beta1"), Stage.MUTATE, store
    )
    patch = json.loads(base64.b64decode(response["response"]["patch"]))
    assert patch == [{"op": "add", "path": "/spec/priority", "value": 2_000_000_000}]


def test_the_status_subresource_is_left_alone():
    body = review(pod_group("non-existent"), "CREATE", "v1beta1")
    body["request"]["subResource"] = "status"
    response, _, _ = handle_review(body, Stage.MUTATE, StaticClassStore(BOTH).snapshot())
    assert response["response"]["allowed"] is True and "patch" not in response["response"]


def test_a_pod_group_without_spec_gets_one():
    group = pod_group()
    del group["spec"]
    response, _, _ = handle_review(
        review(group, "CREATE", "v1alpha2"), Stage.MUTATE, StaticClassStore(BOTH).snapshot()
    )
    patch = json.loads(base64.b64decode(response["response"]["patch"]))
    assert patch == [
        {"op": "add", "path": "/spec", "value": {"priorityClassName": "default1", "priority": 1000}}
    ]


@pytest.mark.parametrize(
    ("field", "value"), [("priority", "5"), ("priority", 2**31), ("priorityClassName", 7)]
)
def test_a_malformed_pod_group_is_a_bad_request(field, value):
    from webhook.review import MalformedReview

    group = pod_group("nondefault1")
    group["spec"][field] = value
    with pytest.raises(MalformedReview, match=rf"^request\.object\.spec\.{field}: "):
        handle_review(review(group, "CREATE", "v1beta1"), Stage.MUTATE, StaticClassStore(BOTH).snapshot())
