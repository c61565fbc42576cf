"""The admission-overhead benchmark's measuring code, in a tiny configuration against the real cluster, so
the script (benchmarks/admission_overhead.py) cannot rot. No timing is asserted: only that every arm is
measured, and that the API server's calls are attributed to the right arm while the arms' creations are
interleaved: each webhook arm's timed creations, and nothing else, reached its own server. The "rule" arm's
pods name a class with an allowed-namespaces rule that admits them, and its cost is given against ours
without one."""

from __future__ import annotations

from benchmarks.admission_overhead import (
    CALLS_PER_POD,
    CHART_SERVER_ARGS,
    CLASS,
    KINDS,
    NONE,
    RULE,
    WARMUP,
    WEBHOOK,
    arm_names,
    arm_namespaces,
    measure,
    report,
    ruled_class,
)

NAMESPACE = "e2e-admission-bench"
REQUESTS = 20
ROUNDS = 1
# Two webhook arms, so that an API-server call attributed to the wrong arm shows in both arms' counts; and
# the rule arm, on the "webhook" arm's server.
VARIANTS = {WEBHOOK: CHART_SERVER_ARGS, "two-workers": ("--workers", "2")}
ARMS = [*VARIANTS, RULE]


def test_the_benchmark_measures_pod_creations_without_and_with_our_webhook(cluster, tmp_path) -> None:
    namespaces = arm_namespaces(NAMESPACE, arm_names(VARIANTS, floor=False, rule=True))
    try:
        summary = measure(
            cluster,
            tmp_path,
            requests_per_arm=REQUESTS,
            rounds=ROUNDS,
            variants=VARIANTS,
            rule=True,
            namespace=NAMESPACE,
        )
    finally:
        for namespace in namespaces.values():
            cluster.kubectl(
                "delete", "namespace", namespace, "--ignore-not-found", "--wait=false", check=False
            )
        ruled = ruled_class(namespaces[RULE])["metadata"]["name"]
        cluster.kubectl(
            "delete", "priorityclass", CLASS["metadata"]["name"], ruled, "--ignore-not-found", check=False
        )
    for kind in KINDS:
        assert list(summary[kind]) == [NONE, *ARMS]
        for figures in summary[kind].values():
            assert figures["n"] == REQUESTS
            assert 0 < figures["p50"] <= figures["p99"]
        for arm in ARMS:
            assert set(summary[kind][arm]["added"]) == {"p50", "p99", "mean"}
        assert set(summary[kind][RULE]["vs_webhook"]) == {"p50", "p99", "mean"}
    timed = len(KINDS) * REQUESTS * CALLS_PER_POD
    # Each arm's timed creations call its two webhooks at least once each: exactly that many calls per arm,
    # and none to a webhook of no arm, means no other creation ("none"'s included) reached an arm's webhook.
    assert summary["unattributed_apiserver_calls"] == 0
    # The servers' own counts, independent of the API server's webhook names: the arm's warm-up and timed
    # creations and its direct pairs, and nothing from the other arms' namespaces.
    reviews = CALLS_PER_POD * (len(KINDS) * (ROUNDS * WARMUP + REQUESTS) + REQUESTS)
    assert set(summary["server"]) == set(VARIANTS)
    for arm, server in summary["server"].items():
        assert server["arms"] == ([WEBHOOK, RULE] if arm == WEBHOOK else [arm])
        assert server["apiserver_calls"] == timed, arm
        assert server["reviews"] == reviews * len(server["arms"]), arm
        assert server["mean_ms_per_review"] > 0 and server["apiserver_mean_ms_per_call"] > 0
        assert server["connections"] >= 1
        assert server["direct_pair"]["n"] == REQUESTS
    (rule,) = summary["shared"].values()
    assert list(summary["shared"]) == [RULE]
    assert rule["apiserver_calls"] == timed and rule["direct_pair"]["n"] == REQUESTS
    assert "added p50" in report(summary) and f"x {WEBHOOK}:" in report(summary)
