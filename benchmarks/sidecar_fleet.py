"""The sidecar as a fleet: real kubelets (kubemark hollow nodes), a sidecar on each, one API server.

    KUBEBUILDER_ASSETS=...  python benchmarks/sidecar_fleet.py [--nodes 20] [--background-pods 20000]
        [--phase 180] [--churn 4] [--restarts 4]

`KUBEBUILDER_ASSETS` names envtest's folder (etcd, kube-apiserver, kubectl and kubemark; see
docs/end-to-end.md); kubemark must run as root. One run, one control plane (etcd + kube-apiserver, no
controller manager, so nothing but this script, the kubelets and the sidecars writes):

0. Background: `--background-pods` pods bound to nodes that have no kubelet, so that the pod collection is
   cluster-sized. A sidecar's LIST (`fieldSelector=spec.nodeName=NODE`) is timed as a consistent read
   (`resourceVersion=""`, what the sidecar sent before) and from the watch cache (`resourceVersion=0`).
1. Baseline, `--phase` seconds: `--nodes` hollow nodes, pods churning on them (created on and deleted from
   random nodes, `--churn` per second), `--restarts` kubelet restarts spread over the phase.
2. Fleet, `--phase` seconds: the same, plus one sidecar per node (`priority-webhook sidecar --node NAME`),
   and `--restarts` sidecar restarts (each one LISTs again).

Reported: the API server's CPU, RSS, open watches (`apiserver_longrunning_requests`) and request rate in
each phase; the sidecars' own requests, exactly, from the API server's audit log (the sidecars authenticate
as their own user): per second by verb and resource, and their LIST latencies; each sidecar's RSS and CPU.
Per sidecar, times 5,000, is the extrapolation to a 5,000-node cluster: linear, since each sidecar holds
two watches filtered to its own node and its LISTs are served from the watch cache, whose cost does not
grow with the cluster (the consistent read does: timed in step 0).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import requests
from plan_live_bench import create_all, list_cost

from testkit.envtest import ControlPlane, free_ports
from testkit.hollow_node import HollowNode
from testkit.processes import cpu_seconds, rss_kib
from testkit.wait import wait_for

NAMESPACE = "fleet"


# -- processes -------------------------------------------------------------------------------------------
def rss_mib(pid: int) -> float:
    return (rss_kib(pid) or 0) / 1024


class Restartable(Protocol):
    name: str

    def restart(self) -> None: ...


@dataclass
class Child:
    """A process of the fleet that can be stopped and started again with the same arguments."""

    name: str
    args: list[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    cpu_before: float = 0.0  # CPU of the earlier incarnations, so a restart does not lose it

    def start(self) -> None:
        out = self.log.open("ab")
        self.popen = subprocess.Popen(
            self.args,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out.close()

    def stop(self) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        with contextlib.suppress(OSError):
            self.cpu_before += cpu_seconds(self.popen.pid)
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(15)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def cpu(self) -> float:
        assert self.popen is not None
        return self.cpu_before + cpu_seconds(self.popen.pid)


def sidecar(node: str, kubeconfig: Path, folder: Path) -> tuple[Child, int]:
    (port,) = free_ports(1)
    args = [sys.executable, "-m", "webhook", "sidecar", "--node", node, "--kubeconfig", str(kubeconfig)]
    args += ["--bind", f"127.0.0.1:{port}"]
    return Child(f"sidecar-{node}", args, folder / f"sidecar-{node}.log"), port


# -- the API server's view -------------------------------------------------------------------------------
SIDECAR_USER = "fleet-sidecar"
AUDIT_POLICY = f"""apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  users: ["{SIDECAR_USER}"]
- level: None
"""


def audited_requests(audit_log: Path, since: float, until: float) -> list[dict[str, object]]:
    """The sidecars' requests received in [since, until) (wall-clock seconds): verb, resource, seconds."""
    out = []
    for line in audit_log.read_text().splitlines():
        event = json.loads(line)
        if event.get("stage") != ("ResponseStarted" if event.get("verb") == "watch" else "ResponseComplete"):
            continue  # a watch counts when it opens; it completes only when it ends
        received = datetime.fromisoformat(
            event["requestReceivedTimestamp"].replace("Z", "+00:00")
        ).timestamp()
        if since <= received < until:
            done = datetime.fromisoformat(event["stageTimestamp"].replace("Z", "+00:00")).timestamp()
            ref = event.get("objectRef") or {}
            out.append(
                {
                    "verb": event["verb"],
                    "resource": ref.get("resource", "")
                    + ("/" + ref["subresource"] if ref.get("subresource") else ""),
                    "seconds": done - received,
                }
            )
    return out


