"""The real server shared by the server fuzz tests and their regressions (one subprocess per module)."""

from __future__ import annotations

import pytest

from testkit.server import webhook_server
from tests.fuzz.oracle import CLASSES_YAML


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz-server")
    classes = tmp / "classes.yaml"
    classes.write_text(CLASSES_YAML)
    with webhook_server(tmp, "--classes", str(classes), "--workers", "2") as running:
        yield running
