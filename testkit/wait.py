"""Wait on a condition with a deadline: the only way tests synchronise with background work."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal, TypeVar

T = TypeVar("T")


def wait_for(
    condition: Callable[[], T | Literal[False] | None],
    *,
    timeout: float = 10.0,
    interval: float = 0.01,
    what: str = "",
) -> T:
    """Poll `condition` until it returns a truthy value, and return that; fail with `what` when the deadline
    passes."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except AssertionError as err:
            last_error = err
        if time.monotonic() >= deadline:
            detail = f": {last_error}" if last_error else ""
            raise AssertionError(f"timed out after {timeout}s waiting for {what or condition!r}{detail}")
        time.sleep(interval)
