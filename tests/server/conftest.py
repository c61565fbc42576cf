"""Fixtures shared by the server's tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from testkit.server import EXAMPLE_CLASSES
from webhook.files import tls
from webhook.server.metrics import MULTIPROC_ENV
from webhook.server.store import StoreSpec, open_store


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA and a serving certificate for localhost (webhook.files.tls's file names)."""
    folder = tmp_path_factory.mktemp("certs")
    tls.write_certificates(folder)
    return folder


@pytest.fixture()
def single_process_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    """Metrics in this process's default registry, where the tests read them."""
    monkeypatch.delenv(MULTIPROC_ENV, raising=False)


@pytest.fixture(scope="module")
def store() -> Any:
    """The classes of examples/priorityclasses.yaml with the built-in ones, as `serve --classes` has them."""
    return open_store(StoreSpec(classes=(str(EXAMPLE_CLASSES),)))
