"""Soak on real Kubernetes (1.33): pods created for half an hour while everything around the webhook fails.

    KUBEBUILDER_ASSETS=$(path to kube-apiserver, etcd, kubectl 1.33) \\
        .venv/bin/python benchmarks/soak_real.py [--duration 1800] [--json FILE]

Loopback only, bounded in time. What runs:

- cluster A: etcd + kube-apiserver with the in-tree Priority plugin off, + controller manager; our webhook
  as two replicas (`serve --kubeconfig`, gunicorn, 2 workers x 4 threads each, as the chart), behind a TCP
  balancer of this script that plays the Service: a connection goes to a replica whose /readyz passed the
  chart's readiness probe (every 5 s, 2 s timeout, out after 2 failures). The chart's configurations are
  registered with the balancer's address (failurePolicy Fail outside kube-system, Ignore inside, 5 s);
- cluster B, the twin: the same binaries with the in-tree Priority plugin on and no webhook;
- class churn on both clusters (the same writes, B then A): classes created, deleted, re-created with
  another value, a global default appearing and going away;
- pod creators: each pod (in `soak` or `kube-system`, naming no class, a churned class, a system class or
  a missing one) is created for real on A and as a server-side dry run on B, one right after the other;
- faults on A, in cycles of `--cycle` seconds: a gunicorn worker killed (SIGKILL), a replica stalled
  (SIGSTOP for `--stall` seconds, then SIGCONT), the API server restarted, etcd restarted; and all along,
  hostile connections to each replica (`--silent` TCP connections that send nothing, `--slow` TLS
  connections dripping a request header a byte every 5 s), re-opened whenever the server closes them.

Measured: creations on A and how they compare with B's in-tree answer for the same pod: agree; disagree
within `--window` s of a class write, from its first request to B until A's last answer (the two
clusters' caches see a write at different moments, and A's own write can take seconds);
disagree otherwise (wrong); refused on A while B admitted, by cause (the webhook's denial, the webhook
unreachable or timed out, A's API server unavailable during its own restart); kube-system pods admitted
without priority (mutation skipped). Staleness: after each class write, how long until both replicas
answer it 3 times in a row on a direct /mutate probe. Memory: RSS of each replica (master + workers).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import random
import signal
import socket
import ssl
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import requests

from testkit.cluster_webhook import (
    chart_webhook_configurations,
    ensure_namespace,
    make_certificates,
    priority_class,
)
from testkit.envtest import ControlPlane, free_ports
from testkit.processes import rss_kib, tree
from testkit.server import WebhookServer, webhook_server
from testkit.wait import wait_for
from webhook.policy.class_model import SYSTEM_CLASSES, ClassSet, PriorityClass
from webhook.policy.decision import Request
from webhook.policy.pod_rules import admit_pod

POOL = [f"soak-{i}" for i in range(4)]
DEFAULT = "soak-default"
CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
LABEL = {"soak": "real"}
IMAGE = "registry.k8s.io/pause:3.9"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# ---- the class state, written to both clusters -------------------------------------------------------
class Classes:
    """The churned classes (name -> (value, default)) and the moments they were written."""

    def __init__(self) -> None:
        self.state: dict[str, tuple[int, bool]] = {}
        # Each write as (first request sent to B, last answer from A), monotonic: a class is deleted on B
        # before A, so for as long as A's requests take (A's API server restarting, our webhook validating
        # the write) the clusters differ by design.
        self.writes: list[tuple[float, float]] = []
        self.lock = threading.Lock()

    def class_set(self) -> ClassSet:
        ours = [PriorityClass(name, value, default) for name, (value, default) in self.state.items()]
        return ClassSet([*SYSTEM_CLASSES, *ours])

    def near_write(self, start: float, end: float, window: float) -> bool:
        with self.lock:
            return any(begun - window <= end and start <= done + window for begun, done in self.writes)


class Cluster:
    """One API server, through a requests session with the admin's client certificate."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.session = plane.session()

    def call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        return self.session.request(method, self.plane.url + path, timeout=40, **kwargs)

    def write(self, method: str, path: str, body: Any | None, stop: threading.Event) -> None:
        """Retry until the API server answers (it may be restarting); 404/409 are the expected answers."""
        while not stop.is_set():
            try:
                response = self.call(method, path, json=body)
                if response.status_code < 500:
                    return
            except requests.RequestException:
                pass
            stop.wait(0.5)


