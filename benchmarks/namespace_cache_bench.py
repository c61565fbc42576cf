"""Namespace cache for allowed-namespaces rules: memory per 1,000 namespaces, label change to decision.

    .venv/bin/python benchmarks/namespace_cache_bench.py [--namespaces 5000] [--changes 100] [--repeat 7]

1. Memory: `--namespaces` Namespaces as the API server lists them (labels, kubectl's last-applied
   annotation, managed fields, spec and status: about 1.3 KB of JSON each) are listed by a
   ClusterNamespaceStore from the in-repo test API server; what its content holds (tracemalloc, after a
   collection) is reported per 1,000 namespaces, against the baseline of the same LIST kept as whole
   objects (webhook.kube.cache.ObjectCache, what a generic informer keeps), measured the same way in the
   same run.
2. Label change -> decision, end to end: the real server (`serve --kubeconfig`, one worker, HTTPS) on the
   test API server, a class with `allowed-namespaces: tier=gold`; each change relabels the namespace
   (gold <-> bronze) and pod reviews are sent to /validate back to back until one is decided the new way;
   the time from the write to that answer is one sample. Baseline, interleaved change by change in the
   same server: a PriorityClass created and sent to /mutate until it resolves (the class cache's path).
3. Decision cost, in process (handle_review, /validate of a pod, best of `--repeat`): a pod of a class
   with a rule (a matching namespace: the selector is evaluated) against the baseline of a pod of a class
   without one, in the same run: the difference is the rule's own work.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
import timeit
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cache_bench import percentiles, until  # the script's own directory is on sys.path

from testkit.kubeapi import KubeAPIServer
from testkit.reviews import pod, review
from testkit.server import webhook_server
from webhook.kube.cache import ObjectCache
from webhook.kube.namespace_store import NAMESPACES_PATH, ClusterNamespaceStore
from webhook.kube.reflector import Reflector
from webhook.policy.class_model import SYSTEM_CLASSES, ClassSet, PriorityClass
from webhook.policy.namespace_access import ALLOWED_NAMESPACES
from webhook.policy.pod_rules import PodOptions
from webhook.review import Stage, handle_review

TEAMS = 40


def namespace(i: int) -> dict[str, Any]:
    name = f"team-{i:05d}"
    labels = {"team": f"team-{i % TEAMS}", "tier": ("gold", "silver", "bronze")[i % 3], "env": "prod"}
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": (
                    '{"apiVersion":"v1","kind":"Namespace","metadata":{"annotations":{},"labels":'
                    f'{{"team":"{labels["team"]}","tier":"{labels["tier"]}","env":"prod"}},"name":"{name}"}}}}\n'
                )
            },
            "managedFields": [
                {
                    "manager": "kubectl-client-side-apply",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2026-01-01T00:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {
                            "f:annotations": {
                                ".": {},
                                "f:kubectl.kubernetes.io/last-applied-configuration": {},
                            },
                            "f:labels": {".": {}, "f:env": {}, "f:team": {}, "f:tier": {}},
                        }
                    },
                }
            ],
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def held(store: Any, reflector: Reflector) -> int:
    """Bytes `store` holds once `reflector` (built, with its client, before tracing starts) has listed."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    reflector.start()
    assert reflector.wait_synced(60)
    reflector.stop(timeout=5)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(store) > 0
    return after - before


def memory(api: KubeAPIServer, count: int) -> None:
    ours = ClusterNamespaceStore(api.api_client(), name="bench-labels")
    ours_bytes = held(ours, ours.reflector)
    whole = ObjectCache()
    whole_bytes = held(whole, Reflector(api.api_client(), NAMESPACES_PATH, whole, name="bench-objects"))
    per = 1000 / count
    print(
        f"memory per 1,000 namespaces: labels only {ours_bytes * per / 1024:.0f} KiB; whole objects "
        f"(baseline) {whole_bytes * per / 1024:.0f} KiB; ratio {ours_bytes / whole_bytes:.3f}x "
        f"({count} namespaces, 4 labels each)"
    )


