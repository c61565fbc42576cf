"""`priority-webhook plan`: the command-line contract, priorities resolved as the webhook does, errors."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import yaml

from tests.preemption.planner_data.builders import HIGH, LOW, MID, VL, L, M, S, node, pdb, pod
from webhook.cli import main

CLASSES = textwrap.dedent("""\
    apiVersion: scheduling.k8s.io/v1
    kind: PriorityClass
    metadata: {name: batch-high}
    value: 1000
    ---
    apiVersion: scheduling.k8s.io/v1
    kind: PriorityClass
    metadata: {name: polite}
    value: 1000
    preemptionPolicy: Never
""")


def kubectl_list(*items):
    """What `kubectl get nodes,pods,pdb -A -o json` prints."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": list(items)}


CLUSTER = kubectl_list(
    node("node1"),
    node("node2"),
    node("node3", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]),
    pod("web-1", "node1", MID, L, labels={"app": "web"}, start=1),
    pod("batch-1", "node2", LOW, M, start=2),
    pod("batch-2", "node2", LOW, S, start=3),
    pod("waiting", "", LOW, S, nominated="node2"),
    pdb("web", {"app": "web"}, 0),
)


def write(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


@pytest.fixture
def files(tmp_path):
    return {
        "cluster": write(tmp_path, "cluster.json", CLUSTER),
        "classes": write(tmp_path, "classes.yaml", CLASSES),
        "pod": write(tmp_path, "pod.yaml", yaml.safe_dump(pod("job", "", None, VL, class_name="batch-high"))),
    }


def plan(args, capsys):
    code = main(["plan", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_prints_the_contract_and_exits_zero(files, capsys):
    code, out, err = plan(
        ["--cluster", files["cluster"], "--pod", files["pod"], "--classes", files["classes"]], capsys
    )
    assert (code, err) == (0, "")
    result = json.loads(out)
    assert list(result) == ["node", "victims", "pdbViolations", "nominatedPodsToClear", "message"]
    # node1 would cost a PDB violation (web-1 is protected, budget 0); node2 costs two priority-0 pods
    assert result["node"] == "node2"
    assert result["victims"] == [
        {"namespace": "default", "name": "batch-1", "priority": 0},
        {"namespace": "default", "name": "batch-2", "priority": 0},
    ]
    assert result["pdbViolations"] == 0
    assert result["nominatedPodsToClear"] == [{"namespace": "default", "name": "waiting", "priority": 0}]
    # The pod's PodScheduled condition: the Filter's FitError alone (the PostFilter nominated a node).
    assert result["message"] == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu, 2 Insufficient memory."
    )


def test_explain_says_why_each_other_node_lost(files, capsys):
    args = ["--cluster", files["cluster"], "--pod", files["pod"], "--classes", files["classes"], "--explain"]
    code, out, _ = plan(args, capsys)
    explain = json.loads(out)["explain"]
    assert code == 0 and explain["outcome"] == "preempt"
    assert explain["summary"] == "preempt 2 pod(s) on node2"
    assert explain["excluded"] == [
        {"node": "node1", "reason": "candidate, not chosen: more PDB violations"},
        {
            "node": "node3",
            "reason": "Preemption is not helpful for scheduling: node(s) had untolerated taint(s)",
        },
    ]
    assert explain["candidates"] == [
        {"node": "node2", "victims": ["default/batch-1", "default/batch-2"], "pdbViolations": 0},
        {"node": "node1", "victims": ["default/web-1"], "pdbViolations": 1},
    ]


def test_yaml_output(files, capsys):
    args = ["--cluster", files["cluster"], "--pod", files["pod"], "--classes", files["classes"], "-o", "yaml"]
    code, out, _ = plan(args, capsys)
    assert code == 0 and yaml.safe_load(out)["node"] == "node2"


def test_no_node_exits_one_with_upstreams_message(tmp_path, files, capsys):
    pending = write(tmp_path, "low.yaml", yaml.safe_dump(pod("job", "", LOW, VL)))
    code, out, _ = plan(["--cluster", files["cluster"], "--pod", pending], capsys)
    assert code == 1
    result = json.loads(out)
    assert (result["node"], result["victims"], result["nominatedPodsToClear"]) == (None, [], [])
    assert result["message"] == (
        # FitError.Error sorts the whole "<count> <reason>" strings: "1 ..." before "2 ..."
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu, 2 Insufficient memory. "
        "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
        "2 No preemption victims found for incoming pod."
    )


def test_no_node_at_all_is_the_schedulers_no_nodes_message(tmp_path, capsys):
    """With no node the scheduler neither filters nor preempts: `no nodes available to schedule pods`."""
    cluster = write(tmp_path, "empty.json", kubectl_list(pod("a", "", LOW, L)))
    code, out, _ = plan(
        ["--cluster", cluster, "--pod", write(tmp_path, "pre.json", pod("pre", "", HIGH, L))], capsys
    )
    result = json.loads(out)
    assert (code, result["node"], result["message"]) == (1, None, "no nodes available to schedule pods")


def test_a_never_class_is_not_eligible(tmp_path, files, capsys):
    polite = write(tmp_path, "polite.yaml", yaml.safe_dump(pod("job", "", None, VL, class_name="polite")))
    code, out, _ = plan(
        ["--cluster", files["cluster"], "--pod", polite, "--classes", files["classes"]], capsys
    )
    assert code == 1
    assert json.loads(out)["message"] == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu, 2 Insufficient memory. "
        "preemption: not eligible due to preemptionPolicy=Never."
    )


def test_classes_come_from_the_snapshot_and_a_class_file_wins(tmp_path, files, capsys):
    snapshot_class = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "batch-high"},
        "value": 0,
    }
    cluster = write(tmp_path, "with-class.json", kubectl_list(*CLUSTER["items"], snapshot_class))
    code, out, _ = plan(["--cluster", cluster, "--pod", files["pod"]], capsys)
    assert code == 1  # value 0 from the snapshot: nothing lower to preempt
    code, out, _ = plan(["--cluster", cluster, "--pod", files["pod"], "--classes", files["classes"]], capsys)
    assert code == 0 and json.loads(out)["node"] == "node2"  # the file's 1000 wins


