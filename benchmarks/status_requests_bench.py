"""What reading pods by their status costs (in-place resize, Kubernetes 1.33+), as ratios in one run.

    .venv/bin/python benchmarks/status_requests_bench.py [--pods 2000] [--repeat 7] [--seed 1]

Pods shaped as a 1.33 API server serves running pods: every container status reports `resources` and
`allocatedResources` (the kubelet writes them whenever resize is on), equal to the spec for most pods, and
a resized pod (spec above what is allocated and running) now and then. Timed on the same pods, taking turns
within a round, best of `--repeat` rounds:
* baseline: the scheduler's request read by spec (`scheduler_pod_requests` with 1.32 semantics);
* scheduler 1.33: the same with the status (largest of spec, allocated and running);
* kubelet 1.33: what the kubelet admits against (`kubelet_admission_requests`: allocated, at least running).
"""

from __future__ import annotations

import argparse
import random
import timeit
from typing import Any

from webhook.preemption.resources import kubelet_admission_requests, scheduler_pod_requests
from webhook.preemption.semantics import Semantics

CPU = ("100m", "250m", "500m", "1")
MEMORY = ("128Mi", "256Mi", "1Gi")


def running_pod(i: int, rng: random.Random) -> dict[str, Any]:
    containers, statuses = [], []
    for c in range(rng.randint(1, 3)):
        requests = {"cpu": rng.choice(CPU), "memory": rng.choice(MEMORY)}
        running = dict(requests)
        if rng.random() < 0.05:  # resized up, not yet allocated
            requests = {**requests, "cpu": "2"}
        containers.append({"name": f"c{c}", "resources": {"requests": requests}})
        statuses.append({"name": f"c{c}", "resources": {"requests": running}, "allocatedResources": running})
    return {
        "metadata": {"name": f"p{i}", "namespace": "default"},
        "spec": {"containers": containers},
        "status": {"phase": "Running", "containerStatuses": statuses},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    pods = [running_pod(i, rng) for i in range(args.pods)]
    v132, v133 = Semantics((1, 32)), Semantics((1, 33))
    cases = {
        "baseline (spec, 1.32)": lambda: [scheduler_pod_requests(p, v132) for p in pods],
        "scheduler 1.33 (status)": lambda: [scheduler_pod_requests(p, v133) for p in pods],
        "kubelet 1.33 (allocated)": lambda: [kubelet_admission_requests(p, v133) for p in pods],
    }
    best = dict.fromkeys(cases, float("inf"))
    for _ in range(args.repeat):
        for name, run in cases.items():
            best[name] = min(best[name], timeit.timeit(run, number=1))
    base = best["baseline (spec, 1.32)"]
    for name, seconds in best.items():
        print(f"{name:28} {seconds / args.pods * 1e6:8.2f} us/pod  x{seconds / base:.2f}")


if __name__ == "__main__":
    main()
