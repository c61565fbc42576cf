"""Start-up time of the commands, as a ratio to a bare interpreter.

    .venv/bin/python benchmarks/startup.py [--rounds 20]

Each round runs, in turn, `python -c pass` (the baseline: the same interpreter, with its site packages)
and every command below as a new process, as a user or a pre-commit hook runs it; the commands take
their inputs from examples/. Printed per command: the median wall time over the rounds and its ratio
to the baseline's median of the same run (so a loaded machine slows both alike). The target is 5x.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
COMMANDS: dict[str, list[str]] = {
    "python -c pass": [PY, "-c", "pass"],
    "--help": [PY, "-m", "webhook", "--help"],
    "--version": [PY, "-m", "webhook", "--version"],
    "review": [PY, "-m", "webhook", "review", "examples/priorityclasses.yaml", "examples/pod.yaml"],
    "victims": [
        *[PY, "-m", "webhook", "victims", "--node", "examples/node.json"],
        *["--pods", "examples/pods.json", "--pod", "examples/agent.yaml"],
    ],
    "kubectl priority --help": [
        PY,
        "-c",
        "import sys; from webhook.cli import kubectl_main; kubectl_main()",
        "--help",
    ],
}


def once(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    for argv in COMMANDS.values():  # warm the file cache and the byte-code
        once(argv)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.rounds):
        for name, argv in COMMANDS.items():
            times[name].append(once(argv))
    base = statistics.median(times["python -c pass"])
    print(f"{'command':<26}{'median ms':>10}{'ratio':>8}")
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"{name:<26}{median * 1000:>10.1f}{median / base:>7.1f}x")


if __name__ == "__main__":
    main()
