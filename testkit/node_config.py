"""The node's settings, rendered from plain data: containerd's configuration, the CNI bridge, the kubelet's and
kube-proxy's configuration and flags, and the API server flags a node needs. Nothing here touches the machine
(testkit/node.py writes and runs them), so every setting is checked without a node.

Each value is one the node README's facts call for: containerd with a root, state, socket and CNI folders of
its own (the machine's /etc/cni/net.d may hold podman's network) and our pause image as the sandbox image; a
bridge on a /24 of its own with no masquerading (pods never leave the machine); the kubelet on the bridge
address with cgroupfs, its files under the run folder, a resolv.conf that points nowhere (there is no cluster
DNS and pods must not reach the machine's resolver), and image garbage collection off (the images exist only
in this containerd: a collected one could never be pulled back).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testkit.node_parts import CNI_BIN_DIR

BRIDGE = "pwnode0"
NETWORK = "pw-node"
PAUSE_IMAGE = "localhost/priority-webhook-node-pause:1"
# /24s a node may take, in order; the first that overlaps no address or route of the machine (and not the
# control plane's service range, 10.0.0.0/24) is used.
CANDIDATE_SUBNETS = ("10.244.250.0/24", "10.245.250.0/24", "172.30.250.0/24", "192.168.250.0/24")
CLUSTER_DOMAIN = "cluster.local"


@dataclass(frozen=True)
class Layout:
    """Where the node's files go, all under one run folder (short: containerd's socket path must fit in a
    unix socket address, 108 bytes)."""

    run: Path

    @property
    def containerd_root(self) -> Path:
        return self.run / "containerd" / "root"

    @property
    def containerd_state(self) -> Path:
        return self.run / "containerd" / "state"

    @property
    def containerd_opt(self) -> Path:
        return self.run / "containerd" / "opt"

    @property
    def containerd_socket(self) -> Path:
        return self.run / "containerd" / "containerd.sock"

    @property
    def containerd_config(self) -> Path:
        return self.run / "containerd" / "config.toml"

    @property
    def cni_conf_dir(self) -> Path:
        return self.run / "cni" / "net.d"

    @property
    def cni_data_dir(self) -> Path:
        return self.run / "cni" / "ipam"

    @property
    def kubelet_root(self) -> Path:
        return self.run / "kubelet"

    @property
    def static_pods(self) -> Path:
        return self.run / "static-pods"

    @property
    def pod_logs(self) -> Path:
        return self.run / "pod-logs"

    @property
    def volume_plugins(self) -> Path:
        return self.run / "volume-plugins"

    @property
    def resolv_conf(self) -> Path:
        return self.run / "resolv.conf"

    @property
    def kubelet_config(self) -> Path:
        return self.run / "kubelet.yaml"


def pick_subnet(
    taken: Iterable[str], candidates: Sequence[str] = CANDIDATE_SUBNETS, service_cidr: str = "10.0.0.0/24"
) -> ipaddress.IPv4Network:
    """The first candidate /24 that overlaps none of `taken` (the machine's addresses and routes, as
    networks) nor the service range."""
    used = [ipaddress.ip_network(net, strict=False) for net in (*taken, service_cidr)]
    for text in candidates:
        subnet = ipaddress.IPv4Network(text)
        if not any(subnet.overlaps(net) for net in used if net.version == 4 and net.prefixlen > 0):
            return subnet
    raise ValueError(f"every candidate pod subnet overlaps this machine's networks: {', '.join(candidates)}")


def gateway(subnet: ipaddress.IPv4Network) -> ipaddress.IPv4Address:
    """The bridge's own address: the subnet's first."""
    return subnet.network_address + 1


def _toml(value: Any) -> str:
    """A TOML scalar: strings as JSON strings (a valid TOML basic string), booleans, integers."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value))


def containerd_config(layout: Layout, sandbox_image: str = PAUSE_IMAGE) -> str:
    """containerd 1.6's configuration (version 2) for the node: everything of its own (no folder outside the
    run folder but the shims' sockets in /run/containerd, which containerd 1.6 does not let one move), the CRI plugin with
    our pause image, runc through the v2 shim with cgroupfs (the kubelet's driver), the CNI bridge's
    folders, pod network namespaces under its state folder, and no OOM score below containerd's own
    (`restrict_oom_score_adj`)."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    sections: list[tuple[str, dict[str, Any]]] = [
        (
            "",
            {
                "version": 2,
                "root": layout.containerd_root,
                "state": layout.containerd_state,
            },
        ),
        ("grpc", {"address": layout.containerd_socket}),
        ("ttrpc", {"address": f"{layout.containerd_socket}.ttrpc"}),
        ("debug", {"level": "info"}),
        # The `opt` plugin's folder (default /opt/containerd, made at every start).
        ('plugins."io.containerd.internal.v1.opt"', {"path": layout.containerd_opt}),
        (
            cri,
            {
                "sandbox_image": sandbox_image,
                "restrict_oom_score_adj": True,
                "enable_selinux": False,
                # Pod network namespaces under the state folder, not the machine's /run/netns, where another
                # program's bind mount once made them unremovable and pods stayed Terminating.
                "netns_mounts_under_state_dir": True,
            },
        ),
        (
            f"{cri}.containerd",
            {"snapshotter": "overlayfs", "default_runtime_name": "runc"},
        ),
        (f"{cri}.containerd.runtimes.runc", {"runtime_type": "io.containerd.runc.v2"}),
        (f"{cri}.containerd.runtimes.runc.options", {"SystemdCgroup": False}),
        (
            f"{cri}.cni",
            {"bin_dir": CNI_BIN_DIR, "conf_dir": layout.cni_conf_dir, "max_conf_num": 1},
        ),
    ]
    lines: list[str] = []
    for header, values in sections:
        if header:
            lines += ["", f"[{header}]"]
        lines += [
            f"  {key} = {_toml(value)}" if header else f"{key} = {_toml(value)}"
            for key, value in values.items()
        ]
    return "\n".join(lines) + "\n"


def cni_conflist(layout: Layout, subnet: ipaddress.IPv4Network, bridge: str = BRIDGE) -> dict[str, Any]:
    """A bridge network with host-local addresses on `subnet` (its state under the run folder), a default
    route to the bridge (the Service range is reached through the host), no masquerading (nothing leaves
    the machine), hairpin (a pod reaches itself through a Service), and portmap for hostPorts."""
    return {
        "cniVersion": "0.4.0",
        "name": NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": bridge,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(layout.cni_data_dir),
                    "ranges": [[{"subnet": str(subnet), "gateway": str(gateway(subnet))}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def resolv_conf() -> str:
    """What pods inherit as their resolver: their own loopback, where nothing answers. There is no cluster
    DNS here, and a lookup must never reach the machine's resolver."""
    return "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"


