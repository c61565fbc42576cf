"""Kubernetes' own preemption specs pass with our webhook giving pods their priority.

Upstream's `[sig-scheduling] SchedulerPreemption [Serial]` specs (`testkit/upstream_e2e.py`: SPECS) decide a
pod's priority only through admission: with the in-tree Priority plugin off they pass only if our webhook,
registered from the chart's rendered configurations with the default values, resolves the classes they
create in their own namespaces and `system-cluster-critical` in kube-system, and lets their PriorityClass
writes through. Each mode (`conftest.py`: MODES) runs them in one `e2e.test` run on a cluster of its own
(scheduler, controller manager, two hollow nodes); what passed is read from the suite's own report.

A spec that fails is run again, alone, on a cluster with the in-tree plugin alone and no webhook, and the
failure says which it is: a spec that passes there and fails with the webhook is ours to fix.

The webhook must have been asked, not bypassed: over the run the API server's own counters of calls answered
200 grew for every entry the specs reach (pods in the specs' namespaces and in kube-system, mutating and
validating, and PriorityClasses), and our server answered pods and PriorityClasses without an error.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from testkit import upstream_e2e
from testkit.apiserver_metrics import Samples, grown, scrape
from testkit.cluster_webhook import metric
from tests.upstream.conftest import SAYS, Cluster, record

# The entries of the chart's configurations the specs reach: (webhook name, the API server's type label).
ENTRIES = (
    ("pods.priority-webhook.io", "admit"),
    ("pods.priority-webhook.io", "validating"),
    ("system-pods.priority-webhook.io", "admit"),
    ("system-pods.priority-webhook.io", "validating"),
    ("priorityclasses.priority-webhook.io", "validating"),
)
OUR_REQUESTS = "priority_webhook_admission_requests_total"


def calls_answered(before: Samples, after: Samples) -> dict[tuple[str, str], float]:
    """Per entry, the API server's calls to it that our webhook answered (HTTP 200) between the scrapes."""
    return {
        (name, kind): sum(
            grown(
                before,
                after,
                "apiserver_admission_webhook_request_total",
                [("name", "=", name), ("type", "=", kind), ("code", "=", "200")],
            ).values()
        )
        for name, kind in ENTRIES
    }


def our_counts(cluster: Cluster) -> dict[str, float]:
    """Our server's own counters: reviews of pods and of PriorityClasses, and those it could not answer."""
    assert cluster.hook is not None
    server = cluster.hook.server
    return {
        "pods": metric(server, OUR_REQUESTS, 'resource="pods"'),
        "priorityclasses": metric(server, OUR_REQUESTS, 'resource="priorityclasses"'),
        "error": metric(server, OUR_REQUESTS, 'result="error"'),
        "unavailable": metric(server, OUR_REQUESTS, 'result="unavailable"'),
    }


def verdicts(failed: list[upstream_e2e.Spec], baseline: upstream_e2e.Run | None, mode: str) -> str:
    """Each failed spec with the suite's own failure message, and what it did with the plugin alone."""
    alone = {spec.name: spec for spec in baseline.specs} if baseline else {}
    lines = []
    for spec in failed:
        lines.append(f"{spec.name}: {spec.state} {SAYS[mode]} ({spec.seconds:.0f} s)")
        lines += [f"    {line}" for line in spec.failure.splitlines()]
        other = alone.get(spec.name)
        if other is None:
            lines.append("  with the in-tree plugin alone, no webhook: not run")
        elif other.passed:
            lines.append("  with the in-tree plugin alone, no webhook: passed -- a defect of ours")
        else:
            lines.append(
                f"  with the in-tree plugin alone, no webhook: {other.state} too -- not the webhook's:"
            )
            lines += [f"    {line}" for line in other.failure.splitlines()]
    return "\n".join(lines)


def test_upstream_preemption_specs_pass(
    cluster: Cluster,
    e2e_binary: Path,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    tracked: Callable[[Cluster | upstream_e2e.Run], None],
) -> None:
    tracked(cluster)
    before, ours_before = scrape(cluster.plane), our_counts(cluster)
    run = upstream_e2e.run_specs(e2e_binary, cluster.plane, upstream_e2e.SPECS, tmp_path / "e2e")
    tracked(run)
    after, ours_after = scrape(cluster.plane), our_counts(cluster)

    ran = [spec.name for spec in run.specs]
    missing = [name for name in upstream_e2e.SPECS if name not in ran]
    assert not missing, f"{e2e_binary} has no spec named {missing} (it ran {ran})"
    failed = [spec for spec in run.specs if not spec.passed]
    if failed:
        record(
            f"upstream e2e: {len(failed)} of {len(run.specs)} specs failed {SAYS[cluster.mode]} "
            f"(Kubernetes {cluster.plane.version})"
        )
        plugin_alone: Cluster = request.getfixturevalue("plugin_alone")
        tracked(plugin_alone)
        baseline = upstream_e2e.run_specs(
            e2e_binary, plugin_alone.plane, [spec.name for spec in failed], tmp_path / "e2e-plugin-alone"
        )
        tracked(baseline)
        pytest.fail(verdicts(failed, baseline, cluster.mode), pytrace=False)
    assert run.returncode == 0, f"e2e.test exited {run.returncode} with every spec passed:\n{run.tail()}"

    calls = calls_answered(before, after)
    assert all(calls.values()), f"the API server did not call (or got no answer from) every entry: {calls}"
    moved = {key: ours_after[key] - ours_before[key] for key in ours_after}
    assert moved["pods"] > 0 and moved["priorityclasses"] > 0, moved
    assert moved["error"] == 0 and moved["unavailable"] == 0, moved

    record(
        f"upstream e2e: {len(run.specs)} specs passed {SAYS[cluster.mode]} (Kubernetes {cluster.plane.version})"
    )
