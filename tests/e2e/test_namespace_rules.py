"""Allowed-namespaces rules through a real kube-apiserver: our webhook (the chart's configurations, a
Namespace cache on the real API server) refuses what `kubectl --dry-run=server` and real creates send
from namespaces whose labels do not match, and follows a relabelled namespace within seconds.

One cluster (`no_priority_plane`) and one registered webhook serve the module, as in test_webhook_pods.py.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from testkit.cluster_webhook import (
    RegisteredWebhook,
    create,
    ensure_namespace,
    kubectl_create,
    kubectl_denial,
    metric,
    pod,
    priority_class,
    wait_until_resolved,
)
from testkit.envtest import ControlPlane
from testkit.wait import wait_for

GOLD_NS, BRONZE_NS, MOVING_NS = "e2e-ns-gold", "e2e-ns-bronze", "e2e-ns-moving"
GOLD, AUDITED, BROKEN = "e2e-ns-gold-only", "e2e-ns-audited", "e2e-ns-broken"
VALUES = {GOLD: 7000, AUDITED: 6000}
SELECTOR = "tier in (gold)"
POD_WEBHOOK = "pods.priority-webhook.io"
CLASS_WEBHOOK = "priorityclasses.priority-webhook.io"
WORKLOAD_WEBHOOK = "workloads.priority-webhook.io"
# A relabel must decide the next creation within this (the watch event's way to every worker's cache).
RELABEL_DEADLINE = 10.0


def gated(name: str, value: int, selector: str, enforcement: str | None = None) -> dict[str, Any]:
    obj = priority_class(name, value)
    obj["metadata"]["annotations"] = {"priority-webhook.io/allowed-namespaces": selector}
    if enforcement:
        obj["metadata"]["annotations"]["priority-webhook.io/enforcement"] = enforcement
    return obj


def label(cluster: ControlPlane, namespace: str, tier: str) -> None:
    cluster.kubectl("label", "namespace", namespace, f"tier={tier}", "--overwrite")


def refusal(class_name: str, namespace: str, selector: str = SELECTOR) -> str:
    return (
        f"PriorityClass {class_name} may not be used in namespace {namespace}: its labels do not match "
        f'priority-webhook.io/allowed-namespaces: "{selector}"'
    )


@pytest.fixture(scope="module")
def cluster(
    no_priority_plane: ControlPlane, no_priority_webhook: RegisteredWebhook
) -> Iterator[ControlPlane]:
    cluster = no_priority_plane
    for namespace, tier in ((GOLD_NS, "gold"), (BRONZE_NS, "bronze"), (MOVING_NS, "bronze")):
        ensure_namespace(cluster, namespace)
        label(cluster, namespace, tier)
    cluster.apply(gated(GOLD, VALUES[GOLD], SELECTOR), gated(AUDITED, VALUES[AUDITED], SELECTOR, "audit"))
    try:
        with cluster.session() as session:
            wait_until_resolved(cluster, session, GOLD_NS, VALUES)
        yield cluster
    finally:
        cluster.kubectl("delete", "priorityclass", GOLD, AUDITED, BROKEN, "--ignore-not-found", check=False)
        for namespace in (GOLD_NS, BRONZE_NS, MOVING_NS):
            cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "real"])
def test_kubectl_prints_the_refusal_naming_class_namespace_and_selector(
    cluster: ControlPlane, dry_run: bool
) -> None:
    name = f"refused-{'dry' if dry_run else 'real'}"
    result = kubectl_create(cluster, pod(name, BRONZE_NS, GOLD), dry_run=dry_run)
    assert result.returncode == 1
    assert result.stderr.strip() == kubectl_denial(
        POD_WEBHOOK, f'pods "{name}" is forbidden: {refusal(GOLD, BRONZE_NS)}'
    )
    assert "NotFound" in cluster.kubectl("get", "pod", "-n", BRONZE_NS, name, check=False).stderr


def test_a_matching_namespace_gets_the_class(cluster: ControlPlane) -> None:
    result = kubectl_create(cluster, pod("admitted", GOLD_NS, GOLD))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["spec"]["priority"] == VALUES[GOLD]


def test_audit_admits_with_kubectls_warning(cluster: ControlPlane) -> None:
    result = kubectl_create(cluster, pod("audited", BRONZE_NS, AUDITED))
    assert result.returncode == 0, result.stderr
    assert f"Warning: audit: {refusal(AUDITED, BRONZE_NS)}" in result.stderr.splitlines()
    assert json.loads(result.stdout)["spec"]["priority"] == VALUES[AUDITED]


def test_a_deployment_is_refused_with_its_pods_words(cluster: ControlPlane) -> None:
    template = pod("x", BRONZE_NS, GOLD)
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": BRONZE_NS},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": template["spec"]},
        },
    }
    result = kubectl_create(cluster, deployment)
    assert result.returncode == 1
    assert result.stderr.strip() == kubectl_denial(
        WORKLOAD_WEBHOOK,
        f"pods created by Deployment {BRONZE_NS}/web will be forbidden: {refusal(GOLD, BRONZE_NS)}",
    )


def test_an_unparsable_rule_is_refused_when_the_class_is_written(cluster: ControlPlane) -> None:
    result = kubectl_create(cluster, gated(BROKEN, 10, "tier in gold"))
    assert result.returncode == 1
    assert result.stderr.strip().startswith(
        kubectl_denial(
            CLASS_WEBHOOK,
            f'PriorityClass.scheduling.k8s.io "{BROKEN}" is invalid: '
            'metadata.annotations[priority-webhook.io/allowed-namespaces]: Invalid value: "tier in gold": ',
        )
    )
    result = kubectl_create(cluster, gated(BROKEN, 10, "tier=gold", "Audit"))
    assert result.returncode == 1
    assert "Unsupported value" in result.stderr


def test_a_namespace_relabelled_while_pods_are_created(
    cluster: ControlPlane, no_priority_webhook: RegisteredWebhook
) -> None:
    """Pods are created without pause (real creates, deleted as they go) while the namespace is relabelled:
    admission follows the labels within the deadline and does not go back."""
    outcomes: list[tuple[float, bool]] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def create_loop() -> None:
        with cluster.session() as session:
            while not stop.is_set():
                try:
                    name = f"moving-{uuid.uuid4().hex[:8]}"
                    outcome = create(session, cluster, pod(name, MOVING_NS, GOLD), dry_run=False)
                    outcomes.append((time.monotonic(), outcome.allowed))
                    if outcome.allowed:
                        cluster.kubectl("delete", "pod", "-n", MOVING_NS, name, "--wait=false", check=False)
                except BaseException as err:  # surfaced in the test thread
                    errors.append(err)
                    return

    loop = threading.Thread(target=create_loop)
    loop.start()
    try:
        wait_for(lambda: len(outcomes) >= 3, timeout=30, what="creations flowing")
        assert not any(allowed for _, allowed in outcomes)
        denied_before = metric(
            no_priority_webhook.server,
            "priority_webhook_namespace_rule_total",
            f'priority_class="{GOLD}",result="denied"',
        )
        assert denied_before >= 3

        label(cluster, MOVING_NS, "gold")
        relabelled = time.monotonic()
        wait_for(
            lambda: outcomes[-1][1], timeout=RELABEL_DEADLINE, what="creations admitted after the relabel"
        )
        first = next(t for t, allowed in outcomes if allowed)
        count = len(outcomes)
        wait_for(lambda: len(outcomes) >= count + 10, timeout=30, what="more creations")
        assert all(allowed for t, allowed in outcomes if t > first)
        assert first - relabelled < RELABEL_DEADLINE

        label(cluster, MOVING_NS, "bronze")
        wait_for(lambda: not outcomes[-1][1], timeout=RELABEL_DEADLINE, what="refused after relabelling back")
    finally:
        stop.set()
        loop.join(60)
    assert not errors, errors
