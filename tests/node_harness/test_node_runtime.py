"""The node's container runtime as the harness runs it, where this machine has its parts (root, containerd,
runc, podman, a C compiler with a static libc; nothing is installed here): the pause program, its image
FROM scratch, containerd started with the harness's own configuration, the images imported into the
kubelet's namespace, a container of the pause image stopped as the kubelet stops a sandbox, and the
machine left as found once containerd is stopped and cleaned up."""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit import node_images
from testkit.containerd import SHIM, Containerd
from testkit.node_config import Layout, cni_conflist
from testkit.node_host import PathSnapshot, alive, mounts_under, processes_naming
from testkit.wait import wait_for
from webhook import __version__

NEEDED = ("containerd", "ctr", "runc", "podman", "cc")
missing = [command for command in NEEDED if shutil.which(command) is None]
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or bool(missing),
    reason=f"needs root and {', '.join(missing) or 'nothing else'} (the node's runtime; tests/node_harness/conftest.py installs them as root with apt-get)",
)
TEST_IMAGE = "localhost/priority-webhook-node-pause:test"


@pytest.fixture
def run_folder() -> Iterator[Path]:
    """A short run folder (containerd's socket path must fit a unix socket address)."""
    folder = Path(tempfile.mkdtemp(prefix="pwnode-t-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_the_pause_program_waits_for_its_signal_and_exits_0(tmp_path: Path, stop: signal.Signals) -> None:
    program = node_images.build_pause_program(tmp_path / "pause")
    process = subprocess.Popen([str(program)])
    try:
        assert process.poll() is None
        wait_for(
            lambda: _blocked(process.pid, stop), timeout=10, interval=0.01, what="pause to block its signals"
        )
        os.kill(process.pid, signal.SIGCHLD)  # a child's end is reaped, not an exit
        os.kill(process.pid, stop)
        assert process.wait(10) == 0
    finally:
        if process.poll() is None:
            process.kill()


def _blocked(pid: int, sig: signal.Signals) -> bool:
    """The process has blocked `sig`: it shows in its blocked set until it waits in sigtimedwait (which
    unblocks the awaited signals while it sleeps there), so either tells."""
    if "sigtimedwait" in Path(f"/proc/{pid}/wchan").read_text():
        return True
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigBlk:"):
            return bool(int(line.split()[1], 16) & (1 << (sig - 1)))
    return False


def test_the_pause_image_is_one_static_file_from_scratch(tmp_path: Path) -> None:
    reference = node_images.build_pause_image(tmp_path, TEST_IMAGE)
    try:
        info = json.loads(
            subprocess.run(
                ["podman", "image", "inspect", reference], capture_output=True, text=True, check=True
            ).stdout
        )[0]
        assert info["Config"]["Entrypoint"] == ["/pause"] and info["Config"]["User"] == "65535:65535"
        assert len(info["RootFS"]["Layers"]) == 1
        assert info["Size"] < 2 * 1024 * 1024, "a static program alone"
    finally:
        node_images.remove_from_podman(reference)


def test_the_node_s_project_image_is_built_by_scripts_image_with_its_sbom(tmp_path: Path) -> None:
    """What a node runs the chart's pods from when no image is given (the layer cache makes it quick)."""
    reference = node_images.project_image(tmp_path)
    info = json.loads(
        subprocess.run(
            ["podman", "image", "inspect", reference], capture_output=True, text=True, check=True
        ).stdout
    )[0]
    labels = info["Config"]["Labels"]
    assert labels["org.opencontainers.image.title"] == "priority-webhook"
    assert labels["org.opencontainers.image.version"] == __version__
    assert [path.name for path in (tmp_path / "image").glob("*.cdx.json")], "the build's SBOM beside it"


def test_containerd_with_the_harness_configuration_runs_the_pause_image_and_leaves_nothing(
    tmp_path: Path, run_folder: Path
) -> None:
    before = PathSnapshot.take()
    layout = Layout(run_folder)
    reference = node_images.build_pause_image(tmp_path, TEST_IMAGE)
    archive = node_images.save_archive(reference, tmp_path / "pause.tar")
    node_images.remove_from_podman(reference)
    # The bridge's configuration where the node writes it, before containerd starts (as the node does).
    layout.cni_conf_dir.mkdir(parents=True)
    (layout.cni_conf_dir / "10-pw-node.conflist").write_text(
        json.dumps(cni_conflist(layout, ipaddress.IPv4Network("10.244.250.0/24")))
    )
    runtime = Containerd.create(layout, sandbox_image=reference)
    try:
        plugins = runtime.ctr("plugins", "list").stdout
        cri = [line.split() for line in plugins.splitlines() if " cri " in f" {line} "]
        assert cri and cri[0][-1] == "ok", plugins  # the CRI plugin the kubelet talks to is up
        log = runtime.process.log.read_text()
        assert f"NetworkPluginConfDir:{layout.cni_conf_dir}" in log and f"SandboxImage:{reference}" in log
        assert "failed to load cni" not in log, "the CRI plugin took the bridge's configuration"
        assert runtime.version()

        started = time.monotonic()
        runtime.import_archive(archive)
        print(f"pause image imported in {time.monotonic() - started:.2f} s")
        assert reference in runtime.images()

        # A container of it, stopped as the kubelet stops a sandbox: SIGTERM, exit 0.
        run = subprocess.Popen(
            ["ctr", "--address", str(runtime.socket), "-n", "k8s.io", "run", "--rm", reference, "pause-t"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_for(
            lambda: "RUNNING" in runtime.ctr("tasks", "list").stdout,
            timeout=30,
            interval=0.1,
            what="the pause container to run",
        )
        shims = runtime.shims()
        assert shims and all(processes_naming(str(runtime.socket), SHIM))
        runtime.ctr("tasks", "kill", "--signal", "SIGTERM", "pause-t")
        assert run.wait(30) == 0, run.stderr.read() if run.stderr else ""
    finally:
        runtime.stop()
        before.clean()
    assert not runtime.process.running()
    assert not any(alive(pid) for pid in shims), "containerd's shims outlived it"
    assert mounts_under([run_folder]) == []
    assert before.new() == [], "machine-wide folders containerd made are gone"
