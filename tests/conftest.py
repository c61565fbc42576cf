"""Suite-wide settings."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

# In CI the property tests run a fixed sequence of examples, so a run's verdict depends on the code alone;
# on a developer's machine they keep exploring new examples (and keep finding what CI would not).
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


ROOT = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """scripts/test runs the end-to-end and image suites on the host's Python only: in a Debian root it names
    their folders in PRIORITY_WEBHOOK_LEAVE_OUT, and their tests are deselected even where the command line
    names them (pytest's --ignore leaves out only what it finds walking a folder)."""
    folders = [ROOT / name for name in os.environ.get("PRIORITY_WEBHOOK_LEAVE_OUT", "").split()]
    if not folders:
        return
    kept, left_out = [], []
    for item in items:
        (left_out if any(folder in item.path.parents for folder in folders) else kept).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The run's counts on one line naming the interpreter: `scripts/test` runs the suite on each Python
    version in PYTHONS and repeats these lines at the end."""
    stats = terminalreporter.stats
    passed = len(stats.get("passed", []))
    failed = len(stats.get("failed", [])) + len(stats.get("error", []))
    skipped = len(stats.get("skipped", []))
    line = f"python {sys.version_info.major}.{sys.version_info.minor}: {passed} passed, {failed} failed"
    terminalreporter.write_line(line + (f", {skipped} skipped" if skipped else ""))
