"""The image, built once per session by `scripts/image`, and the chart's workloads rendered to run it with.

Without a container engine (no podman, and no way to install one) the image tests are skipped with one
line on a workstation, and fail under `CI=true`: in CI the image must be built and run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import helm_python as helm
import pytest

from testkit.chart_rendering import CHART, Rendered, render
from testkit.image_engine import EngineUnavailable, build, in_ci, inspect
from testkit.server import free_port


@pytest.fixture(scope="session")
def image_tag() -> str:
    """The reference `scripts/image` printed (the chart's repository and tag)."""
    try:
        return build()
    except EngineUnavailable as err:
        if in_ci():
            pytest.fail(f"the image must be built and run in CI: {err}", pytrace=False)
        pytest.skip(f"image tests need a container engine: {err}")


@pytest.fixture(scope="session")
def image(image_tag: str) -> str:
    """The image this session built, by its ID: a build in another checkout may move the tag meanwhile."""
    return inspect(image_tag)["Id"]


@pytest.fixture(scope="session")
def ports() -> dict[str, int]:
    """Free ports for the workloads (the containers share the host's network, as with hostNetwork)."""
    return {"webhook": free_port(), "sidecar": free_port()}


@pytest.fixture(scope="session")
def chart_objects(ports: dict[str, int]) -> Iterator[Rendered]:
    """The chart rendered with its defaults, but for the ports the containers listen on."""
    values: dict[str, Any] = {
        "webhook": {"port": ports["webhook"]},
        "sidecar": {"metricsPort": ports["sidecar"]},
    }
    with helm.Chart.load(CHART) as chart:
        yield render(chart, values)
