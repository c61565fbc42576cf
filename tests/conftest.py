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


_LEAVE_OUT = pytest.StashKey[list[Path]]()


def pytest_configure(config: pytest.Config) -> None:
    """scripts/test runs the end-to-end, image and node suites on the host's Python only: in a Debian root it names
    their folders in PRIORITY_WEBHOOK_LEAVE_OUT. Read once and taken out of the environment: a pytest that a
    test starts itself (tests/test_envtest_discovery.py collects tests/e2e) is not told to leave them out."""
    names = os.environ.pop("PRIORITY_WEBHOOK_LEAVE_OUT", "").split()
    config.stash[_LEAVE_OUT] = [ROOT / name for name in names]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the tests of the folders left out, even where the command line names them (pytest's --ignore
    leaves out only what it finds walking a folder)."""
    folders = config.stash[_LEAVE_OUT]
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
