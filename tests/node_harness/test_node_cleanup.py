"""A node that fails or is interrupted while it starts leaves the machine as it found it (testkit/node.py).

The Kubernetes binaries are stand-ins of the test's own: an envtest folder whose `etcd` never becomes
healthy (it sleeps) or cannot be executed at all. So the real start-up runs as far as the control plane:
the machine's state recorded, the bridge made, the node's own iptables rules installed. Then the start
fails (an unexecutable etcd), or the test process gets SIGTERM (testkit/live.py's handler) or SIGINT
(KeyboardInterrupt through the start-up) while it waits for etcd. Either way the bridge, the rules, the
kernel settings and the stand-in's process are gone afterwards. Runs where this machine has root and every
Debian part of a node (nothing is installed by a test).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from testkit import node_host
from testkit.envtest import ASSETS_ENV
from testkit.node import Node
from testkit.node_config import BRIDGE
from testkit.node_parts import KUBE_PROXY_ENV, KUBELET_ENV, host_problem, missing_packages
from testkit.server import REPO
from testkit.wait import wait_for

pytestmark = pytest.mark.skipif(
    bool(host_problem() or missing_packages()),
    reason=f"needs {host_problem() or 'the Debian packages ' + ', '.join(missing_packages())} (apt-get could not install them)",
)
BINARIES = ("kube-apiserver", "kubectl", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy")
NETAVARK = "NETAVARK"  # a concurrent podman build's rules on a shared machine: not the node's


def assets(root: Path, etcd: str) -> Path:
    folder = root / "assets"
    folder.mkdir()
    for name in BINARIES:
        (folder / name).write_text("")
        (folder / name).chmod(0o755)
    (folder / "etcd").write_text(etcd)
    (folder / "etcd").chmod(0o755)
    return folder


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in (KUBELET_ENV, KUBE_PROXY_ENV):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


class Machine:
    """What the node may change, as it was before the test."""

    def __init__(self) -> None:
        self.iptables = node_host.IptablesSnapshot.take()
        self.sysctls = node_host.SysctlSnapshot.take()
        self.paths = node_host.PathSnapshot.take()

    def changed(self) -> list[str]:
        found = []
        for command, text in self.iptables.saved.items():
            ours = [line for line in node_host.normalized(text).splitlines() if NETAVARK not in line]
            now = [
                line
                for line in node_host.normalized(node_host.save(command)).splitlines()
                if NETAVARK not in line
            ]
            if ours != now:
                found.append(f"{command}: {sorted(set(now) ^ set(ours))}")
        found += [f"{k}: {v}" for k, v in self.sysctls.differences().items()]
        found += [str(p) for p in self.paths.new()]
        found += [f"link {BRIDGE}"] if BRIDGE in node_host.links() else []
        found += [str(g) for g in node_host.kubepods_cgroups()]
        return found

    def restore(self) -> None:
        """Put the machine back where a node killed before its teardown left it (the test has failed already;
        the next test and the machine must not inherit the bridge and the rules)."""
        node_host.delete_bridge(BRIDGE)
        self.iptables.restore()
        self.sysctls.restore()
        self.paths.clean()


def test_a_start_that_fails_leaves_the_machine_as_found(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ASSETS_ENV, str(assets(env, "")))  # an empty file: exec format error
    machine = Machine()
    with pytest.raises(OSError, match="Exec format error"):
        Node.create(env / "node", project_image="unused:0")
    assert machine.changed() == []


# Ctrl-C's own disposition first: a test run started as a background job of a non-interactive shell (as CI
# may start it) hands its children SIGINT ignored, and the start would then never be interrupted.
CHILD = """
import signal
import sys
from pathlib import Path
from testkit.node import Node
signal.signal(signal.SIGINT, signal.default_int_handler)
Node.create(Path(sys.argv[1]), project_image="unused:0", timeout=600)
"""


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupted_start_leaves_the_machine_as_found(env: Path, stop: signal.Signals) -> None:
    # An etcd that never answers (the start waits on it); its sleep's length marks it as this test's.
    marker = f"600.{os.getpid()}{int(stop)}"
    folder = assets(env, f"#!/bin/sh\nexec sleep {marker}\n")
    machine = Machine()
    child = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-c", CHILD, str(env / "node")],
        cwd=REPO,
        env={**os.environ, ASSETS_ENV: str(folder), "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        # Mid-start: the bridge and the node's rules are there, and the stand-in etcd runs.
        wait_for(
            lambda: (
                BRIDGE in node_host.links()
                and "PW-NODE-INPUT" in node_host.save("iptables")
                and bool(node_host.processes_naming(marker, "sleep"))
            ),
            timeout=60,
            interval=0.1,
            what="the node to be half started",
        )
        child.send_signal(stop)
        try:
            output, _ = child.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGABRT)  # faulthandler prints where every thread is stuck, then it dies
            output, _ = child.communicate(timeout=30)
            machine.restore()
            pytest.fail(f"the node did not stop within 60 s of {stop.name}:\n{output}")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
            machine.restore()
    assert child.returncode != 0, output
    assert machine.changed() == [], output
    assert (env / "node" / "plane" / "etcd.log").exists(), output
    assert not [pid for pid in node_host.processes_naming(marker, "sleep") if node_host.alive(pid)]
