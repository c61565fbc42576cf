"""`priority-webhook victims`: the command-line contract, through `webhook.cli.main` and a real process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.preemption.kubelet_objects import critical, node, pod
from webhook.cli import main

NODE_CRITICAL = 2_000_001_000
CLUSTER_CRITICAL = 2_000_000_000


def write(tmp_path: Path, name: str, obj) -> str:
    path = tmp_path / name
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(path)


def pod_list(*pods) -> dict:
    """What `kubectl get pods -A --field-selector spec.nodeName=X -o json` prints."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": list(pods)}


@pytest.fixture
def files(tmp_path):
    def make(node_obj, pods, the_pod) -> list[str]:
        return [
            "--node",
            write(tmp_path, "node.json", node_obj),
            "--pods",
            write(tmp_path, "pods.json", pods),
            "--pod",
            write(tmp_path, "pod.yaml", the_pod if isinstance(the_pod, str) else yaml.safe_dump(the_pod)),
        ]

    return make


def run(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = main(["victims", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_admitted_after_preemption(files, capsys):
    argv = files(node(), pod_list(pod("a", "3", priority=0), pod("b", "500m", priority=5)), critical(cpu="1"))
    code, out, err = run(capsys, argv)
    assert (code, err) == (0, "")
    assert json.loads(out) == {
        "admit": True,
        "fits": False,
        "reasons": [
            {
                "reason": "OutOfcpu",
                "message": "Node didn't have enough resource: cpu, requested: 1000, used: 3500, capacity: 4000",
                "resource": "cpu",
                "requested": 1000,
                "used": 3500,
                "capacity": 4000,
            }
        ],
        "victims": [
            {
                "namespace": "default",
                "name": "b",
                "uid": "uid-default-b",
                "qosClass": "Burstable",
                "priority": 5,
                "terminating": False,
            }
        ],
        "error": None,
    }


def test_fits(files, capsys):
    code, out, _ = run(capsys, files(node(), pod_list(), pod("new", "1")))
    assert code == 0
    assert json.loads(out) == {"admit": True, "fits": True, "reasons": [], "victims": [], "error": None}


def test_rejected_exits_1(files, capsys):
    code, out, _ = run(
        capsys, files(node(), pod_list(pod("a", "4", priority=0)), pod("new", "1", priority=10))
    )
    got = json.loads(out)
    assert code == 1
    assert (got["admit"], got["victims"], got["error"]) == (False, [], None)
    assert [r["reason"] for r in got["reasons"]] == ["OutOfcpu"]


def test_no_victims_reports_upstreams_error(files, capsys):
    code, out, _ = run(capsys, files(node(), pod_list(critical("other", cpu="4")), critical(cpu="1")))
    assert code == 1
    assert json.loads(out)["error"] == (
        "preemption: error finding a set of pods to preempt: "
        "no set of running pods found to reclaim resources: [(res: cpu, q: 1000), ]"
    )


def test_order_priority_and_yaml_output(files, capsys):
    """The kubernetes issue #135857 node: a full node, a BestEffort cluster-critical pod, a low-priority one."""
    pods = pod_list(
        pod("metrics-agent", namespace="kube-system", priority=CLUSTER_CRITICAL),
        pod("batch-job", "100m", priority=0),
    )
    argv = files(node(pods=2), pods, critical("node-agent", cpu="100m", priority=NODE_CRITICAL))
    _, out, _ = run(capsys, argv)
    assert [v["name"] for v in json.loads(out)["victims"]] == ["metrics-agent"]
    code, out, _ = run(capsys, [*argv, "--order", "priority", "-o", "yaml"])
    got = yaml.safe_load(out)
    assert code == 0
    assert [v["name"] for v in got["victims"]] == ["batch-job"]
    assert list(got) == ["admit", "fits", "reasons", "victims", "error"]


def test_critical_priority_option(files, capsys):
    argv = files(node(), pod_list(pod("a", "4", priority=0)), pod("new", "1", priority=7000))
    assert run(capsys, argv)[0] == 1
    code, out, _ = run(capsys, [*argv, "--critical-priority", "7000"])
    assert code == 0 and json.loads(out)["victims"][0]["name"] == "a"


def test_pods_as_yaml_documents_from_stdin(tmp_path, capsys, monkeypatch):
    import io

    docs = yaml.safe_dump_all([pod("a", "3", priority=0), pod("b", "500m", priority=0)])
    monkeypatch.setattr(sys, "stdin", io.StringIO(docs))
    argv = [
        "--node",
        write(tmp_path, "n.json", node()),
        "--pods",
        "-",
        "--pod",
        write(tmp_path, "p.json", critical()),
    ]
    code, out, _ = run(capsys, argv)
    assert code == 0 and [v["name"] for v in json.loads(out)["victims"]] == ["b"]


# (name, node, pods, pod, expected stderr after "priority-webhook victims: error: ")
BAD_INPUT = [
    ("node of another kind", {"kind": "Pod"}, pod_list(), pod("p"), "{node}: kind: expected Node, got 'Pod'"),
    (
        "bad allocatable",
        node(cpu="four"),
        pod_list(),
        pod("p"),
        "{node} (node-a): status.allocatable.cpu: invalid quantity 'four'",
    ),
    (
        "bad quantity in one of the pods",
        node(),
        pod_list(pod("ok"), pod("bad", "1", "lots")),
        pod("p"),
        "{pods}: document 2 (default/bad): spec.containers[0].resources.requests.memory: invalid quantity 'lots'",
    ),
    (
        "a pod that is not an object",
        node(),
        pod_list("just a string"),
        pod("p"),
        "{pods}: document 1: must be a Pod object, got str",
    ),
    (
        "a node in the pods file",
        node(),
        pod_list(node()),
        pod("p"),
        "{pods}: document 1 (node-a): kind: expected Pod, got 'Node'",
    ),
    ("items not a list", node(), {"kind": "List", "items": {}}, pod("p"), "{pods}: items: must be a list"),
    (
        "bad priority",
        node(),
        pod_list(),
        {**pod("p"), "spec": {"priority": "high"}},
        "{pod} (default/p): spec.priority: must be an integer, got 'high'",
    ),
    (
        "bad toleration",
        node(),
        pod_list(),
        {**pod("p"), "spec": {"tolerations": [{"key": 5}]}},
        "{pod} (default/p): spec.tolerations[0].key: must be a string, got int",
    ),
    (
        "two pods to admit",
        node(),
        pod_list(),
        "a: 1\n---\nb: 2\n",
        "{pod}: expected one Pod (or workload), found 2",
    ),
    (
        "not JSON",
        node(),
        pod_list(),
        '{"a": ',
        "{pod}: not valid YAML or JSON: Expecting value: line 1 column 7 (char 6)",
    ),
]


@pytest.mark.parametrize(
    ("node_obj", "pods", "the_pod", "message"), [c[1:] for c in BAD_INPUT], ids=[c[0] for c in BAD_INPUT]
)
def test_bad_input_exits_2_with_one_line(tmp_path, files, capsys, node_obj, pods, the_pod, message):
    argv = files(node_obj, pods, the_pod)
    code, out, err = run(capsys, argv)
    expected = message.format(node=argv[1], pods=argv[3], pod=argv[5])
    assert (code, out) == (2, "")
    assert err == f"priority-webhook victims: error: {expected}\n"


def test_missing_file(tmp_path, capsys):
    missing = str(tmp_path / "nope.json")
    code, _, err = run(capsys, ["--node", missing, "--pods", missing, "--pod", missing])
    assert code == 2
    assert err == f"priority-webhook victims: error: {missing}: not found\n"


def test_real_process(tmp_path):
    """`python -m webhook victims` as an operator runs it."""
    argv = [
        "--node",
        write(tmp_path, "node.json", node()),
        "--pods",
        write(tmp_path, "pods.json", pod_list(pod("a", "3", priority=0), pod("b", "600m", priority=0))),
        "--pod",
        write(tmp_path, "pod.json", critical(cpu="1")),
    ]
    done = subprocess.run(
        [sys.executable, "-m", "webhook", "victims", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert [v["name"] for v in json.loads(done.stdout)["victims"]] == ["b"]
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "victims",
            *argv[:5],
            write(tmp_path, "bad.json", {"kind": "Pod", "spec": 1}),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
    assert bad.stderr.endswith("bad.json: pod.spec: must be an object, got int\n")


def test_room_from_a_terminating_pod_is_admitted_and_the_victim_marked(files, capsys):
    """The kubelet kills an already-terminating victim again and admits: `admit: true`, marked terminating."""
    dying = pod("dying", "3", priority=0, deleting=True)
    code, out, _ = run(capsys, files(node(), pod_list(dying), critical(cpu="2")))
    got = json.loads(out)
    assert (code, got["admit"], got["fits"]) == (0, True, False)
    assert [(v["name"], v["terminating"]) for v in got["victims"]] == [("dying", True)]


def gpu_pod(name: str, **kw) -> dict:
    """A GPU only in limits, as GPU manifests usually have it: the API server makes it the request."""
    p = pod(name, "100m", **kw)
    p["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    return p


def test_limits_only_extended_resources_are_requested(files, capsys):
    gpu_node = node(**{"nvidia.com/gpu": "1"})
    code, out, _ = run(
        capsys, files(gpu_node, pod_list(gpu_pod("running", priority=0)), gpu_pod("new", priority=0))
    )
    got = json.loads(out)
    assert (code, got["admit"]) == (1, False)
    assert [r["resource"] for r in got["reasons"]] == ["nvidia.com/gpu"]
    # as a critical pod it evicts the GPU holder, a Guaranteed-looking limits-only pod counted by its requests
    code, out, _ = run(
        capsys,
        files(
            gpu_node,
            pod_list(gpu_pod("running", priority=0)),
            gpu_pod("new", priority=2_000_000_000, namespace="kube-system"),
        ),
    )
    assert code == 0 and [v["name"] for v in json.loads(out)["victims"]] == ["running"]


def test_an_invalid_pod_name_is_refused_with_the_api_servers_message(files, capsys):
    bad = pod("new", "1", namespace="FILLED BY THE OPERATOR")
    code, _, err = run(capsys, files(node(), pod_list(), bad))
    assert code == 2
    assert (
        'Pod "new" is invalid: metadata.namespace: Invalid value: "FILLED BY THE OPERATOR": a lowercase'
        in err
    )


def test_a_missing_kubeconfig_says_not_found(tmp_path, capsys):
    pod_file = write(tmp_path, "pod.yaml", pod("new", "1"))
    missing = str(tmp_path / "nope" / "config")
    code, _, err = run(capsys, ["--node", "n1", "--pod", pod_file, "--kubeconfig", missing])
    assert code == 2
    assert err == f"priority-webhook victims: error: kubeconfig {missing}: not found\n"


def test_the_default_kubeconfig_missing_says_not_found(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    code, _, err = run(capsys, ["--node", "n1", "--pod", write(tmp_path, "pod.yaml", pod("new", "1"))])
    assert code == 2 and err.endswith(f"kubeconfig {tmp_path / 'absent'}: not found\n")
