"""A stalled replica (SIGSTOP) behind a Service: how long until its readiness probe takes it out, and what
the webhook's client sees meanwhile, with the chart's probe settings and with the ones used before.

    .venv/bin/python benchmarks/stall_bench.py [--seconds 20 --stall-at 5]

Simulated, and said so: there is no kubelet or kube-proxy here. Two real `priority-webhook serve`
replicas run over TLS on loopback; a kubelet-like loop probes each one's /readyz over HTTPS with the
chart's periodSeconds / timeoutSeconds / failureThreshold; a Service-like TCP proxy sends each new
connection to a ready replica, round robin, and leaves established connections where they are (as
kube-proxy's NAT does). The client behaves like the API server's webhook client: a few kept-alive
connections, each review bounded by the webhook's timeoutSeconds (5 s), a connection closed after a
timeout and a new one opened through the Service. Every `--interval` each client thread sends a review.
One replica (its gunicorn master and workers) is stopped with SIGSTOP at `--stall-at` and continued at the
end. Printed per probe setting: time from the stall to unready, reviews answered and failed (timed out),
and the last failure's time after the stall.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import itertools
import json
import os
import signal
import ssl
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testkit import processes  # noqa: E402
from testkit.hostile import mutate_body  # noqa: E402
from testkit.server import EXAMPLE_CLASSES, WebhookServer, free_port, webhook_server  # noqa: E402
from webhook.files import tls  # noqa: E402

WEBHOOK_TIMEOUT = 5.0  # the chart's admission.timeoutSeconds
SETTINGS = {"chart now (1/1/2)": (1, 1, 2), "before (5/2/2)": (5, 2, 2)}


@dataclass
class Backend:
    server: WebhookServer
    ready: bool = True
    failures: int = 0
    unready_at: float | None = None


class Service:
    """Kubelet-like probes and a kube-proxy-like TCP front for the backends."""

    def __init__(self, backends: list[Backend], probe: tuple[int, int, int], ca: Path) -> None:
        self.backends, self.probe = backends, probe
        self.context = ssl.create_default_context(cafile=str(ca))
        self.port = free_port()
        self.turn = itertools.count()

    async def run(self, stop: asyncio.Event) -> None:
        server = await asyncio.start_server(self.forward, "127.0.0.1", self.port)
        probes = [asyncio.ensure_future(self.probe_loop(b, stop)) for b in self.backends]
        await stop.wait()
        server.close()
        for p in probes:
            p.cancel()

    async def probe_loop(self, backend: Backend, stop: asyncio.Event) -> None:
        period, timeout, threshold = self.probe
        while not stop.is_set():
            started = time.monotonic()
            ok = await self.probe_once(backend, timeout)
            if ok:
                backend.failures, backend.ready = 0, True
            else:
                backend.failures += 1
                if backend.failures >= threshold and backend.ready:
                    backend.ready, backend.unready_at = False, time.monotonic()
            await asyncio.sleep(max(0.0, period - (time.monotonic() - started)))  # the probe period

    async def probe_once(self, backend: Backend, timeout: float) -> bool:
        async def get() -> bool:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", backend.server.port, ssl=self.context, server_hostname="localhost"
            )
            writer.write(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            line = await reader.readline()
            writer.transport.abort()
            return line.split(b" ")[1:2] == [b"200"]

        try:
            return await asyncio.wait_for(get(), timeout)
        except (OSError, TimeoutError, ssl.SSLError):
            return False

    async def forward(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        ready = [b for b in self.backends if b.ready] or self.backends
        backend = ready[next(self.turn) % len(ready)]
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", backend.server.port)
        except OSError:
            client_w.transport.abort()
            return

        async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            try:
                while data := await r.read(65536):
                    w.write(data)
                    await w.drain()
            except OSError:
                pass
            finally:
                w.transport.abort()

        await asyncio.gather(pipe(client_r, up_w), pipe(up_r, client_w))


@dataclass
class Seen:
    answered: int = 0
    failed: list[float] = field(default_factory=list)  # seconds after the stall (negative: before)


def client(port: int, ca: Path, seen: Seen, until: float, interval: float, stalled_at: list[float]) -> None:
    context = ssl.create_default_context(cafile=str(ca))
    conn: http.client.HTTPSConnection | None = None
    n = 0
    while time.monotonic() < until:
        n += 1
        started = time.monotonic()
        try:
            if conn is None:
                conn = http.client.HTTPSConnection(
                    "localhost", port, context=context, timeout=WEBHOOK_TIMEOUT
                )
            conn.request("POST", "/mutate", mutate_body(f"s{n}"), {"Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            if resp.status == 200:
                seen.answered += 1
            else:
                raise OSError(f"status {resp.status}")
        except (OSError, http.client.HTTPException):
            seen.failed.append(started - stalled_at[0] if stalled_at else -1.0)
            if conn is not None:
                conn.close()
            conn = None
        time.sleep(max(0.0, interval - (time.monotonic() - started)))  # the client's pace


def signal_tree(pid: int, sig: int) -> None:
    for each in processes.tree(pid):
        os.kill(each, sig)


def run(args: argparse.Namespace, name: str, probe: tuple[int, int, int], work: Path) -> dict[str, Any]:
    certs = work / "certs"
    if not certs.exists():
        tls.write_certificates(certs)
    shape = ("--classes", str(EXAMPLE_CLASSES), "--workers", "2", "--threads", "4")
    for side in ("a", "b"):
        (work / f"{name[:5]}-{side}").mkdir(exist_ok=True)
    with (
        webhook_server(work / f"{name[:5]}-a", *shape, cert_dir=certs) as a,
        webhook_server(work / f"{name[:5]}-b", *shape, cert_dir=certs) as b,
    ):
        backends = [Backend(a), Backend(b)]
        service = Service(backends, probe, certs / tls.CA_CERT)
        loop = asyncio.new_event_loop()
        stop = asyncio.Event()
        thread = threading.Thread(target=loop.run_until_complete, args=(service.run(stop),), daemon=True)
        thread.start()
        time.sleep(2 * probe[0] + 1)  # both probed ready
        seen = [Seen() for _ in range(args.clients)]
        stalled_at: list[float] = []
        until = time.monotonic() + args.seconds
        threads = [
            threading.Thread(
                target=client, args=(service.port, certs / tls.CA_CERT, s, until, args.interval, stalled_at)
            )
            for s in seen
        ]
        for t in threads:
            t.start()
        time.sleep(args.stall_at)  # let the clients' connections spread over both replicas
        stalled_at.append(time.monotonic())
        signal_tree(b.process.pid, signal.SIGSTOP)
        try:
            for t in threads:
                t.join(args.seconds + 30)
        finally:
            signal_tree(b.process.pid, signal.SIGCONT)
            loop.call_soon_threadsafe(stop.set)
            thread.join(10)
        failed = sorted(x for s in seen for x in s.failed)
        unready = backends[1].unready_at
        return {
            "probe period/timeout/threshold": probe,
            "unready_after_s": round(unready - stalled_at[0], 2) if unready else None,
            "reviews_answered": sum(s.answered for s in seen),
            "reviews_failed": len(failed),
            "failures_started_s_after_stall": [round(x, 2) for x in failed],
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--stall-at", type=float, default=5.0)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--clients", type=int, default=4, help="kept-alive client connections")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="priority-webhook-stall-") as tmp:
        for name, probe in SETTINGS.items():
            results[name] = run(args, name, probe, Path(tmp))
            print(name, json.dumps(results[name]), file=sys.stderr, flush=True)
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
