"""The admission-overhead benchmark's measuring code, in a tiny configuration against the real cluster, so
the script (benchmarks/admission_overhead.py) cannot rot. No timing is asserted: only that both arms are
measured, the webhook arm really went through our webhook and the "none" arm did not."""

from __future__ import annotations

from benchmarks.admission_overhead import CALLS_PER_POD, CLASS, KINDS, NONE, measure, report

NAMESPACE = "e2e-admission-bench"
REQUESTS = 20


def test_the_benchmark_measures_pod_creations_without_and_with_our_webhook(cluster, tmp_path) -> None:
    try:
        summary = measure(cluster, tmp_path, requests_per_arm=REQUESTS, rounds=1, namespace=NAMESPACE)
    finally:
        cluster.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false", check=False)
        cluster.kubectl(
            "delete", "priorityclass", CLASS["metadata"]["name"], "--ignore-not-found", check=False
        )
    for kind in KINDS:
        assert set(summary[kind]) == {NONE, "webhook"}
        for figures in summary[kind].values():
            assert figures["n"] == REQUESTS
            assert 0 < figures["p50"] <= figures["p99"]
        assert set(summary[kind]["webhook"]["added"]) == {"p50", "p99", "mean"}
    server = summary["server"]["webhook"]
    timed = len(KINDS) * REQUESTS * CALLS_PER_POD
    assert server["apiserver_calls"] == timed  # only the webhook arm's timed creations reached the webhook
    assert server["reviews"] >= timed  # plus warm-up and switch probes
    assert server["mean_ms_per_review"] > 0 and server["apiserver_mean_ms_per_call"] > 0
    assert server["connections"] >= 1
    assert server["direct_pair"]["n"] == REQUESTS
    assert "added p50" in report(summary)
