"""webhook.objects: the API server's defaulting and name validation, for offline input."""

from __future__ import annotations

import copy
import re

import pytest

from webhook.files.documents import parse_documents
from webhook.objects.defaults import default_pod, default_priority_class, pod_to_create, requests_from_limits
from webhook.objects.names import (
    dns1123_label,
    dns1123_subdomain,
    generated_name,
    invalid_object,
    invalid_pod,
    object_meta_errors,
)

LABEL_ERR = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


@pytest.mark.parametrize(
    ("value", "errors"),
    [
        ("default", []),
        ("a", []),
        ("0-a", []),
        ("a" * 63, []),
        ("a" * 64, ["must be no more than 63 characters"]),
        ("a.b", ["must not contain dots"]),  # a valid subdomain: apimachinery v1.33 names the dots
        ("a" * 40 + "." + "a" * 30, ["must be no more than 63 characters", "must not contain dots"]),
        ("a..b", [LABEL_ERR]),
        ("A.b", [LABEL_ERR]),
        ("-a", [LABEL_ERR]),
        ("a-", [LABEL_ERR]),
        ("FILLED BY THE OPERATOR", [LABEL_ERR]),
        ("", [LABEL_ERR]),
    ],
)
def test_dns1123_label(value, errors):
    assert dns1123_label(value) == errors


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("example.com", True),
        ("a-b.c", True),
        ("a" * 253, True),
        ("a" * 254, False),
        ("a..b", False),
        ("A", False),
        ("a_b", False),
        (".a", False),
    ],
)
def test_dns1123_subdomain(value, ok):
    assert (dns1123_subdomain(value) == []) is ok


@pytest.mark.parametrize(
    ("meta", "namespaced", "fields"),
    [
        ({"name": "web", "namespace": "shop"}, True, []),
        ({"generateName": "web-"}, True, []),  # a trailing dash is fine in a prefix
        ({"generateName": "Web-"}, True, ["metadata.generateName"]),
        ({"name": "web-"}, True, ["metadata.name"]),
        ({}, True, ["metadata.name"]),
        ({"name": "x", "namespace": "a b"}, True, ["metadata.namespace"]),
        ({"name": "x", "namespace": "shop"}, False, ["metadata.namespace"]),  # cluster-scoped
    ],
)
def test_object_meta_errors_name_the_field(meta, namespaced, fields):
    errors = object_meta_errors({"metadata": meta}, namespaced=namespaced)
    assert [e.split(":", 1)[0] for e in errors] == fields


def test_a_generate_name_object_is_named_before_it_is_validated():
    message = invalid_object("Pod", {"metadata": {"generateName": "Web-"}}, namespaced=False)
    name = re.match(r'Pod "(Web-[bcdfghjklmnpqrstvwxz2456789]{5})" is invalid: \[', message).group(1)
    assert 'metadata.generateName: Invalid value: "Web-": ' in message
    assert f'metadata.name: Invalid value: "{name}": ' in message
    assert len(generated_name("a" * 100)) == 63


def test_invalid_pod_defaults_the_namespace():
    assert invalid_pod({"metadata": {"name": "p"}}) is None
    assert invalid_pod({"metadata": {"name": "p", "namespace": "X"}}).startswith('Pod "p" is invalid: ')


@pytest.mark.parametrize(
    ("resources", "requests"),
    [
        ({"limits": {"nvidia.com/gpu": "1"}}, {"nvidia.com/gpu": "1"}),
        ({"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "1"}}, {"cpu": "1", "memory": "1Gi"}),
        ({"requests": {"cpu": "1"}}, {"cpu": "1"}),
        ({}, None),
        ({"limits": {}}, None),
        ({"limits": "x"}, None),  # a wrong shape is the caller's checks' business
    ],
)
def test_requests_from_limits(resources, requests):
    before = copy.deepcopy(resources)
    assert requests_from_limits(resources) == requests
    assert resources == before


def test_default_pod_copies_limits_into_requests_for_containers_and_init_containers_only():
    pod = {
        "metadata": {"name": "p"},
        "spec": {
            "initContainers": [{"name": "i", "resources": {"limits": {"cpu": "1"}}}],
            "containers": [{"name": "c", "resources": {"limits": {"example.com/fpga": 2}}}, "junk"],
        },
    }
    before = copy.deepcopy(pod)
    got = default_pod(pod)
    assert pod == before, "the input is never changed"
    assert got["spec"]["initContainers"][0]["resources"]["requests"] == {"cpu": "1"}
    assert got["spec"]["containers"][0]["resources"]["requests"] == {"example.com/fpga": 2}
    assert got["spec"]["containers"][1] == "junk"


def test_pod_level_requests_default_from_the_containers_then_from_the_limits():
    pod = {
        "spec": {
            "resources": {"limits": {"cpu": "4", "memory": "1Gi", "example.com/x": "1"}},
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        }
    }
    assert default_pod(pod)["spec"]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}


def test_host_network_pods_get_host_ports():
    pod = {"spec": {"hostNetwork": True, "containers": [{"name": "c", "ports": [{"containerPort": 53}]}]}}
    assert default_pod(pod)["spec"]["containers"][0]["ports"] == [{"containerPort": 53, "hostPort": 53}]
    pod["spec"]["hostNetwork"] = False
    assert default_pod(pod)["spec"]["containers"][0]["ports"] == [{"containerPort": 53}]


def test_priority_class_preemption_policy_default():
    assert default_priority_class({"value": 1})["preemptionPolicy"] == "PreemptLowerPriority"
    assert default_priority_class({"value": 1, "preemptionPolicy": "Never"})["preemptionPolicy"] == "Never"


def test_pod_to_create_names_a_generate_name_pod_by_its_prefix():
    assert pod_to_create({"metadata": {"generateName": "job-"}, "spec": {}})["metadata"]["name"] == "job-"
    assert pod_to_create({"metadata": {"name": "a", "generateName": "job-"}})["metadata"]["name"] == "a"


def test_raw_lists_take_their_item_kind_and_api_version_from_the_list():
    text = (
        '{"kind": "PodList", "apiVersion": "v1", "items": [{"metadata": {"name": "a"}}, '
        '{"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "b"}}]}'
    )
    assert parse_documents(text, "f") == [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}},
        {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "b"}},
    ]
    # a v1 List's items keep what they have (kubectl always gives them a kind)
    assert parse_documents('{"kind": "List", "items": [{"metadata": {}}]}', "f") == [{"metadata": {}}]
