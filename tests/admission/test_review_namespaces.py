"""`review` and allowed-namespaces rules: Namespace documents in the input give the labels; a namespace
the input does not describe is unknown (one line on stderr, exit 2) only where a rule needs its labels."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from webhook.cli import main

CLASSES = textwrap.dedent("""\
    apiVersion: scheduling.k8s.io/v1
    kind: PriorityClass
    metadata:
      name: gold
      annotations:
        priority-webhook.io/allowed-namespaces: "tier in (gold,silver)"
    value: 5000
    ---
    apiVersion: scheduling.k8s.io/v1
    kind: PriorityClass
    metadata:
      name: watched
      annotations:
        priority-webhook.io/allowed-namespaces: "kubernetes.io/metadata.name=platform"
        priority-webhook.io/enforcement: audit
    value: 4000
    ---
    apiVersion: scheduling.k8s.io/v1
    kind: PriorityClass
    metadata: {name: free}
    value: 10
""")
NAMESPACES = textwrap.dedent("""\
    apiVersion: v1
    kind: Namespace
    metadata: {name: team-gold, labels: {tier: gold}}
    ---
    apiVersion: v1
    kind: Namespace
    metadata: {name: team-bronze, labels: {tier: bronze}}
""")


def pod(class_name: str, namespace: str, name: str = "web") -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"priorityClassName": class_name, "containers": [{"name": "c", "image": "nginx"}]},
        }
    )


def deployment(class_name: str, namespace: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "priorityClassName": class_name,
                        "containers": [{"name": "c", "image": "nginx"}],
                    },
                },
            },
        }
    )


def review(tmp_path: Path, capsys: pytest.CaptureFixture[str], *docs: str) -> tuple[int, list, str]:
    path = tmp_path / "input.yaml"
    path.write_text("---\n".join([CLASSES, NAMESPACES, *docs]))
    code = main(["review", str(path), "-o", "json"])
    out, err = capsys.readouterr()
    parsed = json.loads(out) if out else {}
    items = parsed.get("items", [parsed]) if parsed else []
    return code, [i for i in items if i.get("kind") in ("Pod", "Deployment")], err


def test_a_matching_namespace_admits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, objects, err = review(tmp_path, capsys, pod("gold", "team-gold"))
    assert code == 0, err
    assert [o["spec"]["priority"] for o in objects] == [5000]


def test_a_namespace_that_does_not_match_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, objects, err = review(
        tmp_path, capsys, pod("gold", "team-bronze"), pod("free", "team-bronze", "ok")
    )
    assert code == 1
    assert [o["metadata"]["name"] for o in objects] == ["ok"]
    assert (
        'Error from server (Forbidden): pods "web" is forbidden: PriorityClass gold may not be used in '
        "namespace team-bronze: its labels do not match priority-webhook.io/allowed-namespaces: "
        '"tier in (gold,silver)"'
    ) in err.splitlines()


def test_a_workload_gets_its_pods_refusal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, objects, err = review(tmp_path, capsys, deployment("gold", "team-bronze"))
    assert code == 1
    assert objects == []
    assert (
        "Error from server (Forbidden): pods created by Deployment team-bronze/web will be forbidden: "
        "PriorityClass gold may not be used in namespace team-bronze"
    ) in err


def test_the_name_label_is_set_as_the_api_server_sets_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    platform = "apiVersion: v1\nkind: Namespace\nmetadata: {name: platform}\n"
    code, objects, err = review(tmp_path, capsys, platform, pod("watched", "platform"))
    assert code == 0, err
    assert "Warning" not in err
    assert objects[0]["spec"]["priority"] == 4000


def test_audit_admits_with_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, objects, err = review(tmp_path, capsys, pod("watched", "team-gold"))
    assert code == 0
    assert objects[0]["spec"]["priority"] == 4000
    assert (
        "Warning: audit: PriorityClass watched may not be used in namespace team-gold: its labels do not "
        'match priority-webhook.io/allowed-namespaces: "kubernetes.io/metadata.name=platform"'
    ) in err.splitlines()


def test_an_unknown_namespace_exits_2_only_where_a_rule_needs_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, objects, err = review(tmp_path, capsys, pod("free", "elsewhere"))
    assert code == 0, err
    assert "elsewhere" not in err

    code, objects, err = review(
        tmp_path, capsys, pod("gold", "elsewhere", "a"), pod("gold", "elsewhere", "b"), pod("free", "x", "c")
    )
    assert code == 2
    unknown = [line for line in err.splitlines() if line.startswith("review: namespace")]
    assert unknown == [
        "review: namespace elsewhere: no Namespace document in the input, its labels are unknown and a "
        "PriorityClass's allowed-namespaces rule needs them"
    ]
    assert [o["metadata"]["name"] for o in objects] == ["c"]


def test_an_unparsable_rule_in_the_input_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = textwrap.dedent("""\
        apiVersion: scheduling.k8s.io/v1
        kind: PriorityClass
        metadata:
          name: broken
          annotations: {priority-webhook.io/allowed-namespaces: "tier in gold"}
        value: 7
    """)
    code, _, err = review(tmp_path, capsys, broken)
    assert code == 1
    (line,) = [line for line in err.splitlines() if "broken" in line]
    assert line.startswith('The PriorityClass "broken" is invalid: metadata.annotations[')


def test_stdin_through_the_real_entry_point() -> None:
    docs = "---\n".join([CLASSES, NAMESPACES, pod("gold", "team-bronze")])
    proc = subprocess.run(
        [sys.executable, "-m", "webhook", "review", "-", "-o", "json"],
        input=docs,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1
    assert "PriorityClass gold may not be used in namespace team-bronze" in proc.stderr