def churn(a: Cluster, b: Cluster, classes: Classes, stop: threading.Event, interval: float, paused) -> None:
    rng = random.Random(1)
    while not stop.wait(interval):
        with paused:  # not while A's API server or etcd restart: both clusters must see the same writes
            action = rng.choice(["create", "delete", "recreate", "recreate", "default"])
            name = rng.choice(POOL)
            with classes.lock:
                state = dict(classes.state)
            ops: list[tuple[str, str, Any]] = []
            if action == "default":
                if DEFAULT in state:
                    ops.append(("DELETE", f"{CLASSES}/{DEFAULT}", None))
                    state.pop(DEFAULT)
                else:
                    value = rng.randint(-100, 100)
                    ops.append(("POST", CLASSES, priority_class(DEFAULT, value, default=True)))
                    state[DEFAULT] = (value, True)
            elif action == "delete" or (action == "create" and name in state):
                if name in state:
                    ops.append(("DELETE", f"{CLASSES}/{name}", None))
                    state.pop(name)
            else:
                if name in state:
                    ops.append(("DELETE", f"{CLASSES}/{name}", None))
                value = rng.randint(1, 1_000_000)
                ops.append(("POST", CLASSES, priority_class(name, value)))
                state[name] = (value, False)
            begun = time.monotonic()
            for method, path, body in ops:
                b.write(method, path, body, stop)
                a.write(method, path, body, stop)
            done = time.monotonic()
            with classes.lock:
                classes.state = state
                classes.writes.append((begun, done))
            if done - begun > 2:
                requests_made = " + ".join(f"{method} {path}" for method, path, _ in ops)
                log(f"class write took {done - begun:.1f}s: {requests_made}")


# ---- pods created on both ------------------------------------------------------------------------------
def outcome(response: requests.Response | None, error: str = "") -> dict[str, Any]:
    if response is None:
        return {"code": 0, "message": error}
    try:
        body = response.json()
    except ValueError:
        body = {}
    if response.status_code < 300:
        spec = body.get("spec") or {}
        return {
            "code": response.status_code,
            "fields": [spec.get("priority"), spec.get("priorityClassName"), spec.get("preemptionPolicy")],
        }
    return {"code": response.status_code, "message": str(body.get("message", response.text[:200]))}


def pod_object(rng: random.Random) -> dict[str, Any]:
    namespace = "kube-system" if rng.random() < 0.15 else "soak"
    choice = rng.random()
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": IMAGE}]}
    if choice < 0.5:
        spec["priorityClassName"] = rng.choice(POOL)
    elif choice < 0.6:
        spec["priorityClassName"] = "system-cluster-critical"
    elif choice < 0.65:
        spec["priorityClassName"] = "soak-missing"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p-{uuid.uuid4().hex[:10]}", "namespace": namespace, "labels": LABEL},
        "spec": spec,
    }


def creator(a: Cluster, b: Cluster, results: list[dict[str, Any]], stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)
    while not stop.is_set():
        obj = pod_object(rng)
        path = f"/api/v1/namespaces/{obj['metadata']['namespace']}/pods"
        sent = time.monotonic()
        try:
            got_a = outcome(a.call("POST", path, json=obj))
        except requests.RequestException as err:
            got_a = outcome(None, type(err).__name__)
        answered = time.monotonic()
        try:
            got_b = outcome(b.call("POST", path, json=obj, params={"dryRun": "All"}))
        except requests.RequestException as err:
            got_b = outcome(None, type(err).__name__)
        results.append(
            {
                "sent": sent,
                "answered": answered,
                "done": time.monotonic(),
                "namespace": obj["metadata"]["namespace"],
                "a": got_a,
                "b": got_b,
            }
        )


