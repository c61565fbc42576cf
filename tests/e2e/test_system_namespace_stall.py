"""A stall in kube-system never stops the control plane's own pods, on the real API server.

The chart serves the system namespaces with their own entries, `failurePolicy: Ignore`. When /mutate
cannot be reached for a kube-system pod (a timeout, an outage, a replica that hangs) the API server skips
it, and the pod reaches /validate as its client sent it: without `spec.priority`. It must be admitted,
with a warning the client sees and a counter an alert can use. Here the chart's system /mutate entry is
pointed at a closed port while /validate stays reachable; the in-tree Priority plugin is off.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from testkit.cluster_webhook import RegisteredWebhook, create, metric, pod
from testkit.envtest import ControlPlane, free_ports
from testkit.wait import wait_for

SYSTEM_ENTRY = "system-pods.priority-webhook.io"
COUNTER = "priority_webhook_unresolved_pods_total"
WARNING = (
    "spec.priority is not set: priority admission was skipped (webhook timeout or outage); "
    "admitted in system namespace kube-system without it"
)


def mutating(hook: RegisteredWebhook) -> dict[str, Any]:
    return next(c for c in hook.configurations if c["kind"] == "MutatingWebhookConfiguration")


def mutated(cluster: ControlPlane, session: Any) -> bool | None:
    """Whether a kube-system pod's /mutate ran (True), was skipped (False), or the pod was denied (None)."""
    outcome = create(session, cluster, pod(f"probe-{uuid.uuid4().hex[:8]}", "kube-system"))
    if not outcome.allowed:
        return None if "spec.priority is not set" not in outcome.message else False
    return outcome.priority is not None


@pytest.fixture
def mutate_unreachable_for_kube_system(
    no_priority_cluster: ControlPlane, no_priority_webhook: RegisteredWebhook
) -> Iterator[tuple[ControlPlane, RegisteredWebhook]]:
    cluster, hook = no_priority_cluster, no_priority_webhook
    original = mutating(hook)
    broken = copy.deepcopy(original)
    for entry in broken["webhooks"]:
        if entry["name"] == SYSTEM_ENTRY:
            assert entry["failurePolicy"] == "Ignore"
            entry["clientConfig"]["url"] = f"https://127.0.0.1:{free_ports(1)[0]}/mutate"  # nothing listens
    cluster.apply(broken)
    try:
        with cluster.session() as session:
            # The API server loads configurations asynchronously: until the broken one is in effect, the
            # pod is mutated. Before the fix the skipped mutation showed as a denial (None).
            wait_for(
                lambda: mutated(cluster, session) is not True,
                timeout=60,
                interval=0.2,
                what="the broken entry",
            )
        yield cluster, hook
    finally:
        cluster.apply(original)
        with cluster.session() as session:
            wait_for(lambda: mutated(cluster, session) is True, timeout=60, interval=0.2, what="the restore")


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "real"])
def test_a_kube_system_pod_whose_mutation_was_skipped_is_admitted_warned_and_counted(
    mutate_unreachable_for_kube_system, dry_run
) -> None:
    cluster, hook = mutate_unreachable_for_kube_system
    before = metric(hook.server, COUNTER)
    name = f"stalled-{uuid.uuid4().hex[:8]}"
    with cluster.session() as session:
        outcome = create(
            session, cluster, pod(name, "kube-system", "system-cluster-critical"), dry_run=dry_run
        )
    assert outcome.allowed, outcome.message
    assert (outcome.priority, outcome.class_name) == (None, "system-cluster-critical")
    assert WARNING in outcome.warnings
    assert metric(hook.server, COUNTER) == before + 1
    if not dry_run:
        cluster.kubectl("delete", "pod", name, "-n", "kube-system", "--wait=false")


def test_outside_the_system_namespaces_a_pod_without_priority_is_still_denied(
    mutate_unreachable_for_kube_system,
) -> None:
    """The general entries are untouched: there a pod that reaches /validate without priority had it
    dropped by a later webhook (tests/e2e/test_webhook_reinvocation.py); the skip rule is kube-system's."""
    cluster, hook = mutate_unreachable_for_kube_system
    before = metric(hook.server, COUNTER)
    with cluster.session() as session:
        outcome = create(session, cluster, pod(f"general-{uuid.uuid4().hex[:8]}", "default"))
    assert outcome.allowed and outcome.priority == 0  # /mutate reachable there: resolved as usual
    assert metric(hook.server, COUNTER) == before
