"""`serve --ca-secret ...`: bad rotation flags are refused before anything starts (exit 2, one line)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testkit.server import free_port

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""

CASES = [
    # (case, arguments, the error line starts with)
    (
        "no cluster to keep the CA in",
        ["--ca-secret", "ns/ca"],
        "--ca-secret: needs --kubeconfig or --in-cluster",
    ),
    (
        "not NS/NAME",
        ["--ca-secret", "ca", "--kubeconfig", "kc"],
        "argument --ca-secret: expected NAMESPACE/NAME",
    ),
    (
        "bad namespace",
        ["--ca-secret", "NS/ca", "--kubeconfig", "kc"],
        "argument --ca-secret: expected NAMESPACE/NAME",
    ),
    (
        "duration without unit",
        ["--ca-validity", "90"],
        "argument --ca-validity: expected a positive duration",
    ),
    (
        "zero duration",
        ["--rotation-interval", "0s"],
        "argument --rotation-interval: expected a positive duration",
    ),
    (
        "serving certificate longer than a third of the CA",
        ["--ca-secret", "ns/ca", "--kubeconfig", "kc", "--ca-validity", "30d", "--cert-validity", "11d"],
        "--cert-validity: must be at most a third of --ca-validity",
    ),
    (
        "service not a DNS label",
        ["--ca-secret", "ns/ca", "--kubeconfig", "kc", "--service", "Web_hook"],
        "--service: 'Web_hook' is not a DNS label",
    ),
    (
        "configuration without a CA",
        ["--webhook-configuration", "pw", "--kubeconfig", "kc"],
        "--webhook-configuration: needs --ca-secret",
    ),
]


@pytest.mark.parametrize(("case", "args", "error"), CASES, ids=[c[0] for c in CASES])
def test_bad_rotation_flags_exit_2_with_one_line(
    case: str, args: list[str], error: str, tmp_path: Path
) -> None:
    (tmp_path / "kc").write_text(KUBECONFIG)
    cmd = [
        sys.executable,
        "-m",
        "webhook",
        "serve",
        "--bind",
        f"127.0.0.1:{free_port()}",
        "--cert-dir",
        "certs",
    ]
    done = subprocess.run([*cmd, *args], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"priority-webhook serve: error: {error}"), done.stderr
    assert not (tmp_path / "certs").exists(), "nothing is issued before the flags are known good"
