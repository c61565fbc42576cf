"""Soak: the real server under sustained review load while the cluster side misbehaves.

    .venv/bin/python benchmarks/soak.py [--duration 60] [--connections 8,64] [--workers 3] [--json FILE]
        [--faults churn,drops,500,410,rotation | --no-faults]

Loopback only, bounded in time (`--duration` seconds per connection count) and requests
(`--max-requests` per phase). What runs:

- the in-repo test API server, and `priority-webhook serve --kubeconfig` (gunicorn, `--workers`
  processes, each with its own PriorityClass list/watch cache) on a certificate from our own code;
- per phase, N keep-alive TLS connections (one thread each, `http.client`) sending pod CREATE reviews
  to `/mutate` back to back; each connection reconnects every `--reconnect-every` requests, so new TLS
  handshakes meet rotated certificates;
- in the background, all phases long: PriorityClasses created, changed (globalDefault toggled; value
  "changed" by delete + re-create, as the API forbids updating it) and deleted; every watch dropped
  every few seconds; windows where every API request gets 500; watches ended with 410 after a
  compaction; the serving certificate rewritten on disk under the same CA.

Checks (any failure makes the exit code 1):

- zero 5xx and zero connection errors (any exception on a connection counts);
- zero wrong decisions: every answer (priority / denial / default class) must equal what the class
  state at some moment in [sent - WINDOW, received] implies. The history of class states is recorded
  with timestamps as the churn thread writes them. The staleness of an answer is how long before it
  was sent the state it matches had already been replaced (0 when it matches a state current during
  the request); the maximum is reported. WINDOW defaults to 35 s: the reflector's backoff cap (30 s)
  plus slack, i.e. the most a correct cache may lag after API faults;
- memory per worker flat: RSS of every worker read from /proc once a second; per phase, after a
  warm-up of a quarter of the phase, a least-squares line is fitted per worker; the growth it predicts
  over the fitted span must stay under 2 MiB.

Reported per phase: requests, throughput, latency p50/p99 (client side, Python client threads included),
max staleness, RSS trend per worker; and throughput and p99 as ratios to a fault-free baseline phase
(`--baseline` seconds, same connections, same server) measured first in the same run. The client is
Python threads on the same machine as the server, so throughput here is a floor for the server, not its
capacity (see benchmarks/http for wrk figures).
"""

from __future__ import annotations

import argparse
import base64
import bisect
import http.client
import json
import os
import random
import ssl
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cryptography import x509

from testkit.kubeapi import KubeAPIServer
from testkit.processes import rss_kib, tree
from testkit.server import webhook_server
from testkit.wait import wait_for
from webhook.files import tls

POOL = [f"soak-{i}" for i in range(10)]
SYSTEM = {
    "system-node-critical": (2000001000, False, "PreemptLowerPriority"),
    "system-cluster-critical": (2000000000, False, "PreemptLowerPriority"),
}
MAX_FLAT_GROWTH_KIB = 2048
FAULT_KINDS = frozenset({"churn", "drops", "500", "410", "rotation"})

State = dict[str, tuple[int, bool, str]]  # name -> (value, globalDefault, preemptionPolicy)


# ---- the class history and the oracle ---------------------------------------------------------------


@dataclass
class History:
    """Class states in order; state i holds from starts[i] (taken before the write that made it) until
    ends[i] (taken after the write that replaced it returned): the uncertain edges favour the server."""

    states: list[State] = field(default_factory=list)
    starts: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, state: State, before: float, after: float) -> None:
        with self.lock:
            if self.ends:
                self.ends[-1] = after
            self.states.append(dict(state))
            self.starts.append(before)
            self.ends.append(float("inf"))


def expected(state: State, class_name: str | None) -> tuple:
    """(allowed, priority, preemptionPolicy, default class named in the patch) that admission implies."""
    if class_name:
        if class_name not in state:
            return (False, None, None, None)
        value, _, policy = state[class_name]
        return (True, value, policy, None)
    defaults = [(value, name, policy) for name, (value, default, policy) in state.items() if default]
    if not defaults:
        return (True, 0, "PreemptLowerPriority", None)
    value, name, policy = min(defaults)
    return (True, value, policy, name)


