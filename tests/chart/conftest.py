"""Shared fixtures: the chart is loaded once, and each values set is rendered once per session."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import helm_python as helm
import pytest

from testkit.chart_rendering import CHART, Rendered, render, values_key


@pytest.fixture(scope="session")
def chart() -> Iterator[helm.Chart]:
    with helm.Chart.load(CHART) as loaded:
        yield loaded


@pytest.fixture(scope="session")
def rendered(chart: helm.Chart) -> Callable[[dict[str, Any] | None], Rendered]:
    cache: dict[str, Rendered] = {}

    def get(values: dict[str, Any] | None = None) -> Rendered:
        key = values_key(values or {})
        if key not in cache:
            cache[key] = render(chart, values)
        return cache[key]

    return get
