"""`review` on manifests as users keep them: workloads, other kinds, API defaulting and validation."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.admission.test_review_cli import CLASSES, run, write
from webhook.objects.workloads import WORKLOADS, pod_template


@pytest.fixture
def classes(tmp_path):
    return write(tmp_path, "classes.yaml", CLASSES)


TEMPLATE = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"priorityClassName": "high", "containers": [{"name": "c", "image": "nginx"}]},
}


def workload(kind: str, template: dict, name: str = "web", namespace: str | None = "shop") -> dict:
    group = WORKLOADS[kind][0]
    api_version = f"{group}/v1" if group else "v1"
    meta = {"name": name} | ({"namespace": namespace} if namespace else {})
    holder: dict = {"template": template}
    if kind == "PodTemplate":
        return {"apiVersion": api_version, "kind": kind, "metadata": meta, **holder}
    if kind == "CronJob":
        return {
            "apiVersion": api_version,
            "kind": kind,
            "metadata": meta,
            "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": holder}},
        }
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": {"replicas": 1, **holder}}


@pytest.mark.parametrize("kind", sorted(WORKLOADS))
def test_a_workload_is_printed_with_the_priority_its_pods_will_carry(tmp_path, classes, capsys, kind):
    obj = workload(kind, TEMPLATE)
    code, out, err = run(
        ["review", write(tmp_path, "w.yaml", yaml.safe_dump(obj)), "--classes", classes, "-o", "json"], capsys
    )
    assert (code, err) == (0, "")
    printed = json.loads(out)
    spec = pod_template(printed, kind)["spec"]
    assert (spec["priority"], spec["preemptionPolicy"]) == (1000, "PreemptLowerPriority")
    # everything else is the input, unchanged
    assert pod_template(printed, kind)["metadata"] == TEMPLATE["metadata"]
    assert printed["metadata"] == obj["metadata"]


@pytest.mark.parametrize("kind", sorted(WORKLOADS))
def test_a_workload_whose_pods_would_be_forbidden_exits_1_with_the_controllers_denial(
    tmp_path, classes, capsys, kind
):
    obj = workload(kind, {"spec": {"priorityClassName": "gold", "containers": []}})
    code, out, err = run(
        ["review", write(tmp_path, "w.yaml", yaml.safe_dump(obj)), "--classes", classes], capsys
    )
    assert (code, out) == (1, "")
    assert err == (
        f"Error from server (Forbidden): pods created by {kind} shop/web will be forbidden: "
        "no PriorityClass with name gold was found\n"
    )


def test_a_workload_without_a_class_takes_the_global_default_and_the_namespace_from_n(
    tmp_path, classes, capsys
):
    obj = workload("Deployment", {"spec": {"containers": []}}, namespace=None)
    code, out, _ = run(
        ["review", write(tmp_path, "d.yaml", yaml.safe_dump(obj)), "--classes", classes, "-n", "team"], capsys
    )
    spec = yaml.safe_load(out)["spec"]["template"]["spec"]
    assert code == 0 and (spec["priorityClassName"], spec["priority"]) == ("low", 10)


def test_the_legacy_annotation_is_honoured_in_a_kube_system_daemonset(tmp_path, capsys):
    template = {
        "metadata": {"annotations": {"scheduler.alpha.kubernetes.io/critical-pod": ""}},
        "spec": {"containers": []},
    }
    obj = workload("DaemonSet", template, namespace="kube-system")
    code, out, err = run(["review", write(tmp_path, "ds.yaml", yaml.safe_dump(obj))], capsys)
    spec = yaml.safe_load(out)["spec"]["template"]["spec"]
    assert code == 0 and spec["priorityClassName"] == "system-cluster-critical" and "Warning:" in err


def test_a_type_error_in_a_template_names_the_field_in_the_workload(tmp_path, capsys):
    obj = workload("Deployment", {"spec": {"priority": "high"}})
    code, _, err = run(["review", write(tmp_path, "d.yaml", yaml.safe_dump(obj))], capsys)
    assert code == 2 and err.rstrip().endswith(
        "document 1: spec.template.spec.priority: Not a valid integer."
    )


def test_other_kinds_pass_through_unchanged_with_one_short_note(tmp_path, classes, capsys):
    docs = [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web"},
            "spec": {"ports": [{"port": 80}]},
        },
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "b"}},
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": "gvisor"},
            "handler": "runsc",
        },
        workload("Deployment", TEMPLATE),
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "other"}},
    ]
    code, out, err = run(
        ["review", write(tmp_path, "all.yaml", yaml.safe_dump_all(docs)), "--classes", classes, "-o", "json"],
        capsys,
    )
    assert code == 0
    items = json.loads(out)["items"]
    assert [i["kind"] for i in items] == ["Service", "ConfigMap", "RuntimeClass", "Deployment", "Service"]
    assert items[:3] == docs[:3] and items[4] == docs[4]
    assert err == (
        "note: 4 object(s) passed through unchanged, priority admission does not apply to their kind "
        "(ConfigMap, RuntimeClass, Service)\n"
    )


def test_a_priority_class_is_printed_defaulted(tmp_path, capsys):
    pc = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "batch"},
        "value": 100,
    }
    code, out, _ = run(["review", write(tmp_path, "pc.yaml", yaml.safe_dump(pc))], capsys)
    assert code == 0 and yaml.safe_load(out) == pc | {"preemptionPolicy": "PreemptLowerPriority"}


def test_a_pod_is_printed_with_requests_defaulted_from_limits(tmp_path, capsys):
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "cuda",
                    "resources": {"limits": {"nvidia.com/gpu": 1, "cpu": "2"}, "requests": {"cpu": "1"}},
                }
            ]
        },
    }
    code, out, _ = run(["review", write(tmp_path, "p.yaml", yaml.safe_dump(pod))], capsys)
    resources = yaml.safe_load(out)["spec"]["containers"][0]["resources"]
    assert code == 0 and resources["requests"] == {"cpu": "1", "nvidia.com/gpu": 1}


@pytest.mark.parametrize(
    ("metadata", "error"),
    [
        (
            {"name": "web", "namespace": "FILLED BY THE OPERATOR"},
            'Pod "web" is invalid: metadata.namespace: Invalid value: "FILLED BY THE OPERATOR": a lowercase RFC 1123 '
            "label must consist of lower case alphanumeric characters or '-', and must start and end with an "
            "alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        ),
        (
            {"name": "Web"},
            'Pod "Web" is invalid: metadata.name: Invalid value: "Web": a lowercase RFC 1123 subdomain must consist '
            "of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
            "character (e.g. 'example.com', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ),
        ({}, 'Pod "" is invalid: metadata.name: Required value: name or generateName is required'),
        (
            {"name": "web-", "namespace": "a.b"},
            'Pod "web-" is invalid: [metadata.name: Invalid value: "web-": a lowercase RFC 1123 subdomain must '
            "consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
            "character (e.g. 'example.com', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), metadata.namespace: Invalid "
            'value: "a.b": must not contain dots]',
        ),
    ],
)
def test_names_and_namespaces_are_validated_with_the_api_servers_message(tmp_path, capsys, metadata, error):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": []}}
    code, out, err = run(["review", write(tmp_path, "p.yaml", yaml.safe_dump(pod))], capsys)
    assert (code, out) == (1, "")
    assert err == f"The {error}\n"  # kubectl's line for a 422 Invalid


def test_generate_name_is_valid_with_a_trailing_dash(tmp_path, capsys):
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "web-"},
        "spec": {"containers": []},
    }
    code, out, err = run(["review", write(tmp_path, "p.yaml", yaml.safe_dump(pod))], capsys)
    assert (code, err) == (0, "") and yaml.safe_load(out)["spec"]["priority"] == 0


def test_a_raw_list_takes_its_item_kind_from_the_list_kind(tmp_path, capsys):
    raw = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClassList",
        "metadata": {},
        "items": [{"metadata": {"name": "batch"}, "value": 5}],
    }
    code, out, _ = run(["review", write(tmp_path, "raw.json", raw), "-o", "json"], capsys)
    assert code == 0
    assert json.loads(out) == {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "batch"},
        "value": 5,
        "preemptionPolicy": "PreemptLowerPriority",
    }


def test_a_raw_class_list_is_accepted_as_classes(tmp_path, capsys):
    raw = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClassList",
        "items": [{"metadata": {"name": "gold"}, "value": 7}],
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"priorityClassName": "gold"},
    }
    code, out, err = run(
        ["review", write(tmp_path, "p.json", pod), "--classes", write(tmp_path, "c.json", raw)], capsys
    )
    assert code == 0, err
    assert yaml.safe_load(out)["spec"]["priority"] == 7


@pytest.mark.parametrize("content", ["", "\n", "---\n", "# nothing\n"])
def test_empty_input_is_an_error(tmp_path, capsys, content):
    code, out, err = run(["review", write(tmp_path, "e.yaml", content)], capsys)
    assert (code, out) == (2, "")
    assert (
        err == f"priority-webhook review: error: {tmp_path / 'e.yaml'}: empty input: no objects to review\n"
    )
