"""A real single-node cluster for the node suite: the envtest control plane, a kubelet and kube-proxy of the
same release, containerd, runc and a CNI bridge, so that the chart installs as users install it and its pods
run from the project's image as real containers.

    node = Node.create(workdir, project_image=reference)      # Ready, both images in its containerd
    node.plane.kubectl("get", "nodes")
    node.stop()                                               # the machine as it was found

Where the parts come from: testkit/node_parts.py. The settings: testkit/node_config.py. What it changes on
the machine, and how each change is undone: testkit/node_host.py.

Start-up, in order: the machine's iptables rules, kernel settings and machine-wide folders are recorded;
the bridge and its address are made on a /24 of its own, and the node's own iptables rules keep the pod
subnet off every other interface and the API server's and kubelet's ports off everything but loopback and
the bridge; the control plane starts (bound on every address, advertising the bridge address, the Node
authorizer and NodeRestriction on, the in-tree Priority plugin on or off); the node's client certificates are
signed by its CA (`system:node:NAME` in `system:nodes`, `system:kube-proxy`); containerd starts with its own
configuration and gets the pause image and the project's image by import; the kubelet registers the Node and
is Ready; kube-proxy programs the Services.

Teardown (`stop()`, from the context manager, `atexit` and SIGTERM through testkit/live.py, and on SIGINT
as pytest unwinds): the workloads' namespaces are deleted first, so the kubelet stops their pods and the CNI
plugin releases their addresses; then kube-proxy, the kubelet, the control plane and containerd (and its
shims) stop by PID; what is left of the pods' cgroups (`kubepods`) is killed and removed; every mount under
the node's folders is undone; the network namespaces (`/run/netns/cni-*`), /var/lib/kubelet, /run/containerd,
/var/lib/cni, /var/log/containers and /var/log/pods go where the node made them; the bridge is deleted; the
iptables rules and kernel settings are restored. Each step runs even when one before it failed.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml

from testkit import live, node_host, node_images
from testkit.containerd import Containerd
from testkit.envtest import SERVICE_CIDR, ControlPlane, Process, free_ports
from testkit.node_config import (
    BRIDGE,
    PAUSE_IMAGE,
    Layout,
    apiserver_args,
    cni_conflist,
    first_service_address,
    gateway,
    kube_proxy_args,
    kubelet_args,
    kubelet_config,
    pick_subnet,
    resolv_conf,
)
from testkit.node_parts import (
    Binaries,
    NodeUnavailable,
    containerd_version,
    install_missing,
    kubelet_version,
    kubernetes_binaries,
)
from testkit.wait import wait_for

NODE_NAME = "node-1"
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


@dataclass
class HostState:
    """What the node found on the machine, taken before it changed anything."""

    iptables: node_host.IptablesSnapshot
    sysctls: node_host.SysctlSnapshot
    paths: node_host.PathSnapshot

    @classmethod
    def take(cls) -> HostState:
        if node_host.kubepods_cgroups():
            raise NodeUnavailable(
                f"pod cgroups ({node_host.KUBEPODS}) already exist under {node_host.CGROUP_ROOT}: another "
                "kubelet runs on this machine, or a node was killed before its cleanup"
            )
        if BRIDGE in node_host.links():
            raise NodeUnavailable(
                f"a link named {BRIDGE} already exists: another node runs on this machine, or one was killed "
                f"before its cleanup (then `ip link delete {BRIDGE}`, and its iptables chains "
                f"{node_host.OUR_CHAIN_PREFIX}*)"
            )
        iptables = node_host.IptablesSnapshot.take()
        left = iptables.chains_named(node_host.OUR_CHAIN_PREFIX)
        if left:
            raise NodeUnavailable(
                f"iptables chains of a node are already there ({', '.join(left)}): a node was killed before "
                "its cleanup; delete them first"
            )
        return cls(iptables, node_host.SysctlSnapshot.take(), node_host.PathSnapshot.take())


@dataclass(eq=False)
class Node:
    workdir: Path
    layout: Layout
    binaries: Binaries
    host: HostState
    subnet: ipaddress.IPv4Network
    name: str = NODE_NAME
    plane: ControlPlane | None = None
    runtime: Containerd | None = None
    processes: dict[str, Process] = field(default_factory=dict)
    kubelet_version: str = ""
    containerd_version: str = ""
    project_image: str = ""
    in_tree_priority: bool = True
    stopped: bool = False
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def control(self) -> ControlPlane:
        """The node's control plane, once the node has started it."""
        assert self.plane is not None, "the node has not started its control plane"
        return self.plane

    # -- start ------------------------------------------------------------------------------------------
    @classmethod
    @contextlib.contextmanager
    def start(cls, workdir: Path, **options: Any) -> Iterator[Node]:
        node = cls.create(workdir, **options)
        try:
            yield node
        finally:
            node.stop()

    @classmethod
    def create(
        cls,
        workdir: Path,
        *,
        project_image: str | None = None,
        in_tree_priority: bool = True,
        name: str = NODE_NAME,
        timeout: float = 180.0,
    ) -> Node:
        """Start a whole node (see the module's docstring). `project_image`: a reference in podman's storage
        (default: built now with `scripts/image`). NodeUnavailable where the parts are missing."""
        binaries = kubernetes_binaries()
        install_missing()
        workdir.mkdir(parents=True, exist_ok=True)
        host = HostState.take()
        run = Path(tempfile.mkdtemp(prefix="pwnode-"))
        with contextlib.suppress(FileExistsError):
            (workdir / "run").symlink_to(run, target_is_directory=True)
        subnet = pick_subnet(node_host.machine_networks())
        node = cls(workdir, Layout(run), binaries, host, subnet, name=name, in_tree_priority=in_tree_priority)
        live.track(node, node.stop)
        try:
            node._start(project_image, timeout)
        except BaseException:
            node.stop()
            raise
        return node

    @property
    def address(self) -> str:
        """The bridge's address: where the API server is advertised and the kubelet listens."""
        return str(gateway(self.subnet))

    def _timed(self, what: str, step: Callable[[], Any]) -> Any:
        started = time.monotonic()
        result = step()
        self.timings[what] = time.monotonic() - started
        return result

    def _start(self, project_image: str | None, timeout: float) -> None:
        layout = self.layout
        api_port, kubelet_port, kubelet_healthz, proxy_metrics, proxy_healthz = free_ports(5)
        node_host.create_bridge(BRIDGE, self.address, self.subnet.prefixlen)
        # Bridged traffic through iptables, so a Service's reply from a pod on the same bridge is un-NATed
        # (kube-proxy needs it; restored with the other kernel settings).
        node_host.set_sysctl("net.bridge.bridge-nf-call-iptables", "1")
        node_host.Guard(BRIDGE, str(self.subnet), (api_port, kubelet_port)).install()

        self.plane = self._timed(
            "control plane",
            lambda: ControlPlane.create(
                self.workdir / "plane",
                apiserver_args=apiserver_args(self.address, in_tree_priority=self.in_tree_priority),
                controller_manager=True,
                scheduler=True,
                serving_hosts=[
                    self.address,
                    first_service_address(SERVICE_CIDR),
                    "kubernetes.default.svc.cluster.local",
                ],
                secure_port=api_port,
                assets=self.binaries.assets,
                timeout=timeout,
            ),
        )
        plane = self.plane
        live.forget(plane)  # stopped by the node, after its workloads are drained and its kubelet stopped
        kubelet_kubeconfig = plane.write_kubeconfig(
            layout.run / "kubelet.kubeconfig", f"system:node:{self.name}", ("system:nodes",)
        )
        proxy_kubeconfig = plane.write_kubeconfig(layout.run / "kube-proxy.kubeconfig", "system:kube-proxy")

        for folder in (layout.cni_conf_dir, layout.static_pods, layout.pod_logs, layout.volume_plugins):
            folder.mkdir(parents=True, exist_ok=True)
        (layout.cni_conf_dir / "10-pw-node.conflist").write_text(
            json.dumps(cni_conflist(layout, self.subnet), indent=2)
        )
        layout.resolv_conf.write_text(resolv_conf())
        self.kubelet_version = kubelet_version(self.binaries.kubelet)
        layout.kubelet_config.write_text(
            yaml.safe_dump(
                kubelet_config(
                    layout,
                    address=self.address,
                    port=kubelet_port,
                    healthz_port=kubelet_healthz,
                    minor=plane.minor,
                )
            )
        )

        pause = self._timed("pause image", lambda: node_images.build_pause_image(layout.run))
        image = project_image or self._timed("project image", lambda: node_images.project_image(layout.run))
        self.project_image = image
        self.runtime = Containerd.create(layout, sandbox_image=pause)
        live.forget(self.runtime)  # stopped by the node, after its kubelet
        self.containerd_version = containerd_version()
        runtime = self.runtime
        for reference in (pause, image):
            archive = node_images.save_archive(reference, layout.run / "image.tar")
            started = time.monotonic()
            runtime.import_archive(archive)
            self.timings[f"import {reference}"] = time.monotonic() - started
            archive.unlink()
        node_images.remove_from_podman(pause)

        kubelet = self._process(
            "kubelet",
            kubelet_args(
                self.binaries.kubelet,
                layout,
                kubeconfig=kubelet_kubeconfig,
                name=self.name,
                node_ip=self.address,
            ),
        )
        self._timed("node Ready", lambda: self._wait(kubelet, self.ready, timeout, f"Node {self.name} Ready"))
        proxy = self._process(
            "kube-proxy",
            kube_proxy_args(
                self.binaries.kube_proxy,
                kubeconfig=proxy_kubeconfig,
                name=self.name,
                cluster_cidr=str(self.subnet),
                metrics_port=proxy_metrics,
                healthz_port=proxy_healthz,
            ),
        )
        self._wait(
            proxy, lambda: _healthy(f"http://127.0.0.1:{proxy_healthz}/healthz"), timeout, "kube-proxy"
        )
        self._wait(proxy, self._kubernetes_service_advertised, timeout, "the kubernetes Service's endpoints")

    def _process(self, name: str, args: list[str]) -> Process:
        process = Process(name, args, self.workdir / f"{name}.log")
        self.processes[name] = process
        process.start()
        return process

    def _wait(self, process: Process, ready: Callable[[], bool], timeout: float, what: str) -> None:
        def check() -> bool:
            if not process.running():
                raise RuntimeError(f"{process.name} exited:\n{process.tail()}")
            return ready()

        wait_for(check, timeout=timeout, interval=0.2, what=what)

    # -- state ------------------------------------------------------------------------------------------
    def name_pause_image(self, reference: str) -> None:
        """Give the node's pause image a second name in its containerd: the one a test's pods run (nothing
        is pulled here, and the kubelet's `IfNotPresent` finds it under that name)."""
        assert self.runtime is not None, "the node has not started containerd"
        self.runtime.tag(PAUSE_IMAGE, reference)

    def kubectl(self, *args: str, **kwargs: Any) -> Any:
        return self.control.kubectl(*args, **kwargs)

    def node_object(self) -> dict[str, Any]:
        return dict(self.control.get_json("node", self.name))

    def ready(self) -> bool:
        found = self.control.kubectl("get", "node", self.name, "-o", "json", check=False)
        if found.returncode != 0:
            return False
        conditions = json.loads(found.stdout).get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def _kubernetes_service_advertised(self) -> bool:
        found = self.control.kubectl(
            "get", "endpoints", "kubernetes", "-n", "default", "-o", "json", check=False
        )
        if found.returncode != 0:
            return False
        subsets = json.loads(found.stdout).get("subsets") or []
        return any(a.get("ip") == self.address for s in subsets for a in s.get("addresses", []))

    def summary(self) -> str:
        """`kubelet v1.33.3, containerd 1.6.20~ds1`: what the suite's summary line names."""
        return f"kubelet {self.kubelet_version}, containerd {self.containerd_version}"

    def logs(self, lines: int = 40) -> str:
        parts = [self.plane.logs(lines)] if self.plane else []
        parts += [f"--- {name} ({p.log})\n{p.tail(lines)}" for name, p in self.processes.items()]
        if self.runtime:
            parts.append(f"--- containerd ({self.runtime.process.log})\n{self.runtime.process.tail(lines)}")
        return "\n".join(parts)

    # -- teardown ---------------------------------------------------------------------------------------
    def drain_workloads(self, timeout: float = 120.0) -> None:
        """Delete every namespace but the system ones, then every pod left, and wait until the kubelet has
        stopped them all (their sandboxes torn down, their addresses released)."""
        plane = self.plane
        if plane is None or not plane.ready() or "kubelet" not in self.processes:
            return
        names = plane.kubectl("get", "namespaces", "-o", "name", check=False).stdout.split()
        ours = [
            n.removeprefix("namespace/")
            for n in names
            if n.removeprefix("namespace/") not in SYSTEM_NAMESPACES
        ]
        if ours:
            plane.kubectl("delete", "namespace", *ours, "--wait=false", check=False)
        plane.kubectl("delete", "pods", "--all", "--all-namespaces", "--wait=false", check=False)

        def no_pods() -> bool:
            left = plane.kubectl("get", "pods", "-A", "-o", "name", check=False)
            return left.returncode == 0 and not left.stdout.strip()

        with contextlib.suppress(AssertionError):
            wait_for(no_pods, timeout=timeout, interval=0.5, what="the node's pods to be gone")

    def stop(self) -> None:
        """Teardown, in the order of the module's docstring; every step runs, the first error is raised."""
        if self.stopped:
            return
        self.stopped = True
        errors: list[BaseException] = []

        def step(action: Callable[[], Any]) -> None:
            try:
                action()
            except Exception as err:  # cleanup goes on; the first error is reported at the end
                errors.append(err)

        step(self.drain_workloads)
        for name in ("kube-proxy", "kubelet"):
            if name in self.processes:
                step(self.processes[name].stop)
        if self.plane is not None:
            step(self.plane.stop)
        if self.runtime is not None:
            step(self.runtime.stop)
        step(lambda: node_host.remove_cgroups(node_host.kubepods_cgroups()))
        step(lambda: node_host.unmount_all([self.layout.run]))
        step(self.host.paths.clean)
        step(lambda: node_host.delete_bridge(BRIDGE))
        step(self.host.iptables.restore)
        step(self.host.sysctls.restore)
        step(lambda: shutil.rmtree(self.layout.run, ignore_errors=True))
        step(lambda: node_images.remove_from_podman(PAUSE_IMAGE))  # where a failed start left it
        live.forget(self)
        if errors:
            raise errors[0]

    def leftovers(self) -> list[str]:
        """What of the node is still on the machine after `stop()` (empty when it left it as found)."""
        changed = self.host.iptables.differences((BRIDGE, str(self.subnet)))
        found = [f"{command}: {line}" for command, lines in changed.items() for line in lines]
        found += [f"{name} {was} -> {now}" for name, (was, now) in self.host.sysctls.differences().items()]
        found += [str(path) for path in self.host.paths.new()]
        found += [str(group) for group in node_host.kubepods_cgroups()]
        found += [f"link {BRIDGE}"] if BRIDGE in node_host.links() else []
        found += [str(point) for point in node_host.mounts_under([self.layout.run])]
        return found


def _healthy(url: str) -> bool:
    with requests.Session() as session:
        session.trust_env = False  # loopback: never through a proxy from the environment
        try:
            return session.get(url, timeout=2).status_code == 200
        except requests.RequestException:
            return False


__all__ = ["NODE_NAME", "PAUSE_IMAGE", "Node", "NodeUnavailable"]