SAMPLE = re.compile(r"^(\w+)\{([^}]*)\} (\S+)$", re.M)


def scrape(session: requests.Session, url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = session.get(f"{url}/metrics", timeout=60).text
    out: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for name, labels, value in SAMPLE.findall(text):
        out[name].append((dict(re.findall(r'(\w+)="([^"]*)"', labels)), float(value)))
    return out


def total(metrics: dict[str, list[tuple[dict[str, str], float]]], name: str, **want: str) -> float:
    return sum(v for labels, v in metrics.get(name, []) if all(labels.get(k) == w for k, w in want.items()))


@dataclass
class Reading:
    at: float
    metrics: dict[str, list[tuple[dict[str, str], float]]]
    rss: float
    cpu: float


def read(plane: ControlPlane, session: requests.Session) -> Reading:
    pid = plane.processes["kube-apiserver"].popen.pid  # type: ignore[union-attr]
    return Reading(time.monotonic(), scrape(session, plane.url), rss_mib(pid), cpu_seconds(pid))


def phase_figures(before: Reading, after: Reading, watches: list[float]) -> dict[str, float]:
    seconds = after.at - before.at
    out: dict[str, float] = {}
    requests_made = total(after.metrics, "apiserver_request_total") - total(
        before.metrics, "apiserver_request_total"
    )
    out["requests /s (all clients)"] = requests_made / seconds
    name = "apiserver_request_duration_seconds"
    count = total(after.metrics, f"{name}_count", verb="LIST", resource="pods") - total(
        before.metrics, f"{name}_count", verb="LIST", resource="pods"
    )
    spent = total(after.metrics, f"{name}_sum", verb="LIST", resource="pods") - total(
        before.metrics, f"{name}_sum", verb="LIST", resource="pods"
    )
    out["pod LIST mean ms"] = spent / count * 1000 if count else float("nan")
    out["open watches (median)"] = statistics.median(watches) if watches else float("nan")
    out["API server RSS MiB (end)"] = after.rss
    out["API server CPU %"] = (after.cpu - before.cpu) / seconds * 100
    return out


# -- the load ----------------------------------------------------------------------------------------------
def churn(
    plane: ControlPlane, nodes: list[str], rate: float, per_node: int, stop: threading.Event, seed: int
) -> Iterator[int]:
    """Create pods on random nodes at `rate` per second, deleting the oldest of a node past `per_node`."""
    rng = random.Random(seed)
    live: dict[str, list[str]] = {node: [] for node in nodes}
    base = f"{plane.url}/api/v1/namespaces/{NAMESPACE}/pods"
    made = 0
    with plane.session() as session:
        while not stop.wait(1 / rate):
            node = rng.choice(nodes)
            name = f"churn-{seed}-{made}"
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "labels": {"app": "churn"}},
                "spec": {
                    "nodeName": node,
                    "containers": [
                        {
                            "name": "c",
                            "image": "pause",
                            "resources": {"requests": {"cpu": "10m", "memory": "8Mi"}},
                        }
                    ],
                    "terminationGracePeriodSeconds": 0,
                },
            }
            try:  # an overloaded API server may time out: the load goes on, the pod is counted only if made
                if session.post(base, json=pod, timeout=60).status_code == 201:
                    made += 1
                    live[node].append(name)
                if len(live[node]) > per_node:
                    session.delete(f"{base}/{live[node].pop(0)}", timeout=60)
            except requests.RequestException as err:
                print(f"  churn: {type(err).__name__}", file=sys.stderr)
            yield made