def cleaner(a: Cluster, stop: threading.Event) -> None:
    while not stop.wait(20):
        for namespace in ("soak", "kube-system"):
            with suppress(requests.RequestException):
                a.call(
                    "DELETE", f"/api/v1/namespaces/{namespace}/pods", params={"labelSelector": "soak=real"}
                )


def _same_denial(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """A's message has the webhook's prefix; the reason after the object's name must be B's."""
    return str(a.get("message", "")).endswith(str(b.get("message", "")).split(": ", 1)[-1])


def classify(result: dict[str, Any], classes: Classes, window: float) -> str:
    a, b = result["a"], result["b"]
    if not 200 <= b["code"] < 500:
        return "twin unavailable"
    a_ok, b_ok = 200 <= a["code"] < 300, b["code"] < 300
    if a["code"] == 0 or (a["code"] >= 500 and "failed calling webhook" not in a.get("message", "")):
        return "refused: A's API server unavailable (its restart, etcd's)"
    if a_ok and result["namespace"] == "kube-system" and a["fields"][0] is None:
        return "kube-system admitted without priority (mutation skipped)"
    if a_ok and b_ok and a["fields"] == b["fields"]:
        return "agree"
    if not a_ok and not b_ok and _same_denial(a, b):
        return "agree"
    near = classes.near_write(result["sent"], result["done"], window)
    if not a_ok and b_ok:
        if "failed calling webhook" in a.get("message", ""):
            return "refused while in-tree admits: webhook unreachable or timed out"
        return f"refused while in-tree admits: webhook denial{' near a class write' if near else ''}"
    return "disagree near a class write" if near else "WRONG: disagree, no class write near"


# ---- the Service: a TCP balancer over the ready replicas ----------------------------------------------
class Balancer:
    """Round robin over replicas that passed the readiness probe (the chart's: 5 s period, 2 s timeout,
    2 failures), like kube-proxy over a Service's ready endpoints. Connections already open stay."""

    def __init__(self, replicas: list[WebhookServer]) -> None:
        self.replicas = replicas
        self.ready = [True] * len(replicas)
        self.failures = [0] * len(replicas)
        self.port = free_ports(1)[0]
        self.turn = 0
        self.unready_seconds = [0.0] * len(replicas)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start(self, stop: threading.Event) -> None:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self.loop).result(10)
        threading.Thread(target=self._probe, args=(stop,), daemon=True).start()

    async def _serve(self) -> None:
        self.server = await asyncio.start_server(self._connect, "127.0.0.1", self.port)

    async def _connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ready = [i for i, ok in enumerate(self.ready) if ok] or list(range(len(self.replicas)))
        self.turn += 1
        replica = self.replicas[ready[self.turn % len(ready)]]
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", replica.port)
        except OSError:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def _probe(self, stop: threading.Event) -> None:
        sessions = [session_for(replica) for replica in self.replicas]
        while not stop.wait(5):
            for i, replica in enumerate(self.replicas):
                try:
                    ok = sessions[i].get(replica.url + "/readyz", timeout=2).status_code == 200
                except requests.RequestException:
                    ok = False
                self.failures[i] = 0 if ok else self.failures[i] + 1
                if ok:
                    self.ready[i] = True
                elif self.failures[i] >= 2:
                    self.ready[i] = False
                if not self.ready[i]:
                    self.unready_seconds[i] += 5


# ---- faults --------------------------------------------------------------------------------------------
def session_for(replica: WebhookServer) -> requests.Session:
    """A session of the caller's own (threads do not share one)."""
    session = requests.Session()
    session.trust_env = False
    session.verify = str(replica.ca_file)
    return session


def processes(replica: WebhookServer) -> list[int]:
    return tree(replica.process.pid)


