"""What a test process started and must stop however it exits (context managers, `atexit`, SIGTERM):
control planes and hollow kubelets, stopped newest first (a kubelet before the API server it reports to).
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
from collections.abc import Callable
from typing import Any


class Registry:
    """Things to stop, in the order they were started."""

    def __init__(self) -> None:
        self._stops: dict[int, Callable[[], None]] = {}  # id(thing) -> how to stop it
        self._lock = threading.Lock()

    def track(self, thing: object, stop: Callable[[], None]) -> None:
        """Stop `thing` with `stop` in `stop_all()` unless `forget(thing)` is called first."""
        with self._lock:
            self._stops[id(thing)] = stop

    def forget(self, thing: object) -> None:
        with self._lock:
            self._stops.pop(id(thing), None)

    def stop_all(self) -> None:
        with self._lock:
            stops = list(self._stops.values())[::-1]
            self._stops.clear()
        for stop in stops:
            stop()


_PROCESS = Registry()  # this test process's: stopped at exit and on SIGTERM


def track(thing: object, stop: Callable[[], None]) -> None:
    _PROCESS.track(thing, stop)
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) in (
        signal.SIG_DFL,
        None,
    ):
        signal.signal(signal.SIGTERM, _on_sigterm)


forget = _PROCESS.forget


def _on_sigterm(signum: int, frame: Any) -> None:
    _PROCESS.stop_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


atexit.register(_PROCESS.stop_all)
