"""The commands on files start fast: `python -m webhook review|victims|plan` on files never imports the
kubernetes client, Flask, Werkzeug, gunicorn or cryptography.

setup.cfg's `fast-start` contract says the same of the import graph, but a module loaded by name
(dispatch's importlib) or by a function of an allowed module is only seen when the command runs: so each
command is run here, as a user runs it, with `-X importtime`, which lists every module it loaded.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testkit.import_report import modules_in

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = ("kubernetes", "flask", "werkzeug", "gunicorn", "cryptography")


def imported(argv: list[str]) -> set[str]:
    """Every module `python -m webhook ARGV` imported (from -X importtime's report on stderr)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "webhook", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    modules = modules_in(done.stderr)
    assert "webhook.commands.dispatch" in modules, "the report lists the modules"
    return modules


@pytest.mark.parametrize(
    "argv",
    [
        ["review", "examples/priorityclasses.yaml", "examples/pod.yaml"],
        ["review", "--classes", "examples/priorityclasses.yaml", "examples/deploy.yaml", "examples/job.yaml"],
        [
            "victims",
            "--node",
            "examples/node.json",
            "--pods",
            "examples/pods.json",
            "--pod",
            "examples/agent.yaml",
        ],
        [
            *["plan", "--cluster", "examples/node.json", "--cluster", "examples/pods.json"],
            *["--cluster", "examples/priorityclasses.yaml", "--pod", "examples/agent.yaml"],
        ],
    ],
    ids=["review", "review-classes-workload", "victims-files", "plan-files"],
)
def test_commands_on_files_import_no_client_no_web_framework_no_crypto(argv: list[str]) -> None:
    loaded = {name.split(".")[0] for name in imported(argv)}
    assert loaded & set(FORBIDDEN) == set()


def test_the_check_sees_a_heavy_import() -> None:
    """The same check on a command that needs the client (certs: cryptography) finds it: it can fail."""
    loaded = {name.split(".")[0] for name in imported(["certs", "--help"])}
    assert "cryptography" in loaded
