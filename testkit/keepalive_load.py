"""Reviews POSTed back to back the way the API server sends them, by a Go client of our own
(testkit/keepalive_client/main.go: net/http's Transport, kept-alive TLS connections to one host name, the
endpoint chosen when a connection is dialled), for the tests and benchmarks of a server that stops under load.

    client = build_client(tmp_path)
    with keepalive_load(client, ca_file, review_file, ["127.0.0.1:8443"]) as load:
        load.endpoints(["127.0.0.1:8444"])  # the first endpoint is removed: new connections go elsewhere
        print(load.stop())                  # {"ok": ..., "failed": ..., "errors": [...], "answered": {...}}

Go comes from the `go` on PATH (testkit/go_build.py).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from testkit.go_build import go_build
from testkit.reviews import pod, review
from testkit.server import EXAMPLE_CLASSES, webhook_server
from testkit.wait import wait_for
from webhook.files import tls

SOURCE = Path(__file__).resolve().parent / "keepalive_client" / "main.go"
# The name the API server dials a webhook Service by, and checks its certificate against.
SERVICE_NAME = f"{tls.DEFAULT_SERVICE}.{tls.DEFAULT_NAMESPACE}.svc"


def build_client(workdir: Path) -> Path:
    return go_build(SOURCE, workdir / "keepalive-client", "the keep-alive client")


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


def write_pod_review(folder: Path) -> Path:
    """A review of a pod as a Deployment makes it: over 4 KiB, so Go writes it in more than one piece."""
    env = [{"name": f"SETTING_{i}", "value": "x" * 40} for i in range(60)]
    containers = [{"name": "app", "image": "registry.example/app:1.0", "env": env}]
    path = folder / "review.json"
    path.write_text(json.dumps(review(pod("web-7d4b9c", containers=containers))))
    return path


def replica_stops_under_load(
    client: Path,
    folder: Path,
    serve_args: Sequence[str],
    *,
    connections: int = 16,
    before: int = 500,
    after: int = 500,
    graceful_timeout: float = 30.0,
) -> dict[str, Any]:
    """Two replicas (`serve` with `serve_args`, over TLS) behind one name; the client calls the first until
    `before` reviews are answered; then the first's endpoint is removed (new connections go to the second) and
    it is sent SIGTERM, as Kubernetes does to a pod being deleted; the client goes on until the second has
    answered `after` more. The client's counts, plus `stoppingAnswered`: reviews the stopping replica answered
    on its kept-alive connections after its endpoint was removed, and `exitCode`: the stopped replica's."""
    certs = folder / "certs"
    tls.write_certificates(certs)
    body = write_pod_review(folder)
    args = ("--classes", str(EXAMPLE_CLASSES), *serve_args)
    with (
        webhook_server(folder, *args, cert_dir=certs) as old,
        webhook_server(folder, *args, cert_dir=certs) as new,
    ):
        old_endpoint, new_endpoint = f"{old.host}:{old.port}", f"{new.host}:{new.port}"
        with keepalive_load(
            client,
            certs / tls.CA_CERT,
            body,
            [old_endpoint],
            connections=connections,
            server_name=SERVICE_NAME,
        ) as load:
            wait_for(
                lambda: load.counts()["ok"] >= before, timeout=120, what="reviews answered by the replica"
            )
            load.endpoints([new_endpoint])
            old.process.terminate()
            exit_code = old.process.wait(graceful_timeout + 10)
            served = load.counts()["answeredSinceEndpoints"].get(new_endpoint, 0)
            wait_for(
                lambda: load.counts()["answeredSinceEndpoints"].get(new_endpoint, 0) >= served + after,
                timeout=120,
                what="reviews answered by the other replica",
            )
            counts = load.stop()
    counts["stoppingAnswered"] = counts["answeredSinceEndpoints"].get(old_endpoint, 0)
    counts["exitCode"] = exit_code
    counts["answeredByStopping"] = counts["answered"].get(old_endpoint, 0)
    return counts
