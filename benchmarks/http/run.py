"""HTTP benchmark: `priority-webhook serve` against a constant-response floor, same gunicorn settings.

The servers run over TLS on loopback with the same workers/threads and keep-alive; `wrk` POSTs a realistic
pod AdmissionReview to /mutate, alternating the servers round by round so that a noisy machine affects all
alike. Each of the webhook and the floor runs twice: with the serving worker of `serve` (the asyncio one)
and with gunicorn's gthread worker, the one used before (`--no-gthread` skips those). Prints throughputs,
p50/p99 latencies, and ratios per round (medians).

    .venv/bin/python benchmarks/http/run.py [--rounds 5 --duration 10 --connections 8] [--baseline DIR]
        [--python COMMAND]... [--also-workers N]...

`--baseline DIR` adds the webhook of another checkout (a worktree of an earlier commit) as one more server
in the same rounds: "webhook-baseline". Every server's CPU per request (its master and workers, from
/proc, over each round) is reported beside its throughput, and its workers' resident memory (the mean over
the workers, read after each round).

`--python COMMAND` (repeatable) adds the webhook of this checkout served by another interpreter, also in the
same rounds: `--python "scripts/debian-python 3.13 python"` runs it on Debian 13's Python 3.13 as
"webhook-py3.13", beside "webhook" on the interpreter running this script; each is compared with "webhook"
and with the first one given (Debian 12's 3.11 first: the same builder's 3.11 against its 3.13). One that
runs without orjson (webhook.json_codec: none installed there, or PRIORITY_WEBHOOK_JSON=json, which
scripts/debian-python passes on) is named "webhook-pyX.Y-json":
`--python "env PRIORITY_WEBHOOK_JSON=json scripts/debian-python 3.11 python"`.

`--also-workers N` (repeatable) adds the webhook of this checkout with N workers per server, in the same
rounds, as "webhook-wN", compared with "webhook" (`--workers`, 2 by default).

Needs `wrk` (Debian package; installed with apt-get when missing and running as root).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from testkit import processes  # noqa: E402
from testkit.server import free_port  # noqa: E402
from webhook.files import tls  # noqa: E402

HERE = Path(__file__).resolve().parent
# The interpreter's version and the JSON engine webhook.json_codec chose there.
VERSION_AND_ENGINE = (
    "import sys; from webhook import json_codec; print('%d.%d' % sys.version_info[:2], json_codec.ENGINE)"
)
RESULT = re.compile(r"RESULT requests=(\d+) duration_us=(\d+) p50_us=(\d+) p99_us=(\d+) errors=(\d+)")


def realistic_review() -> dict:
    """A Deployment's pod as the API server sends it for CREATE: two containers, probes, env, volumes."""
    container = {
        "name": "app",
        "image": "registry.example/team/app:1.42.0",
        "args": ["--port=8080", "--log-level=info"],
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "env": [{"name": f"SETTING_{i}", "value": f"value-{i}"} for i in range(12)],
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 5},
        "livenessProbe": {"httpGet": {"path": "/live", "port": 8080}, "periodSeconds": 10},
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/app"},
            {
                "name": "kube-api-access",
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "readOnly": True,
            },
        ],
        "imagePullPolicy": "IfNotPresent",
        "terminationMessagePath": "/dev/termination-log",
    }
    sidecar = {
        **container,
        "name": "proxy",
        "image": "registry.example/proxy:2.1",
        "args": ["--upstream=8080"],
        "env": container["env"][:4],
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "app-7d9c8b6f5d-",
            "namespace": "shop",
            "labels": {"app": "app", "pod-template-hash": "7d9c8b6f5d", "team": "checkout"},
            "annotations": {
                "kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z",
                "prometheus.io/scrape": "true",
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "app-7d9c8b6f5d",
                    "uid": "0b5e8a52-52f2-4a2b-9a53-3d3bd2e7d4c1",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "priorityClassName": "high",
            "containers": [container, sidecar],
            "volumes": [
                {"name": "config", "configMap": {"name": "app-config"}},
                {
                    "name": "kube-api-access",
                    "projected": {
                        "sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]
                    },
                },
            ],
            "serviceAccountName": "app",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ],
            "affinity": {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 100,
                            "podAffinityTerm": {
                                "labelSelector": {"matchLabels": {"app": "app"}},
                                "topologyKey": "kubernetes.io/hostname",
                            },
                        }
                    ]
                }
            },
            "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
        },
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "2c6e1f6e-9a0e-4f55-8a1c-3f7d3b1e9b10",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "shop",
            "operation": "CREATE",
            "userInfo": {
                "username": "system:serviceaccount:kube-system:replicaset-controller",
                "groups": ["system:serviceaccounts", "system:authenticated"],
            },
            "object": pod,
            "oldObject": None,
            "dryRun": False,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        },
    }


