"""`review` on PodGroup documents: resolved as the API server's Priority plugin resolves them (1.36+)."""

from __future__ import annotations

import textwrap

import yaml

from tests.admission.test_review_cli import CLASSES, run, write

POD_GROUP = textwrap.dedent("""\
    apiVersion: scheduling.k8s.io/{version}
    kind: PodGroup
    metadata: {{name: gang, namespace: train}}
    spec:
      schedulingPolicy:
        gang: {{minCount: 4}}
      {spec}
""")


def test_a_pod_group_gets_its_classs_priority(tmp_path, capsys):
    classes = write(tmp_path, "classes.yaml", CLASSES)
    for version in ("v1alpha2", "v1beta1"):
        path = write(tmp_path, "pg.yaml", POD_GROUP.format(version=version, spec="priorityClassName: high"))
        code, out, err = run(["review", path, "--classes", classes], capsys)
        assert (code, err) == (0, "")
        stored = yaml.safe_load(out)
        assert stored["apiVersion"] == f"scheduling.k8s.io/{version}"
        assert stored["spec"]["priority"] == 1000 and "preemptionPolicy" not in stored["spec"]


def test_an_unnamed_pod_group_gets_the_default_class(tmp_path, capsys):
    classes = write(tmp_path, "classes.yaml", CLASSES)
    path = write(tmp_path, "pg.yaml", POD_GROUP.format(version="v1beta1", spec="minCount: 1"))
    code, out, _ = run(["review", path, "--classes", classes], capsys)
    spec = yaml.safe_load(out)["spec"]
    assert code == 0 and (spec["priorityClassName"], spec["priority"]) == ("low", 10)


def test_an_unknown_class_is_refused_as_kubectl_prints_it(tmp_path, capsys):
    path = write(tmp_path, "pg.yaml", POD_GROUP.format(version="v1beta1", spec="priorityClassName: gold"))
    code, out, err = run(["review", path], capsys)
    assert (code, out) == (1, "")
    assert err == (
        'Error from server (Forbidden): podgroups.scheduling.k8s.io "gang" is forbidden: '
        "no PriorityClass with name gold was found\n"
    )


def test_other_projects_pod_groups_pass_through(tmp_path, capsys):
    """Volcano's and scheduler-plugins' PodGroups share the kind, not the API group."""
    doc = textwrap.dedent("""\
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: PodGroup
        metadata: {name: gang, namespace: train}
        spec: {minMember: 2, priorityClassName: gold}
    """)
    code, out, err = run(["review", write(tmp_path, "vc.yaml", doc)], capsys)
    assert code == 0 and yaml.safe_load(out) == yaml.safe_load(doc)
    assert "passed through unchanged" in err and "PodGroup" in err