def restart_etcd(plane: ControlPlane) -> None:
    etcd = plane.processes["etcd"]
    etcd.stop()
    etcd.start()
    wait_for(plane._etcd_healthy, timeout=120, interval=0.5, what="etcd")
    wait_for(plane.ready, timeout=120, interval=0.5, what="the API server after etcd")


def faults(
    plane: ControlPlane,
    replicas: list[WebhookServer],
    stop: threading.Event,
    paused: threading.Lock,
    cycle: float,
    stall: float,
    events: list[tuple[float, str]],
) -> None:
    """In each cycle, at fixed fractions of it: kill a worker, stall a replica, restart the API server,
    restart etcd."""
    step = 0
    while not stop.is_set():
        kind = ("kill", "stall", "apiserver", "etcd")[step % 4]
        replica = replicas[step // 4 % len(replicas)]
        if stop.wait(cycle / 4):
            return
        started = time.monotonic()
        if kind == "kill":
            workers = processes(replica)[1:]
            if workers:
                os.kill(random.choice(workers), signal.SIGKILL)
        elif kind == "stall":
            pids = processes(replica)
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            stop.wait(stall)
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
        elif kind == "apiserver":
            with paused:
                plane.restart_apiserver(stop_timeout=5)
        else:
            with paused:
                restart_etcd(plane)
        events.append((started, f"{kind} ({time.monotonic() - started:.1f}s)"))
        log(f"fault: {events[-1][1]}")
        step += 1


def hostile(replica: WebhookServer, silent: int, slow: int, stop: threading.Event, opened: Counter) -> None:
    """Keep `silent` silent TCP connections and `slow` TLS connections dripping a header byte every 5 s."""
    context = ssl.create_default_context(cafile=str(replica.ca_file))
    header = (
        b"POST /mutate HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\nX-Slow: " + b"a" * 4096
    )
    conns: list[list[Any]] = []  # [socket, bytes sent] (None for a silent one)
    while not stop.is_set():
        conns = [c for c in conns if c[0] is not None]
        while sum(1 for c in conns if c[1] is None) < silent:
            try:
                conns.append([socket.create_connection(("127.0.0.1", replica.port), timeout=2), None])
                opened["silent"] += 1
            except OSError:
                break
        while sum(1 for c in conns if c[1] is not None) < slow:
            try:
                raw = socket.create_connection(("127.0.0.1", replica.port), timeout=2)
                conns.append([context.wrap_socket(raw, server_hostname="127.0.0.1"), 0])
                opened["slow"] += 1
            except OSError:
                break
        for c in conns:
            sock, sent = c
            try:
                if sent is None:
                    sock.setblocking(False)
                    if sock.recv(1) == b"":  # closed by the server: open another
                        raise OSError
                else:
                    sock.settimeout(2)
                    sock.send(header[sent % len(header) : sent % len(header) + 1])
                    c[1] = sent + 1
            except BlockingIOError:
                pass
            except OSError:
                sock.close()
                c[0] = None
        stop.wait(5)
    for c in conns:
        if c[0] is not None:
            c[0].close()


# ---- staleness -----------------------------------------------------------------------------------------
def probe_review(class_name: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": IMAGE}]}
    if class_name:
        spec["priorityClassName"] = class_name
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "namespace": "soak",
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"}, "spec": spec},
        },
    }


def answer_of(response: dict[str, Any]) -> tuple[Any, ...]:
    body = response["response"]
    if not body["allowed"]:
        return ("denied",)
    fields = {op["path"].rsplit("/", 1)[1]: op["value"] for op in json.loads(base64.b64decode(body["patch"]))}
    return (fields.get("priority"), fields.get("priorityClassName"))


def expected_answer(classes: ClassSet, class_name: str | None) -> tuple[Any, ...]:
    obj = probe_review(class_name)["request"]["object"]
    decision = admit_pod(Request("CREATE", "pods", obj, None, "soak"), classes)
    if not decision.allowed:
        return ("denied",)
    return (decision.spec_changes.get("priority"), decision.spec_changes.get("priorityClassName"))


