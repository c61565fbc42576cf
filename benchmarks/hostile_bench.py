"""Hostile-connection benchmark: honest reviews beside 1,000 hostile connections, and with none.

    .venv/bin/python benchmarks/hostile_bench.py [--hostile 1000 --duration 30 --workers 2 --threads 4]
        [--gthread]

One `priority-webhook serve` (the chart's shape: 2 workers x 4 threads, default limits) over TLS on
loopback. Phases, in one run: `alone` (no hostile connection), then `hostile`: a separate process holds
`--hostile` connections, a quarter of each kind (silent TCP, silent after the TLS handshake, headers dripped
a byte every 0.5 s, half of a second request on a kept-alive connection; testkit/hostile.py), each
reopened as soon as the server drops it. In each phase one client reviews on a fresh connection and one on a
kept-alive connection, each every 0.25 s, and every latency is recorded. Printed: per phase and client,
reviews, answered 200 within 1 s, p50 / p99 / max latency; the connections the server held (its own
gauge, sampled every 2 s); the server's CPU in the phase. `--gthread` repeats the hostile phase against
gunicorn's gthread worker (the serving design used before) with a shorter run; that phase did not finish
in 15 minutes on a loaded machine (its clients stay blocked on a server that answers nothing): run it
under `timeout`.

The open-files limit is raised to its hard limit for this process and its children (a thousand
connections need a thousand descriptors on each side).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testkit.hostile import (  # noqa: E402
    KINDS,
    Honest,
    honest_client,
    hostile_clients,
    raise_open_files_limit,
)
from testkit.processes import cpu_seconds  # noqa: E402
from testkit.server import EXAMPLE_CLASSES, WebhookServer, webhook_server  # noqa: E402

INTERVAL = 0.25
BOUND = 1.0


def open_connections(server: WebhookServer) -> float:
    try:
        text = server.session.get(server.url + "/metrics", timeout=10).text
    except OSError:
        return float("nan")
    match = re.search(r"^priority_webhook_open_connections (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else float("nan")


def phase(server: WebhookServer, seconds: float, hostile: Any = None) -> dict[str, Any]:
    until = time.monotonic() + seconds
    results = [Honest("fresh"), Honest("kept-alive")]
    clients = [
        threading.Thread(
            target=honest_client,
            args=(server.port, server.ca_file, r, r.name == "kept-alive", until, INTERVAL, BOUND),
        )
        for r in results
    ]
    cpu_before = cpu_seconds(server.process.pid)
    for client in clients:
        client.start()
    held_server, held_clients = [], []
    while any(c.is_alive() for c in clients):
        held_server.append(open_connections(server))
        if hostile is not None:
            held_clients.append(hostile.held)
        for client in clients:
            client.join(2.0)
    figures: dict[str, Any] = {
        "server_cpu_s": round(cpu_seconds(server.process.pid) - cpu_before, 2),
        "seconds": seconds,
        "server_held_max": max(held_server),
        "server_held_mean": round(statistics.fmean(held_server), 1),
    }
    if held_clients:
        figures["hostile_held_mean"] = round(statistics.fmean(held_clients), 1)
        figures["hostile_opened"] = hostile.state["opened"]
    for r in results:
        lat = sorted(r.latencies) or [float("nan")]
        figures[r.name] = {
            "reviews": r.attempts,
            "within_bound": r.attempts - len(r.failures),
            "failures": len(r.failures),
            "p50_ms": round(lat[len(lat) // 2] * 1000, 1),
            "p99_ms": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000, 1),
            "max_ms": round(lat[-1] * 1000, 1),
            "first_failures": r.failures[:3],
        }
    return figures


def run_design(
    args: argparse.Namespace, work: Path, name: str, env: dict[str, str], phases: list[str]
) -> dict:
    out: dict[str, Any] = {}
    folder = work / name
    folder.mkdir()
    shape = [
        "--classes",
        str(EXAMPLE_CLASSES),
        "--workers",
        str(args.workers),
        "--threads",
        str(args.threads),
    ]
    with webhook_server(
        folder, *shape, env={**env, "PROMETHEUS_MULTIPROC_DIR": str(folder)}, startup_timeout=120
    ) as server:
        if "alone" in phases:
            out["alone"] = phase(server, args.duration)
            print(name, "alone", json.dumps(out["alone"]), file=sys.stderr, flush=True)
        if "hostile" in phases:
            per_kind = args.hostile // len(KINDS)
            with hostile_clients(server.host, server.port, server.ca_file, per_kind, spread=5.0) as hostile:
                started = time.monotonic()
                try:
                    hostile.wait_held(int(per_kind * len(KINDS) * 0.95), timeout=args.ramp)
                    ramp = "held"
                except TimeoutError as err:
                    ramp = str(err)
                out["ramp"] = {"result": ramp, "seconds": round(time.monotonic() - started, 1)}
                seconds = args.duration if name == "async" else args.gthread_duration
                out["hostile"] = phase(server, seconds, hostile)
            out["hostile"]["hostile_errors"] = hostile.state["errors"][:3]
            print(name, "hostile", json.dumps(out), file=sys.stderr, flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hostile", type=int, default=1000)
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of honest reviews per phase")
    parser.add_argument("--ramp", type=float, default=120.0, help="longest wait for the hostile connections")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--gthread", action="store_true", help="also the hostile phase against gthread")
    parser.add_argument("--gthread-duration", type=float, default=15.0)
    args = parser.parse_args()
    limit = raise_open_files_limit()
    if limit < args.hostile * 2 + 100:
        raise SystemExit(f"open files limit {limit} is too low for {args.hostile} connections (ulimit -n)")
    figures: dict[str, Any] = {"hostile": args.hostile, "workers": args.workers, "threads": args.threads}
    with tempfile.TemporaryDirectory(prefix="priority-webhook-hostile-") as tmp:
        figures["async"] = run_design(args, Path(tmp), "async", {}, ["alone", "hostile"])
        if args.gthread:
            env = {"PRIORITY_WEBHOOK_WORKER_CLASS": "gthread"}
            figures["gthread"] = run_design(args, Path(tmp), "gthread", env, ["hostile"])
    print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