def test_global_default_and_system_classes_apply_to_pods_without_a_class(tmp_path, capsys):
    """The legacy critical annotation in kube-system maps to system-cluster-critical, as admission does."""
    legacy = pod("dns", "", None, VL, namespace="kube-system")
    legacy["metadata"]["annotations"] = {"scheduler.alpha.kubernetes.io/critical-pod": ""}
    cluster = write(tmp_path, "c.json", kubectl_list(node("node1"), pod("p", "node1", HIGH, L)))
    path = write(tmp_path, "dns.json", legacy)
    code, out, _ = plan(["--cluster", cluster, "--pod", path], capsys)
    assert code == 0 and json.loads(out)["victims"][0]["name"] == "p"
    code, out, _ = plan(["--cluster", cluster, "--pod", path, "--no-legacy-critical-annotation"], capsys)
    assert code == 1


def test_several_cluster_files_and_documents(tmp_path, capsys):
    nodes = write(tmp_path, "nodes.yaml", yaml.safe_dump_all([node("node1"), node("node2")]))
    pods = write(tmp_path, "pods.json", kubectl_list(pod("a", "node1", MID, L), pod("b", "node2", LOW, L)))
    pre = write(tmp_path, "pre.json", pod("pre", "", HIGH, L))
    code, out, _ = plan(["--cluster", nodes, "--cluster", pods, "--pod", pre], capsys)
    assert code == 0 and json.loads(out)["node"] == "node2"


def test_pod_from_stdin(tmp_path, monkeypatch, capsys):
    import io

    cluster = write(tmp_path, "c.json", kubectl_list(node("node1"), pod("a", "node1", LOW, L)))
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(pod("pre", "", HIGH, L))))
    code, out, _ = plan(["--cluster", cluster, "--pod", "-"], capsys)
    assert code == 0 and json.loads(out)["victims"][0]["name"] == "a"


def test_the_pod_fitting_already_exits_zero_with_no_victims(tmp_path, capsys):
    cluster = write(tmp_path, "c.json", kubectl_list(node("node1")))
    pre = write(tmp_path, "pre.json", pod("pre", "", HIGH, S))
    code, out, _ = plan(["--cluster", cluster, "--pod", pre], capsys)
    result = json.loads(out)
    assert (code, result["node"], result["victims"]) == (0, "node1", [])
    assert result["message"].startswith("no preemption needed")


def test_sample_with_offset_is_reproducible(tmp_path, capsys):
    objects = [node(f"node{i}") for i in range(1, 6)] + [
        pod(f"p{i}", f"node{i}", MID, L) for i in range(1, 6)
    ]
    cluster = write(tmp_path, "c.json", kubectl_list(*objects))
    pre = write(tmp_path, "pre.json", pod("pre", "", HIGH, L))
    nodes = set()
    for _ in range(2):
        code, out, _ = plan(["--cluster", cluster, "--pod", pre, "--sample", "--offset", "3"], capsys)
        nodes.add(json.loads(out)["node"])
    assert code == 0 and nodes == {"node4"}  # every node ties; the walk starts at the 4th