def latency(api: KubeAPIServer, changes: int) -> None:
    api.create(
        "priorityclasses",
        {"metadata": {"name": "gold", "annotations": {ALLOWED_NAMESPACES: "tier=gold"}}, "value": 5000},
    )
    api.create("namespaces", {"metadata": {"name": "bench", "labels": {"tier": "bronze"}}})
    body = review(pod(name="p", class_name="gold", priority=5000, preemptionPolicy="PreemptLowerPriority"))
    body["request"]["namespace"] = body["request"]["object"]["metadata"]["namespace"] = "bench"
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = api.kubeconfig(str(Path(tmp) / "kubeconfig"))
        with webhook_server(Path(tmp), "--kubeconfig", kubeconfig, "--workers", "1") as server:
            until(
                lambda: server.session.get(server.url + "/readyz", timeout=5).status_code == 200,
                time.perf_counter(),
            )

            def allowed(path: str, sent: dict[str, Any]) -> bool:
                answer = server.session.post(server.url + path, json=sent, timeout=5)
                return bool(answer.json()["response"]["allowed"])

            relabels, creations = [], []
            tier = "bronze"
            for i in range(changes):
                tier = "gold" if tier == "bronze" else "bronze"
                obj = api.get("namespaces", "bench")
                assert obj is not None
                obj["metadata"]["labels"] = {"tier": tier}
                start = time.perf_counter()
                api.update("namespaces", obj)
                relabels.append(until(lambda want=tier == "gold": allowed("/validate", body) is want, start))

                name = f"bench-{i}"
                start = time.perf_counter()
                api.create("priorityclasses", {"metadata": {"name": name}, "value": i})
                creations.append(
                    until(lambda name=name: allowed("/mutate", review(pod(class_name=name))), start)
                )
    ratio = statistics.median(relabels) / statistics.median(creations)
    print(f"label change -> first review decided by it: {percentiles(relabels)}")
    print(f"baseline, class created -> first review resolving it: {percentiles(creations)}")
    print(f"ratio of medians: {ratio:.2f}x")


def decision_cost(repeat: int) -> None:
    ruled = PriorityClass.from_object(
        {
            "metadata": {
                "name": "gold",
                "annotations": {ALLOWED_NAMESPACES: "tier in (gold,silver),!sandbox"},
            },
            "value": 5,
        }
    )
    classes = ClassSet([*SYSTEM_CLASSES, ruled, PriorityClass("free", 5)])
    labels = {"bench": {"kubernetes.io/metadata.name": "bench", "tier": "gold", "team": "a"}}

    class Labels:
        def labels_of(self, namespace: str) -> Any:
            return labels.get(namespace)

    def body(name: str) -> dict[str, Any]:
        sent = review(pod(name="p", class_name=name, priority=5, preemptionPolicy="PreemptLowerPriority"))
        sent["request"]["namespace"] = sent["request"]["object"]["metadata"]["namespace"] = "bench"
        return sent

    options, source = PodOptions(), Labels()
    free, gold = body("free"), body("gold")
    assert handle_review(gold, Stage.VALIDATE, classes, options, namespaces=source)[2].allowed

    def best(stmt: Any) -> float:
        loops, _ = timeit.Timer(stmt).autorange()
        return min(timeit.Timer(stmt).repeat(repeat, loops)) / loops

    plain = best(lambda: handle_review(free, Stage.VALIDATE, classes, options, namespaces=source))
    with_rule = best(lambda: handle_review(gold, Stage.VALIDATE, classes, options, namespaces=source))
    print(
        f"/validate of a pod, in process: class without a rule {plain * 1e6:.1f} us (baseline); "
        f"class with a rule {with_rule * 1e6:.1f} us ({with_rule / plain:.2f}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespaces", type=int, default=5000)
    parser.add_argument("--changes", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with KubeAPIServer(bookmark_interval=30) as api:
        for i in range(args.namespaces):
            api.create("namespaces", namespace(i))
        memory(api, args.namespaces)
        latency(api, args.changes)
    decision_cost(args.repeat)


if __name__ == "__main__":
    main()
