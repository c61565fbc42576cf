"""Benchmark of `plan` on a generated 5,000 nodes / 150,000 pods / 500 PDBs snapshot.

    python benchmarks/plan_bench.py [--nodes 5000 --pods 150000 --pdbs 500] [--repeat 3] [--cli]

The snapshot is generated at run time into a temporary directory (never committed). Figures:
JSON loading (the command's document loader), indexing (every pod's priority, start time and requests
read once, nodes' used resources summed), the plan itself with all nodes examined (default) and with
`--sample` (upstream's candidate limits, random offsets), and, with `--cli`, the whole command in a
subprocess. Each time is also given as a ratio to a baseline measured in the same run: one pass over the
index touching every pod's cpu request, i.e. the least any plan examining every node must do.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from plan_snapshot import PREEMPTOR, generate  # the script's own directory is on sys.path

from webhook.commands.plan import _classes, _resolver, without_gc
from webhook.documents import load_objects, load_one
from webhook.policy.pods import PodOptions
from webhook.preemption.planner import PlanOptions, plan
from webhook.preemption.scheduler_filter import same_pod
from webhook.preemption.snapshot import Snapshot, build_snapshot, read_pod


def timed(fn: Callable[[], Any], repeat: int) -> tuple[tuple[float, float], Any]:
    """(median wall time, median CPU time of this process) of `repeat` runs, and the last result.

    CPU time is given too because a shared machine stretches wall time with other processes' work.
    """
    walls, cpus, result = [], [], None
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        result = fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return (statistics.median(walls), statistics.median(cpus)), result


def sample_options() -> PlanOptions:
    """`--sample` as the command runs it: a fresh random offset each time, as upstream."""
    return PlanOptions(now=time.time(), sample=True, offset=random.randrange(2**31))


def touch_every_pod(snapshot: Snapshot) -> int:
    """Baseline: one pass over every node's pods reading one request."""
    total = 0
    for node in snapshot.nodes:
        for pod in node.pods:
            total += pod.requests.get("cpu", 0)
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--pdbs", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cli", action="store_true", help="also time the whole command in a subprocess")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="plan-bench-") as tmp:
        cluster, pod_file = Path(tmp) / "cluster.json", Path(tmp) / "pod.yaml"
        cluster.write_text(json.dumps(generate(args.nodes, args.pods, args.pdbs)))
        pod_file.write_text(PREEMPTOR)
        mib = cluster.stat().st_size / 2**20

        with without_gc():  # as the command loads and indexes
            load_s, objects = timed(lambda: load_objects([str(cluster)]), 1)
        classes = _classes(objects, [])
        resolve = _resolver(classes, PodOptions())
        preemptor = read_pod(load_one(str(pod_file), "Pod"), str(pod_file), -1, resolve)
        assert preemptor is not None
        with without_gc():
            index_s, snapshot = timed(
                lambda: build_snapshot(objects, resolve, exclude=lambda p: same_pod(p, preemptor)), 1
            )
        with without_gc():
            base_s, _ = timed(lambda: touch_every_pod(snapshot), max(args.repeat, 5))
            full_s, full = timed(lambda: plan(preemptor, snapshot, PlanOptions(now=time.time())), args.repeat)
            sample_s, sampled = timed(lambda: plan(preemptor, snapshot, sample_options()), args.repeat)
        rows = [
            (f"JSON load ({mib:.0f} MiB)", load_s),
            ("index (parse pods, sum per node)", index_s),
            (f"plan, all nodes ({len(full.candidates)} candidates)", full_s),
            (f"plan --sample ({len(sampled.candidates)} candidates)", sample_s),
        ]
        if args.cli:
            cmd = [sys.executable, "-m", "webhook", "plan", "--cluster", str(cluster), "--pod", str(pod_file)]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            (cli_wall, _), proc = timed(lambda: subprocess.run(cmd, capture_output=True, check=False), 1)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            assert proc.returncode == 0, proc.stderr
            cli_cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            rows.append(("whole command (subprocess)", (cli_wall, cli_cpu)))

    print(f"snapshot: {args.nodes} nodes, {args.pods} pods, {args.pdbs} PDBs; chosen node {full.node}, "
          f"{len(full.victims)} victims; baseline (touch every pod once) {base_s[0] * 1000:.1f} ms wall, "
          f"{base_s[1] * 1000:.1f} ms CPU")
    print(f"{'figure':45} {'wall s':>8} {'CPU s':>8} {'x baseline (CPU)':>17}")
    for name, (wall, cpu) in rows:
        print(f"{name:45} {wall:8.3f} {cpu:8.3f} {cpu / base_s[1]:17.0f}")


if __name__ == "__main__":
    main()
