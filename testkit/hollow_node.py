"""A real kubelet for end-to-end tests: kubemark's hollow node against a `ControlPlane`.

The hollow node is the upstream kubelet code (pod admission with its resource checks, critical-pod
preemption, pod workers and status manager, static and mirror pods, events, node status and lease) with a
fake container runtime, a fake cadvisor and a stub container manager. The binary is `kubemark` in the
plane's assets folder (`KUBEBUILDER_ASSETS`), so a kubelet always runs against the control plane of its
own version.

    node = HollowNode.create(plane, workdir, "hollow-1", max_pods=20)   # registered and Ready
    node.static_pod_dir()                                               # manifests here become mirror pods
    node.restart()                                                      # same name, same pods in the API
    node.stop()

It registers Node NAME with cpu 1, memory 3840Mi, pods `max_pods` (capacity = allocatable). It must run as
root (it opens /dev/kmsg). Like every kubelet it makes iptables chains on the machine (`KUBE-IPTABLES-HINT`,
`KUBE-KUBELET-CANARY`, `KUBE-FIREWALL`, in both families) and never removes them: the machine's rules are
saved before the first hollow kubelet starts and what the kubelets added is undone when the last one stops.
Like the control plane, it receives SIGTERM when the test process dies (`PR_SET_PDEATHSIG`), and every node
still running is stopped at exit. Its log joins the plane's logs, so a failing test that tracks the plane gets
the kubelet's tail in its report.
"""

from __future__ import annotations

import datetime
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testkit import live, node_host
from testkit.envtest import ControlPlane, Process, free_ports
from testkit.wait import wait_for

KUBEMARK = "kubemark"
# What the hollow node registers (kubemark's fake cadvisor): the tests size their pods against it.
CPU_MILLIS = 1000
MEMORY_BYTES = 3840 * 1024 * 1024


class _MachineRules:
    """The machine's iptables rules before the first of the running hollow kubelets started."""

    saved: node_host.IptablesSnapshot | None = None
    running: set[int] = set()  # id() of each HollowNode whose kubelet runs

    @classmethod
    def kubelet_starts(cls, node: object) -> None:
        if not cls.running:
            cls.saved = node_host.IptablesSnapshot.take()
        cls.running.add(id(node))

    @classmethod
    def kubelet_stopped(cls, node: object) -> None:
        cls.running.discard(id(node))
        if not cls.running and cls.saved is not None:
            saved, cls.saved = cls.saved, None
            saved.restore()


class HollowNodeUnavailable(RuntimeError):
    """No kubemark next to the control plane's binaries, or not root: no real kubelet can run."""


def unavailable(plane: ControlPlane) -> str | None:
    """Why a hollow node cannot run next to `plane`, or None."""
    binary = plane.assets / KUBEMARK
    if not os.access(binary, os.X_OK):
        return f"{plane.assets} has no {KUBEMARK} (the hollow-node kubelet)"
    if os.geteuid() != 0:
        return "the hollow-node kubelet must run as root (it opens /dev/kmsg)"
    return None