def ensure_wrk() -> str:
    found = shutil.which("wrk")
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print("installing wrk with apt-get ...", file=sys.stderr)
        subprocess.run(["apt-get", "install", "-y", "-q", "wrk"], check=False, stdout=subprocess.DEVNULL)
        if not shutil.which("wrk"):
            subprocess.run(["apt-get", "update", "-q"], check=False, stdout=subprocess.DEVNULL)
            subprocess.run(["apt-get", "install", "-y", "-q", "wrk"], check=False, stdout=subprocess.DEVNULL)
    found = shutil.which("wrk")
    if not found:
        raise SystemExit("wrk is not installed (Debian package: wrk)")
    return found


@dataclass
class Server:
    name: str
    url: str
    process: subprocess.Popen

    def cpu_seconds(self) -> float:
        """CPU time used so far by the server's master and its workers."""
        return processes.cpu_seconds(self.process.pid)

    def worker_rss_mib(self) -> float:
        """The mean resident memory of the workers (the master's children) now."""
        workers = [processes.rss_kib(pid) for pid in processes.tree(self.process.pid)[1:]]
        alive = [kib for kib in workers if kib is not None]
        return statistics.mean(alive) / 1024 if alive else 0.0

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()


def start(
    name: str,
    cmd: list[str],
    port: int,
    ca: Path,
    log: Path,
    env: dict[str, str] | None = None,
    cwd: Path = REPO,
) -> Server:
    with open(log, "wb") as out:
        process = subprocess.Popen(
            cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
    server = Server(name, f"https://127.0.0.1:{port}", process)
    session = requests.Session()
    session.trust_env = False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{name} exited: {log.read_text()}")
        try:
            if session.get(server.url + "/healthz", verify=str(ca), timeout=2).status_code == 200:
                return server
        except (requests.ConnectionError, requests.Timeout):
            pass  # a worker still booting on a loaded machine
        time.sleep(0.1)  # startup poll in a script, bounded by the deadline
    server.stop()
    raise SystemExit(f"{name} did not start: {log.read_text()}")


@dataclass
class Round:
    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    cpu_us: float = 0.0  # the server's CPU per request
    worker_mib: float = 0.0  # its workers' mean resident memory after the round


def run_wrk(wrk: str, server: Server, args: argparse.Namespace, review_file: Path, duration: int) -> Round:
    cmd = [
        wrk,
        f"-t{args.wrk_threads}",
        f"-c{args.connections}",
        f"-d{duration}s",
        "--timeout",
        "5s",
        "-s",
        str(HERE / "review.lua"),
        server.url + "/mutate",
    ]
    done = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        env={**os.environ, "REVIEW_FILE": str(review_file)},
        timeout=duration + 60,
        check=True,
    )
    match = RESULT.search(done.stdout)
    if not match:
        raise SystemExit(f"unexpected wrk output:\n{done.stdout}\n{done.stderr}")
    requests_, duration_us, p50, p99, errors = map(int, match.groups())
    if errors:
        raise SystemExit(f"{server.name}: {errors} errors (non-2xx or socket errors):\n{done.stdout}")
    return Round(requests_ / (duration_us / 1e6), p50 / 1000, p99 / 1000, requests_)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=int, default=10, help="seconds per round and server")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--wrk-threads", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="also run the webhook of this checkout (e.g. a worktree of an earlier commit): webhook-baseline",
    )
    parser.add_argument(
        "--python",
        metavar="COMMAND",
        action="append",
        default=[],
        help='also serve this checkout with this interpreter, e.g. "scripts/debian-python 3.13 python" '
        "(webhook-pyX.Y; repeatable)",
    )
    parser.add_argument(
        "--also-workers",
        type=int,
        action="append",
        default=[],
        metavar="N",
        help="one more webhook server with N workers in the same rounds (webhook-wN), compared with webhook",
    )
    parser.add_argument(
        "--no-gthread",
        dest="gthread",
        action="store_false",
        help="skip the runs with gunicorn's gthread worker (the serving design used before)",
    )
    args = parser.parse_args()
    wrk = ensure_wrk()

    # Under the work tree's ignored build/ with --python: scripts/debian-python's root sees the work tree, not
    # the host's /tmp.
    scratch = REPO / "build" if args.python else None
    if scratch:
        scratch.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="priority-webhook-bench-", dir=scratch))
    servers: list[Server] = []
    try:
        certs = work / "certs"
        tls.write_certificates(certs)
        ca = certs / tls.CA_CERT
        review_file = work / "review.json"
        review = realistic_review()
        review_file.write_text(json.dumps(review))
        shape = ["--cert-dir", str(certs), "--workers", str(args.workers), "--threads", str(args.threads)]
        classes = ["--classes", str(REPO / "examples" / "priorityclasses.yaml")]
        designs = {"": {}}

        def serve_command(port: int, workers: int = args.workers) -> list[str]:
            bind = f"127.0.0.1:{port}"
            command = [sys.executable, "-m", "webhook", "serve", "--bind", bind, *shape, *classes]
            command[command.index("--workers") + 1] = str(workers)
            return command

        if args.gthread:
            designs["-gthread"] = {"PRIORITY_WEBHOOK_WORKER_CLASS": "gthread"}
        for suffix, env in designs.items():
            port = free_port()
            serve = serve_command(port)
            servers.append(start("webhook" + suffix, serve, port, ca, work / f"webhook{suffix}.log", env))
            port = free_port()
            floor_cmd = [sys.executable, str(HERE / "floor.py"), "--bind", f"127.0.0.1:{port}", *shape]
            servers.append(start("floor" + suffix, floor_cmd, port, ca, work / f"floor{suffix}.log", env))
        others: list[str] = []
        others_workers: list[str] = []
        for command in args.python:
            interpreter = shlex.split(command)
            version, engine = subprocess.run(
                [*interpreter, "-c", VERSION_AND_ENGINE],
                cwd=REPO,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()[-2:]
            name = f"webhook-py{version}" + ("-json" if engine == "json" else "")
            while name in others:
                name += "+"
            others.append(name)
            port = free_port()
            serve = [*interpreter, *serve_command(port)[1:]]
            servers.append(start(name, serve, port, ca, work / f"{name}.log"))
        for workers in args.also_workers:
            port = free_port()
            name = f"webhook-w{workers}"
            others_workers.append(name)
            servers.append(start(name, serve_command(port, workers), port, ca, work / f"{name}.log"))
        if args.baseline:
            port = free_port()
            serve = serve_command(port)
            baseline_log = work / "webhook-baseline.log"
            servers.append(
                start("webhook-baseline", serve, port, ca, baseline_log, cwd=args.baseline.resolve())
            )

        for server in servers:
            if server.name.startswith("webhook"):
                check = requests.post(server.url + "/mutate", json=review, verify=str(ca), timeout=5).json()
                assert check["response"]["allowed"] and check["response"]["patchType"] == "JSONPatch", check

        for server in servers:  # warm up: imports, first TLS sessions, caches
            run_wrk(wrk, server, args, review_file, 2)
        results: dict[str, list[Round]] = {server.name: [] for server in servers}
        for i in range(args.rounds):
            order = servers if i % 2 == 0 else servers[::-1]
            for server in order:
                used = server.cpu_seconds()
                r = run_wrk(wrk, server, args, review_file, args.duration)
                r.cpu_us = (server.cpu_seconds() - used) / r.requests * 1e6
                r.worker_mib = server.worker_rss_mib()
                results[server.name].append(r)
                print(
                    f"round {i + 1} {server.name:16s} {r.rps:8.0f} req/s  p50 {r.p50_ms:6.2f} ms  "
                    f"p99 {r.p99_ms:6.2f} ms  CPU {r.cpu_us:5.0f} us/request  worker {r.worker_mib:5.1f} MiB",
                    file=sys.stderr,
                )

        # Each round runs every server back to back: the ratio within a round is the least exposed to load
        # from elsewhere on the machine drifting between rounds; the median of those is the headline.
        def ratio(a: str, b: str, field: str) -> float:
            pairs = zip(results[a], results[b], strict=True)
            return round(statistics.median(getattr(x, field) / getattr(y, field) for x, y in pairs), 3)

        figures: dict[str, object] = {
            "review_bytes": len(review_file.read_bytes()),
            "rounds": args.rounds,
            "duration_s": args.duration,
            "connections": args.connections,
            "workers": args.workers,
            "threads": args.threads,
        }
        print(
            f"review body: {figures['review_bytes']} bytes; {args.rounds} rounds x {args.duration:g} s, "
            f"{args.connections} connections, {args.workers} workers x {args.threads} threads (medians)"
        )
        for name, rounds in results.items():
            rps = statistics.median(r.rps for r in rounds)
            p50 = statistics.median(r.p50_ms for r in rounds)
            p99 = statistics.median(r.p99_ms for r in rounds)
            cpu = statistics.median(r.cpu_us for r in rounds)
            mib = statistics.median(r.worker_mib for r in rounds)
            figures[name] = {
                "rps": round(rps),
                "p50_ms": round(p50, 2),
                "p99_ms": round(p99, 2),
                "cpu_us_per_request": round(cpu),
                "worker_rss_mib": round(mib, 1),
            }
            print(
                f"{name:16s} {rps:8.0f} req/s  p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  "
                f"CPU {cpu:5.0f} us/request  worker {mib:5.1f} MiB"
            )
        comparisons = [("webhook", "floor")]
        if args.gthread:
            comparisons += [
                ("webhook", "floor-gthread"),
                ("webhook", "webhook-gthread"),
                ("floor", "floor-gthread"),
            ]
        if args.baseline:
            comparisons.append(("webhook", "webhook-baseline"))
        comparisons += [(other, "webhook") for other in others + others_workers]
        comparisons += [(other, others[0]) for other in others[1:]]
        for a, b in comparisons:
            rps_ratio, p99_ratio, cpu_ratio = ratio(a, b, "rps"), ratio(a, b, "p99_ms"), ratio(a, b, "cpu_us")
            mib_ratio = ratio(a, b, "worker_mib")
            figures[f"{a}/{b}"] = {
                "throughput": rps_ratio,
                "p99": p99_ratio,
                "cpu_per_request": cpu_ratio,
                "worker_memory": mib_ratio,
            }
            print(
                f"{a + ' / ' + b:32s} throughput {rps_ratio:.3f}  p99 {p99_ratio:.3f}  "
                f"CPU per request {cpu_ratio:.3f}  worker memory {mib_ratio:.3f}"
                "  (medians of per-round ratios)"
            )
        if args.json:
            print(json.dumps(figures))
        return 0
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