def observed(answer: dict[str, Any]) -> tuple:
    response = answer["response"]
    if not response["allowed"]:
        return (False, None, None, None)
    ops = {}
    if "patch" in response:
        ops = {op["path"]: op.get("value") for op in json.loads(base64.b64decode(response["patch"]))}
    return (
        True,
        ops.get("/spec/priority"),
        ops.get("/spec/preemptionPolicy"),
        ops.get("/spec/priorityClassName"),
    )


def staleness(
    history: History, class_name: str | None, got: tuple, sent: float, received: float
) -> float | None:
    """Seconds by which the matching state was already outdated when the review was sent (0: current);
    None when no state that began before the answer came back matches."""
    last = bisect.bisect_right(history.starts, received) - 1
    for i in range(last, -1, -1):
        if expected(history.states[i], class_name) == got:
            return max(0.0, sent - history.ends[i])
    return None


# ---- the cluster side: churn and faults -------------------------------------------------------------


def pc(name: str, value: int, default: bool, policy: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "globalDefault": default,
        "preemptionPolicy": policy,
    }


class Churn(threading.Thread):
    """Creates, changes and deletes classes every `interval` seconds, recording each resulting state."""

    def __init__(self, api: KubeAPIServer, history: History, stop: threading.Event, interval: float) -> None:
        super().__init__(name="churn", daemon=True)
        self.api, self.history, self.stop, self.interval = api, history, stop, interval
        self.state: State = dict(SYSTEM)
        self.counts: Counter[str] = Counter()
        self.rng = random.Random(1)
        now = time.monotonic()
        history.record(self.state, now, now)

    def write(self, action: str, call: Any, name: str, new: tuple[int, bool, str] | None) -> None:
        before = time.monotonic()
        call()
        if new is None:
            self.state.pop(name, None)
        else:
            self.state[name] = new
        self.history.record(self.state, before, time.monotonic())
        self.counts[action] += 1

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            name = self.rng.choice(POOL)
            current = self.state.get(name)
            if current is None:
                new = (
                    self.rng.randint(1, 1_000_000_000),
                    self.rng.random() < 0.2,
                    self.rng.choice(["PreemptLowerPriority", "Never"]),
                )
                self.write(
                    "created", lambda n=name, v=new: self.api.create("priorityclasses", pc(n, *v)), name, new
                )
                continue
            roll = self.rng.random()
            if roll < 0.4:
                self.write("deleted", lambda n=name: self.api.delete("priorityclasses", n), name, None)
            elif roll < 0.75:
                value, default, policy = current
                obj = self.api.get("priorityclasses", name)
                obj["globalDefault"] = not default
                self.write(
                    "default toggled",
                    lambda o=obj: self.api.update("priorityclasses", o),
                    name,
                    (value, not default, policy),
                )
            else:  # the value is immutable: a new value is a delete and a re-create
                self.write("deleted", lambda n=name: self.api.delete("priorityclasses", n), name, None)
                new = (self.rng.randint(1, 1_000_000_000), current[1], current[2])
                self.write(
                    "re-created with a new value",
                    lambda n=name, v=new: self.api.create("priorityclasses", pc(n, *v)),
                    name,
                    new,
                )


class Faults(threading.Thread):
    """A fixed rhythm of API faults and certificate rotations (periods in seconds)."""

    def __init__(
        self,
        api: KubeAPIServer,
        cert_dir: Path,
        stop: threading.Event,
        *,
        drop_every: float = 3,
        fail_every: float = 11,
        fail_for: float = 1.5,
        expire_every: float = 17,
        rotate_every: float = 10,
        kinds: frozenset[str] = FAULT_KINDS,
    ) -> None:
        super().__init__(name="faults", daemon=True)
        self.api, self.cert_dir, self.stop = api, cert_dir, stop
        periods = {
            "watches dropped": ("drops", drop_every),
            "500 windows": ("500", fail_every),
            "410 (compaction + expired watches)": ("410", expire_every),
            "certificate rotations": ("rotation", rotate_every),
        }
        self.periods = {name: period for name, (kind, period) in periods.items() if kind in kinds}
        self.fail_for = fail_for
        self.counts: Counter[str] = Counter()

    def run(self) -> None:
        start = time.monotonic()
        due = {kind: start + period for kind, period in self.periods.items()}
        while due and not self.stop.is_set():
            kind = min(due, key=due.__getitem__)
            if self.stop.wait(max(0.0, due[kind] - time.monotonic())):
                return
            if kind == "watches dropped":
                self.api.drop_watches()
            elif kind == "500 windows":
                with self.api.failing(500):
                    self.api.drop_watches()  # so the reflectors must LIST / WATCH through the 500s
                    self.stop.wait(self.fail_for)
            elif kind.startswith("410"):
                self.api.expire_watches()
            else:
                tls.write_certificates(self.cert_dir, ca_dir=self.cert_dir)
            self.counts[kind] += 1
            due[kind] += self.periods[kind]


