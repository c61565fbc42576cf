"""Benchmark of `plan` on a generated 5,000 nodes / 150,000 pods / 500 PDBs snapshot, against the
standard library's `json.load` of the same file, both measured in the same run.

    python benchmarks/plan_bench.py [--nodes 5000 --pods 150000 --pdbs 500] [--repeat 3] [--snapshot DIR]

The snapshot is generated at run time into a temporary directory (never committed), or read from DIR
(`plan_snapshot.py --out DIR`). Each repeat runs, in fresh subprocesses and alternately, the baseline
`json.load(open(FILE))` and the whole command `priority-webhook plan --cluster FILE --pod POD -o json`
(read, parse, decide, print). Per subprocess: wall time, CPU time (user + system) and peak RSS (its own
`wait4` rusage, taken by a small launcher process, not the maximum over all children). Ratios are
command / baseline, medians of the repeats; CPU time is the steadier figure on a shared machine. Then,
in this process, where the command's time goes: streaming the file into the compact index, and the plan
with all nodes examined and with `--sample`.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from plan_snapshot import PREEMPTOR, generate  # the script's own directory is on sys.path

from webhook.commands.plan import _resolver, without_gc
from webhook.files.documents import load_one
from webhook.files.snapshot_file import stream_objects
from webhook.policy.class_model import StaticClassStore
from webhook.policy.pod_rules import PodOptions
from webhook.preemption.cluster.filter import same_info
from webhook.preemption.cluster.planner import PlanOptions, plan
from webhook.preemption.cluster.snapshot import SnapshotBuilder, read_pod

BASELINE = "import json, sys\nwith open(sys.argv[1]) as f:\n    json.load(f)\n"


# Runs the command as its own child and reports that child's rusage. A child's peak RSS counts the memory
# of the process it was forked from (Linux carries the pre-exec high-water mark over), so the forking
# process must be this small one, not the benchmark with its own objects.
LAUNCHER = """import json, os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
sys.stderr.write("\\nRUSAGE " + json.dumps([usage.ru_utime + usage.ru_stime, usage.ru_maxrss]) + "\\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def measure(cmd: list[str]) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MiB) of one fresh process running `cmd`."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", LAUNCHER, *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    wall = time.perf_counter() - start
    err = proc.stderr.decode(errors="replace")
    if proc.returncode not in (0, 1) or "\nRUSAGE " not in err:
        raise SystemExit(f"{cmd[:4]} exited {proc.returncode}: {err[-2000:]}")
    cpu, maxrss_kib = json.loads(err.rsplit("\nRUSAGE ", 1)[1])
    return wall, cpu, maxrss_kib / 1024


def breakdown(cluster: Path, pod_file: Path) -> list[tuple[str, float]]:
    """CPU seconds of the command's parts, in this process."""
    options = PodOptions()
    rows = []
    with without_gc():  # as the command runs
        cpu = time.process_time()
        builder = SnapshotBuilder(_resolver(StaticClassStore([]).snapshot(), options), classes_known=False)
        for source, obj in stream_objects(str(cluster)):
            builder.add(source, obj)
        resolve = _resolver(StaticClassStore(builder.classes).snapshot(), options)
        preemptor = read_pod(load_one(str(pod_file), "Pod"), str(pod_file), -1, resolve)
        assert preemptor is not None
        snapshot = builder.finish(resolve, exclude=lambda p: same_info(p, preemptor))
        rows.append(("stream the file into the compact index", time.process_time() - cpu))
        cpu = time.process_time()
        full = plan(preemptor, snapshot, PlanOptions(now=time.time()))
        rows.append((f"plan, all nodes ({len(full.candidates)} candidates)", time.process_time() - cpu))
        cpu = time.process_time()
        sample = PlanOptions(now=time.time(), sample=True, offset=random.randrange(2**31))
        sampled = plan(preemptor, snapshot, sample)
        rows.append((f"plan --sample ({len(sampled.candidates)} candidates)", time.process_time() - cpu))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--pdbs", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--snapshot", type=Path, help="plan_snapshot.py's output folder")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="plan-bench-") as tmp:
        folder = args.snapshot or Path(tmp)
        cluster, pod_file = folder / "cluster.json", folder / "pod.yaml"
        if args.snapshot is None:
            cluster.write_text(json.dumps(generate(args.nodes, args.pods, args.pdbs)))
            pod_file.write_text(PREEMPTOR)
        mib = cluster.stat().st_size / 2**20
        baseline_cmd = [sys.executable, "-c", BASELINE, str(cluster)]
        plan_cmd = [
            sys.executable,
            "-m",
            "webhook",
            "plan",
            "--cluster",
            str(cluster),
            "--pod",
            str(pod_file),
            "-o",
            "json",
        ]
        baseline, command = [], []
        for _ in range(args.repeat):
            baseline.append(measure(baseline_cmd))
            command.append(measure(plan_cmd))
        parts = breakdown(cluster, pod_file)

    print(f"snapshot: {mib:.0f} MiB of JSON; medians of {args.repeat} alternate runs in fresh processes")
    print(f"{'':36} {'wall s':>8} {'CPU s':>8} {'peak RSS MiB':>13}")
    medians = {}
    for name, runs in (("json.load (baseline)", baseline), ("plan, whole command", command)):
        medians[name] = [statistics.median(r[i] for r in runs) for i in range(3)]
        wall, cpu, rss = medians[name]
        print(f"{name:36} {wall:8.2f} {cpu:8.2f} {rss:13.0f}")
    (bw, bc, br), (pw, pc, pr) = medians.values()
    print(f"{'ratio plan / json.load':36} {pw / bw:8.2f} {pc / bc:8.2f} {pr / br:13.2f}")
    print("\nwhere the command's CPU time goes (in this process):")
    for name, cpu in parts:
        print(f"  {name:44} {cpu:6.2f} s")


if __name__ == "__main__":
    main()
