"""Multiprocess metrics set-up: the directory `serve` makes, and the import order it relies on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.server import REPO
from webhook.server.gunicorn import METRICS_ENV, metrics_dir


def test_fresh_directory_inside_a_given_one_removed_at_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(METRICS_ENV, str(tmp_path))
    with metrics_dir() as path:
        assert path.parent == tmp_path and path.is_dir() and not any(path.iterdir())
        assert os.environ[METRICS_ENV] == str(path)
    assert not path.exists()
    assert os.environ[METRICS_ENV] == str(tmp_path)


def test_fresh_directory_in_tmp_and_variable_unset_after(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(METRICS_ENV, raising=False)
    with metrics_dir() as path:
        assert os.environ[METRICS_ENV] == str(path) and path.is_dir()
    assert not path.exists() and METRICS_ENV not in os.environ


def test_the_command_line_does_not_import_prometheus_client_before_serve_chooses_the_directory() -> None:
    """prometheus_client picks per-process or multiprocess storage at import: every command module is
    imported at start, so none may import it (or the server's metrics) at module level."""
    code = (
        "import sys; import webhook.cli; "
        "print(sorted(m for m in sys.modules if m.startswith(('prometheus_client', 'webhook.server.metrics', "
        "'webhook.server.app'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