def run_phase(
    plane: ControlPlane,
    session: requests.Session,
    nodes: list[str],
    restartable: list[Restartable],
    args: argparse.Namespace,
    seed: int,
) -> tuple[Reading, Reading, list[float], int]:
    """Churn and restart for `--phase` seconds; the API server read at both ends, watches sampled."""
    stop = threading.Event()
    created = [0]

    def load() -> None:
        for made in churn(plane, nodes, args.churn, 20, stop, seed):
            created[0] = made

    watches: list[float] = []
    before = read(plane, session)
    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    restart_at = [before.at + args.phase * (k + 1) / (args.restarts + 1) for k in range(args.restarts)]
    rng = random.Random(seed)
    while (now := time.monotonic()) < before.at + args.phase:
        if restart_at and now >= restart_at[0]:
            restart_at.pop(0)
            child = rng.choice(restartable)
            print(f"  restart {child.name}", file=sys.stderr)
            child.restart()
        metrics = scrape(session, plane.url)
        watches.append(total(metrics, "apiserver_longrunning_requests", verb="WATCH"))
        time.sleep(5)  # a sampling period, not a synchronisation
    stop.set()
    worker.join(60)
    after = read(plane, session)
    return before, after, watches, created[0]


def background(plane: ControlPlane, count: int, threads: int) -> None:
    """`count` pods bound to nodes without a kubelet: they stay Pending and cost only their storage."""

    def pods() -> Iterator[tuple[str, dict[str, object]]]:
        for i in range(count):
            spec = {"nodeName": f"ghost-{i % 500:03d}", "containers": [{"name": "c", "image": "pause"}]}
            yield f"/api/v1/namespaces/{NAMESPACE}/pods", {"metadata": {"name": f"bg-{i}"}, "spec": spec}

    start = time.perf_counter()
    create_all(plane, pods(), threads)
    print(f"  created {count} background pods in {time.perf_counter() - start:.0f} s", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--background-pods", type=int, default=20_000)
    parser.add_argument("--phase", type=float, default=180.0, help="seconds per phase")
    parser.add_argument("--churn", type=float, default=4.0, help="pod creations per second")
    parser.add_argument("--restarts", type=int, default=4, help="restarts per phase")
    parser.add_argument("--repeat", type=int, default=5, help="LIST timings per resourceVersion")
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("sidecar_fleet: kubemark (the hollow kubelet) must run as root")

    with tempfile.TemporaryDirectory(prefix="sidecar-fleet-") as folder:
        tmp = Path(folder)
        (tmp / "audit-policy.yaml").write_text(AUDIT_POLICY)
        audit_log = tmp / "audit.log"
        audit = [f"--audit-policy-file={tmp / 'audit-policy.yaml'}", f"--audit-log-path={audit_log}"]
        audit += ["--audit-log-format=json", "--audit-log-mode=blocking"]
        kubelets: list[Child] = []
        sidecars: list[Child] = []
        with ControlPlane.start(tmp / "envtest", apiserver_args=audit) as plane, plane.session() as session:
            try:
                version = plane.version
                print(f"kube-apiserver {version}", file=sys.stderr)
                sidecar_kubeconfig = plane.write_kubeconfig(
                    tmp / "sidecar.kubeconfig", SIDECAR_USER, ("system:masters",)
                )
                create_all(plane, [("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})], 1)
                account = {"metadata": {"name": "default"}}
                create_all(plane, [(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts", account)], 1)
                background(plane, args.background_pods, args.threads)
                names = [f"hollow-{k:02d}" for k in range(args.nodes)]
                kubelets += (HollowNode.create(plane, tmp / name, name, timeout=300) for name in names)
                lists = list_cost(plane, names[0], args.repeat)
                print("phase 1: kubelets only", file=sys.stderr)
                base = run_phase(plane, session, names, kubelets, args, seed=1)
                ports = []
                for name in names:
                    child, port = sidecar(name, sidecar_kubeconfig, tmp)
                    child.start()
                    sidecars.append(child)
                    ports.append(port)

                def all_ready() -> bool:
                    try:
                        return all(
                            requests.get(f"http://127.0.0.1:{p}/readyz", timeout=2).status_code == 200
                            for p in ports
                        )
                    except requests.RequestException:
                        return False

                wait_for(all_ready, timeout=300, interval=1, what="every sidecar ready")
                print("phase 2: kubelets and sidecars", file=sys.stderr)
                side_cpu0 = {c.name: c.cpu() for c in sidecars}
                since = time.time()
                fleet = run_phase(plane, session, names, [*sidecars, *kubelets], args, seed=2)
                until = time.time()
                side_cpu = [(c.cpu() - side_cpu0[c.name]) / args.phase * 100 for c in sidecars]
                side_rss = [rss_mib(c.popen.pid) for c in sidecars]  # type: ignore[union-attr]
                made = audited_requests(audit_log, since, until)
            finally:
                for child in [*sidecars, *kubelets]:
                    child.stop()

    one = phase_figures(*base[:3])
    two = phase_figures(*fleet[:3])
    n = args.nodes
    print(f"\nkube-apiserver {version}; {n} hollow nodes; {args.background_pods} background pods")
    print(f"pods created: {base[3]} (kubelets only), {fleet[3]} (with sidecars) in {args.phase:.0f} s each")
    costs = ", ".join(f"resourceVersion={v}: {s * 1000:.1f} ms" for v, s in lists.items())
    print(f"a sidecar's pod LIST (median of {args.repeat}): {costs}")
    ratio = lists['""'] / lists["0"] if lists["0"] else float("nan")
    print(f"  consistent read / watch cache: {ratio:.1f}x")

    print(f"\n{'API server':32} {'kubelets':>10} {'+sidecars':>10} {'per sidecar':>12} {'x 5,000':>10}")
    for key in one:
        if key == "pod LIST mean ms":  # a latency: not additive over sidecars
            print(f"{key:32} {one[key]:10.2f} {two[key]:10.2f}")
            continue
        delta = (two[key] - one[key]) / n
        print(f"{key:32} {one[key]:10.2f} {two[key]:10.2f} {delta:12.4f} {delta * 5000:10.1f}")

    seconds = until - since
    print(f"\nthe sidecars' own requests ({len(made)} in {seconds:.0f} s; audit log; restarts included)")
    print(
        f"{'verb resource':32} {'/s, fleet':>10} {'/s each':>10} {'x 5,000':>10} {'p50 ms':>8} {'max ms':>8}"
    )
    kinds = sorted({(r["verb"], r["resource"]) for r in made})
    for verb, resource in kinds:
        these = [r for r in made if (r["verb"], r["resource"]) == (verb, resource)]
        rate = len(these) / seconds
        times = [float(r["seconds"]) * 1000 for r in these]  # type: ignore[arg-type]
        latency = (
            f"{statistics.median(times):8.1f} {max(times):8.1f}" if verb != "watch" else f"{'-':>8} {'-':>8}"
        )
        print(f"{verb + ' ' + resource:32} {rate:10.3f} {rate / n:10.4f} {rate / n * 5000:10.1f} {latency}")
    print(f"\nsidecar RSS MiB: median {statistics.median(side_rss):.0f}, max {max(side_rss):.0f}")
    print(f"sidecar CPU %: median {statistics.median(side_cpu):.2f}, max {max(side_cpu):.2f}")


if __name__ == "__main__":
    main()
