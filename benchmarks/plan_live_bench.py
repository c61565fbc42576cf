"""`plan --kubeconfig` and the sidecar against a real control plane holding a big cluster.

    KUBEBUILDER_ASSETS=... python benchmarks/plan_live_bench.py [--nodes 5000 --pods 20000 --pdbs 500]
        [--node-pods 250] [--repeat 3] [--threads 8]

Starts its own etcd + kube-apiserver (testkit/envtest.py; no controller manager, so no controller
writes while it measures), then creates through the API, concurrently: the nodes (status with allocatable),
the pods bound to them with `spec.nodeName` (the benchmark snapshot's shapes: plan_snapshot.py), the PDBs,
and `--node-pods` more pods on one node. Creation throughput is reported (it bounds what can be measured
on a small machine; 150,000 pods at that rate is given as an estimate, not measured).

1. `plan --kubeconfig` (paged lists, 500 a page), in fresh processes: wall, CPU, peak RSS; baselines in the
   same run: `kubectl get nodes,pods,pdb,pc -A -o json` to a file (the listing alone, in Go), `json.load`
   of that file, and `plan --cluster` on it. Both plans must give the same answer.
2. The sidecar on the node with `--node-pods` pods, and on an empty node, in the same cluster: its list
   and watch are `spec.nodeName=NODE` field-selected, so its pod cache holds its node's pods only and its
   memory does not grow with the cluster. Reported: pods in its cache (its metrics), RSS once synced, and
   the time from start to ready.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import requests
from plan_bench import BASELINE, measure
from plan_snapshot import PREEMPTOR, node, pdb, pod

from testkit.envtest import ControlPlane, free_ports
from testkit.wait import wait_for
from webhook import json_codec
from webhook.kube.config import api_client
from webhook.kube.listing import list_objects

NAMESPACES = [f"team-{k:02d}" for k in range(40)]  # plan_snapshot.py's
SIDECAR_NODE = "node-00000"
EMPTY_NODE = "node-empty"


def create_all(plane: ControlPlane, objects: Iterable[tuple[str, dict[str, Any]]], threads: int) -> int:
    """POST every (collection path, object) with `threads` sessions; the number created. A Node's status
    (which a create drops) is then written through its `status` subresource, as a kubelet does, and its
    taints set back to the generated ones (admission adds `not-ready`, which only a controller removes)."""
    local = threading.local()

    def post(item: tuple[str, dict[str, Any]]) -> None:
        session = getattr(local, "session", None)
        if session is None:
            session = local.session = plane.session()
        path, obj = item
        response = session.post(plane.url + path, json=obj, timeout=60)
        if response.status_code != 201:
            raise RuntimeError(f"POST {path}: {response.status_code} {response.text[:300]}")
        if path == "/api/v1/nodes":
            url = f"{plane.url}{path}/{obj['metadata']['name']}"
            for where, patch in (
                ("/status", {"status": obj["status"]}),
                ("", {"spec": {"taints": obj["spec"].get("taints")}}),
            ):
                response = session.patch(
                    url + where,
                    json=patch,
                    timeout=60,
                    headers={"Content-Type": "application/merge-patch+json"},
                )
                if response.status_code != 200:
                    raise RuntimeError(f"PATCH {url}{where}: {response.status_code} {response.text[:300]}")

    count = 0
    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(post, objects):
            count += 1
    return count


def for_api(obj: dict[str, Any]) -> dict[str, Any]:
    """A generated pod as the API server takes it: no uid, no status (the server sets both)."""
    drop = ("uid", "creationTimestamp", "ownerReferences")
    meta = {k: v for k, v in obj["metadata"].items() if k not in drop}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": obj["spec"]}


def populate(plane: ControlPlane, args: argparse.Namespace) -> list[tuple[str, float, int]]:
    """Create the cluster; (what, seconds, count) per step."""
    rng = random.Random(1)
    rows = []
    setup: list[tuple[str, dict[str, Any]]] = []
    for ns in NAMESPACES:
        setup.append(("/api/v1/namespaces", {"metadata": {"name": ns}}))
    for value in (100, 1000, 10000, 100000):
        setup.append(
            (
                "/apis/scheduling.k8s.io/v1/priorityclasses",
                {"metadata": {"name": f"tier-{value}"}, "value": value},
            )
        )
    create_all(plane, setup, 1)
    create_all(
        plane,
        (
            (f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": "default"}})
            for ns in NAMESPACES
        ),
        args.threads,
    )

    def step(what: str, items: Callable[[], Iterable[tuple[str, dict[str, Any]]]]) -> None:
        start = time.perf_counter()
        count = create_all(plane, items(), args.threads)
        rows.append((what, time.perf_counter() - start, count))
        print(f"  created {count} {what} in {rows[-1][1]:.0f} s", file=sys.stderr)

    def nodes() -> Iterable[tuple[str, dict[str, Any]]]:
        for i in range(args.nodes):
            obj = node(i, rng)
            obj["metadata"].pop("uid")
            obj["metadata"].pop("creationTimestamp")
            if obj["metadata"]["name"] == SIDECAR_NODE:
                obj["status"]["allocatable"]["pods"] = obj["status"]["capacity"]["pods"] = "500"
            yield "/api/v1/nodes", obj
        empty = node(0, rng)
        empty["metadata"] = {"name": EMPTY_NODE, "labels": {"kubernetes.io/hostname": EMPTY_NODE}}
        yield "/api/v1/nodes", empty

    apps = max(1, args.pods // 30)

    def pods() -> Iterable[tuple[str, dict[str, Any]]]:
        for i in range(args.pods):
            app = rng.randrange(apps)
            ns = NAMESPACES[app % 40]
            yield f"/api/v1/namespaces/{ns}/pods", for_api(pod(i, f"node-{i % args.nodes:05d}", app, ns, rng))
        for j in range(args.node_pods):
            app = rng.randrange(apps)
            ns = NAMESPACES[app % 40]
            yield f"/api/v1/namespaces/{ns}/pods", for_api(pod(args.pods + j, SIDECAR_NODE, app, ns, rng))

    def pdbs() -> Iterable[tuple[str, dict[str, Any]]]:
        for i, app in enumerate(rng.sample(range(apps), min(args.pdbs, apps))):
            obj = pdb(i, app, NAMESPACES[app % 40], rng)
            obj["metadata"].pop("uid")
            obj.pop("status")
            yield f"/apis/policy/v1/namespaces/{obj['metadata']['namespace']}/poddisruptionbudgets", obj

    step("nodes", nodes)
    step("pods", pods)
    step("PDBs", pdbs)
    return rows


def plan_figures(plane: ControlPlane, args: argparse.Namespace, tmp: Path) -> list[tuple[str, list[float]]]:
    pod_file = tmp / "pod.yaml"
    # Fits no node that holds a pod (15.8 cpu allocatable): every node is dry-run.
    pod_file.write_text(PREEMPTOR.replace('cpu: "10"', 'cpu: "15500m"'))
    dump = tmp / "cluster.json"
    kubectl = [
        str(plane.assets / "kubectl"),
        f"--kubeconfig={plane.kubeconfig}",
        "get",
        "nodes,pods,pdb,pc",
        "-A",
        "-o",
        "json",
    ]
    live_cmd = [
        sys.executable,
        "-m",
        "webhook",
        "plan",
        "--kubeconfig",
        str(plane.kubeconfig),
        "--pod",
        str(pod_file),
        "-o",
        "json",
    ]
    file_cmd = [
        sys.executable,
        "-m",
        "webhook",
        "plan",
        "--cluster",
        str(dump),
        "--pod",
        str(pod_file),
        "-o",
        "json",
    ]
    runs: dict[str, list[tuple[float, float, float]]] = {}
    for _ in range(args.repeat):
        start = time.perf_counter()
        if args.kubectl:
            with open(dump, "w") as out:
                subprocess.run(kubectl, stdout=out, check=True, timeout=3600)
            # kubectl's own CPU and RSS are not separated from this process's other children: wall only.
            runs.setdefault("kubectl get ... -o json > file", []).append((time.perf_counter() - start, 0, 0))
        else:  # the same objects, written by our own paged listing (kubectl takes minutes at 150,000 pods)
            client = api_client(str(plane.kubeconfig), False)
            try:
                items = [obj for _, obj in list_objects(client)]
            finally:
                client.close()
            dump.write_bytes(json_codec.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
            del items
        baseline = measure([sys.executable, "-c", BASELINE, str(dump)])
        runs.setdefault("json.load of that file", []).append(baseline)
        runs.setdefault("plan --cluster that file", []).append(measure(file_cmd))
        runs.setdefault("plan --kubeconfig", []).append(measure(live_cmd))
    live = subprocess.run(live_cmd, capture_output=True, text=True, check=False, timeout=1800)
    offline = subprocess.run(file_cmd, capture_output=True, text=True, check=False, timeout=1800)
    same = json.loads(live.stdout) == json.loads(offline.stdout)
    answer = json.loads(live.stdout)
    print(f"  plan --kubeconfig and plan --cluster agree: {same}; {answer['message']}", file=sys.stderr)

    size = dump.stat().st_size / 2**20
    out = [
        (
            f"{name}{f' ({size:.0f} MiB)' if 'file' in name else ''}",
            [statistics.median(r[i] for r in values) for i in range(3)],
        )
        for name, values in runs.items()
    ]
    return out


def sidecar_figures(plane: ControlPlane, node_name: str, tmp: Path) -> tuple[float, float, float, float]:
    """(pods in its cache, RSS MiB once synced, peak RSS MiB, seconds to ready) of a dry-run sidecar."""
    (port,) = free_ports(1)
    cmd = [
        sys.executable,
        "-m",
        "webhook",
        "sidecar",
        "--node",
        node_name,
        "--kubeconfig",
        str(plane.kubeconfig),
        "--dry-run",
        "--bind",
        f"127.0.0.1:{port}",
    ]
    start = time.perf_counter()
    log = open(tmp / f"sidecar-{node_name}.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:

        def ready() -> bool:
            try:
                return requests.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
            except requests.RequestException:
                return False

        wait_for(ready, timeout=600, interval=0.1, what=f"the sidecar on {node_name} to be ready")
        ready_s = time.perf_counter() - start
        metrics = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        pattern = r'^priority_webhook_cache_objects\{reflector="pods[^"]*"\} (\S+)$'
        cached = sum(float(v) for v in re.findall(pattern, metrics, re.M))
        status = Path(f"/proc/{proc.pid}/status").read_text()
        rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024  # type: ignore[union-attr]
        peak = int(re.search(r"VmHWM:\s+(\d+)", status).group(1)) / 1024  # type: ignore[union-attr]
        return cached, rss, peak, ready_s
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def list_cost(plane: ControlPlane, node_name: str, repeat: int) -> dict[str, float]:
    """Median seconds of the sidecar's LIST (`fieldSelector=spec.nodeName=NODE`) as its reflector sends it
    (`resourceVersion=""`: a consistent read from etcd, which scans every pod of the cluster) and as the
    kubelet does (`resourceVersion=0`: from the API server's watch cache)."""
    out = {}
    with plane.session() as session:
        for version in ("", "0"):
            times = []
            for _ in range(repeat):
                start = time.perf_counter()
                response = session.get(
                    f"{plane.url}/api/v1/pods",
                    timeout=300,
                    params={"fieldSelector": f"spec.nodeName={node_name}", "resourceVersion": version},
                )
                response.raise_for_status()
                times.append(time.perf_counter() - start)
            out[version or '""'] = statistics.median(times)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--pdbs", type=int, default=500)
    parser.add_argument("--node-pods", type=int, default=250)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument(
        "--no-kubectl",
        dest="kubectl",
        action="store_false",
        help="write the dump with our own listing, not kubectl (much faster)",
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="plan-live-bench-") as folder:
        tmp = Path(folder)
        with ControlPlane.start(tmp / "envtest") as plane:
            print(f"kube-apiserver {plane.version}; creating the cluster...", file=sys.stderr)
            created = populate(plane, args)
            plans = plan_figures(plane, args, tmp)
            sidecars = [(name, sidecar_figures(plane, name, tmp)) for name in (SIDECAR_NODE, EMPTY_NODE)]
            lists = list_cost(plane, SIDECAR_NODE, args.repeat)

    total = args.pods + args.node_pods
    print(f"cluster: {args.nodes + 1} nodes, {total} pods, {args.pdbs} PDBs (real kube-apiserver, etcd)")
    for what, seconds, count in created:
        print(f"  created {count} {what} in {seconds:.0f} s ({count / seconds:.0f}/s)")
    pods_rate = next(count / seconds for what, seconds, count in created if what == "pods")
    print(f"  150,000 pods at that rate: about {150_000 / pods_rate / 60:.0f} min (not run)")
    print(f"\n{'':40} {'wall s':>8} {'CPU s':>8} {'peak RSS MiB':>13}")
    for name, (wall, cpu, rss) in plans:
        print(f"{name:40} {wall:8.2f} {cpu or float('nan'):8.2f} {rss or float('nan'):13.0f}")
    figures = dict(plans)
    live = next(v for k, v in figures.items() if k.startswith("plan --kubeconfig"))
    load = next(v for k, v in figures.items() if k.startswith("json.load"))
    listing = next((v for k, v in figures.items() if k.startswith("kubectl")), None)
    print(
        f"plan --kubeconfig / json.load of the dump: wall {live[0] / load[0]:.2f}, "
        f"CPU {live[1] / load[1]:.2f}, peak RSS {live[2] / load[2]:.2f}"
        + (f"; wall / kubectl's listing {live[0] / listing[0]:.2f}" if listing else "")
    )
    print(f"\nsidecar (--dry-run) in this cluster of {total} pods:")
    print(f"{'node':14} {'pods cached':>12} {'RSS MiB':>8} {'peak MiB':>9} {'ready s':>8}")
    for name, (cached, rss, peak, ready_s) in sidecars:
        print(f"{name:14} {cached:12.0f} {rss:8.0f} {peak:9.0f} {ready_s:8.1f}")
    costs = ", ".join(f"{version}: {seconds * 1000:.0f} ms" for version, seconds in lists.items())
    print(f"its pod LIST, by resourceVersion: {costs}")


if __name__ == "__main__":
    main()
