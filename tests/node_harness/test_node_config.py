"""The node's settings as rendered (testkit/node_config.py): each value the node README's facts call for,
and containerd's own reading of its configuration where containerd is installed."""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from testkit.envtest import SERVICE_CIDR, merged_flags
from testkit.node_config import (
    BRIDGE,
    PAUSE_IMAGE,
    Layout,
    apiserver_args,
    cni_conflist,
    containerd_config,
    first_service_address,
    kube_proxy_args,
    kubelet_args,
    kubelet_config,
    pick_subnet,
)
from tests.node.release import image_values

LAYOUT = Layout(Path("/tmp/pwnode-x"))
SUBNET = ipaddress.IPv4Network("10.244.250.0/24")


@pytest.mark.parametrize(
    ("taken", "expected"),
    [
        ([], "10.244.250.0/24"),
        (["10.244.0.0/16"], "10.245.250.0/24"),
        (["10.244.250.7/32", "10.245.0.0/16"], "172.30.250.0/24"),
        (["10.0.0.0/8", "172.16.0.0/12"], "192.168.250.0/24"),
        (["0.0.0.0/0", "fd00::/64", "192.0.2.2/24"], "10.244.250.0/24"),  # a default route overlaps nothing
    ],
)
def test_the_pod_subnet_overlaps_nothing_of_the_machine(taken: list[str], expected: str) -> None:
    assert pick_subnet(taken) == ipaddress.IPv4Network(expected)


def test_no_free_candidate_is_an_error_naming_them() -> None:
    with pytest.raises(ValueError, match="every candidate pod subnet overlaps"):
        pick_subnet(["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"])


def test_the_service_range_is_never_the_pod_subnet() -> None:
    assert pick_subnet([], candidates=("10.0.0.0/24", "10.9.0.0/24"), service_cidr=SERVICE_CIDR) == (
        ipaddress.IPv4Network("10.9.0.0/24")
    )


def test_containerd_has_everything_of_its_own() -> None:
    config = tomllib.loads(containerd_config(LAYOUT))
    assert config["version"] == 2
    assert (config["root"], config["state"]) == (str(LAYOUT.containerd_root), str(LAYOUT.containerd_state))
    assert config["grpc"]["address"] == str(LAYOUT.containerd_socket)
    assert config["plugins"]["io.containerd.internal.v1.opt"]["path"] == str(LAYOUT.containerd_opt)
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == PAUSE_IMAGE and cri["restrict_oom_score_adj"] is True
    assert cri["netns_mounts_under_state_dir"] is True
    assert cri["cni"] == {"bin_dir": "/usr/lib/cni", "conf_dir": str(LAYOUT.cni_conf_dir), "max_conf_num": 1}
    runc = cri["containerd"]["runtimes"]["runc"]
    assert runc["runtime_type"] == "io.containerd.runc.v2" and runc["options"]["SystemdCgroup"] is False


