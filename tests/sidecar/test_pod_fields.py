"""The sidecar's pod cache keeps what its decisions read: every decision on the kept fields is the one on
the whole pod, and what is dropped is what a controller's pod carries most of."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.sidecar.fixtures import node
from tests.sidecar.test_decide import CASES, summary
from webhook.sidecar import record as rec
from webhook.sidecar.decide import decide
from webhook.sidecar.pod_fields import DROPPED_CONTAINER, kept_fields

MANAGED = [
    {"manager": "kubelet", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}
]


def as_served(pod: dict[str, Any]) -> dict[str, Any]:
    """`pod` with what the API server returns beside it: managedFields, env, mounts, probes, volumes."""
    full = copy.deepcopy(pod)
    full.setdefault("metadata", {})["managedFields"] = MANAGED
    spec = full.setdefault("spec", {})
    spec["volumes"] = [{"name": "config", "configMap": {"name": "app"}}]
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            container.update(
                env=[{"name": "A", "value": "1"}],
                volumeMounts=[{"name": "config", "mountPath": "/config"}],
                livenessProbe={"httpGet": {"path": "/healthz", "port": 8080}},
                command=["/app"],
                args=["--flag"],
            )
    return full


@pytest.mark.parametrize(
    ("pods", "settings", "hints", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_decisions_on_the_kept_fields_are_the_decisions_on_the_whole_pod(pods, settings, hints, expected):
    pods = copy.deepcopy(pods)
    if expected == "BAD":
        pods[-1]["metadata"]["annotations"][rec.ANNOTATION] = "{not json"
        expected = [("report", "crit", "PreemptionSkipped")]
    served = [as_served(p) for p in pods]
    whole = summary(decide(node(), served, settings, hints))
    kept = summary(decide(node(), [kept_fields(p) for p in served], settings, hints))
    assert whole == expected  # the table's answer, with all the extra fields
    assert kept == whole


def test_what_is_dropped_and_what_is_kept() -> None:
    pod = as_served(
        {
            "metadata": {
                "name": "web",
                "namespace": "ns",
                "uid": "u",
                "resourceVersion": "7",
                "labels": {"a": "b"},
            },
            "spec": {
                "nodeName": "node-a",
                "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "1"}}}],
                "containers": [{"name": "c", "image": "i", "ports": [{"hostPort": 80, "containerPort": 80}]}],
                "tolerations": [{"operator": "Exists"}],
            },
            "status": {"phase": "Running", "qosClass": "Burstable"},
        }
    )
    before = copy.deepcopy(pod)
    kept = kept_fields(pod)
    assert pod == before  # the reflector's object is not changed
    assert "managedFields" not in kept["metadata"] and "volumes" not in kept["spec"]
    assert kept["metadata"] == {k: v for k, v in before["metadata"].items() if k != "managedFields"}
    assert kept["status"] == before["status"]
    for key in ("initContainers", "containers"):
        for container, original in zip(kept["spec"][key], before["spec"][key], strict=True):
            assert not set(container) & set(DROPPED_CONTAINER)
            assert container == {k: v for k, v in original.items() if k not in DROPPED_CONTAINER}
    assert kept["spec"]["tolerations"] == before["spec"]["tolerations"]


@pytest.mark.parametrize("pod", [{}, {"metadata": None, "spec": "x"}, {"spec": {"containers": ["x", None]}}])
def test_malformed_pods_pass_through(pod: dict[str, Any]) -> None:
    assert kept_fields(pod) == pod