def staleness(
    replicas: list[WebhookServer], classes: Classes, stop: threading.Event, samples: list[tuple[float, float]]
) -> None:
    """After each class write: seconds until both replicas answer every churned name as the state says, 3
    times in a row (several workers each). A write while waiting restarts the wait."""
    seen_writes = 0
    sessions = [session_for(replica) for replica in replicas]
    while not stop.wait(0.05):
        with classes.lock:
            if len(classes.writes) == seen_writes:
                continue
            seen_writes = len(classes.writes)
            written, expected_set = classes.writes[-1][1], classes.class_set()
        names: list[str | None] = [None, *POOL]
        want = {name: expected_answer(expected_set, name) for name in names}
        streak = 0
        while not stop.is_set() and streak < 3:
            with classes.lock:
                if len(classes.writes) != seen_writes:
                    break
            try:
                ok = all(
                    answer_of(s.post(r.url + "/mutate", json=probe_review(n), timeout=5).json()) == want[n]
                    for r, s in zip(replicas, sessions, strict=True)
                    for n in names
                )
            except (requests.RequestException, KeyError, ValueError):
                ok = False
            streak = streak + 1 if ok else 0
        else:
            if streak >= 3:
                samples.append((written, time.monotonic() - written))


# ---- the run -------------------------------------------------------------------------------------------
def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=1800.0, help="seconds (default 1800)")
    parser.add_argument("--cycle", type=float, default=300.0, help="seconds per fault cycle (default 300)")
    parser.add_argument("--stall", type=float, default=20.0, help="seconds a replica stays SIGSTOPped")
    parser.add_argument("--churn-interval", type=float, default=3.0, help="seconds between class writes")
    parser.add_argument("--creators", type=int, default=3, help="pod-creating threads (default 3)")
    parser.add_argument("--silent", type=int, default=2, help="silent TCP connections per replica")
    parser.add_argument("--slow", type=int, default=2, help="slow-header TLS connections per replica")
    parser.add_argument("--window", type=float, default=2.0, help="seconds around a class write (default 2)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args()

    stop = threading.Event()
    paused = threading.Lock()
    classes = Classes()
    results: list[dict[str, Any]] = []
    events: list[tuple[float, str]] = []
    samples: list[tuple[float, float]] = []
    memory: dict[int, list[tuple[float, int]]] = {0: [], 1: []}
    opened: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="soak-real-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        log("starting cluster A (in-tree Priority off) and cluster B (in-tree Priority on)")
        plane_a = stack.enter_context(
            ControlPlane.start(
                work / "a", apiserver_args=["--disable-admission-plugins=Priority"], controller_manager=True
            )
        )
        plane_b = stack.enter_context(ControlPlane.start(work / "b", controller_manager=True))
        a, b = Cluster(plane_a), Cluster(plane_b)
        for plane in (plane_a, plane_b):
            ensure_namespace(plane, "soak")
            ensure_namespace(plane, "kube-system")
        cert_dir = work / "certs"
        ca_bundle = make_certificates(cert_dir)
        serve = ("--kubeconfig", str(plane_a.kubeconfig), "--workers", "2", "--threads", "4")
        replicas = []
        for i in range(2):
            (work / f"replica-{i}").mkdir()
            replicas.append(
                stack.enter_context(webhook_server(work / f"replica-{i}", *serve, cert_dir=cert_dir))
            )
        for replica in replicas:
            wait_for(
                lambda r=replica: r.session.get(r.url + "/readyz", timeout=5).status_code == 200, timeout=60
            )
        balancer = Balancer(replicas)
        balancer.start(stop)
        configs = chart_webhook_configurations(
            f"https://127.0.0.1:{balancer.port}", ca_bundle, {"kubeVersionOverride": plane_a.version}
        )
        plane_a.apply(*configs)
        probe = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "probe", "namespace": "soak"},
            "spec": {"containers": [{"name": "c", "image": IMAGE}]},
        }
        wait_for(
            lambda: (
                "priority"
                in (
                    a.call(
                        "POST", "/api/v1/namespaces/soak/pods", json=probe, params={"dryRun": "All"}
                    ).json()
                )["spec"]
            ),
            timeout=60,
            interval=0.2,
            what="the API server to call the webhook",
        )
        log(f"webhook registered behind the balancer on port {balancer.port}; soaking {args.duration:.0f}s")
        threads = [
            threading.Thread(target=churn, args=(a, b, classes, stop, args.churn_interval, paused)),
            threading.Thread(target=cleaner, args=(Cluster(plane_a), stop)),
            threading.Thread(
                target=faults, args=(plane_a, replicas, stop, paused, args.cycle, args.stall, events)
            ),
            threading.Thread(target=staleness, args=(replicas, classes, stop, samples)),
            *(
                threading.Thread(
                    target=creator, args=(Cluster(plane_a), Cluster(plane_b), results, stop, seed)
                )
                for seed in range(args.creators)
            ),
            *(
                threading.Thread(target=hostile, args=(r, args.silent, args.slow, stop, opened))
                for r in replicas
            ),
        ]
        for thread in threads:
            thread.daemon = True
            thread.start()
        started = time.monotonic()
        next_report = started + 60
        while time.monotonic() - started < args.duration:
            for i, replica in enumerate(replicas):
                memory[i].append(
                    (time.monotonic() - started, sum(rss_kib(pid) or 0 for pid in processes(replica)))
                )
            if time.monotonic() >= next_report:
                tally = Counter(classify(r, classes, args.window) for r in list(results))
                log(f"{len(results)} creations: {dict(tally)}")
                next_report += 60
            stop.wait(10)
        stop.set()
        log("stopping")
        for thread in threads:
            thread.join(60)

    tally: Counter[str] = Counter()
    examples: dict[str, list[Any]] = {}
    for result in results:
        kind = classify(result, classes, args.window)
        tally[kind] += 1
        if kind != "agree" and len(examples.setdefault(kind, [])) < 3:
            example = {k: result[k] for k in ("namespace", "a", "b")}
            example["sent_s"] = round(result["sent"] - started, 2)  # seconds into the run
            example["last_write_s"] = [  # the class write before it, seconds into the run: (begun, done)
                [round(t - started, 2) for t in write]
                for write in classes.writes
                if write[0] <= result["sent"]
            ][-1:]
            examples[kind].append(example)
    latencies = [r["answered"] - r["sent"] for r in results if r["a"]["code"] and r["a"]["code"] < 300]
    stale = [s for _, s in samples]
    report: dict[str, Any] = {
        "duration_s": args.duration,
        "creations_on_a": len(results),
        "admitted_on_a": sum(1 for r in results if 0 < r["a"]["code"] < 300),
        "outcomes": dict(tally.most_common()),
        "create_latency_s": {"p50": percentile(latencies, 0.5), "p99": percentile(latencies, 0.99)},
        "class_writes": len(classes.writes),
        "staleness_s": {
            "samples": len(stale),
            "p50": percentile(stale, 0.5),
            "p99": percentile(stale, 0.99),
            "max": max(stale, default=float("nan")),
        },
        "examples": examples,
        "faults": [name for _, name in events],
        "unready_seconds_per_replica": balancer.unready_seconds,
        "hostile_connections_opened": dict(opened),
        "memory_kib": {
            f"replica-{i}": {
                "first": series[0][1] if series else 0,
                "last": series[-1][1] if series else 0,
                "max": max((kib for _, kib in series), default=0),
                "median": int(statistics.median([kib for _, kib in series])) if series else 0,
            }
            for i, series in memory.items()
        },
        "memory_series_kib": {f"replica-{i}": series[::6] for i, series in memory.items()},
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0 if not any(k.startswith("WRONG") for k in tally) else 1


if __name__ == "__main__":
    sys.exit(main())