@pytest.mark.skipif(shutil.which("containerd") is None, reason="containerd is not installed")
def test_containerd_reads_the_configuration_as_written(tmp_path: Path) -> None:
    """containerd's own `config dump` of the file: the values it will run with, merged over its defaults."""
    layout = Layout(tmp_path)
    (tmp_path / "config.toml").write_text(containerd_config(layout, sandbox_image="localhost/p:1"))
    dumped = subprocess.run(
        ["containerd", "--config", str(tmp_path / "config.toml"), "config", "dump"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    config = tomllib.loads(dumped)
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == "localhost/p:1"
    assert cri["cni"]["conf_dir"] == str(layout.cni_conf_dir) and cri["cni"]["bin_dir"] == "/usr/lib/cni"
    assert cri["restrict_oom_score_adj"] is True
    assert cri["netns_mounts_under_state_dir"] is True  # a key containerd did not know would not be dumped
    assert config["root"] == str(layout.containerd_root) and config["grpc"]["address"] == str(
        layout.containerd_socket
    )
    assert config["plugins"]["io.containerd.internal.v1.opt"]["path"] == str(layout.containerd_opt)


def test_the_bridge_never_masquerades_and_keeps_its_state_in_the_run_folder() -> None:
    conflist = cni_conflist(LAYOUT, SUBNET)
    bridge, portmap = conflist["plugins"]
    assert bridge["type"] == "bridge" and bridge["bridge"] == BRIDGE
    assert bridge["isGateway"] is True and bridge["ipMasq"] is False and bridge["hairpinMode"] is True
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.244.250.0/24", "gateway": "10.244.250.1"}]]
    assert bridge["ipam"]["dataDir"] == str(LAYOUT.cni_data_dir)
    assert portmap == {"type": "portmap", "capabilities": {"portMappings": True}}


@pytest.mark.parametrize(("minor", "fail_v1"), [((1, 30), None), ((1, 31), False), ((1, 35), False)])
def test_the_kubelet_configuration(minor: tuple[int, int], fail_v1: bool | None) -> None:
    config = kubelet_config(LAYOUT, address="10.244.250.1", port=10250, healthz_port=10248, minor=minor)
    assert config["containerRuntimeEndpoint"] == f"unix://{LAYOUT.containerd_socket}"
    assert (config["address"], config["readOnlyPort"], config["healthzBindAddress"]) == (
        "10.244.250.1",
        0,
        "127.0.0.1",
    )
    assert config["cgroupDriver"] == "cgroupfs" and config["failSwapOn"] is False
    assert config["staticPodPath"] == str(LAYOUT.static_pods) and config["podLogsDir"] == str(LAYOUT.pod_logs)
    assert config["resolvConf"] == str(LAYOUT.resolv_conf) and config["clusterDNS"] == []
    assert config["authentication"]["anonymous"] == {"enabled": True}
    assert config["imageGCHighThresholdPercent"] == 100
    assert config.get("failCgroupV1") is fail_v1


def test_the_kubelet_and_kube_proxy_flags() -> None:
    args = kubelet_args(
        Path("/k/kubelet"), LAYOUT, kubeconfig=Path("/k/kc"), name="node-1", node_ip="10.244.250.1"
    )
    assert args[0] == "/k/kubelet" and f"--root-dir={LAYOUT.kubelet_root}" in args
    assert {"--hostname-override=node-1", "--node-ip=10.244.250.1", "--kubeconfig=/k/kc"} <= set(args)
    proxy = kube_proxy_args(
        Path("/k/kube-proxy"),
        kubeconfig=Path("/k/p"),
        name="node-1",
        cluster_cidr=str(SUBNET),
        metrics_port=1,
        healthz_port=2,
    )
    assert {
        "--proxy-mode=iptables",
        "--cluster-cidr=10.244.250.0/24",
        "--metrics-bind-address=127.0.0.1:1",
        "--healthz-bind-address=127.0.0.1:2",
        "--conntrack-max-per-core=0",
    } <= set(proxy)


def test_the_api_server_flags_a_node_needs() -> None:
    on = apiserver_args("10.244.250.1")
    assert on == [
        "--bind-address=0.0.0.0",
        "--advertise-address=10.244.250.1",
        "--endpoint-reconciler-type=lease",
        "--enable-aggregator-routing=true",
        "--kubelet-preferred-address-types=InternalIP",
        "--enable-admission-plugins=NodeRestriction",
        "--authorization-mode=Node,RBAC",
    ]
    assert apiserver_args("10.244.250.1", in_tree_priority=False) == [
        *on,
        "--disable-admission-plugins=Priority",
    ]
    assert first_service_address(SERVICE_CIDR) == "10.0.0.1"


@pytest.mark.parametrize(
    ("reference", "values"),
    [
        (
            "localhost/priority-webhook:0.1.0",
            {"image": {"repository": "localhost/priority-webhook", "tag": "0.1.0"}},
        ),
        ("registry:5000/pw:1", {"image": {"repository": "registry:5000/pw", "tag": "1"}}),
    ],
)
def test_the_chart_gets_the_image_scripts_image_printed(reference: str, values: dict[str, object]) -> None:
    assert image_values(reference) == values


def test_an_image_without_a_tag_is_refused() -> None:
    with pytest.raises(ValueError, match="has no tag"):
        image_values("registry:5000/pw")


def test_the_node_flags_replace_envtest_s_own_rather_than_repeat_them() -> None:
    """kube-apiserver appends a repeated list flag and exits on `RBAC,Node,RBAC`: each flag goes once."""
    defaults = [
        "--advertise-address=127.0.0.1",
        "--bind-address=127.0.0.1",
        "--authorization-mode=RBAC",
        "--allow-privileged=true",
        "--endpoint-reconciler-type=none",
    ]
    flags = merged_flags(defaults, apiserver_args("10.244.250.1", in_tree_priority=False))
    names = [flag.split("=", 1)[0] for flag in flags]
    assert len(names) == len(set(names)), flags
    assert flags[:5] == [
        "--advertise-address=10.244.250.1",
        "--bind-address=0.0.0.0",
        "--authorization-mode=Node,RBAC",
        "--allow-privileged=true",
        "--endpoint-reconciler-type=lease",
    ]
    assert "--disable-admission-plugins=Priority" in flags
    assert merged_flags(defaults, ["--v=2", "--v=4"]) == [*defaults, "--v=4"]
