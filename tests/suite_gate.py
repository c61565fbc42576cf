"""The suites that need parts a machine may lack (a node, upstream's e2e.test): left out at collection with one
summary line naming what is missing, or, under their `*_REQUIRED=1` variable, stopped with that line."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest


def required(env: str) -> bool:
    """`ENV=1` (or true, yes): a missing part is an error rather than a line in the summary."""
    return os.environ.get(env, "").lower() in ("1", "true", "yes")


def leave_out(
    config: pytest.Config,
    items: list[pytest.Item],
    where: Path,
    unavailable: Callable[[], str | None],
    *,
    env: str,
    what: str,
) -> str | None:
    """Without what the suite in `where` (a folder or one module) needs (`unavailable()`: what is missing and
    where it was looked for, asked only where the suite's tests were collected), take its tests out of `items`
    and return its summary line, `WHAT: not run: REASON`; under `ENV=1` stop the run with that line instead.
    None where it runs."""
    ours = [item for item in items if item.path == where or where in item.path.parents]
    reason = unavailable() if ours else None
    if reason is None:
        return None
    line = f"{what}: not run: {reason}"
    if required(env):
        raise pytest.UsageError(f"{what} tests are required ({env}=1) but {line}")
    gone = set(ours)
    items[:] = [item for item in items if item not in gone]
    config.hook.pytest_deselected(items=ours)
    return line
