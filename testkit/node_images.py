"""The node's images: the sandbox ("pause") image from a program of our own, and the project's image.

No image can be pulled here, so the node's containerd gets both by import: `podman save --format
docker-archive` of an image podman built, then `ctr -n k8s.io images import` (the kubelet's namespace).

The pause program is `testkit/pause/pause.c`: compiled static at test time, it is the only file of an image
FROM scratch (run as 65535, as a sandbox needs nothing else).
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from testkit import image_engine
from testkit.node_config import PAUSE_IMAGE

PAUSE_SOURCE = Path(__file__).resolve().parent / "pause" / "pause.c"
CONTAINERFILE = 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n'


def _run(*args: str, timeout: float = 600.0, cwd: Path | None = None) -> str:
    done = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-3000:]}")
    return done.stdout


def build_pause_program(out: Path) -> Path:
    """Compile the pause program, static and stripped (an image FROM scratch has no libc)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    _run("cc", "-static", "-Os", "-s", "-o", str(out), str(PAUSE_SOURCE))
    return out


def build_pause_image(workdir: Path, reference: str = PAUSE_IMAGE) -> str:
    """The pause image in podman's storage; returns its reference."""
    context = Path(tempfile.mkdtemp(prefix="pause-image-", dir=workdir))
    build_pause_program(context / "pause")
    (context / "Containerfile").write_text(CONTAINERFILE)
    _run(
        "podman",
        "build",
        "--quiet",
        "--tag",
        reference,
        "--file",
        str(context / "Containerfile"),
        str(context),
    )
    return reference


def project_image(workdir: Path) -> str:
    """The project's image, built by `scripts/image` (its reference, the last line it prints); its SBOM goes
    into `workdir`."""
    return image_engine.build(out_dir=workdir / "image").reference


def save_archive(reference: str, out: Path) -> Path:
    """A docker-archive of one image from podman's storage (keeps the reference as its tag)."""
    out.unlink(missing_ok=True)
    _run("podman", "save", "--format", "docker-archive", "--output", str(out), reference)
    return out


def remove_from_podman(reference: str) -> None:
    """Remove an image the node built for itself from podman's storage, once containerd has it."""
    subprocess.run(["podman", "rmi", "--force", reference], capture_output=True, check=False, timeout=120)
