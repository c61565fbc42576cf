"""The project's commands run as a user runs them: `python -m webhook ARGS`, a subprocess of this interpreter
in the work tree, for the suites that check a command against what a cluster or a node did."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from testkit.server import REPO


def cli(*args: str, cwd: Path = REPO, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """`priority-webhook ARGS`, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "webhook", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def victims_answer(*args: str) -> dict[str, Any]:
    """`priority-webhook victims ARGS`: its JSON answer. It exits 0 when the pod is admitted and 1 when it
    is not; anything else (bad input, a crash) fails the test."""
    result = cli("victims", *args)
    assert result.returncode in (0, 1), f"victims exited {result.returncode}: {result.stdout}{result.stderr}"
    answer: dict[str, Any] = json.loads(result.stdout)
    assert answer["admit"] is (result.returncode == 0), answer
    return answer


def sidecar_victims(node: Path, pods: Path, pod: Path, critical_priority: int) -> list[str]:
    """The victims `victims` names, in eviction order, for a pod it admits, asked as the chart's sidecar
    asks (`--order priority --critical-priority N`) on `kubectl get -o json` files."""
    answer = victims_answer(
        *("--node", str(node), "--pods", str(pods), "--pod", str(pod)),
        *("--order", "priority", "--critical-priority", str(critical_priority)),
    )
    assert answer["admit"], answer
    return [victim["name"] for victim in answer["victims"]]
