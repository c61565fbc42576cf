"""`kubectl priority` through the real kubectl (which finds `kubectl-priority` on PATH), and the start-up
behaviour both console scripts rely on: a command loads only its own modules."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from webhook import __version__

ROOT = Path(__file__).resolve().parents[2]
PLUGIN_DIR = Path(sys.executable).parent  # kubectl-priority is installed next to the interpreter


def _kubectl() -> str:
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    found = str(Path(assets) / "kubectl") if assets else shutil.which("kubectl")
    if not found or not Path(found).exists():
        if os.environ.get("CI") == "true":
            pytest.fail("kubectl is needed: set KUBEBUILDER_ASSETS or put kubectl on PATH")
        pytest.skip("kubectl not found (KUBEBUILDER_ASSETS or PATH)")
    return found


def kubectl_priority(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{PLUGIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}"}
    env["KUBECONFIG"] = str(cwd / "no-such-kubeconfig")  # offline commands must not need one
    return subprocess.run(
        [_kubectl(), "priority", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_version_and_help_through_kubectl():
    version = kubectl_priority("--version")
    assert (version.returncode, version.stdout, version.stderr) == (
        0,
        f"kubectl priority {__version__}\n",
        "",
    )
    usage = kubectl_priority("--help")
    assert usage.returncode == 0 and usage.stdout.startswith("usage: kubectl priority {review,victims,plan}")
    sub = kubectl_priority("review", "--help")
    assert sub.returncode == 0 and sub.stdout.startswith("usage: kubectl priority review ")


@pytest.mark.parametrize(
    ("args", "err"),
    [
        (["review", "missing.yaml"], "kubectl priority review: error: missing.yaml: not found\n"),
        (
            ["certs"],
            "kubectl priority: error: expected one of review, victims, plan (see kubectl priority --help)\n",
        ),
        (
            ["victims", "--node", "examples/node.json", "--pods", "examples/pods.json", "--pod", "nope.yaml"],
            "kubectl priority victims: error: nope.yaml: not found\n",
        ),
    ],
)
def test_errors_name_kubectl_priority(args, err):
    result = kubectl_priority(*args)
    assert (result.returncode, result.stderr) == (2, err)


def test_an_option_error_names_kubectl_priority():
    result = kubectl_priority("review", "--output", "xml")
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].startswith("kubectl priority review: error: argument -o/--output")


# Modules that cost most of a start-up and that only some commands need.
HEAVY = ("kubernetes", "flask", "gunicorn", "cryptography", "marshmallow", "prometheus_client")


@pytest.mark.parametrize(
    ("argv", "allowed"),
    [
        (["--help"], ()),
        (["--version"], ()),
        (["review", "--help"], ()),
        (["victims", "--help"], ()),
        (["plan", "--help"], ()),
    ],
)
def test_a_command_loads_only_what_it_uses(argv, allowed):
    code = (
        "import sys\nfrom webhook.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = set(out.stdout.split()[-1:] and out.stdout.splitlines()[-1].split())
    assert loaded & set(HEAVY) <= set(allowed)


@pytest.mark.parametrize(
    "argv",
    [
        [
            "victims",
            "--node",
            "examples/node.json",
            "--pods",
            "examples/pods.json",
            "--pod",
            "examples/agent.yaml",
        ],
        ["review", "examples/priorityclasses.yaml", "examples/pod.yaml"],  # well formed: no schemas needed
    ],
)
def test_commands_on_files_load_no_cluster_client_and_no_schemas(argv):
    code = (
        f"import sys\nfrom webhook.cli import main\nmain({argv!r})\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})), file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert set(out.stderr.splitlines()[-1].split()) & set(HEAVY) == set()
