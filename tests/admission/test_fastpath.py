"""The fast type check never accepts what the marshmallow schemas reject, and reads the same request."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.review.fastpath import well_formed
from webhook.review.handler import MalformedReview, _load, parse_review

POD = {
    "metadata": {"name": "web", "namespace": "ns", "annotations": {"a": "b"}},
    "spec": {"priorityClassName": "high", "priority": 5, "preemptionPolicy": "Never", "containers": []},
}
CLASS = {
    "metadata": {"name": "high"},
    "value": 10,
    "globalDefault": False,
    "preemptionPolicy": "Never",
    "description": "d",
}
POD_GROUP = {
    "metadata": {"name": "gang", "namespace": "ns"},
    "spec": {"priorityClassName": "high", "priority": 10, "schedulingPolicy": {"basic": {}}},
}
RESOURCES = {
    "pods": ({"group": "", "version": "v1", "resource": "pods"}, POD),
    "podgroups": ({"group": "scheduling.k8s.io", "version": "v1beta1", "resource": "podgroups"}, POD_GROUP),
    "priorityclasses": (
        {"group": "scheduling.k8s.io", "version": "v1", "resource": "priorityclasses"},
        CLASS,
    ),
}

# Every place a field we read can be, as a path into the review.
PATHS = [
    ("apiVersion",),
    ("kind",),
    ("request",),
    ("request", "uid"),
    ("request", "resource"),
    ("request", "resource", "group"),
    ("request", "resource", "version"),
    ("request", "resource", "resource"),
    ("request", "operation"),
    ("request", "subResource"),
    ("request", "namespace"),
    ("request", "name"),
    ("request", "dryRun"),
    ("request", "object"),
    ("request", "oldObject"),
    ("request", "object", "metadata"),
    ("request", "object", "metadata", "name"),
    ("request", "object", "metadata", "generateName"),
    ("request", "object", "metadata", "annotations"),
    ("request", "object", "metadata", "annotations", "a"),
    ("request", "object", "spec"),
    ("request", "object", "spec", "priority"),
    ("request", "object", "spec", "priorityClassName"),
    ("request", "object", "spec", "preemptionPolicy"),
    ("request", "object", "value"),
    ("request", "object", "globalDefault"),
    ("request", "object", "description"),
    ("request", "oldObject", "spec", "priority"),
    ("request", "oldObject", "value"),
]
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.sampled_from(["", "CREATE", "UPDATE", "admission.k8s.io/v1", "AdmissionReview", "true", "1", "pods"]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
    st.just("<absent>"),
)


def review(resource: str, operation: str) -> dict:
    gvr, obj = RESOURCES[resource]
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u",
            "resource": dict(gvr),
            "operation": operation,
            "namespace": "ns",
            "name": "web",
            "object": copy.deepcopy(obj),
            "oldObject": copy.deepcopy(obj),
            "dryRun": False,
        },
    }


def mutate(body: dict, path: tuple[str, ...], value) -> None:
    target = body
    for key in path[:-1]:
        if not isinstance(target, dict) or not isinstance(target.get(key), dict):
            return
        target = target[key]
    if not isinstance(target, dict):
        return
    if value == "<absent>":
        target.pop(path[-1], None)
    else:
        target[path[-1]] = value


@settings(max_examples=1500, deadline=None)
@given(
    st.sampled_from(sorted(RESOURCES)),
    st.sampled_from(["CREATE", "UPDATE", "DELETE"]),
    st.lists(st.tuples(st.sampled_from(PATHS), VALUES), max_size=3),
)
def test_fast_acceptance_implies_schema_acceptance(resource, operation, changes):
    body = review(resource, operation)
    for path, value in changes:
        mutate(body, path, value)
    if not well_formed(body):
        return
    try:
        api_version, req = _load(copy.deepcopy(body))
    except MalformedReview as err:
        raise AssertionError(f"fast path accepted what the schema rejects: {err}") from None
    _, uid, request = parse_review(body)
    assert (api_version, uid) == (body["apiVersion"], req["uid"])
    assert request.operation == req["operation"] and request.object == req["object"]
    assert (request.namespace, request.name, request.sub_resource) == (
        req["namespace"],
        req["name"],
        req["subResource"],
    )


def test_well_formed_reviews_take_the_fast_path():
    for resource in RESOURCES:
        for operation in ("CREATE", "UPDATE", "DELETE"):
            assert well_formed(review(resource, operation))
