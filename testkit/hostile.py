"""Hostile clients of the webhook server, in a process of their own (their CPU must not slow the honest
clients they are measured against, which a thread of the same interpreter would, through the GIL).

    with hostile_clients(host, port, ca_file, per_kind=32) as hostile:
        hostile.wait_held(128, timeout=60)
        ...

Each connection is of one kind and is reopened as soon as the server drops it:
- silent tcp: connects and sends nothing (the server waits in the TLS handshake);
- silent tls: completes the TLS handshake and sends nothing;
- dripped headers: sends a review's request one byte every `drip` seconds;
- half a second request: one whole review on the connection, answered, then half of a second one.
The first connections start spread over `spread` seconds, as independent attackers would.

Run directly (`python -m testkit.hostile HOST PORT CA_FILE PER_KIND`) it prints the number of
connections held, as a JSON line every half second, until its standard input closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import random
import re
import resource
import ssl
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KINDS = ("silent tcp", "silent tls", "dripped headers", "half a second request")
REPO = Path(__file__).resolve().parents[1]


def mutate_request(uid: str) -> bytes:
    body = mutate_body(uid)
    return (
        b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )


def mutate_body(uid: str) -> bytes:
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "operation": "CREATE",
                "namespace": "default",
                "name": "web",
                "object": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "web", "namespace": "default"},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                },
            },
        }
    ).encode()


@dataclass
class Honest:
    name: str
    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    attempts: int = 0


def honest_client(
    port: int, ca_file: Path, result: Honest, kept_alive: bool, until: float, interval: float, bound: float
) -> None:
    """A review every `interval` seconds until `until`, each on a new connection or all on one kept alive;
    its latency recorded, and a failure for anything but the right 200 answer within `bound` seconds."""
    context = ssl.create_default_context(cafile=str(ca_file))
    conn: http.client.HTTPSConnection | None = None
    n = 0
    next_at = time.monotonic()
    while next_at < until:
        n += 1
        result.attempts = n
        uid = f"{result.name}-{n}"
        body = mutate_body(uid)
        started = time.monotonic()
        try:
            if conn is None or not kept_alive:
                conn = http.client.HTTPSConnection("localhost", port, context=context, timeout=10)
            conn.request("POST", "/mutate", body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            answered = json.loads(resp.read())
            elapsed = time.monotonic() - started
            result.latencies.append(elapsed)
            if resp.status != 200 or answered["response"]["uid"] != uid:
                result.failures.append(f"{uid}: {resp.status} {answered}")
            elif elapsed > bound:
                result.failures.append(f"{uid}: answered after {elapsed:.2f} s")
        except (OSError, http.client.HTTPException, ValueError) as err:
            result.failures.append(f"{uid}: {err!r} after {time.monotonic() - started:.2f} s")
            conn = None
        finally:
            if not kept_alive and conn is not None:
                conn.close()
        next_at += interval
        time.sleep(max(0.0, next_at - time.monotonic()))  # the client's pace, not a synchronisation
    if conn is not None:
        conn.close()


class Clients:
    def __init__(self, host: str, port: int, ca_file: str, drip: float, spread: float) -> None:
        self.host, self.port, self.drip_every, self.spread = host, port, drip, spread
        self.context = ssl.create_default_context(cafile=ca_file)
        self.held = dict.fromkeys(KINDS, 0)
        self.opened = 0
        self.errors: list[str] = []
        self.stopping = asyncio.Event()

    async def keep(self, kind: str) -> None:
        await self.pause(random.uniform(0, self.spread))
        while not self.stopping.is_set():
            try:
                await self.one(kind)
            except (OSError, ssl.SSLError, asyncio.IncompleteReadError, EOFError):
                pass  # dropped by the server: open another
            except Exception as err:  # a broken client must show, not hide as "dropped"
                self.errors.append(repr(err))
                return

    async def pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopping.wait(), seconds)

    async def one(self, kind: str) -> None:
        tls = None if kind == "silent tcp" else self.context
        reader, writer = await asyncio.open_connection(
            self.host, self.port, ssl=tls, server_hostname="localhost" if tls else None
        )
        self.opened += 1
        self.held[kind] += 1
        dripping: asyncio.Task[None] | None = None
        try:
            if kind == "half a second request":
                writer.write(mutate_request(str(uuid.uuid4())))
                head = await reader.readuntil(b"\r\n\r\n")
                found = re.search(rb"(?i)content-length: *(\d+)", head)
                await reader.readexactly(int(found.group(1)) if found else 0)
                second = mutate_request(str(uuid.uuid4()))
                writer.write(second[: len(second) // 2])
            elif kind == "dripped headers":
                dripping = asyncio.ensure_future(self.drip(writer))
            await self.until_closed(reader)
        finally:
            self.held[kind] -= 1
            if dripping is not None:
                dripping.cancel()
                await asyncio.gather(dripping, return_exceptions=True)
            writer.transport.abort()

    async def drip(self, writer: asyncio.StreamWriter) -> None:
        for byte in mutate_request(str(uuid.uuid4())):
            writer.write(bytes([byte]))
            await asyncio.sleep(self.drip_every)  # the attacker's pace

    async def until_closed(self, reader: asyncio.StreamReader) -> None:
        """Until the server closes the connection (a 408 may come first) or the run ends."""
        stop = asyncio.ensure_future(self.stopping.wait())
        try:
            while True:
                read = asyncio.ensure_future(reader.read(65536))
                done, _ = await asyncio.wait({read, stop}, return_when=asyncio.FIRST_COMPLETED)
                if stop in done:
                    read.cancel()
                    await asyncio.gather(read, return_exceptions=True)
                    return
                if not read.result():
                    raise EOFError
        finally:
            stop.cancel()


def raise_open_files_limit() -> int:
    """Up to the hard limit: a thousand connections need a thousand descriptors. The new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return soft


