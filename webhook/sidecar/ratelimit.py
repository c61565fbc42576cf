"""Evictions-per-minute limit: a sliding one-minute window over the times of past evictions.

Pure: the caller passes the clock reading (monotonic seconds), so tests drive time directly. A sliding
window (rather than a token bucket) makes the promise exact: no 60-second span ever holds more than N.
"""

from __future__ import annotations

from collections import deque

WINDOW_SECONDS = 60.0


class EvictionRateLimit:
    def __init__(self, per_minute: int, window: float = WINDOW_SECONDS) -> None:
        if per_minute < 1:
            raise ValueError("per_minute must be at least 1")
        self.per_minute = per_minute
        self.window = window
        self._times: deque[float] = deque()

    def _expire(self, now: float) -> None:
        while self._times and self._times[0] <= now - self.window:
            self._times.popleft()

    def available(self, now: float) -> int:
        """How many evictions may start at `now`."""
        self._expire(now)
        return self.per_minute - len(self._times)

    def next_free(self, now: float) -> float:
        """When the next eviction may start (== now if one may start now)."""
        self._expire(now)
        if len(self._times) < self.per_minute:
            return now
        return self._times[0] + self.window

    def take(self, now: float) -> bool:
        """Spend one eviction at `now`; False (and nothing spent) if the window is full."""
        if self.available(now) <= 0:
            return False
        self._times.append(now)
        return True
