"""`victims` and `plan` on hostile files: the contract's JSON object (exit 0/1) or one clear error (exit 2)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import strategies
from tests.fuzz.cli import assert_clear_error, parse_output, run
from tests.fuzz.runs import SAMPLE, fuzz

VICTIMS_KEYS = {"admit", "fits", "reasons", "victims", "error"}
PLAN_KEYS = {"node", "victims", "pdbViolations", "nominatedPodsToClear", "message"}

node_files = strategies.document_bytes(strategies.nodes | strategies.damaged(strategies.nodes))
pods_files = strategies.document_bytes(strategies.bound_pods() | strategies.damaged(strategies.bound_pods()))
pod_files = strategies.document_bytes(strategies.pods | strategies.damaged(strategies.pods))
cluster_files = strategies.document_bytes(strategies.node_side_objects)
formats = st.sampled_from(["json", "yaml"])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    base = tmp_path_factory.mktemp("preemption-cli")

    def write(name: str, content: bytes) -> str:
        path = base / name
        path.write_bytes(content)
        return str(path)

    return write


def check(command: str, argv: list[str], fmt: str, keys: set[str], admitted: str) -> None:
    outcome = run([command, *argv, "-o", fmt])
    if outcome.code == 2:
        assert_clear_error(outcome, command)
        return
    assert outcome.code in (0, 1), outcome
    printed = parse_output(outcome.out, fmt)
    assert isinstance(printed, dict) and set(printed) >= keys, printed
    assert (outcome.code == 0) == bool(printed[admitted]), (outcome.code, printed)
    assert outcome.err == "", outcome.err[:300]


def check_victims(files, node: bytes, pods: bytes, pod: bytes, order: str, fmt: str) -> None:
    argv = [
        "--node",
        files("node", node),
        "--pods",
        files("pods", pods),
        "--pod",
        files("pod", pod),
        "--order",
        order,
    ]
    check("victims", argv, fmt, VICTIMS_KEYS, "admit")


def check_plan(files, cluster: bytes, pod: bytes, explain: bool, fmt: str) -> None:
    argv = ["--cluster", files("cluster", cluster), "--pod", files("pod", pod)]
    check("plan", argv + (["--explain"] if explain else []), fmt, PLAN_KEYS, "node")


victims_args = {
    "node": node_files,
    "pods": pods_files,
    "pod": pod_files,
    "order": st.sampled_from(["qos", "priority"]),
    "fmt": formats,
}
plan_args = {"cluster": cluster_files, "pod": pod_files, "explain": st.booleans(), "fmt": formats}


@SAMPLE
@given(**victims_args)
def test_victims_cli_sample(files, node, pods, pod, order, fmt):
    check_victims(files, node, pods, pod, order, fmt)


@pytest.mark.fuzz
@pytest.mark.timeout(1200)
@fuzz(1500)
@given(**victims_args)
def test_victims_cli_fuzz(files, node, pods, pod, order, fmt):
    check_victims(files, node, pods, pod, order, fmt)


@SAMPLE
@given(**plan_args)
def test_plan_cli_sample(files, cluster, pod, explain, fmt):
    check_plan(files, cluster, pod, explain, fmt)


@pytest.mark.fuzz
@pytest.mark.timeout(1200)
@fuzz(1500)
@given(**plan_args)
def test_plan_cli_fuzz(files, cluster, pod, explain, fmt):
    check_plan(files, cluster, pod, explain, fmt)
