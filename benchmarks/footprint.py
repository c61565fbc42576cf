"""The sidecar's and a webhook replica's memory as the chart runs them, each in a memory cgroup of its own.

    sudo .venv/bin/python benchmarks/footprint.py [--runs 3] [--classes 400] [--node-pods 110]
        [--other-pods 2000] [--rest 20] [--load 30] [--connections 4] [--repo DIR] [--json FILE]
        [--set webhook.workers=1]

Each process tree runs as the chart's pod runs it: the container's arguments and environment rendered from
the chart (testkit/chart_rendering.py, default values or those given with `--set`; only the bind address
and the certificate folder are moved to the host's loopback and a temporary folder), the in-cluster
configuration (`--in-cluster`: KUBERNETES_SERVICE_HOST/PORT, and a token and CA mounted at
/var/run/secrets/kubernetes.io/serviceaccount, in a mount namespace of the process's own), and a memory
cgroup of its own, as the kubelet gives each container. The API server is a real one where an envtest
folder is found (testkit/envtest.py), else the test API server (testkit/kubeapi) over TLS with a bearer
token. It holds `--classes` PriorityClasses and `--node-pods` pods on the sidecar's node beside
`--other-pods` on other nodes, each written as a controller's pod looks when read back (managed fields,
labels, probes, status), so that a cache keeping whole objects pays what it pays in a cluster.

Reported per process tree, after `--rest` seconds at rest once it is ready and under load for `--load`
seconds: the working set (the cgroup's usage minus its inactive file pages: what the kubelet reports and
evicts by; cgroup v1 `memory.usage_in_bytes - total_inactive_file`, v2 `memory.current - inactive_file`),
the RSS and the PSS summed over its processes. At rest, the median of one sample a second over the last
half of `--rest`; under load, the largest sample. Load: for the replica, `--connections` clients reviewing
pods as fast as they can, each on one kept-alive TLS connection; for the sidecar, pods created on and
deleted from its node, one every 50 ms. Also the sidecar's CPU at rest (millicores). The baseline is a bare
interpreter of the same environment (`python -c` waiting for a signal) measured the same way in the same
run. `--repo` runs the sidecar and the replica from another checkout (a worktree of an older commit), to
measure before and after on one machine.

Needs root (cgroups and the mount namespace: unshare(1)). Every figure is MiB (2**20 bytes).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import secrets
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import helm_python as helm  # noqa: E402
import urllib3  # noqa: E402

from testkit import envtest  # noqa: E402
from testkit.chart_rendering import CHART, NAMESPACE, render  # noqa: E402
from testkit.image_engine import expand, service_account  # noqa: E402
from testkit.kubeapi import KubeAPIServer, ResourceType  # noqa: E402
from testkit.processes import cpu_seconds  # noqa: E402
from testkit.reviews import review  # noqa: E402
from testkit.server import free_port  # noqa: E402
from testkit.wait import wait_for  # noqa: E402
from webhook import json_codec  # noqa: E402

MIB = 2**20
NODE = "node-a"
CGROUP_ROOT = Path("/sys/fs/cgroup")
# In a mount namespace of its own: a fresh /run (so /var/run, a tmpfs) holding the service-account folder
# where the kubelet mounts it and the pod's memory-backed emptyDir volumes (RUN_VOLUMES/NAME: their pages
# are charged to the pod's cgroup, as the kubelet's are), then the command. $1 is the cgroup folder, $2 the
# service-account folder, $3 the memory volumes' names.
RUN_VOLUMES = "/run/volumes"
IN_POD = (
    'echo $$ > "$1/cgroup.procs" && mount -t tmpfs -o mode=0755 tmpfs /run && '
    "mkdir -p /run/secrets/kubernetes.io && "
    'ln -s "$2" /run/secrets/kubernetes.io/serviceaccount && '
    f'for v in $3; do mkdir -p {RUN_VOLUMES}/$v; done && shift 3 && exec "$@"'
)


# -- memory cgroups ---------------------------------------------------------------------------------------
class Cgroup:
    """A memory cgroup of our own (v1 under the memory hierarchy, v2 under the unified root)."""

    def __init__(self, name: str) -> None:
        self.v2 = (CGROUP_ROOT / "cgroup.controllers").exists()
        parent = CGROUP_ROOT if self.v2 else CGROUP_ROOT / "memory"
        if self.v2 and "memory" not in (parent / "cgroup.subtree_control").read_text().split():
            (parent / "cgroup.subtree_control").write_text("+memory")
        self.path = parent / f"footprint-{os.getpid()}-{name}"
        self.path.mkdir()

    def _stat(self) -> dict[str, int]:
        lines = (self.path / "memory.stat").read_text().splitlines()
        return {key: int(value) for key, value in (line.split() for line in lines)}

    def working_set(self) -> int:
        """Usage minus inactive file pages, as the kubelet (cadvisor) computes it; bytes."""
        if self.v2:
            usage = int((self.path / "memory.current").read_text())
            inactive = self._stat().get("inactive_file", 0)
        else:
            usage = int((self.path / "memory.usage_in_bytes").read_text())
            inactive = self._stat().get("total_inactive_file", 0)
        return max(0, usage - inactive)

    def pids(self) -> list[int]:
        return [int(pid) for pid in (self.path / "cgroup.procs").read_text().split()]

    def remove(self) -> None:
        wait_for(lambda: not self.pids(), timeout=30, what=f"{self.path} empty")
        self.path.rmdir()


def proc_kib(pid: int, file: str, key: str) -> int:
    try:
        text = Path(f"/proc/{pid}/{file}").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


@dataclass
class Sample:
    working_set: float
    rss: float
    pss: float


@dataclass
class Pod:
    """One process tree of a pod's container, in its cgroup and mount namespace."""

    name: str
    cgroup: Cgroup
    process: subprocess.Popen[bytes]
    log: Path
    argv: list[str]

    @classmethod
    def start(
        cls,
        name: str,
        argv: list[str],
        env: Mapping[str, str],
        account: Path,
        cwd: Path,
        log: Path,
        memory_volumes: tuple[str, ...] = (),
    ) -> Pod:
        cgroup = Cgroup(name)
        with log.open("wb") as out:
            process = subprocess.Popen(
                [
                    *("unshare", "--mount", "sh", "-c", IN_POD, "sh"),
                    *(str(cgroup.path), str(account), " ".join(memory_volumes)),
                    *argv,
                ],
                env=dict(env),
                cwd=cwd,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return cls(name, cgroup, process, log, argv)

    def sample(self) -> Sample:
        pids = self.cgroup.pids()
        rss = sum(proc_kib(pid, "status", "VmRSS") for pid in pids)
        pss = sum(proc_kib(pid, "smaps_rollup", "Pss") for pid in pids)
        return Sample(self.cgroup.working_set() / MIB, rss / 1024, pss / 1024)

    def cpu(self) -> float:
        return sum(cpu_seconds(pid) for pid in self.cgroup.pids())

    def alive(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(
                f"{self.name} exited {self.process.returncode}:\n{self.log.read_text()[-3000:]}"
            )
        return True

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.cgroup.remove()


# -- the cluster's objects --------------------------------------------------------------------------------
def managed_fields(manager: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {
        "manager": manager,
        "operation": "Update",
        "apiVersion": "v1",
        "time": "2026-01-01T00:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }


def controller_pod(name: str, namespace: str, node: str, index: int) -> dict[str, Any]:
    """A Deployment's pod as the API server returns it once it runs: what a node's pods look like."""
    app = f"app-{index % 40}"
    container_fields = {
        f'k:{{"name":"{c}"}}': {
            ".": {},
            "f:env": {f'k:{{"name":"VAR_{i}"}}': {".": {}, "f:name": {}, "f:value": {}} for i in range(6)},
            "f:image": {},
            "f:livenessProbe": {".": {}, "f:httpGet": {".": {}, "f:path": {}, "f:port": {}}},
            "f:ports": {'k:{"containerPort":8080,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}},
            "f:resources": {".": {}, "f:limits": {".": {}, "f:memory": {}}, "f:requests": {".": {}}},
            "f:volumeMounts": {'k:{"mountPath":"/config"}': {".": {}, "f:mountPath": {}, "f:name": {}}},
        }
        for c in ("main", "proxy")
    }
    containers = [
        {
            "name": c,
            "image": f"registry.example.com/team/{app}-{c}:v1.{index % 7}.3",
            "args": ["--config=/config/app.yaml", "--log-format=json"],
            "env": [{"name": f"VAR_{i}", "value": f"value-{i}-{index}"} for i in range(6)],
            "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
            "resources": {
                "requests": {"cpu": "100m", "memory": "128Mi"},
                "limits": {"memory": "256Mi"},
            },
            "livenessProbe": {
                "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                "periodSeconds": 10,
                "timeoutSeconds": 1,
                "successThreshold": 1,
                "failureThreshold": 3,
            },
            "volumeMounts": [
                {"name": "config", "mountPath": "/config"},
                {
                    "name": "kube-api-access",
                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    "readOnly": True,
                },
            ],
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent",
        }
        for c in ("main", "proxy")
    ]
    uid = f"{index:08d}-0000-4000-8000-{secrets.token_hex(6)}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "generateName": f"{app}-7d9f8b6c5d-",
            "labels": {"app": app, "pod-template-hash": "7d9f8b6c5d", "team": f"team-{index % 9}"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{app}-7d9f8b6c5d",
                    "uid": f"rs-{index % 40:04d}-0000-4000-8000-000000000000",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                managed_fields("kube-controller-manager", {"f:spec": {"f:containers": container_fields}}),
                managed_fields(
                    "kubelet", {"f:status": {"f:conditions": {".": {}}, "f:phase": {}, "f:podIP": {}}}
                ),
            ],
        },
        "spec": {
            "nodeName": node,
            "containers": containers,
            "volumes": [
                {"name": "config", "configMap": {"name": f"{app}-config", "defaultMode": 420}},
                {
                    "name": "kube-api-access",
                    "projected": {
                        "defaultMode": 420,
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {
                                "configMap": {
                                    "name": "kube-root-ca.crt",
                                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                }
                            },
                        ],
                    },
                },
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "schedulerName": "default-scheduler",
            "priority": 0,
            "preemptionPolicy": "PreemptLowerPriority",
            "enableServiceLinks": True,
            "tolerations": [
                {
                    "key": f"node.kubernetes.io/{t}",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
                for t in ("not-ready", "unreachable")
            ],
        },
        "status": {
            "phase": "Running",
            "qosClass": "Burstable",
            "hostIP": "10.0.0.1",
            "podIP": f"10.1.{index // 250}.{index % 250}",
            "startTime": "2026-01-01T00:00:00Z",
            "conditions": [
                {
                    "type": t,
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
                for t in (
                    "PodReadyToStartContainers",
                    "Initialized",
                    "Ready",
                    "ContainersReady",
                    "PodScheduled",
                )
            ],
            "containerStatuses": [
                {
                    "name": c,
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "image": f"registry.example.com/team/{app}-{c}:v1.{index % 7}.3",
                    "imageID": f"registry.example.com/team/{app}-{c}@sha256:{'0' * 64}",
                    "containerID": f"containerd://{secrets.token_hex(32)}",
                    "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                }
                for c in ("main", "proxy")
            ],
        },
    }


def priority_class(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {
            "name": f"class-{index:03d}",
            "labels": {"team": f"team-{index % 9}"},
            "managedFields": [
                managed_fields("kubectl-client-side-apply", {"f:value": {}, "f:description": {}})
            ],
        },
        "value": index * 1000,
        "preemptionPolicy": "PreemptLowerPriority",
        "description": f"Workloads of tier {index}: scheduled before tier {index - 1}, evicted after it.",
    }


def node() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": NODE, "labels": {"kubernetes.io/os": "linux", "kubernetes.io/hostname": NODE}},
        "status": {
            "capacity": {"cpu": "64", "memory": "256Gi", "pods": "110", "ephemeral-storage": "500Gi"},
            "allocatable": {"cpu": "63", "memory": "250Gi", "pods": "110", "ephemeral-storage": "450Gi"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


# -- the API server ---------------------------------------------------------------------------------------
@dataclass
class Cluster:
    """Where the pods send their requests, and how the benchmark writes to it."""

    host: str
    port: str
    token: str
    ca: bytes
    create: Callable[[str, dict[str, Any], str | None], None]
    delete: Callable[[str, str, str | None], None]
    class_watches: Callable[[], int]  # PriorityClass watch requests so far (-1: not known)
    kind: str


def extra_resources() -> list[ResourceType]:
    """What `certificates.mode: webhook` needs beside the defaults: its CA Secret, the configurations."""
    return [
        ResourceType("secrets", "Secret"),
        *(
            ResourceType(plural, kind, "admissionregistration.k8s.io", namespaced=False)
            for plural, kind in (
                ("mutatingwebhookconfigurations", "MutatingWebhookConfiguration"),
                ("validatingwebhookconfigurations", "ValidatingWebhookConfiguration"),
            )
        ),
    ]


@contextlib.contextmanager
def test_api_server() -> Iterator[Cluster]:
    api = KubeAPIServer(tls=True, token=secrets.token_urlsafe(16), bookmark_interval=5)
    for resource in extra_resources():
        api.register_resource(resource)

    def create(plural: str, obj: dict[str, Any], namespace: str | None) -> None:
        api.create(plural, obj, namespace)

    def delete(plural: str, name: str, namespace: str | None) -> None:
        api.delete(plural, name, namespace)

    with api:
        assert api.certificates is not None and api.token is not None
        host, _, port = api.url.removeprefix("https://").rpartition(":")
        yield Cluster(
            host,
            port,
            api.token,
            api.certificates.ca.read_bytes(),
            create,
            delete,
            lambda: api.watch_count("/apis/scheduling.k8s.io/v1/priorityclasses"),
            "test API server (testkit/kubeapi)",
        )


@contextlib.contextmanager
def real_api_server(workdir: Path) -> Iterator[Cluster]:
    """kube-apiserver from the envtest folder; the pods' service account is bound to cluster-admin."""
    with envtest.ControlPlane.start(workdir / "plane") as plane:
        plane.kubectl("create", "namespace", NAMESPACE, check=False)
        plane.kubectl("create", "serviceaccount", "footprint", "-n", NAMESPACE)
        plane.kubectl(
            "create",
            "clusterrolebinding",
            "footprint",
            "--clusterrole=cluster-admin",
            f"--serviceaccount={NAMESPACE}:footprint",
        )
        token = plane.kubectl(
            "create", "token", "footprint", "-n", NAMESPACE, "--duration=3600s"
        ).stdout.strip()
        session = plane.session()
        lock = threading.Lock()

        def path(plural: str, ns: str | None) -> str:
            prefix = {
                "priorityclasses": "/apis/scheduling.k8s.io/v1",
                "mutatingwebhookconfigurations": "/apis/admissionregistration.k8s.io/v1",
                "validatingwebhookconfigurations": "/apis/admissionregistration.k8s.io/v1",
            }.get(plural, "/api/v1")
            return f"{plane.url}{prefix}/namespaces/{ns}/{plural}" if ns else f"{plane.url}{prefix}/{plural}"

        def create(plural: str, obj: dict[str, Any], ns: str | None) -> None:
            body = {
                **obj,
                "metadata": {k: v for k, v in obj["metadata"].items() if k not in ("uid", "managedFields")},
            }
            status = body.pop("status", None)
            with lock:
                if ns:
                    session.post(
                        f"{plane.url}/api/v1/namespaces", json={"metadata": {"name": ns}}, timeout=10
                    )
                made = session.post(path(plural, ns), json=body, timeout=30)
                made.raise_for_status()
                if status is not None:  # what the kubelet would have written
                    url = f"{path(plural, ns)}/{obj['metadata']['name']}/status"
                    session.patch(
                        url,
                        data=json_codec.dumps({"status": status}),
                        headers={"Content-Type": "application/merge-patch+json"},
                        timeout=30,
                    ).raise_for_status()

        def delete(plural: str, name: str, ns: str | None) -> None:
            with lock:
                session.delete(f"{path(plural, ns)}/{name}", params={"gracePeriodSeconds": "0"}, timeout=30)

        host, _, port = plane.url.removeprefix("https://").rpartition(":")
        yield Cluster(
            host,
            port,
            token,
            plane.ca.cert_pem(),
            create,
            delete,
            lambda: -1,
            f"kube-apiserver {plane.version}",
        )


def populate(cluster: Cluster, classes: int, node_pods: int, other_pods: int, rendered: Any) -> None:
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        cluster.create(kind.lower() + "s", rendered.one(kind), None)
    cluster.create("nodes", node(), None)
    for i in range(classes):
        cluster.create("priorityclasses", priority_class(i), None)
    for i in range(node_pods + other_pods):
        where = NODE if i < node_pods else f"node-{i % 500:03d}-other"
        cluster.create("pods", controller_pod(f"pod-{i:05d}", f"team-{i % 9}", where, i), f"team-{i % 9}")


# -- the pods ---------------------------------------------------------------------------------------------
def container_of(rendered: Any, kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
    workload = rendered.one(kind)
    spec = workload["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    return spec, container


def pod_env(container: dict[str, Any], cluster: Cluster) -> dict[str, str]:
    """The container's environment as the kubelet builds it (downward API: the node's name)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp", "PYTHONUNBUFFERED": "1"}
    for item in container.get("env", []):
        env[item["name"]] = expand(item["value"], env) if "value" in item else NODE
    env["KUBERNETES_SERVICE_HOST"] = cluster.host
    env["KUBERNETES_SERVICE_PORT"] = cluster.port
    return env


def volumes(pod_spec: dict[str, Any], container: dict[str, Any], folder: Path) -> dict[str, str]:
    """Where each of the container's mounts is here: a memory-backed emptyDir in the pod's own tmpfs
    (RUN_VOLUMES/NAME), any other in a folder of the run."""
    kinds = {volume["name"]: volume for volume in pod_spec.get("volumes", [])}
    where = {}
    for mount in container.get("volumeMounts", []):
        volume = kinds[mount["name"]]
        if volume.get("emptyDir", {}).get("medium") == "Memory":
            where[mount["mountPath"]] = f"{RUN_VOLUMES}/{mount['name']}"
        else:
            (folder / "volumes" / mount["name"]).mkdir(parents=True, exist_ok=True)
            where[mount["mountPath"]] = str(folder / "volumes" / mount["name"])
    return where


def memory_volumes(where: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(path.rsplit("/", 1)[1] for path in where.values() if path.startswith(RUN_VOLUMES + "/"))


def mounted(env: dict[str, str], where: Mapping[str, str]) -> dict[str, str]:
    """The environment with a value naming a mount point (TMPDIR=/tmp) pointed at the mount's place here."""
    return {name: where.get(value, value) for name, value in env.items()}


def with_extra(env: dict[str, str], extra: list[str]) -> dict[str, str]:
    """`--env NAME=VALUE` settings over the chart's (to try a setting before the chart gets it)."""
    return {**env, **dict(item.split("=", 1) for item in extra)}


def chart_args(
    container: dict[str, Any], env: Mapping[str, str], bind: str, where: Mapping[str, str]
) -> list[str]:
    """The container's arguments, `--bind` on loopback and a mount point given as a value (`--cert-dir`)
    pointed at the mount's place here."""
    args = []
    for arg in container["args"]:
        flag, _, value = expand(arg, dict(env)).partition("=")
        if flag == "--bind":
            value = bind
        args.append(f"{flag}={where.get(value, value)}" if value else flag)
    return args


PROBE = urllib3.PoolManager(
    cert_reqs="CERT_NONE", assert_hostname=False
)  # the kubelet's probes: no verification
urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)


def ready(url: str) -> bool:
    try:
        answer = PROBE.request("GET", url, timeout=2, retries=False)
    except urllib3.exceptions.HTTPError:
        return False
    return answer.status == 200


@dataclass
class Figures:
    rest: Sample
    load: Sample
    cpu_millicores: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def at_rest(pod: Pod, seconds: float) -> tuple[Sample, float]:
    """Median of one sample a second over the last half of `seconds`, and the CPU used meanwhile."""
    cpu0, t0 = pod.cpu(), time.monotonic()
    samples = []
    deadline = t0 + seconds
    while time.monotonic() < deadline:
        time.sleep(1.0)  # a sampling period, not a synchronisation
        pod.alive()
        if time.monotonic() >= t0 + seconds / 2:
            samples.append(pod.sample())
    used = pod.cpu() - cpu0
    median = Sample(
        *(statistics.median(getattr(s, f) for s in samples) for f in ("working_set", "rss", "pss"))
    )
    return median, 1000 * used / (time.monotonic() - t0)


def under(pod: Pod, seconds: float, load: Callable[[threading.Event], None], workers: int) -> Sample:
    """The largest sample while `workers` threads run `load` for `seconds`."""
    stop = threading.Event()
    threads = [threading.Thread(target=load, args=(stop,), daemon=True) for _ in range(workers)]
    for thread in threads:
        thread.start()
    peak = Sample(0, 0, 0)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.5)
        pod.alive()
        now = pod.sample()
        peak = Sample(*(max(getattr(peak, f), getattr(now, f)) for f in ("working_set", "rss", "pss")))
    stop.set()
    for thread in threads:
        thread.join(30)
    return peak


def reviewer(port: int, counter: list[int]) -> Callable[[threading.Event], None]:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"priorityClassName": "class-123", "containers": [{"name": "c", "image": "nginx"}]},
    }
    body = json_codec.dumps(review(pod))

    def run(stop: threading.Event) -> None:
        connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
        while not stop.is_set():
            connection.request("POST", "/mutate", body, {"Content-Type": "application/json"})
            answer = connection.getresponse()
            answer.read()
            assert answer.status == 200, answer.status
            counter[0] += 1
        connection.close()

    return run


def churner(cluster: Cluster) -> Callable[[threading.Event], None]:
    def run(stop: threading.Event) -> None:
        made: list[str] = []
        index = 100_000
        while not stop.is_set():
            name = f"churn-{index}"
            cluster.create("pods", controller_pod(name, "churn", NODE, index), "churn")
            made.append(name)
            if len(made) > 10:
                cluster.delete("pods", made.pop(0), "churn")
            index += 1
            stop.wait(0.05)
        for name in made:
            cluster.delete("pods", name, "churn")

    return run


def measure_run(
    args: argparse.Namespace, cluster: Cluster, rendered: Any, folder: Path
) -> dict[str, Figures]:
    account = service_account(
        folder / "serviceaccount", token=cluster.token, ca=cluster.ca, namespace=NAMESPACE
    )
    python = sys.executable
    repo = args.repo.resolve()
    out: dict[str, Figures] = {}

    # the baseline: a bare interpreter, in the same kind of cgroup and namespace
    bare = Pod.start(
        "bare",
        [python, "-c", "import signal; signal.pause()"],
        {"PATH": os.environ["PATH"]},
        account,
        repo,
        folder / "bare.log",
    )
    try:
        rest, cpu = at_rest(bare, min(args.rest, 6))
        out["bare"] = Figures(rest, rest, cpu)
    finally:
        bare.stop()

    if "sidecar" in args.pods:
        out["sidecar"] = measure_sidecar(args, cluster, rendered, folder, account)
    if "replica" in args.pods:
        out["replica"] = measure_replica(args, cluster, rendered, folder, account)
    return out


def launch(
    name: str,
    kind: str,
    bind: str,
    args: argparse.Namespace,
    cluster: Cluster,
    rendered: Any,
    folder: Path,
    account: Path,
) -> Pod:
    """The container of the chart's `kind`, as its pod runs it, from `--repo`."""
    repo = args.repo.resolve()
    spec, container = container_of(rendered, kind)
    where = volumes(spec, container, folder / name)
    env = with_extra({**mounted(pod_env(container, cluster), where), "PYTHONPATH": str(repo)}, args.env)
    argv = [sys.executable, "-m", "webhook", *chart_args(container, env, bind, where)]
    return Pod.start(name, argv, env, account, repo, folder / f"{name}.log", memory_volumes(where))


def measure_sidecar(
    args: argparse.Namespace, cluster: Cluster, rendered: Any, folder: Path, account: Path
) -> Figures:
    port = free_port()
    sidecar = launch("sidecar", "DaemonSet", f"127.0.0.1:{port}", args, cluster, rendered, folder, account)
    try:
        wait_for(
            lambda: sidecar.alive() and ready(f"http://127.0.0.1:{port}/readyz"),
            timeout=120,
            what="sidecar ready",
        )
        rest, cpu = at_rest(sidecar, args.rest)
        load = under(sidecar, args.load, churner(cluster), 1)
        return Figures(rest, load, cpu)
    finally:
        sidecar.stop()


def measure_replica(
    args: argparse.Namespace, cluster: Cluster, rendered: Any, folder: Path, account: Path
) -> Figures:
    """A webhook replica: gunicorn's master and its workers."""
    port = free_port()
    watches = cluster.class_watches()
    replica = launch("replica", "Deployment", f"127.0.0.1:{port}", args, cluster, rendered, folder, account)
    try:
        workers = int(next(a.split("=", 1)[1] for a in replica.argv if a.startswith("--workers=")))
        wait_for(
            lambda: (
                replica.alive()
                and ready(f"https://127.0.0.1:{port}/readyz")
                and len(replica.cgroup.pids()) >= workers + 1
            ),
            timeout=180,
            what="replica ready",
        )
        if watches >= 0:  # /readyz answered from one worker: the others' caches too
            wait_for(
                lambda: cluster.class_watches() >= watches + workers, timeout=60, what="every worker watching"
            )
        rest, cpu = at_rest(replica, args.rest)
        each = {pid: round(proc_kib(pid, "status", "VmRSS") / 1024, 1) for pid in replica.cgroup.pids()}
        reviews = [0]
        started = time.monotonic()
        load = under(replica, args.load, reviewer(port, reviews), args.connections)
        rate = reviews[0] / (time.monotonic() - started)
        return Figures(rest, load, cpu, {"rss_each": list(each.values()), "reviews_per_s": rate})
    finally:
        replica.stop()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--classes", type=int, default=400)
    parser.add_argument("--node-pods", type=int, default=110)
    parser.add_argument("--other-pods", type=int, default=2000)
    parser.add_argument(
        "--rest", type=float, default=20.0, help="seconds at rest (sampled over the second half)"
    )
    parser.add_argument("--load", type=float, default=30.0, help="seconds under load")
    parser.add_argument("--connections", type=int, default=4, help="kept-alive review connections")
    parser.add_argument("--repo", type=Path, default=REPO, help="checkout the sidecar and replica run from")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument(
        "--pods",
        type=lambda v: v.split(","),
        default=["sidecar", "replica"],
        help="sidecar,replica (default)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a chart value, as `helm --set` takes it (e.g. webhook.workers=1); the pods run as it renders",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="one more environment variable of the pods",
    )
    args = parser.parse_args()
    if os.geteuid() != 0 or not shutil.which("unshare"):
        parser.error("needs root and unshare(1): memory cgroups and a mount namespace per pod")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the pods and remove their cgroups
    values = helm.parse_set_string(",".join(args.set)) if args.set else {}
    with helm.Chart.load(CHART) as chart:
        rendered = render(chart, values)
    runs: list[dict[str, Figures]] = []
    with tempfile.TemporaryDirectory(prefix="footprint-") as tmp:
        folder = Path(tmp)
        try:
            envtest.assets_dir()
            server = real_api_server(folder)
        except envtest.AssetsMissing:
            server = test_api_server()
        with server as cluster:
            print(f"API server: {cluster.kind}; populating", flush=True)
            populate(cluster, args.classes, args.node_pods, args.other_pods, rendered)
            for run in range(args.runs):
                run_dir = folder / f"run-{run}"
                run_dir.mkdir()
                runs.append(measure_run(args, cluster, rendered, run_dir))
                report(runs[-1], f"run {run + 1}")
    if args.runs > 1:
        report(
            {
                name: Figures(
                    median_sample([r[name].rest for r in runs]),
                    median_sample([r[name].load for r in runs]),
                    statistics.median(r[name].cpu_millicores for r in runs),
                    {"reviews_per_s": statistics.median(r[name].extra.get("reviews_per_s", 0) for r in runs)},
                )
                for name in runs[0]
            },
            f"median of {args.runs} runs",
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "args": {k: str(v) for k, v in vars(args).items()},
                    "runs": [
                        {
                            name: {
                                "rest": vars(f.rest),
                                "load": vars(f.load),
                                "cpu_millicores": f.cpu_millicores,
                                **f.extra,
                            }
                            for name, f in run.items()
                        }
                        for run in runs
                    ],
                },
                indent=1,
            )
        )
    return 0


def median_sample(samples: list[Sample]) -> Sample:
    return Sample(*(statistics.median(getattr(s, f) for s in samples) for f in ("working_set", "rss", "pss")))


def report(figures: dict[str, Figures], title: str) -> None:
    bare = figures["bare"].rest
    print(f"-- {title} (MiB; x: times the bare interpreter's)")
    print(f"{'':9} {'':6} {'working set':>16} {'RSS':>16} {'PSS':>16}  CPU")
    for name, f in figures.items():
        for when, s in (("rest", f.rest), ("load", f.load)):
            if name == "bare" and when == "load":
                continue
            cells = [
                f"{getattr(s, k):7.1f} ({getattr(s, k) / max(getattr(bare, k), 1e-9):4.1f}x)"
                for k in ("working_set", "rss", "pss")
            ]
            cpu = f"{f.cpu_millicores:.1f}m" if when == "rest" else ""
            print(f"{name:9} {when:6} {cells[0]:>16} {cells[1]:>16} {cells[2]:>16}  {cpu}")
        if name == "replica":
            ratio = f.load.working_set / f.rest.working_set
            rate = f.extra.get("reviews_per_s", 0)
            print(
                f"{'':9} load/rest working set {ratio:.2f}x, {rate:.0f} reviews/s; "
                f"RSS of each process at rest {f.extra.get('rss_each', 'in each run')}"
            )
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
