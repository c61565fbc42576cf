"""constraints.txt as the tests read it: each distribution's pinned version, and the environment marker that
limits where it is installed (orjson: only on the Pythons it has wheels for), as setup.cfg declares it."""

from __future__ import annotations

from typing import NamedTuple

from testkit.server import REPO


class Pin(NamedTuple):
    version: str
    marker: str  # "" where the distribution is installed on every Python


def normalized(name: str) -> str:
    return name.lower().replace("_", "-")


def pins() -> dict[str, Pin]:
    """Every pin of constraints.txt by its distribution's normalized name."""
    found = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            pin, _, marker = line.partition(";")
            name, _, version = pin.partition("==")
            found[normalized(name.strip())] = Pin(version.strip(), marker.strip())
    return found