BAD_INPUT = [
    (
        "bad-quantity",
        [node("node1"), pod("a", "node1", LOW, {"cpu": "lots"})],
        "c.json: document 2: Pod default/a: spec.containers[0].resources.requests.cpu: invalid quantity 'lots'",
    ),
    (
        "bad-priority",
        [node("node1"), pod("a", "node1", "high")],
        "c.json: document 2: Pod default/a: spec.priority: must be a 32-bit integer, got 'high'",
    ),
    (
        "nameless-node",
        [{"kind": "Node", "metadata": {}}],
        "c.json: document 1: Node: metadata.name: must be a non-empty string",
    ),
    (
        "bad-start-time",
        [node("node1"), {**pod("a", "node1", LOW), "status": {"startTime": "yesterday"}}],
        "c.json: document 2: Pod default/a: status.startTime: not an RFC 3339 time: 'yesterday'",
    ),
    (
        "bad-pdb",
        [pdb("p", selector={"matchExpressions": [{"key": "a", "operator": "Has"}]})],
        "c.json: document 1: PodDisruptionBudget: spec.selector.matchExpressions[0].operator: must be one of "
        "In, NotIn, Exists, DoesNotExist, got 'Has'",
    ),
    (
        "bad-allocatable",
        [{**node("node1"), "status": {"allocatable": {"cpu": "1 core"}}}],
        "c.json: document 1: Node node1: status.allocatable.cpu: invalid quantity '1 core'",
    ),
    (
        "unknown-class-on-a-snapshot-pod",
        [node("node1"), pod("a", "node1", None, class_name="nope")],
        'c.json: document 2: Pod default/a: pods "a" is forbidden: no PriorityClass with name nope was found',
    ),
    ("duplicate-node", [node("node1"), node("node1")], "c.json: document 2: Node node1 appears twice"),
    (
        "bad-node-name",
        [{**pod("a"), "spec": {"nodeName": 5, "containers": []}}],
        "c.json: document 1: Pod default/a: spec.nodeName: must be a string",
    ),
    (
        "bad-labels",
        [{**pod("a"), "metadata": {"name": "a", "labels": {"x": 1}}}],
        "c.json: document 1: Pod default/a: metadata.labels: must be a map of strings",
    ),
    (
        "spec-not-an-object",
        [{**pod("a"), "spec": []}],
        "c.json: document 1: Pod default/a: pod.spec: must be an object, got a list",
    ),
    ("kindless", [{"metadata": {"name": "x"}}], "c.json: document 1: kind: missing"),
]


@pytest.mark.parametrize(("objects", "message"), [pytest.param(*r[1:], id=r[0]) for r in BAD_INPUT])
def test_bad_snapshot_exits_two_naming_file_and_field(tmp_path, objects, message, capsys):
    cluster = write(tmp_path, "c.json", kubectl_list(*objects))
    pre = write(tmp_path, "pre.json", pod("pre", "", HIGH, L))
    code, out, err = plan(["--cluster", cluster, "--pod", pre], capsys)
    assert (code, out) == (2, "")
    assert err == f"priority-webhook plan: error: {tmp_path}/{message}\n"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            pod("pre", "", None, L, class_name="nope"),
            'pre.json: Pod default/pre: pods "pre" is forbidden: no PriorityClass with name nope was found',
        ),
        ({"kind": "Node", "metadata": {"name": "x"}}, "pre.json: expected kind Pod, got 'Node'"),
        ([pod("a"), pod("b")], "pre.json: expected one Pod (or workload), found 2"),
        (
            pod("pre", "node1", HIGH, L, phase="Succeeded"),
            "pre.json: status.phase: the pod has already terminated",
        ),
        (
            pod("pre", "", HIGH, L, policy="Sometimes"),
            "pre.json: Pod default/pre: spec.preemptionPolicy: must be Never or PreemptLowerPriority, got 'Sometimes'",
        ),
        ("{not json", "pre.json: not valid YAML or JSON"),
    ],
)
def test_bad_pod_exits_two(tmp_path, content, message, capsys):
    cluster = write(tmp_path, "c.json", kubectl_list(node("node1")))
    pre = write(tmp_path, "pre.json", content)
    code, _, err = plan(["--cluster", cluster, "--pod", pre], capsys)
    assert code == 2
    assert err.startswith(f"priority-webhook plan: error: {tmp_path}/{message}") and err.count("\n") == 1


