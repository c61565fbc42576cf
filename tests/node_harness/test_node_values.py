"""The values the node suite installs with, rendered by the real Helm engine with the chart's schema: each
set is one the chart takes, and renders what the suite's modules rely on (the image by the reference
`scripts/image` printed, in every pod the release runs; the changes of the upgrades, the sidecar's settings, the failing
webhook and the gate's timeout)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import helm_python as helm
import pytest

from testkit.chart_rendering import CHART, Rendered, render
from tests.node.release import RELEASE, node_values
from tests.node.test_rollout import ROUND, changed
from tests.node.test_sidecar import CRITICAL, SIDECAR_VALUES
from tests.node.test_uninstall import GATE_SECONDS, failing_values

IMAGE = "localhost/priority-webhook:9.8.7"
NAMESPACE = "priority-system"


@pytest.fixture(scope="module")
def chart() -> Iterator[helm.Chart]:
    with helm.Chart.load(CHART) as loaded:
        yield loaded


def rendered(chart: helm.Chart, values: dict[str, Any]) -> Rendered:
    return render(chart, values, namespace=NAMESPACE, release=RELEASE)


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj["spec"]
    pod_spec = spec["template"]["spec"] if "template" in spec else spec
    return [*pod_spec.get("initContainers", []), *pod_spec["containers"]]


def test_every_pod_of_the_release_runs_the_image_scripts_image_printed(chart: helm.Chart) -> None:
    objects = rendered(chart, node_values(IMAGE))
    with_pods = [o for o in objects.objects if o["kind"] in ("Deployment", "DaemonSet", "Job", "Pod")]
    assert {o["kind"] for o in with_pods} == {
        "Deployment",
        "DaemonSet",
        "Job",
        "Pod",
    }  # hooks and `helm test`
    for obj in with_pods:
        for container in containers(obj):
            assert container["image"] == IMAGE, (obj["kind"], obj["metadata"]["name"])
            assert container.get("imagePullPolicy", "IfNotPresent") == "IfNotPresent"


def test_a_change_rolls_the_webhook_and_the_sidecar_and_rewrites_the_configurations(
    chart: helm.Chart,
) -> None:
    objects = rendered(chart, changed(IMAGE, 2, 7))
    for kind in ("Deployment", "DaemonSet"):
        template = objects.one(kind)["spec"]["template"]
        assert template["metadata"]["annotations"][ROUND] == "2", kind
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert {hook["timeoutSeconds"] for hook in objects.one(kind)["webhooks"]} == {7}, kind


def test_the_sidecar_module_lowers_the_critical_line_and_recreates(chart: helm.Chart) -> None:
    args = objects_args(rendered(chart, node_values(IMAGE, sidecar=SIDECAR_VALUES)), "DaemonSet")
    assert f"--critical-priority={CRITICAL}" in args and "--recreate-rejected" in args
    default = objects_args(rendered(chart, node_values(IMAGE)), "DaemonSet")
    assert "--recreate-rejected" not in default


def test_the_failing_install_has_a_webhook_that_exits_and_a_short_gate(chart: helm.Chart) -> None:
    objects = rendered(chart, failing_values(IMAGE))
    assert objects_args(objects, "Deployment")[-1] == "--no-such-flag"
    (gate,) = [job for job in objects.of_kind("Job") if job["metadata"]["name"].endswith("-wait")]
    assert str(GATE_SECONDS) in containers(gate)[0]["args"]


def objects_args(objects: Rendered, kind: str) -> list[str]:
    return list(containers(objects.one(kind))[0]["args"])
