"""`priority-webhook review`: objects, AdmissionReviews, Lists, exit codes and one-line errors."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import textwrap

import jsonpatch
import pytest
import yaml

from webhook.cli import main

CLASSES = textwrap.dedent("""\
    apiVersion: scheduling.k8s.io/v1
    kind: PriorityClass
    metadata: {name: high}
    value: 1000
    ---
    apiVersion: scheduling.k8s.io/v1
    kind: PriorityClass
    metadata: {name: low}
    value: 10
    globalDefault: true
    preemptionPolicy: Never
""")

# What `kubectl create -f pod.yaml --dry-run=client -o json` prints.
KUBECTL_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"creationTimestamp": None, "name": "web", "namespace": "shop"},
    "spec": {
        "containers": [{"image": "nginx", "name": "web", "resources": {}}],
        "dnsPolicy": "ClusterFirst",
        "restartPolicy": "Always",
        "priorityClassName": "high",
    },
    "status": {},
}


@pytest.fixture
def classes(tmp_path):
    path = tmp_path / "classes.yaml"
    path.write_text(CLASSES)
    return str(path)


def write(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def run(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_kubectl_dry_run_pod_is_printed_mutated(tmp_path, classes, capsys):
    code, out, err = run(
        ["review", write(tmp_path, "pod.json", KUBECTL_POD), "--classes", classes, "-o", "json"], capsys
    )
    assert code == 0, err
    pod = json.loads(out)
    assert pod["spec"]["priority"] == 1000 and pod["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    assert pod["metadata"] == KUBECTL_POD["metadata"] and pod["status"] == {}


def test_default_class_from_classes_file(tmp_path, classes, capsys):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "spec": {"containers": []}}
    code, out, _ = run(
        ["review", write(tmp_path, "p.yaml", yaml.safe_dump(pod)), "--classes", classes], capsys
    )
    spec = yaml.safe_load(out)["spec"]
    assert code == 0
    assert (spec["priorityClassName"], spec["priority"], spec["preemptionPolicy"]) == ("low", 10, "Never")


def test_several_documents_print_a_list_in_order_and_denials_exit_1(tmp_path, classes, capsys):
    docs = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "one"},
            "spec": {"priorityClassName": "high"},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "bad"},
            "spec": {"priorityClassName": "gold"},
        },
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "mid"},
            "value": 5,
        },
    ]
    path = write(tmp_path, "many.yaml", yaml.safe_dump_all(docs))
    code, out, err = run(["review", path, "--classes", classes, "-o", "json"], capsys)
    assert code == 1
    assert (
        err.strip()
        == 'Error from server (Forbidden): pods "bad" is forbidden: no PriorityClass with name gold '
        "was found"
    )
    listing = json.loads(out)
    assert listing["kind"] == "List" and [i["metadata"]["name"] for i in listing["items"]] == ["one", "mid"]


def test_v1_list_input(tmp_path, classes, capsys):
    listing = {"apiVersion": "v1", "kind": "List", "items": [KUBECTL_POD, KUBECTL_POD]}
    code, out, _ = run(
        ["review", write(tmp_path, "l.json", listing), "--classes", classes, "-o", "json"], capsys
    )
    assert code == 0 and len(json.loads(out)["items"]) == 2


def test_priority_class_denied(tmp_path, classes, capsys):
    pc = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "another"},
        "value": 1,
        "globalDefault": True,
    }
    code, out, err = run(["review", write(tmp_path, "pc.json", pc), "--classes", classes], capsys)
    assert code == 1 and out == ""
    assert "PriorityClass low is already marked as default. Only one default can exist" in err


@pytest.mark.parametrize("api_version", ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"])
def test_admission_review_in_response_out(tmp_path, classes, capsys, api_version):
    review = {
        "apiVersion": api_version,
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "namespace": "default",
            "object": {"metadata": {"name": "x"}, "spec": {"priorityClassName": "gold"}},
        },
    }
    code, out, _ = run(
        ["review", write(tmp_path, "r.json", review), "--classes", classes, "-o", "json"], capsys
    )
    response = json.loads(out)
    # a denied AdmissionReview is an answer, not a failed input
    assert code == 0
    assert response["apiVersion"] == api_version and response["response"]["uid"] == "u-1"
    assert response["response"]["allowed"] is False and response["response"]["status"]["code"] == 403


def test_admission_review_patch_matches_the_object_output(tmp_path, classes, capsys):
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "x", "namespace": "default"},
        "spec": {"priorityClassName": "high"},
    }
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u",
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "namespace": "default",
            "object": pod,
        },
    }
    path = write(tmp_path, "both.json", {"kind": "List", "items": [review, pod]})
    _, out, _ = run(["review", path, "--classes", classes, "-o", "json"], capsys)
    answer, mutated = json.loads(out)["items"]
    patch = json.loads(base64.b64decode(answer["response"]["patch"]))
    assert jsonpatch.apply_patch(pod, patch) == mutated


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("kind: [Deployment]\n", "document 1: kind: must be a non-empty string, got ['Deployment']"),
        ("metadata: {name: x}\n", "document 1: kind: must be a non-empty string, got None"),
        ("- 1\n", "document 1: expected a Kubernetes object, got int"),
        ("", "bad.yaml: empty input: no objects to review"),
        ("# only a comment\n---\n", "bad.yaml: empty input: no objects to review"),
        ("{not json", "not valid YAML or JSON"),
        ("kind: Pod\nspec: {priority: high}\n", "document 1: spec.priority: Not a valid integer."),
        (
            '{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {}}',
            "document 1: request.operation: Missing data for required field.",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, content, message):
    code, out, err = run(["review", write(tmp_path, "bad.yaml", content)], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err and "bad.yaml" in err


def test_missing_file(capsys):
    code, _, err = run(["review", "no-such-file.yaml"], capsys)
    assert code == 2 and "no-such-file.yaml: not found" in err


def test_bad_classes_file_names_file_and_field(tmp_path, capsys):
    classes = write(tmp_path, "c.yaml", "kind: PriorityClass\nmetadata: {name: x}\nvalue: many\n")
    code, _, err = run(["review", write(tmp_path, "p.json", KUBECTL_POD), "--classes", classes], capsys)
    assert code == 2 and "c.yaml: document 1: value: must be a 32-bit integer" in err


def test_namespace_conflict_like_kubectl(tmp_path, capsys):
    code, _, err = run(["review", write(tmp_path, "p.json", KUBECTL_POD), "-n", "other"], capsys)
    assert code == 2 and 'does not match the namespace "other"' in err


def test_legacy_annotation_switch(tmp_path, capsys):
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "dns",
            "namespace": "kube-system",
            "annotations": {"scheduler.alpha.kubernetes.io/critical-pod": ""},
        },
        "spec": {},
    }
    path = write(tmp_path, "p.json", pod)
    _, out, err = run(["review", path, "-o", "json"], capsys)
    assert json.loads(out)["spec"]["priority"] == 2000000000 and "Warning:" in err
    _, out, _ = run(["review", path, "-o", "json", "--no-legacy-critical-annotation"], capsys)
    assert json.loads(out)["spec"]["priority"] == 0


def test_stdin_through_the_real_entry_point():
    proc = subprocess.run(
        [sys.executable, "-m", "webhook", "review", "-", "-o", "json"],
        input=json.dumps(KUBECTL_POD | {"spec": {"containers": []}}),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["spec"]["priority"] == 0