# ---- memory ----------------------------------------------------------------------------------------


class RssSampler(threading.Thread):
    def __init__(self, master: int, stop: threading.Event) -> None:
        super().__init__(name="rss", daemon=True)
        self.master, self.stop = master, stop
        self.samples: list[tuple[float, int, int]] = []  # (time, worker pid, RSS KiB)

    def run(self) -> None:
        while not self.stop.wait(1.0):
            now = time.monotonic()
            for pid in tree(self.master)[1:]:
                rss = rss_kib(pid)
                if rss is not None:
                    self.samples.append((now, pid, rss))


def trend(samples: list[tuple[float, int]]) -> tuple[float, float]:
    """(slope KiB/s, growth KiB predicted over the span) of a least-squares line through (t, rss)."""
    if len(samples) < 3:
        return 0.0, 0.0
    ts = [t for t, _ in samples]
    slope = statistics.linear_regression(ts, [r for _, r in samples]).slope
    return slope, slope * (ts[-1] - ts[0])


# ---- load -------------------------------------------------------------------------------------------


@dataclass
class Result:
    sent: float
    received: float
    class_name: str | None
    got: tuple | None
    status: int
    error: str = ""


def pod_review(uid: str, class_name: str | None) -> bytes:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "registry.k8s.io/pause"}]}
    if class_name:
        spec["priorityClassName"] = class_name
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": uid, "namespace": "soak"}, "spec": spec}
    request = {
        "uid": uid,
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "operation": "CREATE",
        "namespace": "soak",
        "name": uid,
        "object": obj,
        "oldObject": None,
        "dryRun": False,
    }
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return json.dumps(review).encode()


class Client(threading.Thread):
    """One keep-alive TLS connection sending reviews back to back until `deadline` or `budget` runs out."""

    def __init__(
        self,
        index: int,
        port: int,
        context: ssl.SSLContext,
        deadline: float,
        budget: list[int],
        budget_lock: threading.Lock,
        reconnect_every: int,
    ) -> None:
        super().__init__(name=f"client-{index}", daemon=True)
        self.index, self.port, self.context, self.deadline = index, port, context, deadline
        self.budget, self.budget_lock, self.reconnect_every = budget, budget_lock, reconnect_every
        self.results: list[Result] = []
        self.serials: set[int] = set()
        self.rng = random.Random(index)

    def connect(self) -> http.client.HTTPSConnection:
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=10)
        conn.connect()
        der = conn.sock.getpeercert(binary_form=True)
        self.serials.add(x509.load_der_x509_certificate(der).serial_number)
        return conn

    def take(self) -> bool:
        with self.budget_lock:
            if self.budget[0] <= 0:
                return False
            self.budget[0] -= 1
            return True

    def run(self) -> None:
        conn: http.client.HTTPSConnection | None = None
        used = 0
        i = 0
        while time.monotonic() < self.deadline and self.take():
            roll = self.rng.random()
            class_name = (
                self.rng.choice(POOL) if roll < 0.6 else "system-cluster-critical" if roll < 0.7 else None
            )
            uid = f"c{self.index}-{i}"
            i += 1
            body = pod_review(uid, class_name)
            sent = time.monotonic()
            try:
                if conn is None or used >= self.reconnect_every:
                    if conn is not None:
                        conn.close()
                    conn, used = self.connect(), 0
                conn.request("POST", "/mutate", body, {"Content-Type": "application/json"})
                response = conn.getresponse()
                data = response.read()
                used += 1
                received = time.monotonic()
                got = None
                if response.status == 200:
                    answer = json.loads(data)
                    if answer["response"]["uid"] != uid:
                        raise AssertionError(f"uid {answer['response']['uid']!r} answered for {uid!r}")
                    got = observed(answer)
                self.results.append(Result(sent, received, class_name, got, response.status))
            except Exception as err:
                self.results.append(
                    Result(sent, time.monotonic(), class_name, None, 0, f"{type(err).__name__}: {err}")
                )
                if conn is not None:
                    conn.close()
                conn = None
        if conn is not None:
            conn.close()


def percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run_phase(
    port: int, ca_file: Path, connections: int, duration: float, max_requests: int, reconnect_every: int
) -> tuple[list[Result], set[int], float, float]:
    context = ssl.create_default_context(cafile=str(ca_file))
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    start = time.monotonic()
    budget, lock = [max_requests], threading.Lock()
    clients = [
        Client(i, port, context, start + duration, budget, lock, reconnect_every) for i in range(connections)
    ]
    for client in clients:
        client.start()
    for client in clients:
        client.join()
    end = time.monotonic()
    results = [r for c in clients for r in c.results]
    serials = set().union(*(c.serials for c in clients))
    return results, serials, start, end


def summarize(
    name: str,
    results: list[Result],
    history: History,
    start: float,
    end: float,
    rss: list[tuple[float, int, int]],
    window: float,
) -> dict[str, Any]:
    ok = [r for r in results if r.status == 200]
    latencies = sorted(r.received - r.sent for r in ok)
    errors = Counter(r.error.split(":")[0] for r in results if r.error)
    statuses = Counter(r.status for r in results if not r.error)
    wrong, stale = [], []
    for r in ok:
        age = staleness(history, r.class_name, r.got, r.sent, r.received)
        if age is None or age > window:
            wrong.append((r.class_name, r.got, age))
        else:
            stale.append(age)
    warm = start + (end - start) / 4
    workers: dict[int, list[tuple[float, int]]] = {}
    for t, pid, kib in rss:
        if warm <= t <= end:
            workers.setdefault(pid, []).append((t, kib))
    memory = {}
    for pid, samples in sorted(workers.items()):
        slope, growth = trend(samples)
        memory[pid] = {
            "samples": len(samples),
            "rss_mib_first": round(samples[0][1] / 1024, 1),
            "rss_mib_last": round(samples[-1][1] / 1024, 1),
            "slope_kib_per_min": round(slope * 60, 1),
            "fitted_growth_kib": round(growth, 1),
        }
    elapsed = end - start
    return {
        "phase": name,
        "requests": len(results),
        "seconds": round(elapsed, 1),
        "throughput_rps": round(len(ok) / elapsed, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 2) if latencies else None,
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 2) if latencies else None,
        "statuses": dict(statuses),
        "status_5xx": sum(n for s, n in statuses.items() if s >= 500),
        "connection_errors": dict(errors),
        "wrong_decisions": len(wrong),
        "wrong_examples": [repr(w) for w in wrong[:5]],
        "stale_answers": sum(1 for a in stale if a > 0),
        "max_staleness_s": round(max(stale, default=0.0), 3),
        "memory": memory,
        "memory_flat": bool(memory)
        and all(m["fitted_growth_kib"] < MAX_FLAT_GROWTH_KIB for m in memory.values()),
    }


def correct(phase: dict[str, Any]) -> bool:
    return (
        phase["status_5xx"] == 0
        and not phase["connection_errors"]
        and phase["wrong_decisions"] == 0
        and set(phase["statuses"]) == {200}
    )


