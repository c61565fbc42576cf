"""The two sizes of every fuzz target: a small sample in the default suite, a long run under `-m fuzz`."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

_COMMON = {
    "deadline": None,
    "database": None,  # runs are reproducible from the printed seed; nothing is written to the tree
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.large_base_example,
        HealthCheck.function_scoped_fixture,
    ],
}

SAMPLE = settings(max_examples=60, **_COMMON)


def fuzz(examples: int) -> settings:
    return settings(max_examples=examples, **_COMMON)