async def _main(host: str, port: int, ca_file: str, per_kind: int, drip: float, spread: float) -> None:
    raise_open_files_limit()
    clients = Clients(host, port, ca_file, drip, spread)
    loop = asyncio.get_running_loop()
    tasks = [asyncio.ensure_future(clients.keep(kind)) for kind in KINDS for _ in range(per_kind)]
    stdin_closed = loop.run_in_executor(None, sys.stdin.read)

    async def report() -> None:
        while True:
            state = {"held": sum(clients.held.values()), "opened": clients.opened, "errors": clients.errors}
            print(json.dumps(state), flush=True)
            await asyncio.sleep(0.5)  # the reporting period

    reporting = asyncio.ensure_future(report())
    await stdin_closed
    clients.stopping.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    reporting.cancel()
    await asyncio.gather(reporting, return_exceptions=True)
    state = {"held": sum(clients.held.values()), "opened": clients.opened, "errors": clients.errors}
    print(json.dumps(state), flush=True)


class Handle:
    """The parent's view of the hostile process: its latest report."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.state: dict[str, Any] = {"held": 0, "opened": 0, "errors": []}
        self.max_held = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.state = json.loads(line)
            self.max_held = max(self.max_held, self.state["held"])

    @property
    def held(self) -> int:
        return int(self.state["held"])

    def wait_held(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.held < count:
            if self.process.poll() is not None:
                raise RuntimeError(f"hostile clients exited with {self.process.returncode}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {self.held} of {count} hostile connections open after {timeout} s")
            time.sleep(0.1)  # polling the child's report

    def stop(self) -> dict[str, Any]:
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
        self._reader.join(5)
        return self.state


@contextmanager
def hostile_clients(
    host: str, port: int, ca_file: Path, per_kind: int, drip: float = 0.5, spread: float = 2.0
) -> Iterator[Handle]:
    cmd = [
        sys.executable,
        "-m",
        "testkit.hostile",
        host,
        str(port),
        str(ca_file),
        str(per_kind),
        str(drip),
        str(spread),
    ]
    process = subprocess.Popen(
        cmd, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    handle = Handle(process)
    try:
        yield handle
    finally:
        handle.stop()


if __name__ == "__main__":
    host_, port_, ca_, per_kind_ = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    drip_ = float(sys.argv[5]) if len(sys.argv) > 5 else 0.5
    spread_ = float(sys.argv[6]) if len(sys.argv) > 6 else 2.0
    asyncio.run(_main(host_, port_, ca_, per_kind_, drip_, spread_))