@dataclass(eq=False)
class HollowNode:
    plane: ControlPlane
    name: str
    workdir: Path
    process: Process
    started_at: datetime.datetime | None = None
    _old_roots: frozenset[Path] = frozenset()

    @classmethod
    def create(
        cls,
        plane: ControlPlane,
        workdir: Path,
        name: str = "hollow-1",
        *,
        max_pods: int = 110,
        labels: dict[str, str] | None = None,
        flags: tuple[str, ...] = (),
        timeout: float = 90.0,
    ) -> HollowNode:
        """Start a hollow node NAME against `plane` and wait until its Node is Ready."""
        reason = unavailable(plane)
        if reason:
            raise HollowNodeUnavailable(reason)
        workdir.mkdir(parents=True, exist_ok=True)
        # The kubelet's root dir and sockets go in its $TMPDIR: a short path, since a unix socket's path
        # must fit in 108 bytes (a test's tmp_path may not); linked from the workdir for the logs.
        short = Path(tempfile.mkdtemp(prefix="hollow-"))
        (workdir / "tmp").symlink_to(short, target_is_directory=True)
        kubelet_port, read_only_port = free_ports(2)
        # The admin identity: the API server authorizes with RBAC only (no Node authorizer), and the
        # `system:node` role is bound to nobody by default.
        args = [
            str(plane.assets / KUBEMARK),
            "--morph=kubelet",
            f"--name={name}",
            f"--kubeconfig={plane.kubeconfig}",
            "--use-host-image-service=false",
            f"--kubelet-port={kubelet_port}",
            f"--kubelet-read-only-port={read_only_port}",
            f"--max-pods={max_pods}",
        ]
        if labels:
            args.append("--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(labels.items())))
        args += flags
        process = Process(f"kubelet {name}", args, workdir / "kubemark.log", env={"TMPDIR": str(short)})
        node = cls(plane, name, workdir, process)
        plane.processes[process.name] = process  # its log goes with the plane's into a failing report
        live.track(node, node.close_process)
        try:
            node.start(timeout)
        except BaseException:
            node.stop()
            raise
        return node

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self, timeout: float = 90.0) -> None:
        """Start the kubelet and wait until the Node reports Ready with a heartbeat from this run."""
        self.started_at = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
        self._old_roots = frozenset(self._roots())
        _MachineRules.kubelet_starts(self)
        self.process.start()
        wait_for(self._ready, timeout=timeout, interval=0.2, what=f"node {self.name} to be Ready")

    def stop(self) -> None:
        """SIGTERM (the hollow kubelet stops at once); the Node and its pods stay in the API. The last running
        hollow kubelet to stop takes the iptables chains they made away."""
        try:
            self.process.stop(10.0)
        finally:
            _MachineRules.kubelet_stopped(self)

    def close_process(self) -> None:
        """Stop the kubelet and remove its scratch files (what the process leaves when it exits)."""
        self.stop()
        shutil.rmtree((self.workdir / "tmp").resolve(), ignore_errors=True)

    def restart(self, timeout: float = 90.0) -> None:
        self.stop()
        self.start(timeout)

    def close(self) -> None:
        """Stop the kubelet and remove its Node (pods bound to it stay: their namespaces go with the test)."""
        self.close_process()
        live.forget(self)
        self.plane.kubectl("delete", "node", self.name, "--ignore-not-found", "--wait=false", check=False)

    def running(self) -> bool:
        return self.process.running()

    def _ready(self) -> bool:
        if not self.process.running():
            raise RuntimeError(f"{self.process.name} exited while starting:\n{self.process.tail()}")
        response = self.plane.get(f"/api/v1/nodes/{self.name}")
        if response.status_code != 200:
            return False
        for condition in response.json().get("status", {}).get("conditions") or ():
            if condition.get("type") == "Ready" and condition.get("status") == "True":
                beat = _parse_time(condition.get("lastHeartbeatTime"))
                return beat is not None and self.started_at is not None and beat >= self.started_at
        return False

    # -- files ---------------------------------------------------------------------------------------
    def _roots(self) -> list[Path]:
        return list((self.workdir / "tmp").glob("hollow-kubelet.*/static-pods*"))

    def static_pod_dir(self) -> Path:
        """The folder of static-pod manifests of the running kubelet (each start makes a new root dir)."""
        new = [p for p in self._roots() if p not in self._old_roots]
        if len(new) != 1:
            raise FileNotFoundError(f"{len(new)} new static-pod folders under {self.workdir / 'tmp'}")
        return new[0]

    def logs(self, lines: int = 60) -> str:
        return f"--- {self.process.name} ({self.process.log})\n{self.process.tail(lines)}"

    def node(self) -> dict[str, Any]:
        data: dict[str, Any] = self.plane.get_json("node", self.name)
        return data


def _parse_time(value: object) -> datetime.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
