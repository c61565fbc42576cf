"""containerd for the node: started in the background with a configuration of its own (testkit/node_config.py),
talked to with `ctr` on its own socket, stopped by its PID and cleaned up.

Stopping containerd leaves its shims (one per pod sandbox, `containerd-shim-runc-v2 -address SOCKET`) and
their containers running: `stop()` kills the shims that name this containerd's socket, by PID, and the
machine-wide leftovers (/run/containerd, the containers' mounts) go with the node's path snapshot.

    with Containerd.start(Layout(run)) as runtime:
        runtime.import_archive(archive)         # into the kubelet's namespace, k8s.io
        runtime.images()                         # the references there
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from testkit import live
from testkit.envtest import Process
from testkit.node_config import Layout, containerd_config
from testkit.node_host import alive, processes_naming, unmount_all
from testkit.wait import wait_for

NAMESPACE = "k8s.io"
SHIM = "containerd-shim-runc-v2"


@dataclass(eq=False)
class Containerd:
    layout: Layout
    process: Process
    sandbox_image: str
    stopped: bool = field(default=False)

    @classmethod
    @contextmanager
    def start(cls, layout: Layout, **options: str | float) -> Iterator[Containerd]:
        runtime = cls.create(layout, **options)  # type: ignore[arg-type]
        try:
            yield runtime
        finally:
            runtime.stop()

    @classmethod
    def create(cls, layout: Layout, *, sandbox_image: str | None = None, timeout: float = 60.0) -> Containerd:
        """Write the configuration and start containerd; returns once `ctr version` answers."""
        config = layout.containerd_config
        config.parent.mkdir(parents=True, exist_ok=True)
        layout.cni_conf_dir.mkdir(parents=True, exist_ok=True)
        kwargs = {"sandbox_image": sandbox_image} if sandbox_image else {}
        config.write_text(containerd_config(layout, **kwargs))
        process = Process(
            "containerd", ["containerd", "--config", str(config)], layout.run / "containerd.log"
        )
        runtime = cls(layout, process, sandbox_image or "")
        live.track(runtime, runtime.stop)
        process.start()

        def answers() -> bool:
            if not process.running():
                raise RuntimeError(f"containerd exited while starting:\n{process.tail()}")
            return runtime.ctr("version", check=False).returncode == 0

        try:
            wait_for(answers, timeout=timeout, interval=0.1, what="containerd to answer on its socket")
        except BaseException:
            runtime.stop()
            raise
        return runtime

    @property
    def socket(self) -> Path:
        return self.layout.containerd_socket

    def ctr(self, *args: str, check: bool = True, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["ctr", "--address", str(self.socket), "--namespace", NAMESPACE, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"ctr {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
        return done

    def import_archive(self, archive: Path) -> None:
        """Import a docker-archive into the kubelet's namespace (the reference it was saved with)."""
        self.ctr("images", "import", "--no-unpack=false", str(archive))

    def tag(self, source: str, reference: str) -> None:
        """Give an image already imported a second name (replacing that name's image, if any)."""
        self.ctr("images", "tag", "--force", source, reference)

    def images(self) -> list[str]:
        return sorted(self.ctr("images", "list", "--quiet").stdout.split())

    def version(self) -> str:
        """The server's version, as `ctr version` reports it."""
        lines = self.ctr("version").stdout.splitlines()
        server = lines[lines.index("Server:") + 1 :] if "Server:" in lines else lines
        for line in server:
            key, _, value = line.strip().partition(":")
            if key == "Version":
                return value.strip()
        return ""

    def shims(self) -> list[int]:
        """The PIDs of this containerd's shims (they name its socket on their command line)."""
        return processes_naming(str(self.socket), SHIM)

    def pid(self) -> int | None:
        popen = self.process.popen
        return popen.pid if popen is not None else None

    def stop(self) -> None:
        """Stop containerd by its PID, then its shims (which outlive it, with their containers), then
        unmount what it mounted under its own folders."""
        if self.stopped:
            return
        self.stopped = True
        shims = self.shims()
        self.process.stop()
        for pid in shims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        wait_for(
            lambda: not any(alive(pid) for pid in shims),
            timeout=30,
            interval=0.1,
            what="containerd's shims to exit",
        )
        unmount_all([self.layout.containerd_root, self.layout.containerd_state])
        live.forget(self)
