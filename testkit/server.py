"""Run the real webhook server (`python -m webhook serve`) as a subprocess, over real TLS, for tests.

    with webhook_server(tmp_path, "--classes", "examples/priorityclasses.yaml") as server:
        server.session.post(server.url + "/mutate", json=review)

Certificates are generated with the project's own code into `tmp_path/certs` (unless `cert_dir` is
given); the port is a free one picked here; the server is ready once `/healthz` answers. Extra CLI
arguments (`--kubeconfig ...`, `--workers 1`) and environment variables are passed through.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from testkit.wait import wait_for
from webhook.files import tls

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_CLASSES = REPO / "examples" / "priorityclasses.yaml"


def free_port() -> int:
    """A port nothing listens on right now (gunicorn cannot report the port of a `:0` bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class WebhookServer:
    url: str
    host: str
    port: int
    ca_file: Path
    cert_dir: Path
    process: subprocess.Popen[bytes]
    session: requests.Session
    log_file: Path

    def log(self) -> str:
        return self.log_file.read_text(errors="replace")

    def review(self, path: str, review: Mapping[str, Any], **kwargs: Any) -> requests.Response:
        return self.session.post(self.url + path, json=review, timeout=10, **kwargs)

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM (graceful: in-flight requests finish), then SIGKILL after `timeout`; the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        return self.process.returncode


def serve_command(port: int, cert_dir: Path, args: Sequence[str], module: str = "webhook") -> list[str]:
    return [
        sys.executable,
        "-m",
        module,
        "serve",
        "--bind",
        f"127.0.0.1:{port}",
        "--cert-dir",
        str(cert_dir),
        *args,
    ]


@contextmanager
def webhook_server(
    tmp_path: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    cert_dir: Path | None = None,
    startup_timeout: float = 60.0,
    port: int | None = None,
    module: str = "webhook",
) -> Iterator[WebhookServer]:
    """Start the server with `args` (default: the example classes) and stop it on exit.

    `port` serves on a given port (to bring a stopped server back where its clients expect it); `module`
    is the one `python -m` runs (testkit.memprobe: the same CLI with workers that report their memory).
    """
    if cert_dir is None:
        cert_dir = tmp_path / "certs"
        tls.write_certificates(cert_dir)
    if not args:
        args = ("--classes", str(EXAMPLE_CLASSES))
    port = port or free_port()
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    with running_server(
        serve_command(port, cert_dir, args, module),
        port,
        cert_dir,
        tmp_path / f"server-{port}.log",
        env=full_env,
        startup_timeout=startup_timeout,
    ) as server:
        yield server


@contextmanager
def running_server(
    command: Sequence[str],
    port: int,
    cert_dir: Path,
    log_file: Path,
    *,
    env: Mapping[str, str] | None = None,
    startup_timeout: float = 60.0,
) -> Iterator[WebhookServer]:
    """Run `command` (a server of ours, or the benchmarks' Go floor) serving HTTPS on `port` with the
    certificates in `cert_dir`; yielded once `/healthz` answers, terminated when the block ends."""
    with open(log_file, "ab") as log:  # a restart on the same port appends
        process = subprocess.Popen(
            list(command),
            cwd=REPO,
            env=dict(env) if env is not None else None,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    session = requests.Session()
    # Loopback with our CA only: no proxy, and no REQUESTS_CA_BUNDLE overriding `verify` (requests lets
    # that variable win over a session's own setting).
    session.trust_env = False
    session.verify = str(cert_dir / tls.CA_CERT)
    url = f"https://127.0.0.1:{port}"
    server = WebhookServer(
        url, "127.0.0.1", port, cert_dir / tls.CA_CERT, cert_dir, process, session, log_file
    )

    def healthy() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{server.log()}")
        if not server.ca_file.exists():  # the server generates a development certificate on its first start
            return False
        try:
            return session.get(url + "/healthz", timeout=2).status_code == 200
        except (requests.ConnectionError, requests.Timeout):
            # The socket is bound before the workers have loaded the app: on a loaded machine the first
            # answer can take longer than one attempt's timeout. The deadline is wait_for's.
            return False

    try:
        wait_for(healthy, timeout=startup_timeout, interval=0.05, what=f"{url}/healthz")
        yield server
    finally:
        session.close()
        server.terminate()
