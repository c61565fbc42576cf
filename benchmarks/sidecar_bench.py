"""Sidecar: the cost of one decision pass, and how fast a rejection turns into an eviction.

    .venv/bin/python benchmarks/sidecar_bench.py [--pods 110] [--repeat 7] [--reactions 30]

1. Decision pass, in process, on a full node (the victims benchmark's pods, all Running):
   * baseline: `admit_to_node` of the critical pod on the same node and pods (the module's own work);
   * `decide` with one rejected critical pod (safety filtering, the module, the record), as a ratio;
   * `decide` with no rejected pod (the pass that follows every pod event), and `state_counts` (the pod
     metric), as ratios.
2. Reaction, end to end: a real `Sidecar` on the in-repo test API server (real HTTP, watches, Eviction
   subresource). Each sample creates a victim and a rejected critical pod, and times the write of the
   rejected pod to the API server's answer to the eviction. Baseline: one eviction call of an idle pod
   through the same client, measured in the same run. p50 / p99 over `--reactions` samples.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import timeit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from victims_bench import scenario

from testkit.kubeapi import KubeAPIServer
from testkit.kubeapi.eviction import install
from webhook.kube import eviction
from webhook.preemption.node.admission import admit_to_node
from webhook.sidecar.actions import Hints, Settings
from webhook.sidecar.agent import Sidecar
from webhook.sidecar.decide import decide
from webhook.sidecar.lifecycle import state_counts


def best(fn, repeat: int) -> float:
    timer = timeit.Timer(fn)
    loops, _ = timer.autorange()
    return min(timer.repeat(repeat=repeat, number=loops)) / loops


def decision_pass(count: int, repeat: int) -> None:
    node, pods, critical = scenario(count, seed=1)
    rejected = {**critical, "status": {"phase": "Failed", "reason": "OutOfcpu"}}
    view = [*pods, rejected]
    settings = Settings(node_name="node-a")
    actions = decide(node, view, settings, Hints())
    assert any(type(a).__name__ == "Evict" for a in actions), "the scenario must need victims"
    base = best(lambda: admit_to_node(critical, node, pods, order="priority"), repeat)
    full = best(lambda: decide(node, view, settings, Hints()), repeat)
    idle = best(lambda: decide(node, pods, settings, Hints()), repeat)
    counts = best(lambda: state_counts(pods), repeat)
    print(
        f"| decision pass, {count} pods | baseline admit_pod {base * 1e3:.3f} ms (1.0) "
        f"| decide with a rejection {full * 1e3:.3f} ms ({full / base:.2f}x) "
        f"| decide, nothing rejected {idle * 1e6:.1f} us ({idle / base:.3f}x) "
        f"| state_counts {counts * 1e6:.1f} us ({counts / base:.3f}x) |"
    )


def pod(name: str, cpu: str, **extra) -> dict:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": "node-a",
            "priority": extra.get("priority", 0),
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {
            "phase": extra.get("phase", "Running"),
            **({"reason": extra["reason"]} if "reason" in extra else {}),
        },
    }


def wait(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("no eviction")
        time.sleep(0.0005)


def reaction(samples: int) -> None:
    with KubeAPIServer(graceful_pods=False) as api:
        recorder = install(api)
        api.create(
            "nodes",
            {
                "metadata": {"name": "node-a"},
                "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "110"}},
            },
        )
        client = api.api_client()
        floor = []
        for i in range(samples):
            idle = api.create("pods", pod(f"idle-{i}", "1m", phase="Pending"), "default")
            api.update("pods", {**idle, "spec": {**idle["spec"], "nodeName": "elsewhere"}}, "default")
            start = time.perf_counter()
            assert eviction.evict(client, "default", f"idle-{i}", idle["metadata"]["uid"]).ok
            floor.append(time.perf_counter() - start)
        agent = Sidecar(client, Settings(node_name="node-a"), max_evictions_per_minute=10_000)
        agent.start()
        assert agent.wait_ready(10)
        times = []
        try:
            for i in range(samples):
                api.create("pods", pod(f"victim-{i}", "900m"), "default")
                before = len(recorder.attempts)
                start = time.perf_counter()
                api.create(
                    "pods",
                    pod(f"crit-{i}", "500m", priority=2_000_000_000, phase="Failed", reason="OutOfcpu"),
                    "default",
                )
                wait(lambda before=before: len(recorder.attempts) > before)
                times.append(time.perf_counter() - start)
                api.delete("pods", f"crit-{i}", "default")
        finally:
            agent.stop()

    def q(values, p):
        return statistics.quantiles(values, n=100)[p - 1] * 1e3

    print(
        f"| rejection -> eviction, {samples} samples | baseline: one eviction call p50 {q(floor, 50):.1f} ms "
        f"| p50 {q(times, 50):.1f} ms ({q(times, 50) / q(floor, 50):.1f}x) "
        f"| p99 {q(times, 99):.1f} ms ({q(times, 99) / q(floor, 99):.1f}x of the floor's p99) |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=110)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--reactions", type=int, default=30)
    args = parser.parse_args(argv)
    decision_pass(args.pods, args.repeat)
    reaction(args.reactions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
