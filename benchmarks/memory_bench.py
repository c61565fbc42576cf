"""Memory of `serve` under review load and connection churn: the RSS series and its slope, per load.

    .venv/bin/python benchmarks/memory_bench.py [--loads keepalive,fresh,churn,soak] [--duration 120]
        [--interval 15] [--warmup 60] [--workers 2 --threads 4] [--server-repo DIR] [--json FILE]

Each load runs against a fresh `priority-webhook serve` (the chart's shape: 2 workers x 4 threads, default
limits) over TLS on 127.0.0.1, for `--duration` seconds; every `--interval` seconds the RSS of the master and
its workers is read from /proc. Loads:

- keepalive: 4 clients reviewing as fast as they can, each on one kept-alive connection;
- fresh: 4 clients reviewing as fast as they can, each review on a new TLS connection;
- churn: no reviews; two loops, each opening 16 silent TCP connections and 16 TLS connections that send half
  a request line, holding them 3 s and closing them (reset), then again;
- soak: the hostile mix of benchmarks/soak_real.py without a cluster: 16 silent TCP and 16 TLS connections
  dripping a request header a byte every 5 s, each reopened when the server drops it, beside 2 kept-alive
  and 2 fresh-connection review clients, one review each every 0.05 s;
- held: `--held` hostile connections held open at once (a quarter of each kind of testkit/hostile.py:
  silent TCP, silent after the handshake, headers dripped, half of a second request), each reopened when
  the server drops it: what the workers' `--max-connections` (1,000 each) lets a client make them hold.

Printed per load: the resting RSS (before the load), the series, max / resting, last / resting, and the
least-squares slope of the samples after `--warmup` seconds (MiB per minute, and as a share of the mean
over that window per 10 minutes). `--server-repo` runs the server from another checkout (a worktree of an
older commit) to compare designs in one run. Every loop is bounded by the duration and a count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testkit import processes  # noqa: E402
from testkit.hostile import hostile_clients, mutate_request, raise_open_files_limit  # noqa: E402
from testkit.server import free_port  # noqa: E402
from testkit.wait import wait_for  # noqa: E402
from webhook.files import tls  # noqa: E402

HOST = "127.0.0.1"
MAX_CONNECTIONS_PER_LOOP = 1_000_000  # a count bound beside the time bound of every loop
LOADS = ("keepalive", "fresh", "churn", "soak", "held")


def rss_mib(master: int) -> tuple[float, list[float]]:
    """RSS of the master and of each of its children, MiB."""
    each = [kib / 1024 for kib in map(processes.rss_kib, processes.tree(master)) if kib is not None]
    return sum(each), each


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MiB): MiB per second."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    den = sum((t - mx) ** 2 for t, _ in points)
    return sum((t - mx) * (v - my) for t, v in points) / den if den else 0.0


class Server:
    def __init__(self, work: Path, repo: Path, workers: int, threads: int) -> None:
        self.cert_dir = work / "certs"
        if not self.cert_dir.exists():
            tls.write_certificates(self.cert_dir)
        self.port = free_port()
        self.log = open(work / f"server-{self.port}.log", "ab")  # noqa: SIM115 - closed in stop()
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(repo)}
        env["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(dir=work)
        cmd = [sys.executable, "-m", "webhook", "serve", "--bind", f"{HOST}:{self.port}"]
        cmd += [
            "--cert-dir",
            str(self.cert_dir),
            "--classes",
            str(REPO / "examples" / "priorityclasses.yaml"),
        ]
        cmd += ["--workers", str(workers), "--threads", str(threads)]
        self.process = subprocess.Popen(cmd, cwd=repo, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.context = ssl.create_default_context(cafile=str(self.cert_dir / tls.CA_CERT))
        wait_for(self._ready, timeout=60, interval=0.1, what="the server's /healthz")
        wait_for(lambda: len(rss_mib(self.process.pid)[1]) == workers + 1, timeout=30, what="the workers")

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"server exited with {self.process.returncode}")
        try:
            return asyncio.run(review(self, fresh=True, count=1)) == 1
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError):
            return False

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
        self.log.close()


async def _open(server: Server, tls_on: bool = True) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    context = server.context if tls_on else None
    return await asyncio.wait_for(
        asyncio.open_connection(
            HOST, server.port, ssl=context, server_hostname="localhost" if tls_on else None
        ),
        15,
    )


async def _one_review(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
    writer.write(mutate_request(f"memory-{n}"))
    head = await reader.readuntil(b"\r\n\r\n")
    found = re.search(rb"(?i)content-length: *(\d+)", head)
    await reader.readexactly(int(found.group(1)) if found else 0)
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(head.split(b"\r\n", 1)[0].decode())


async def review(
    server: Server, fresh: bool, count: int, until: float = float("inf"), pause: float = 0.0
) -> int:
    """Up to `count` reviews until `until`; the number answered 200."""
    done = 0
    conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    for n in range(count):
        if time.monotonic() >= until:
            break
        try:
            if conn is None:
                conn = await _open(server)
            await asyncio.wait_for(_one_review(*conn, n), 15)
            done += 1
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError, TimeoutError, RuntimeError):
            fresh_after_error = conn
            conn = None
            if fresh_after_error is not None:
                fresh_after_error[1].transport.abort()
            continue
        if fresh:
            conn[1].transport.abort()  # the API server's connections end either way; no close_notify wait
            conn = None
        if pause:
            await asyncio.sleep(pause)  # the client's pace
    if conn is not None:
        conn[1].transport.abort()
    return done


async def churn_loop(server: Server, until: float, counts: dict[str, int]) -> None:
    """16 silent TCP + 16 TLS connections sending half a request line, held 3 s, reset; again."""
    half = mutate_request("churn")[:15]

    async def silent() -> asyncio.StreamWriter | None:
        try:
            _, writer = await _open(server, tls_on=False)
        except (OSError, TimeoutError):
            return None
        return writer

    async def partial() -> asyncio.StreamWriter | None:
        try:
            _, writer = await _open(server)
        except (OSError, ssl.SSLError, TimeoutError):
            return None
        writer.write(half)
        return writer

    while time.monotonic() < until and counts["connections"] < MAX_CONNECTIONS_PER_LOOP:
        writers = await asyncio.gather(*[silent() for _ in range(16)], *[partial() for _ in range(16)])
        counts["connections"] += sum(1 for w in writers if w is not None)
        await asyncio.sleep(3)  # how long the attacker holds them
        for writer in writers:
            if writer is not None:
                writer.transport.abort()


async def hostile_keep(server: Server, kind: str, until: float, counts: dict[str, int]) -> None:
    """One silent TCP connection, or one TLS connection dripping a header byte every 5 s; reopened."""
    request = mutate_request("slow")
    while time.monotonic() < until and counts["connections"] < MAX_CONNECTIONS_PER_LOOP:
        try:
            reader, writer = await _open(server, tls_on=kind == "slow")
        except (OSError, ssl.SSLError, TimeoutError):
            await asyncio.sleep(0.5)
            continue
        counts["connections"] += 1
        sent = 0
        try:
            while time.monotonic() < until and not reader.at_eof():
                if kind == "slow" and sent < len(request):
                    writer.write(request[sent : sent + 1])
                    sent += 1
                try:
                    if await asyncio.wait_for(reader.read(65536), 5) == b"":
                        break
                except TimeoutError:
                    pass  # nothing from the server in 5 s: drip the next byte
        except (OSError, ssl.SSLError):
            pass
        finally:
            writer.transport.abort()


async def run_load(server: Server, load: str, seconds: float, held: int) -> dict[str, int]:
    until = time.monotonic() + seconds
    counts = {"connections": 0}
    many = 10**9
    if load == "held":
        with hostile_clients(
            HOST, server.port, server.cert_dir / tls.CA_CERT, held // 4, spread=10
        ) as hostile:
            await asyncio.sleep(seconds)  # the load runs in its own process for the duration
            counts["connections"] = int(hostile.state["opened"])
            counts["held_at_end"] = hostile.held
        done: list[int] = []
    elif load == "keepalive":
        done = await asyncio.gather(*[review(server, fresh=False, count=many, until=until) for _ in range(4)])
    elif load == "fresh":
        done = await asyncio.gather(*[review(server, fresh=True, count=many, until=until) for _ in range(4)])
    elif load == "churn":
        done = []
        await asyncio.gather(*[churn_loop(server, until, counts) for _ in range(2)])
    else:
        reviews = [
            review(server, fresh=f, count=many, until=until, pause=0.05) for f in (False, False, True, True)
        ]
        keep = [hostile_keep(server, kind, until, counts) for kind in ["silent"] * 16 + ["slow"] * 16]
        results = await asyncio.gather(*reviews, *keep)
        done = [r for r in results[:4] if isinstance(r, int)]
    counts["reviews"] = sum(done)
    return counts


async def sample(
    server: Server, until: float, interval: float, series: list[dict[str, Any]], t0: float
) -> None:
    while True:
        total, each = rss_mib(server.process.pid)
        series.append(
            {
                "t": round(time.monotonic() - t0, 1),
                "rss": round(total, 1),
                "each": [round(x, 1) for x in each],
            }
        )
        if time.monotonic() + interval > until + 0.5:
            return
        await asyncio.sleep(interval)  # the sampling period


async def measure(
    server: Server, load: str, seconds: float, interval: float, held: int
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    series: list[dict[str, Any]] = []
    t0 = time.monotonic()
    sampler = asyncio.ensure_future(sample(server, t0 + seconds, interval, series, t0))
    counts = await run_load(server, load, seconds, held)
    await sampler
    return series, counts


def summary(
    load: str, rest: float, series: list[dict[str, Any]], counts: dict[str, int], warmup: float
) -> dict[str, Any]:
    after = [(s["t"], s["rss"]) for s in series if s["t"] >= warmup]
    per_second = slope(after)
    mean = sum(v for _, v in after) / len(after) if after else rest
    values = [s["rss"] for s in series]
    window = [v for _, v in after]
    return {
        "load": load,
        "rest_mib": round(rest, 1),
        "series_mib": values,
        "max_over_rest": round(max(values) / rest, 2),
        "last_over_rest": round(values[-1] / rest, 2),
        "after_warmup_min_max_mib": [round(min(window), 1), round(max(window), 1)] if window else [],
        "after_warmup_spread": round((max(window) - min(window)) / min(window), 3) if window else 0.0,
        "slope_mib_per_min": round(per_second * 60, 3),
        "slope_share_per_10min": round(per_second * 600 / mean, 4) if mean else 0.0,
        "workers_last_mib": series[-1]["each"],
        **counts,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loads", default=",".join(LOADS), help=f"comma-separated, of {', '.join(LOADS)}")
    parser.add_argument("--duration", type=float, default=120.0, help="seconds per load")
    parser.add_argument("--interval", type=float, default=15.0, help="seconds between RSS samples")
    parser.add_argument("--warmup", type=float, default=60.0, help="seconds left out of the slope")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--held", type=int, default=2000, help="connections the `held` load holds")
    parser.add_argument("--server-repo", type=Path, default=REPO, help="checkout the server runs from")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    loads = [x for x in args.loads.split(",") if x]
    unknown = set(loads) - set(LOADS)
    if unknown:
        parser.error(f"unknown load(s): {', '.join(sorted(unknown))}")
    raise_open_files_limit()
    results = []
    with tempfile.TemporaryDirectory(prefix="memory-bench-") as tmp:
        for load in loads:
            server = Server(Path(tmp), args.server_repo.resolve(), args.workers, args.threads)
            try:
                time.sleep(2)  # let the workers settle after their first review before the resting sample
                rest = rss_mib(server.process.pid)[0]
                series, counts = asyncio.run(measure(server, load, args.duration, args.interval, args.held))
            finally:
                server.stop()
            result = summary(load, rest, series, counts, args.warmup)
            results.append(result)
            print(json.dumps(result), flush=True)
    print()
    columns = ["load", "rest_mib", "max_over_rest", "last_over_rest", "after_warmup_spread"]
    columns += ["slope_mib_per_min", "reviews", "connections"]
    print(" | ".join(columns))
    for r in results:
        print(" | ".join(str(r[c]) for c in columns))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