def test_missing_file_and_offset_without_sample(tmp_path, capsys):
    code, _, err = plan(["--cluster", str(tmp_path / "none.json"), "--pod", "x"], capsys)
    assert code == 2 and "none.json: not found" in err
    cluster = write(tmp_path, "c.json", kubectl_list())
    code, _, err = plan(["--cluster", cluster, "--pod", cluster, "--offset", "1"], capsys)
    assert code == 2 and "--offset: needs --sample" in err


def test_real_process_reads_a_kubectl_dump_from_stdin(tmp_path):
    pre = write(tmp_path, "pre.yaml", yaml.safe_dump(pod("pre", "", HIGH, L)))
    proc = subprocess.run(
        [sys.executable, "-m", "webhook", "plan", "--cluster", "-", "--pod", pre, "-o", "json"],
        input=json.dumps(kubectl_list(node("node1"), pod("a", "node1", LOW, L))),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["victims"] == [{"namespace": "default", "name": "a", "priority": 0}]


def test_a_leftover_priority_that_contradicts_the_class_is_an_error(tmp_path, files, capsys):
    stale = write(tmp_path, "stale.json", pod("job", "", 5, VL, class_name="batch-high"))
    code, _, err = plan(
        ["--cluster", files["cluster"], "--pod", stale, "--classes", files["classes"]], capsys
    )
    assert code == 2
    assert err.endswith(
        "stale.json: Pod default/job: spec.priority 5 does not match PriorityClass batch-high "
        "(1000); remove spec.priority to plan with the class\n"
    )


def test_a_dumped_pod_keeps_its_priority_and_takes_the_policy_of_its_class(tmp_path, files, capsys):
    dumped = write(tmp_path, "dumped.json", pod("job", "", 1000, VL, class_name="polite"))
    code, out, _ = plan(
        ["--cluster", files["cluster"], "--pod", dumped, "--classes", files["classes"]], capsys
    )
    assert code == 1 and "preemptionPolicy=Never" in json.loads(out)["message"]
    # an unknown class with a priority set: the priority is what the scheduler reads
    unknown = write(tmp_path, "unknown.json", pod("job", "", 1000, VL, class_name="elsewhere"))
    code, out, _ = plan(["--cluster", files["cluster"], "--pod", unknown], capsys)
    assert code == 0 and json.loads(out)["node"] == "node2"


def test_sample_without_offset_starts_anywhere_but_finds_a_tied_node(tmp_path, capsys):
    objects = [node(f"node{i}") for i in range(1, 6)] + [
        pod(f"p{i}", f"node{i}", MID, L) for i in range(1, 6)
    ]
    cluster = write(tmp_path, "c.json", kubectl_list(*objects))
    pre = write(tmp_path, "pre.json", pod("pre", "", HIGH, L))
    code, out, _ = plan(["--cluster", cluster, "--pod", pre, "--sample"], capsys)
    assert code == 0 and json.loads(out)["node"] in {f"node{i}" for i in range(1, 6)}


def test_a_generate_name_pod_is_planned(tmp_path, files, capsys):
    job = pod("x", "", None, VL, class_name="batch-high")
    job["metadata"] = {"generateName": "job-", "namespace": "default"}
    files["pod"] = write(tmp_path, "gen.yaml", yaml.safe_dump(job))
    code, out, err = plan(
        ["--cluster", files["cluster"], "--pod", files["pod"], "--classes", files["classes"]], capsys
    )
    assert (code, err) == (0, "") and json.loads(out)["node"] is not None


def test_a_gpu_only_in_limits_is_requested_so_no_node_without_gpus_fits(tmp_path, files, capsys):
    job = pod("train", "", None, S, class_name="batch-high")
    job["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    files["pod"] = write(tmp_path, "gpu.yaml", yaml.safe_dump(job))
    code, out, _ = plan(
        ["--cluster", files["cluster"], "--pod", files["pod"], "--classes", files["classes"], "--explain"],
        capsys,
    )
    assert code == 1 and json.loads(out)["node"] is None
    reasons = [e["reason"] for e in json.loads(out)["explain"]["excluded"]]
    assert reasons and all("nvidia.com/gpu" in r for r in reasons if "taint" not in r), reasons


def test_an_invalid_pod_namespace_is_refused_with_the_api_servers_message(tmp_path, files, capsys):
    bad = pod("job", "", None, S, namespace="FILLED BY THE OPERATOR")
    code, _, err = plan(
        ["--cluster", files["cluster"], "--pod", write(tmp_path, "bad.yaml", yaml.safe_dump(bad))], capsys
    )
    assert (
        code == 2
        and 'Pod "job" is invalid: metadata.namespace: Invalid value: "FILLED BY THE OPERATOR"' in err
    )
