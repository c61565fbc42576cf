"""Where the node suite finds a node's parts (testkit/node_parts.py), and the one line it prints where it
finds none. The Kubernetes binaries here are empty executable files: only their presence is looked at, and
nothing is installed (collection only looks)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from testkit import node_parts
from testkit.node_parts import KUBE_PROXY_ENV, KUBELET_ENV, NodeUnavailable, kubernetes_binaries
from tests.test_envtest_discovery import ARCH, collect, empty_data_folder, folder

PLANE = ("etcd", "kube-apiserver", "kubectl", "kube-controller-manager", "kube-scheduler")
NODE = ("kubelet", "kube-proxy")


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty setup-envtest data folder; no envtest or node variable set."""
    return empty_data_folder(tmp_path, monkeypatch, KUBELET_ENV, KUBE_PROXY_ENV)


def test_no_envtest_folder_is_named_as_envtest_names_it(data: Path) -> None:
    assert node_parts.unavailable() == f"no envtest folder (KUBEBUILDER_ASSETS unset; none under {data})"


def test_a_control_plane_without_kubelet_and_kube_proxy(data: Path) -> None:
    found = folder(data, f"1.33.3-linux-{ARCH}", PLANE)
    assert node_parts.unavailable() == (
        f"no kubelet in {found} (KUBELET unset); no kube-proxy in {found} (KUBE_PROXY unset)"
    )


def test_the_controller_manager_and_scheduler_are_needed_too(data: Path) -> None:
    found = folder(data, f"1.33.3-linux-{ARCH}", ("etcd", "kube-apiserver", "kubectl", *NODE))
    assert node_parts.unavailable() == f"no kube-controller-manager in {found}; no kube-scheduler in {found}"


def test_the_binaries_beside_the_control_plane(data: Path) -> None:
    found = folder(data, f"1.33.3-linux-{ARCH}", (*PLANE, *NODE))
    assert kubernetes_binaries() == node_parts.Binaries(found, found / "kubelet", found / "kube-proxy")


def test_the_variables_name_them_elsewhere(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = folder(data, f"1.33.3-linux-{ARCH}", PLANE)
    elsewhere = folder(tmp_path, "node-bin", NODE)
    monkeypatch.setenv(KUBELET_ENV, str(elsewhere / "kubelet"))
    monkeypatch.setenv(KUBE_PROXY_ENV, str(elsewhere / "kube-proxy"))
    assert kubernetes_binaries() == node_parts.Binaries(
        found, elsewhere / "kubelet", elsewhere / "kube-proxy"
    )


def test_a_variable_naming_no_executable_says_so(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder(data, f"1.33.3-linux-{ARCH}", (*PLANE, *NODE))
    (tmp_path / "kubelet").write_text("")  # not executable
    monkeypatch.setenv(KUBELET_ENV, str(tmp_path / "kubelet"))
    with pytest.raises(NodeUnavailable) as err:
        kubernetes_binaries()
    assert str(err.value) == f"KUBELET={tmp_path / 'kubelet'} is not an executable file"


def test_missing_debian_packages_without_apt_get(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every Kubernetes binary present, as root, but an empty PATH: the packages are named, and the
    lack of apt-get to install them is what stops the suite."""
    if os.geteuid() != 0:
        pytest.skip("as another user the root check speaks first")
    folder(data, f"1.33.3-linux-{ARCH}", (*PLANE, *NODE))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(node_parts, "CNI_BIN_DIR", tmp_path / "no-cni")
    monkeypatch.setattr(node_parts, "STATIC_LIBC", ())
    assert node_parts.missing_packages() == [
        "conntrack",
        "containerd",
        "containernetworking-plugins",
        "gcc",
        "iproute2",
        "iptables",
        "libc6-dev",
        "podman",
        "runc",
    ]
    assert node_parts.unavailable() == (
        "missing conntrack, containerd, containernetworking-plugins, gcc, iproute2, iptables, libc6-dev, "
        "podman, runc (Debian packages) and no apt-get to install them"
    )


def collect_node_suite(env: dict[str, str]) -> tuple[int, list[str], str]:
    """Collect tests/node in a pytest of its own: its exit code, the `node:` lines, and all it printed."""
    return collect("tests/node", env, "node: ")


def test_without_a_node_the_suite_is_left_out_with_one_line(data: Path) -> None:
    code, lines, output = collect_node_suite({"CI": "true", "NODE_REQUIRED": ""})
    assert code == 5, output  # nothing left to run
    assert lines == [f"node: not run: no envtest folder (KUBEBUILDER_ASSETS unset; none under {data})"]


def test_the_line_names_what_the_envtest_folder_lacks(data: Path) -> None:
    found = folder(data, f"1.33.3-linux-{ARCH}", PLANE)
    code, lines, output = collect_node_suite({"NODE_REQUIRED": ""})
    assert code == 5, output
    assert lines == [
        f"node: not run: no kubelet in {found} (KUBELET unset); no kube-proxy in {found} (KUBE_PROXY unset)"
    ]


def test_node_required_makes_the_absence_an_error(data: Path) -> None:
    code, lines, output = collect_node_suite({"NODE_REQUIRED": "1"})
    assert code == 4, output  # pytest's usage error: nothing ran
    assert any(
        "node tests are required (NODE_REQUIRED=1) but node: not run: no envtest folder" in line
        for line in lines
    ), output


def test_a_node_without_e2e_test_leaves_out_only_upstream_specs_on_it(data: Path) -> None:
    """Upstream's specs on the node (tests/node/test_upstream_specs.py) need e2e.test as well: where the
    node's parts are here and it is not, they alone are left out, with their own line."""
    found = folder(data, f"1.33.3-linux-{ARCH}", (*PLANE, *NODE))
    env = {"NODE_REQUIRED": "", "UPSTREAM_E2E_REQUIRED": "", "E2E_TEST": ""}
    code, lines, output = collect("tests/node", env, "not run")
    problem = node_parts.unavailable()
    if problem is not None:  # not root, or no apt-get: the whole suite goes, with the node's line alone
        assert (code, lines) == (5, [f"node: not run: {problem}"]), output
        return
    assert code == 0, output
    assert lines == [f"upstream e2e on the node: not run: no e2e.test in {found} (E2E_TEST unset)"], output
    collected = [line for line in output.splitlines() if line.startswith("tests/node/")]
    assert collected and not any("test_upstream_specs" in line for line in collected), output
