"""Inputs the fuzzers found mishandled, pinned as plain tests (each names what used to go wrong)."""

from __future__ import annotations

import json

import pytest

from tests.fuzz import strategies
from tests.fuzz.cli import assert_clear_error, run
from tests.fuzz.oracle import CLASSES, CLASSES_YAML, assert_one_line
from webhook.files.documents import MAX_DEPTH, InputError, parse_documents
from webhook.review import MalformedReview, Stage, handle_review


def pod_review(obj):
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u",
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "namespace": "default",
            "object": obj,
        },
    }


@pytest.mark.parametrize(
    ("key", "shown"),
    [
        ("a\nb", '"a\\nb"'),  # used to split the error over two lines
        ("k" * 5000, '"' + "k" * 64 + '"...'),  # used to echo all 5000 characters
        ("\x00", '"\\u0000"'),
    ],
)
def test_annotation_keys_from_the_input_are_quoted_in_errors(key, shown):
    body = pod_review({"metadata": {"name": "p", "annotations": {key: 1}}})
    with pytest.raises(MalformedReview) as err:
        handle_review(body, Stage.MUTATE, CLASSES)
    assert str(err.value) == f"request.object.metadata.annotations.{shown}.value: Not a valid string."
    assert_one_line(str(err.value), bound=200)


BILLION_LAUGHS = strategies.YAML_ODDITIES[1]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        # used to hang printing an exponentially expanded document with -o json
        (BILLION_LAUGHS, "f: YAML aliases expand the document beyond 1000000 values"),
        # used to build a self-referencing document
        ("&r [*r]\n", f"f: nested too deeply (over {MAX_DEPTH} levels)"),
        # used to keep the last of two values silently
        (
            "kind: Pod\nkind: PriorityClass\n",
            "f: not valid YAML or JSON: mapping key 'kind' already defined (line 2, column 1)",
        ),
        (
            '{"kind": "Pod", "kind": "PriorityClass"}',
            "f: not valid YAML or JSON: mapping key 'kind' already defined",
        ),
        # used to give only PyYAML's context line ("while scanning for the next token")
        (
            "\tkind: Pod\n",
            "f: not valid YAML or JSON: found character '\\t' that cannot start any token (line 1, column 1)",
        ),
        # used to pass and overflow the stack later (copying the object to apply the patch)
        (
            '{"kind": "Pod", "spec": ' + "[" * 500 + "]" * 500 + "}",
            f"f: nested too deeply (over {MAX_DEPTH} levels)",
        ),
    ],
)
def test_documents_refuse_what_kubectl_refuses(text, error):
    with pytest.raises(InputError) as err:
        parse_documents(text, "f")
    assert str(err.value) == error


def test_aliases_within_the_budget_and_merge_keys_still_load():
    docs = parse_documents("base: &b {name: p}\nkind: Pod\nmetadata: {<<: *b}\nother: *b\n", "f")
    assert docs == [{"base": {"name": "p"}, "kind": "Pod", "metadata": {"name": "p"}, "other": {"name": "p"}}]


def test_depth_limit_admits_the_limit_itself():
    value: object = "x"
    for _ in range(MAX_DEPTH - 1):
        value = [value]
    assert parse_documents(json.dumps({"a": value}), "f") == [{"a": value}]


@pytest.fixture
def files(tmp_path):
    classes = tmp_path / "classes.yaml"
    classes.write_text(CLASSES_YAML)

    def review(content: str, *extra: str):
        path = tmp_path / "in.yaml"
        path.write_text(content)
        return run(["review", str(path), "--classes", str(classes), *extra])

    return review


@pytest.mark.parametrize(
    ("content", "error"),
    [
        # used to crash with TypeError: unhashable type: 'list'
        ("kind: [Pod]\n", "kind: must be a non-empty string, got ['Pod']"),
        # used to echo the whole 10 kB kind
        ("kind: [" + "x" * 10000 + "]\n", "kind: must be a non-empty string, got ['" + "x" * 62 + "..."),
        # used to blame request.name, a field the user never wrote (YAML 1.1 reads `yes` as true)
        ("kind: PriorityClass\nmetadata: {name: yes}\nvalue: 1\n", "metadata.name: Not a valid string."),
        ("kind: Pod\nmetadata: {name: 5}\n", "metadata.name: Not a valid string."),
        ("kind: Pod\nmetadata: {name: p, namespace: [a]}\n", "metadata.namespace: Not a valid string."),
    ],
)
def test_review_names_the_field_the_user_wrote(files, content, error):
    outcome = files(content)
    assert_clear_error(outcome, "review")
    assert outcome.err.rstrip("\n").endswith(f"document 1: {error}")


def test_review_passes_an_unknown_kind_through_with_a_short_note(files):
    outcome = files("kind: " + "x" * 10000 + "\nmetadata: {name: a}\n", "-o", "json")
    assert outcome.code == 0 and json.loads(outcome.out)["kind"] == "x" * 10000
    assert_one_line(outcome.err.rstrip("\n"), bound=300)
    assert "x" * 64 + "..." in outcome.err


