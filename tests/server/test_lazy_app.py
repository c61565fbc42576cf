"""The serving worker's WSGI app is built on its first request, once, however many pool threads ask at once
(webhook.server.wsgi.LazyApp): building it twice would load the web framework's routes twice for nothing,
and a request must never see a half-built app."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from webhook.server.wsgi import LazyApp, call_wsgi


def _environ(path: str) -> dict[str, Any]:
    return {"REQUEST_METHOD": "GET", "PATH_INFO": path}


def test_nothing_is_built_until_a_request_and_then_once_for_all_threads() -> None:
    builds: list[int] = []
    release = threading.Event()

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [environ["PATH_INFO"].encode()]

    def build() -> Any:
        builds.append(threading.get_ident())
        release.wait(5)  # every other thread arrives while this one builds
        return app

    lazy = LazyApp(build)
    assert not lazy.built and builds == []
    with ThreadPoolExecutor(8) as pool:
        answers = [pool.submit(call_wsgi, lazy, _environ(f"/{i}")) for i in range(8)]
        release.set()
        bodies = sorted(future.result(timeout=10)[2] for future in answers)
    assert len(builds) == 1 and lazy.built
    assert bodies == sorted(f"/{i}".encode() for i in range(8))


def test_a_failed_build_is_tried_again_by_the_next_request() -> None:
    attempts: list[int] = []

    def build() -> Any:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("first build fails")
        return lambda environ, start_response: (start_response("204 No Content", []), [b""])[1]

    lazy = LazyApp(build)
    with pytest.raises(RuntimeError):  # reaches the caller: the connection answers it 500
        call_wsgi(lazy, _environ("/"))
    assert not lazy.built
    assert call_wsgi(lazy, _environ("/"))[0] == "204 No Content"
    assert len(attempts) == 2
