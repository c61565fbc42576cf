"""Kubernetes' own preemption specs pass with our webhook giving pods their priority.

Upstream's `[sig-scheduling] SchedulerPreemption [Serial]` specs (`testkit/upstream_e2e.py`: SPECS) decide a
pod's priority only through admission: with the in-tree Priority plugin off they pass only if our webhook,
registered from the chart's rendered configurations with the default values, resolves the classes they
create in their own namespaces and `system-cluster-critical` in kube-system, and lets their PriorityClass
writes through. Each mode (`conftest.py`: MODES) runs them on a cluster of its own (scheduler, controller
manager, two hollow nodes), one `e2e.test` run per spec, each once the previous spec's objects are gone;
what passed is read from the suite's own report.

A spec that fails is run again, alone, on a cluster with the in-tree plugin alone and no webhook, and the
failure says which it is: a spec that passes there and fails with the webhook is ours to fix.

The webhook must have been asked, not bypassed: over each spec the API server's own counters of calls
answered 200 grew for every entry the spec reaches (pods in its namespace, mutating and validating; pods in
kube-system for the critical pod; PriorityClasses), and our server answered without an error.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from testkit import upstream_e2e
from testkit.apiserver_metrics import scrape
from testkit.cluster_webhook import metric
from tests.upstream.conftest import SAYS, Cluster, count

OUR_REQUESTS = "priority_webhook_admission_requests_total"
# One run of a spec, and one more on the plugin-alone cluster where it fails (started then).
pytestmark = pytest.mark.timeout((2 * upstream_e2e.SPEC_TIMEOUT_MINUTES + 5) * 60)


def our_counts(cluster: Cluster) -> dict[str, float]:
    """Our server's own counters: reviews it answered, and those it could not answer."""
    assert cluster.hook is not None
    server = cluster.hook.server
    return {
        "answered": metric(server, OUR_REQUESTS),
        "error": metric(server, OUR_REQUESTS, 'result="error"'),
        "unavailable": metric(server, OUR_REQUESTS, 'result="unavailable"'),
    }


def run_spec(cluster: Cluster, e2e: Path, name: str, workdir: Path) -> upstream_e2e.Run:
    """Run one spec alone on `cluster`, once it is back as it started (the previous spec's objects gone)."""
    cluster.wait_as_started()
    return upstream_e2e.run_specs(e2e, cluster.plane, [name], workdir)


def verdict(spec: upstream_e2e.Spec, baseline: upstream_e2e.Spec | None, mode: str) -> str:
    """The failed spec with the suite's own failure message, and what it did with the plugin alone."""
    lines = [f"{spec.name}: {spec.state} {SAYS[mode]} ({spec.seconds:.0f} s)"]
    lines += [f"    {line}" for line in spec.failure.splitlines()]
    if baseline is None:
        lines.append("  with the in-tree plugin alone, no webhook: not run")
    elif baseline.passed:
        lines.append("  with the in-tree plugin alone, no webhook: passed -- a defect of ours")
    else:
        lines.append(
            f"  with the in-tree plugin alone, no webhook: {baseline.state} too -- not the webhook's:"
        )
        lines += [f"    {line}" for line in baseline.failure.splitlines()]
    return "\n".join(lines)


@pytest.mark.parametrize("name", upstream_e2e.SPECS, ids=upstream_e2e.spec_id)
def test_upstream_spec_passes(
    cluster: Cluster,
    name: str,
    e2e_binary: Path,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    tracked: Callable[[Cluster | upstream_e2e.Run], None],
) -> None:
    tracked(cluster)
    before, ours_before = scrape(cluster.plane), our_counts(cluster)
    run = run_spec(cluster, e2e_binary, name, tmp_path / "e2e")
    tracked(run)
    after, ours_after = scrape(cluster.plane), our_counts(cluster)

    assert [spec.name for spec in run.specs] == [name], f"{e2e_binary} ran {run.specs} for {name!r}"
    (spec,) = run.specs
    count(cluster, spec)
    if not spec.passed:
        plugin_alone: Cluster = request.getfixturevalue("plugin_alone")
        tracked(plugin_alone)
        baseline = run_spec(plugin_alone, e2e_binary, name, tmp_path / "e2e-plugin-alone")
        tracked(baseline)
        pytest.fail(verdict(spec, baseline.specs[0] if baseline.specs else None, cluster.mode), pytrace=False)
    assert run.returncode == 0, f"e2e.test exited {run.returncode} with the spec passed:\n{run.tail()}"

    calls = upstream_e2e.calls_answered(before, after, name)
    assert all(calls.values()), f"the API server did not call (or got no answer from) every entry: {calls}"
    moved = {key: ours_after[key] - ours_before[key] for key in ours_after}
    assert moved["answered"] >= sum(calls.values()), moved
    assert moved["error"] == 0 and moved["unavailable"] == 0, moved
