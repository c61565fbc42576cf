"""Another mutating webhook changes pods after ours: the API server reinvokes ours (`reinvocationPolicy:
IfNeeded`), and the validating entry checks the final state.

The second webhook (`Meddler`, testkit/cluster_webhook.py) is a small TLS server of our own, registered under a
name that sorts after the chart's configuration, so it runs after ours; what it does depends on the pod's
annotations. The in-tree Priority plugin is off: our webhook alone resolves priority.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from testkit.cluster_webhook import (
    ADD_LABEL,
    DROP_PRIORITY,
    SET_CLASS,
    Meddler,
    RegisteredWebhook,
    ensure_namespace,
    kubectl_create,
    kubectl_denial,
    meddler,
    pod,
    priority_class,
    registered_webhook,
    wait_until_resolved,
)
from testkit.envtest import ControlPlane
from testkit.wait import wait_for

NS = "e2e-reinvoke"
HIGH = "e2e-reinvoke-high"


@pytest.fixture(scope="module")
def chain(
    no_priority_plane: ControlPlane,
    no_priority_webhook: RegisteredWebhook,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[RegisteredWebhook, Meddler]]:
    cluster, hook = no_priority_plane, no_priority_webhook
    ensure_namespace(cluster, NS)
    cluster.apply(priority_class(HIGH, 1000000))
    tmp = tmp_path_factory.mktemp("reinvoke")
    try:
        with meddler(tmp) as second:
            config = second.configuration(NS)
            cluster.apply(config)
            with cluster.session() as session:
                wait_until_resolved(cluster, session, NS, {HIGH: 1000000})
            # The API server loads webhook configurations asynchronously: wait until the second one is called.
            wait_for(
                lambda: (
                    kubectl_create(cluster, pod("probe", NS)).returncode == 0 and second.calls_for("probe")
                ),
                timeout=60,
                interval=0.2,
                what="the second webhook",
            )
            try:
                yield hook, second
            finally:
                cluster.kubectl(
                    "delete", "mutatingwebhookconfiguration", config["metadata"]["name"], check=False
                )
    finally:
        cluster.kubectl("delete", "priorityclass", HIGH, "--ignore-not-found", check=False)
        cluster.kubectl("delete", "namespace", NS, "--wait=false", check=False)


@pytest.fixture
def cluster(no_priority_cluster: ControlPlane, chain) -> ControlPlane:
    return no_priority_cluster


def counts(hook: RegisteredWebhook) -> tuple[float, float]:
    return hook.requests("mutate"), hook.requests("validate")


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "real"])
def test_a_class_set_by_a_later_webhook_is_resolved_when_we_are_reinvoked(cluster, chain, dry_run) -> None:
    hook, second = chain
    name = f"set-class-{'dry' if dry_run else 'real'}"
    before = counts(hook)
    result = kubectl_create(cluster, pod(name, NS, annotations={SET_CLASS: HIGH}), dry_run=dry_run)
    assert result.returncode == 0, result.stderr
    spec = json.loads(result.stdout)["spec"]
    assert (spec["priorityClassName"], spec["priority"], spec["preemptionPolicy"]) == (
        HIGH,
        1000000,
        "PreemptLowerPriority",
    )
    mutate, validate = counts(hook)
    assert (mutate - before[0], validate - before[1]) == (2, 1)  # reinvoked once, validated once
    # The second webhook changed the pod once; it was called again after our reinvocation changed it.
    assert second.calls_for(name) == [True, False]


def test_an_unrelated_change_by_a_later_webhook_reinvokes_us_to_no_effect(cluster, chain) -> None:
    hook, second = chain
    before = counts(hook)
    result = kubectl_create(cluster, pod("add-label", NS, annotations={ADD_LABEL: ""}))
    assert result.returncode == 0, result.stderr
    stored = json.loads(result.stdout)
    assert stored["metadata"]["labels"] == {"meddled": "yes"}
    assert (stored["spec"]["priority"], stored["spec"]["preemptionPolicy"]) == (0, "PreemptLowerPriority")
    mutate, validate = counts(hook)
    assert (mutate - before[0], validate - before[1]) == (2, 1)
    # Our second call changed nothing, so the second webhook is not called again.
    assert second.calls_for("add-label") == [True]


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "real"])
def test_a_later_webhook_that_keeps_dropping_the_priority_is_caught_by_the_final_state_check(
    cluster, chain, dry_run
) -> None:
    hook, second = chain
    name = f"drop-priority-{'dry' if dry_run else 'real'}"
    before = counts(hook)
    result = kubectl_create(cluster, pod(name, NS, HIGH, annotations={DROP_PRIORITY: ""}), dry_run=dry_run)
    assert result.returncode == 1
    assert result.stderr.strip() == kubectl_denial(
        "pods.priority-webhook.io",
        f'pods "{name}" is forbidden: spec.priority is not set; priority admission requires 1000000',
    )
    mutate, validate = counts(hook)
    assert (mutate - before[0], validate - before[1]) == (2, 1)
    assert second.calls_for(name) == [True, True]  # after our first call and after our reinvocation
    assert "NotFound" in cluster.kubectl("get", "pod", name, "-n", NS, check=False).stderr


def test_after_the_in_tree_plugin_the_final_state_check_is_what_catches_a_dropped_priority(
    control_plane: ControlPlane, attach_logs, tmp_path
) -> None:
    """With the plugin on (the session's cluster), a later webhook that drops the priority gets a pod
    stored without one; with our webhook registered too, the validating entry denies it."""
    plane = attach_logs(control_plane)
    ensure_namespace(plane, NS)
    plane.apply(priority_class(HIGH, 1000000))
    obj = pod("drop-after-plugin", NS, HIGH, annotations={DROP_PRIORITY: ""})
    try:
        with meddler(tmp_path) as second:
            config = second.configuration(NS)
            plane.apply(config)
            try:
                wait_for(
                    lambda: (
                        kubectl_create(plane, pod("probe", NS)).returncode == 0 and second.calls_for("probe")
                    ),
                    timeout=60,
                    interval=0.2,
                    what="the second webhook",
                )
                alone = kubectl_create(plane, obj)
                assert alone.returncode == 0, alone.stderr
                assert "priority" not in json.loads(alone.stdout)["spec"]  # the plugin alone lets it through
                with registered_webhook(plane, tmp_path, workers=1):
                    result = kubectl_create(plane, obj)
                assert result.returncode == 1
                assert result.stderr.strip() == kubectl_denial(
                    "pods.priority-webhook.io",
                    'pods "drop-after-plugin" is forbidden: spec.priority is not '
                    "set; priority admission requires 1000000",
                )
            finally:
                plane.kubectl(
                    "delete", "mutatingwebhookconfiguration", config["metadata"]["name"], check=False
                )
    finally:
        plane.kubectl("delete", "priorityclass", HIGH, "--ignore-not-found", check=False)
        plane.kubectl("delete", "namespace", NS, "--wait=false", check=False)
