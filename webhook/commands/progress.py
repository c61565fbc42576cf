"""A progress line on standard error for long commands: on a terminal only, and only once a command has
run for about a second, so quick runs, pipes and scripts see nothing."""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

# Seconds before the first line; the environment variable exists for tests, which cannot wait that long.
DELAY = 1.0
DELAY_VARIABLE = "PRIORITY_WEBHOOK_PROGRESS_AFTER"
INTERVAL = 0.1  # at most ten rewrites a second
_CLEAR = "\r\x1b[K"


class Progress:
    """One status line, rewritten in place (`\\r`, erase line) and erased by `done()`."""

    def __init__(self, stream: TextIO | None = None, delay: float | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _is_terminal(self.stream)
        self.delay = delay if delay is not None else float(os.environ.get(DELAY_VARIABLE, DELAY))
        self.started = time.monotonic()
        self._last = 0.0
        self._phase = ""
        self._shown = False

    def update(self, text: str) -> None:
        """Show `text` ("phase: details"); a new phase is always shown, details at most every INTERVAL."""
        if not self.enabled:
            return
        now = time.monotonic()
        phase = text.split(":", 1)[0]
        if now - self.started < self.delay or (phase == self._phase and now - self._last < INTERVAL):
            return
        self._last, self._phase = now, phase
        self._shown = True
        self.stream.write(f"{_CLEAR}{text}")
        self.stream.flush()

    def done(self) -> None:
        """Erase the line, so that what follows (the answer, an error) starts on a clean line."""
        if self._shown:
            self.stream.write(_CLEAR)
            self.stream.flush()
            self._shown = False


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or not a real file
        return False