def kubelet_config(
    layout: Layout,
    *,
    address: str,
    port: int,
    healthz_port: int,
    minor: tuple[int, int],
    max_pods: int = 110,
) -> dict[str, Any]:
    """The KubeletConfiguration. Anonymous access with AlwaysAllow is on the bridge address alone (the
    API server has no kubelet client certificate, and `kubectl logs` must work); the eviction thresholds are
    low so that a shared test machine's disk does not evict the chart's pods; image GC is off (100%)."""
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": address,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "cgroupDriver": "cgroupfs",
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "staticPodPath": str(layout.static_pods),
        "podLogsDir": str(layout.pod_logs),
        "volumePluginDir": str(layout.volume_plugins),
        "resolvConf": str(layout.resolv_conf),
        "clusterDomain": CLUSTER_DOMAIN,
        "clusterDNS": [],
        "authentication": {
            "anonymous": {"enabled": True},
            "webhook": {"enabled": False},
            "x509": {},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "maxPods": max_pods,
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
        "protectKernelDefaults": False,
        "serializeImagePulls": False,
        "shutdownGracePeriod": "0s",
        "fileCheckFrequency": "1s",
    }
    if minor >= (1, 31):
        # cgroup v1 is in maintenance mode from 1.31 and refused by default from 1.35: these machines have it.
        config["failCgroupV1"] = False
    return config


def kubelet_args(binary: Path, layout: Layout, *, kubeconfig: Path, name: str, node_ip: str) -> list[str]:
    return [
        str(binary),
        f"--config={layout.kubelet_config}",
        f"--kubeconfig={kubeconfig}",
        f"--root-dir={layout.kubelet_root}",
        f"--cert-dir={layout.kubelet_root / 'pki'}",
        f"--hostname-override={name}",
        f"--node-ip={node_ip}",
        "--v=2",
    ]


def kube_proxy_args(
    binary: Path,
    *,
    kubeconfig: Path,
    name: str,
    cluster_cidr: str,
    metrics_port: int,
    healthz_port: int,
) -> list[str]:
    """kube-proxy in iptables mode; metrics and health on loopback; the conntrack sysctls left as they are
    (0 keeps kube-proxy from writing them: the machine is not ours to tune)."""
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        "--proxy-mode=iptables",
        f"--hostname-override={name}",
        f"--cluster-cidr={cluster_cidr}",
        f"--metrics-bind-address=127.0.0.1:{metrics_port}",
        f"--healthz-bind-address=127.0.0.1:{healthz_port}",
        "--conntrack-max-per-core=0",
        "--conntrack-tcp-timeout-established=0s",
        "--conntrack-tcp-timeout-close-wait=0s",
        "--v=2",
    ]


def apiserver_args(bridge_address: str, *, in_tree_priority: bool = True) -> list[str]:
    """The API server flags a node needs, after envtest's own (a later flag wins): reachable from pods on
    the bridge (bound on every address; the INPUT rules keep other interfaces out), advertised there with a
    lease-reconciled `kubernetes` Service, webhooks called at their Service's endpoints, the kubelet reached
    by its InternalIP (never by resolving the node's name), and the Node authorizer with NodeRestriction."""
    args = [
        "--bind-address=0.0.0.0",
        f"--advertise-address={bridge_address}",
        "--endpoint-reconciler-type=lease",
        "--enable-aggregator-routing=true",
        "--kubelet-preferred-address-types=InternalIP",
        "--enable-admission-plugins=NodeRestriction",
        "--authorization-mode=Node,RBAC",
    ]
    if not in_tree_priority:
        args.append("--disable-admission-plugins=Priority")
    return args


def first_service_address(service_cidr: str) -> str:
    """The `kubernetes` Service's ClusterIP: the range's first address (the API server's certificate must
    name it, as pods reach the API server there)."""
    return str(ipaddress.ip_network(service_cidr).network_address + 1)
