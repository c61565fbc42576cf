"""The image, built once per session by `scripts/image` without the layer cache (as on a fresh machine: the
reproducible-build test builds once more and compares), its arm64 twin, and the chart's workloads rendered
to run them with.

Where podman is missing the build installs it (as root, from Debian's packages), and so for the arm64
emulation; without a way to install them the image tests fail: they never skip for a missing tool.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import helm_python as helm
import pytest

from testkit.chart_rendering import CHART, Rendered, render
from testkit.image_engine import EMULATED_ARCH, HOST_ARCH, ArchImage, Built, EngineUnavailable, build
from testkit.server import free_port


def _build(tmp_path_factory: pytest.TempPathFactory, *args: str) -> Built:
    try:
        return build(*args, out_dir=tmp_path_factory.mktemp("image"))
    except EngineUnavailable as err:
        pytest.fail(f"the image tests need podman: {err}", pytrace=False)


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The host architecture's image, every step built again."""
    return _build(tmp_path_factory, "--no-cache")


@pytest.fixture(scope="session")
def built_emulated(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The other architecture's image (arm64 on an amd64 host), built and run under emulation."""
    return _build(tmp_path_factory, "--arch", EMULATED_ARCH)


@pytest.fixture(scope="session")
def image_tag(built: Built) -> str:
    """The reference `scripts/image` printed (the chart's repository and tag)."""
    return built.reference


@pytest.fixture(scope="session")
def image(built: Built) -> str:
    """The image this session built, by its ID: a build in another checkout may move the tag meanwhile."""
    return built.image_id(HOST_ARCH)


@pytest.fixture(scope="session", params=[HOST_ARCH, EMULATED_ARCH])
def any_image(request: pytest.FixtureRequest) -> ArchImage:
    """Each image: the host architecture's, and the other one (arm64 on amd64) run under emulation."""
    arch: str = request.param
    found: Built = request.getfixturevalue("built" if arch == HOST_ARCH else "built_emulated")
    return ArchImage(arch, found.image_id(arch), found)


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