def test_review_with_an_alias_bomb_ends_quickly_with_an_error(files):
    outcome = files(BILLION_LAUGHS, "-o", "json")
    assert_clear_error(outcome, "review")
    assert "YAML aliases expand the document" in outcome.err


def test_victims_error_quoting_a_huge_kind_stays_one_short_line(tmp_path):
    # used to print the whole 10 kB value: every command's error is now one line of at most 500 chars
    node = tmp_path / "node.json"
    node.write_text(json.dumps({"kind": "x" * 10_000, "metadata": {"name": "n"}}))
    pod = tmp_path / "pod.yaml"
    pod.write_text("kind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n")
    outcome = run(["victims", "--node", str(node), "--pods", str(pod), "--pod", str(pod)])
    assert_clear_error(outcome, "victims")
    line = outcome.err.rstrip("\n")
    assert len(line) <= len("priority-webhook victims: error: ") + 500
    assert line.startswith(f"priority-webhook victims: error: {node} (n): kind: expected Node, got 'xxx")
    assert " ... " in line


def test_errors_with_line_breaks_from_the_input_are_quoted(tmp_path):
    # the node's name used to break the error over three lines; it is now quoted with its escapes
    node = tmp_path / "node.json"
    node.write_text(json.dumps({"kind": "Pod", "metadata": {"name": "a\nb\u2028c"}}))
    outcome = run(["victims", "--node", str(node), "--pods", str(node), "--pod", str(node)])
    assert_clear_error(outcome, "victims")
    assert "('a\\nb\\u2028c'): kind: expected Node, got 'Pod'" in outcome.err


def test_plan_names_a_pod_status_that_is_not_an_object(tmp_path):
    # used to crash with a traceback (InvalidObject escaping from the terminal-phase check)
    cluster = tmp_path / "cluster.json"
    cluster.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "a", "namespace": "default"},
                "spec": {"containers": [], "nodeName": "node-1"},
                "status": [],
            }
        )
    )
    pod = tmp_path / "pod.json"
    pod.write_text(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}))
    outcome = run(["plan", "--cluster", str(cluster), "--pod", str(pod)])
    assert_clear_error(outcome, "plan")
    assert outcome.err.rstrip("\n").endswith("status: must be an object")


NODE_FIELDS = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "node-2"},
    "status": {"allocatable": {"cpu": "2", "memory": "1Gi", "pods": "110"}},
}


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        # each used to crash mid-plan with a traceback (AttributeError, InvalidObject from the filters)
        (True, "node.spec: must be an object, got bool"),
        ({"taints": {}}, "node.spec.taints: must be a list, got an object"),
        ({"taints": [None]}, "node.spec.taints[0]: must be an object"),
    ],
)
def test_plan_checks_node_specs_when_reading_the_snapshot(tmp_path, spec, error):
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"kind": "List", "items": [{**NODE_FIELDS, "spec": spec}]}))
    pod = tmp_path / "pod.json"
    pod.write_text(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}))
    outcome = run(["plan", "--cluster", str(cluster), "--pod", str(pod)])
    assert_clear_error(outcome, "plan")
    assert outcome.err.rstrip("\n").endswith(f"Node node-2: {error}")


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        # each used to crash with a traceback (exit 1) when the filters read the field
        ({"tolerations": {}}, "spec.tolerations: must be a list, got an object"),
        ({"tolerations": [5]}, "spec.tolerations[0]: must be an object"),
        ({"containers": [{"name": "c", "ports": 5}]}, "spec.containers[0].ports: must be a list, got int"),
    ],
)
def test_plan_checks_the_pending_pod_before_planning(tmp_path, spec, error):
    cluster = tmp_path / "cluster.json"
    cluster.write_text(
        json.dumps({**NODE_FIELDS, "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}})
    )
    pod = tmp_path / "pod.json"
    pod.write_text(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}))
    outcome = run(["plan", "--cluster", str(cluster), "--pod", str(pod)])
    assert_clear_error(outcome, "plan")
    assert outcome.err.rstrip("\n").endswith(f"{pod}: {error}")


@pytest.mark.parametrize("command", ["plan", "victims"])
def test_a_pod_file_whose_kind_is_not_a_string_is_refused(tmp_path, command):
    """`--pod` with `kind: []` used to raise TypeError (unhashable) in the shared pod-input reader."""
    pod = tmp_path / "pod.json"
    pod.write_text(json.dumps({"apiVersion": "v1", "kind": [], "metadata": {"name": "p"}}))
    empty = tmp_path / "list.json"
    empty.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}))
    node = tmp_path / "node.json"
    node.write_text(json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}))
    where = ["--cluster", str(empty)] if command == "plan" else ["--node", str(node), "--pods", str(empty)]
    outcome = run([command, *where, "--pod", str(pod)])
    assert_clear_error(outcome, command)
    assert outcome.err.endswith(f"{pod}: expected kind Pod, got []\n")
