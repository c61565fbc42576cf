"""`review`, `victims` and `plan` on public manifests as published (tests/manifests/public/README.md), and on
the cases that came from them: classes in the input, the one-default rule, workloads, file order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from webhook.cli import main

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = ROOT / "tests" / "manifests" / "public"
BOOK = PUBLIC / "kubernetes-for-developers"
KUEUE = PUBLIC / "kueue"


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_book_example_resolves_its_own_classes(capsys):
    code, out, err = run(
        [
            "review",
            str(BOOK / "default-priority.yaml"),
            str(BOOK / "placeholder-priority.yaml"),
            str(BOOK / "placeholder-deploy.yaml"),
            "-o",
            "json",
        ],
        capsys,
    )
    assert (code, err) == (0, "")
    items = json.loads(out)["items"]
    assert [i["kind"] for i in items] == ["PriorityClass", "PriorityClass", "Deployment"]
    spec = items[2]["spec"]["template"]["spec"]
    assert (spec["priorityClassName"], spec["priority"], spec["preemptionPolicy"]) == (
        "placeholder-priority",
        -10,
        "Never",
    )


@pytest.mark.parametrize("pod", ["high-prio-pod.yaml", "low-prio-pod.yaml"])
def test_kueue_prios_with_its_pods(pod, capsys):
    code, out, err = run(["review", str(KUEUE / "prios.yaml"), str(KUEUE / pod), "-o", "json"], capsys)
    assert (code, err) == (0, "")
    stored = json.loads(out)["items"][-1]
    expected = {"high-prio-pod.yaml": 1000000, "low-prio-pod.yaml": 100}[pod]
    assert stored["spec"]["priority"] == expected


def test_two_global_defaults_in_one_input_the_second_is_refused(capsys):
    code, out, err = run(
        ["review", str(KUEUE / "prios.yaml"), str(BOOK / "default-priority.yaml"), "-o", "json"], capsys
    )
    assert code == 1
    assert err == (
        'Error from server (Forbidden): priorityclasses.scheduling.k8s.io "default-priority" is forbidden: '
        "PriorityClass low-prio is already marked as default. Only one default can exist\n"
    )
    assert [i["metadata"]["name"] for i in json.loads(out)["items"]] == ["high-prio", "low-prio"]


def test_a_class_after_the_pod_that_uses_it_is_a_warning(capsys):
    pod, prios = str(KUEUE / "high-prio-pod.yaml"), str(KUEUE / "prios.yaml")
    code, _, err = run(["review", pod, prios], capsys)
    assert code == 0
    assert err == (
        f"Warning: {pod}: document 1: PriorityClass high-prio is defined after this Pod, in {prios}: "
        "document 1; kubectl apply creates objects in file order: apply the PriorityClasses first\n"
    )


def test_without_its_classes_the_deployment_is_refused(capsys):
    code, _, err = run(["review", str(BOOK / "placeholder-deploy.yaml")], capsys)
    assert code == 1
    assert err == (
        "Error from server (Forbidden): pods created by Deployment default/placeholder will be forbidden: "
        "no PriorityClass with name placeholder-priority was found\n"
    )


@pytest.fixture
def node_files(tmp_path):
    """A node with 10 cpu and a placeholder pod of the book's Deployment on it (priority -10)."""
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "10", "memory": "16Gi", "pods": "110"}},
    }
    deploy = yaml.safe_load((BOOK / "placeholder-deploy.yaml").read_text())
    placeholder = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "placeholder-abcde", "namespace": "default", "uid": "u1"},
        "spec": {**deploy["spec"]["template"]["spec"], "nodeName": "n1", "priority": -10},
        "status": {"phase": "Running"},
    }
    placeholder["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    (tmp_path / "node.json").write_text(json.dumps(node))
    (tmp_path / "pods.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": [placeholder]})
    )
    return tmp_path


def test_victims_takes_a_workload_and_its_classes_from_the_pod_file(node_files, tmp_path, capsys):
    """The kueue pod needs 9 cpu; its class (in the same file) gives it 1000000: not critical, so the
    kubelet does not preempt, and says it does not fit."""
    both = tmp_path / "both.yaml"
    both.write_text(
        (KUEUE / "prios.yaml").read_text() + "\n---\n" + (KUEUE / "high-prio-pod.yaml").read_text()
    )
    argv = ["victims", "--node", str(node_files / "node.json"), "--pods", str(node_files / "pods.json")]
    code, out, _ = run([*argv, "--pod", str(both)], capsys)
    assert code == 1 and json.loads(out)["reasons"][0]["reason"] == "OutOfcpu"
    # A system-node-critical DaemonSet in its place: admitted, the placeholder evicted.
    agent = tmp_path / "agent.yaml"
    agent.write_text((ROOT / "examples" / "agent.yaml").read_text().replace("500m", "9"))
    code, out, _ = run([*argv, "--pod", str(agent)], capsys)
    result = json.loads(out)
    assert code == 0 and [v["name"] for v in result["victims"]] == ["placeholder-abcde"]


def test_victims_refuses_a_pod_whose_class_does_not_exist(node_files, capsys):
    argv = ["victims", "--node", str(node_files / "node.json"), "--pods", str(node_files / "pods.json")]
    code, _, err = run([*argv, "--pod", str(KUEUE / "low-prio-pod.yaml")], capsys)
    assert code == 2
    assert err.endswith(
        'pods "low-prio-1m-sleep" is forbidden: no PriorityClass with name low-prio was found\n'
    )
    code, _, _ = run(
        [*argv, "--pod", str(KUEUE / "low-prio-pod.yaml"), "--classes", str(KUEUE / "prios.yaml")], capsys
    )
    assert code == 1  # known now: 9 cpu do not fit, and a priority of 100 is not critical


def test_plan_takes_the_books_deployment_with_its_classes(node_files, tmp_path, capsys):
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        (BOOK / "placeholder-priority.yaml").read_text()
        + "---\n"
        + (BOOK / "placeholder-deploy.yaml").read_text()
    )
    cluster = tmp_path / "cluster.json"
    node = json.loads((node_files / "node.json").read_text())
    pods = json.loads((node_files / "pods.json").read_text())["items"]
    cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node, *pods]}))
    code, out, err = run(["plan", "--cluster", str(cluster), "--pod", str(pod)], capsys)
    assert (code, err) == (0, "")
    assert json.loads(out)["node"] == "n1"


def test_an_unrendered_chart_template_is_named_as_such(capsys):
    """The cluster-overprovisioner chart's PriorityClass template, given as it is in the repository."""
    path = PUBLIC / "cluster-overprovisioner" / "priorityclass-overprovision.yaml"
    code, out, err = run(["review", str(path)], capsys)
    assert (code, out) == (2, "")
    assert err == (
        f'priority-webhook review: error: {path}: line 1: {{{{ template "PriorityClass.apiVersion" . }}}}: '
        "an unrendered template; render it first (helm template ...)\n"
    )


def test_a_class_in_the_input_and_in_a_classes_file_is_one_class(capsys):
    """The same default class given with --classes and in the input is not its own rival default."""
    prios = str(KUEUE / "prios.yaml")
    code, _, err = run(["review", prios, "--classes", prios, "-o", "json"], capsys)
    assert (code, err) == (0, "")
    code, _, err = run(["review", str(BOOK / "default-priority.yaml"), "--classes", prios], capsys)
    assert code == 1 and "PriorityClass low-prio is already marked as default" in err
