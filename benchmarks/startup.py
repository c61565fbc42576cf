"""Start-up time of the commands, as a ratio to a bare interpreter.

    .venv/bin/python benchmarks/startup.py [--rounds 20]

Each round runs, in turn, `python -c pass` (the baseline: the same interpreter, with its site packages)
and every command below as a new process, as a user or a pre-commit hook runs it; the commands take
their inputs from examples/. Printed per command: the median wall time over the rounds and its ratio
to the baseline's median of the same run (so a loaded machine slows both alike), for the wall time and
for the CPU time the process used (user + system; steadier on a shared machine). The target is 5x.
"""

from __future__ import annotations

import argparse
import os
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


def once(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, cpu seconds: user + system of the process) of one run."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(process.pid, 0)
    process.returncode = 0  # reaped by wait4
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    for argv in COMMANDS.values():  # warm the file cache and the byte-code
        once(argv)
    wall: dict[str, list[float]] = {name: [] for name in COMMANDS}
    cpu: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.rounds):
        for name, argv in COMMANDS.items():
            w, c = once(argv)
            wall[name].append(w)
            cpu[name].append(c)
    base_wall = statistics.median(wall["python -c pass"])
    base_cpu = statistics.median(cpu["python -c pass"])
    print(f"{'command':<26}{'wall ms':>9}{'ratio':>8}{'cpu ms':>9}{'ratio':>8}")
    for name in COMMANDS:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        print(f"{name:<26}{w * 1000:>9.1f}{w / base_wall:>7.1f}x{c * 1000:>9.1f}{c / base_cpu:>7.1f}x")


if __name__ == "__main__":
    main()
