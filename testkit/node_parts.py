"""What a real node takes, and where the node suite finds it: the envtest way, then Debian's packages.

The Kubernetes binaries come from the envtest folder `testkit/envtest.py` finds (`KUBEBUILDER_ASSETS`, else
setup-envtest's data folder): the control plane's own (kube-apiserver, kubectl, etcd, kube-controller-manager,
kube-scheduler) and, beside them, `kubelet` and `kube-proxy` of the same release. `KUBELET` and `KUBE_PROXY`
name them elsewhere. None of these is shipped or built by this repository.

The rest comes from Debian: containerd and ctr (`containerd`), runc, the CNI plugins (`containernetworking-
plugins`: bridge, host-local, portmap, loopback under /usr/lib/cni), conntrack, iptables (and `nft` where
iptables is the nf_tables flavour: a table the node made is removed with it), podman (to build the pause image
and the project's image) and a C compiler with a static libc (the pause program). They are installed (as root,
with apt-get) only where the Kubernetes binaries are present, so that a machine that cannot run the node is
left untouched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from testkit.envtest import AssetsMissing, assets_dir

KUBELET_ENV = "KUBELET"
KUBE_PROXY_ENV = "KUBE_PROXY"
CNI_BIN_DIR = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "portmap", "loopback")
# The control plane's components a node needs beside the API server (Deployments, DaemonSets, scheduling).
COMPONENTS = ("kube-controller-manager", "kube-scheduler")
# Each command the node runs, and the Debian package that has it.
COMMANDS = {
    "containerd": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "conntrack": "conntrack",
    "iptables": "iptables",
    "iptables-save": "iptables",
    "iptables-restore": "iptables",
    "ip6tables-save": "iptables",
    "ip": "iproute2",
    "podman": "podman",
    "cc": "gcc",
}
STATIC_LIBC = ("/usr/lib/x86_64-linux-gnu/libc.a", "/usr/lib/aarch64-linux-gnu/libc.a", "/usr/lib/libc.a")


class NodeUnavailable(RuntimeError):
    """A real node cannot run here; the message says what is missing and where it was looked for."""


@dataclass(frozen=True)
class Binaries:
    """The Kubernetes side of a node: the envtest folder (control plane) and the kubelet and kube-proxy."""

    assets: Path
    kubelet: Path
    kube_proxy: Path


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def kubernetes_binaries() -> Binaries:
    """The envtest folder and the node's two binaries, or NodeUnavailable naming every place looked at."""
    try:
        assets = assets_dir()
    except AssetsMissing as err:
        raise NodeUnavailable(str(err)) from None
    found: dict[str, Path] = {}
    lacking: list[str] = []
    for env, name in ((KUBELET_ENV, "kubelet"), (KUBE_PROXY_ENV, "kube-proxy")):
        given = os.environ.get(env, "")
        path = Path(given) if given else assets / name
        if _executable(path):
            found[name] = path
        elif given:
            lacking.append(f"{env}={given} is not an executable file")
        else:
            lacking.append(f"no {name} in {assets} ({env} unset)")
    lacking += [f"no {name} in {assets}" for name in COMPONENTS if not _executable(assets / name)]
    if lacking:
        raise NodeUnavailable("; ".join(lacking))
    return Binaries(assets, found["kubelet"], found["kube-proxy"])


def nf_tables() -> bool:
    """iptables is the nf_tables flavour (Debian's default): a table it made stays until `nft` removes it."""
    try:
        return (
            "nf_tables"
            in subprocess.run(["iptables", "--version"], capture_output=True, text=True, check=False).stdout
        )
    except OSError:
        return False


def missing_packages() -> list[str]:
    """The Debian packages whose commands or files are absent here (sorted, each once)."""
    wanted = {package for command, package in COMMANDS.items() if shutil.which(command) is None}
    if any(not _executable(CNI_BIN_DIR / plugin) for plugin in CNI_PLUGINS):
        wanted.add("containernetworking-plugins")
    if not any(Path(path).exists() for path in STATIC_LIBC):
        wanted.add("libc6-dev")
    if shutil.which("iptables") is not None and nf_tables() and shutil.which("nft") is None:
        wanted.add("nftables")
    return sorted(wanted)


def host_problem() -> str | None:
    """Why this machine cannot host a node whatever is installed: not Linux, not root, no cgroups."""
    if os.uname().sysname != "Linux":
        return f"a node needs Linux, this is {os.uname().sysname}"
    if os.geteuid() != 0:
        return "a node must run as root (kubelet, containerd, iptables, the bridge)"
    if not Path("/sys/fs/cgroup").is_dir():
        return "no /sys/fs/cgroup (the kubelet needs cgroups)"
    return None


def unavailable() -> str | None:
    """Why the node suite cannot run here, or None; it changes nothing on the machine. Packages that are
    missing do not count where root with apt-get can install them (`install_missing`)."""
    try:
        kubernetes_binaries()
    except NodeUnavailable as err:
        return str(err)
    problem = host_problem()
    if problem:
        return problem
    packages = missing_packages()
    if packages and shutil.which("apt-get") is None:
        return f"missing {', '.join(packages)} (Debian packages) and no apt-get to install them"
    return None


def install_missing() -> list[str]:
    """Install the missing Debian packages (root, apt-get); returns what was installed. Call it only once
    `unavailable()` said None (the node will run), or for the harness's own tests. Installing one package
    can show that another is wanted (nft once iptables is there and uses nf_tables): up to two rounds."""
    installed: list[str] = []
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for _ in range(2):
        packages = [package for package in missing_packages() if package not in installed]
        if not packages:
            break
        for args in (
            ["apt-get", "update", "-qq"],
            ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
        ):
            done = subprocess.run(args, capture_output=True, text=True, env=env, check=False, timeout=900)
            if done.returncode != 0:
                raise NodeUnavailable(f"{' '.join(args[:2])} failed: {done.stderr.strip()[-2000:]}")
        installed += packages
    still = missing_packages()
    if still:
        raise NodeUnavailable(f"still missing after apt-get install: {', '.join(still)}")
    return installed


def version_of(binary: Path | str, *args: str) -> str:
    """The first line a binary prints for `--version` (or ARGS)."""
    done = subprocess.run(
        [str(binary), *(args or ("--version",))], capture_output=True, text=True, check=False, timeout=30
    )
    return (
        (done.stdout or done.stderr).strip().splitlines()[0] if (done.stdout or done.stderr).strip() else ""
    )


def kubelet_version(binary: Path) -> str:
    """`Kubernetes v1.33.3` -> `v1.33.3`."""
    return version_of(binary).split()[-1]


def containerd_version() -> str:
    """`containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3` -> `1.6.20~ds1`."""
    words = version_of("containerd").split()
    return words[2] if len(words) > 2 else " ".join(words)