def passed(phase: dict[str, Any]) -> bool:
    return correct(phase) and phase["memory_flat"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds per phase (default 60)")
    parser.add_argument("--connections", default="8,64", help="comma-separated, a phase each (default 8,64)")
    parser.add_argument("--workers", type=int, default=3, help="server processes (default 3)")
    parser.add_argument("--max-requests", type=int, default=2_000_000, help="per phase (default 2000000)")
    parser.add_argument("--reconnect-every", type=int, default=500, help="requests per connection")
    parser.add_argument("--churn-interval", type=float, default=0.25, help="seconds between class writes")
    parser.add_argument(
        "--baseline",
        type=float,
        default=15.0,
        help="seconds of fault-free load per connection count first, for ratios (0: none)",
    )
    parser.add_argument(
        "--faults",
        default=",".join(sorted(FAULT_KINDS)),
        help="which background disturbances run (default: all of churn, drops, 500, 410, "
        "rotation); a subset attributes memory growth to one of them",
    )
    parser.add_argument("--no-faults", action="store_true", help="none of them: load only")
    parser.add_argument("--window", type=float, default=35.0, help="staleness accepted, seconds (default 35)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args()
    phases = [int(c) for c in args.connections.split(",") if c.strip()]

    report: dict[str, Any] = {"settings": vars(args), "phases": []}
    with tempfile.TemporaryDirectory() as tmp, KubeAPIServer(bookmark_interval=1.0) as api:
        tmp_path = Path(tmp)
        cert_dir = tmp_path / "certs"
        tls.write_certificates(cert_dir)
        kubeconfig = api.kubeconfig(str(tmp_path / "kubeconfig"))
        history, stop = History(), threading.Event()
        with webhook_server(
            tmp_path, "--kubeconfig", kubeconfig, "--workers", str(args.workers), cert_dir=cert_dir
        ) as server:
            wait_for(
                lambda: all(
                    server.session.get(server.url + "/readyz", timeout=5).status_code == 200
                    for _ in range(2 * args.workers)
                ),
                timeout=30,
                what="/readyz on every worker",
            )
            churn = Churn(api, history, stop, args.churn_interval)
            kinds = frozenset() if args.no_faults else frozenset(k.strip() for k in args.faults.split(","))
            if kinds - FAULT_KINDS:
                parser.error(f"--faults: unknown {', '.join(sorted(kinds - FAULT_KINDS))}")
            faults = Faults(api, cert_dir, stop, kinds=kinds)
            sampler = RssSampler(server.process.pid, stop)
            # The baseline: the same load on the same server with no churn and no faults, in this run.
            baselines = {}
            for connections in phases if args.baseline > 0 else ():
                results, _, start, end = run_phase(
                    server.port,
                    server.ca_file,
                    connections,
                    args.baseline,
                    args.max_requests,
                    args.reconnect_every,
                )
                baselines[connections] = summarize(
                    f"{connections} connections, no faults (baseline)",
                    results,
                    history,
                    start,
                    end,
                    [],
                    args.window,
                )
                print(json.dumps(baselines[connections], indent=2), flush=True)
            report["baselines"] = list(baselines.values())
            background = (*((churn,) if "churn" in kinds else ()), faults, sampler)
            for thread in background:
                thread.start()
            for connections in phases:
                results, serials, start, end = run_phase(
                    server.port,
                    server.ca_file,
                    connections,
                    args.duration,
                    args.max_requests,
                    args.reconnect_every,
                )
                phase = summarize(
                    f"{connections} connections",
                    results,
                    history,
                    start,
                    end,
                    list(sampler.samples),
                    args.window,
                )
                phase["serving_certificates_seen"] = len(serials)
                phase["started"] = start
                base = baselines.get(connections)
                if base and base["throughput_rps"] and base["p99_ms"]:
                    ratio = phase["throughput_rps"] / base["throughput_rps"]
                    phase["throughput_vs_baseline"] = round(ratio, 2)
                    phase["p99_vs_baseline"] = round(phase["p99_ms"] / base["p99_ms"], 2)
                report["phases"].append(phase)
                print(json.dumps(phase, indent=2), flush=True)
            stop.set()
            for thread in background:
                thread.join(10)
            # The whole run after the first phase's warm-up: a leak shows as a trend across phases too.
            first = report["phases"][0] if report["phases"] else None
            if first is not None:
                begin = first["started"] + first["seconds"] / 4
                by_worker: dict[int, list[tuple[float, int]]] = {}
                for t, pid, kib in sampler.samples:
                    if t >= begin:
                        by_worker.setdefault(pid, []).append((t, kib))
                report["memory_overall"] = {
                    pid: {
                        "rss_mib_first": round(got[0][1] / 1024, 1),
                        "rss_mib_last": round(got[-1][1] / 1024, 1),
                        "slope_kib_per_min": round(trend(got)[0] * 60, 1),
                    }
                    for pid, got in sorted(by_worker.items())
                }
            report["class_writes"] = dict(churn.counts)
            report["faults"] = dict(faults.counts)
            report["watch_requests"] = api.watch_count()
            report["list_requests"] = api.list_count()
            report["api_500s"] = sum(1 for r in list(api.requests) if r.status == 500)
            report["server_log_errors"] = [
                line for line in server.log().splitlines() if "ERROR" in line or "Traceback" in line
            ][:20]
    report["passed"] = (
        all(passed(p) for p in report["phases"])
        and not report["server_log_errors"]
        and all(correct(b) for b in report["baselines"])
    )
    print(json.dumps({k: v for k, v in report.items() if k != "phases"}, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    print("PASS" if report["passed"] else "FAIL")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
