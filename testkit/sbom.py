"""The image's SBOM as the tests read it, and the licence policy its Python distributions are held to.

The policy: every Python distribution in the image (ours, its dependencies, the base interpreter's own) is
under licences that may be shipped with an Apache-2.0 work. A licence is named by an SPDX id or expression
in the SBOM; a distribution whose metadata names none precisely (only a trove classifier such as "BSD
License") is accepted only through CLARIFIED, which says what its licence file in the image says, and the
image test reads that file to check.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from license_expression import ExpressionError, get_spdx_licensing

# SPDX ids that may be shipped in an Apache-2.0 work, each with why.
ALLOWED: Mapping[str, str] = {
    "Apache-2.0": "the project's own licence",
    "MIT": "permissive, notice only",
    "MIT-0": "permissive, not even a notice",
    "BSD-2-Clause": "permissive, notice only",
    "BSD-3-Clause": "permissive, notice and no endorsement",
    "ISC": "permissive, notice only (MIT-like)",
    "PSF-2.0": "permissive (the Python Software Foundation's licence)",
    # The one exception: a weak, file-level copyleft. Shipping its files unmodified beside Apache-2.0 code
    # (the Apache Software Foundation's category B) obliges only to keep them available under MPL-2.0,
    # which the unmodified wheel does; certifi's CA bundle and orjson carry it.
    "MPL-2.0": "EXCEPTION: weak file-level copyleft, shipped unmodified (ASF category B)",
}


@dataclass(frozen=True)
class Clarified:
    """A distribution whose metadata names its licence only vaguely: what its licence file says."""

    spdx: str
    phrase: str  # a sentence of that licence's text, found in the distribution's licence file
    why: str


CLARIFIED: Mapping[str, Clarified] = {
    "jinja2": Clarified(
        "BSD-3-Clause",
        "Neither the name of the copyright holder nor the names of its",
        "its metadata names only the trove classifier 'BSD License'; LICENSE.txt is the 3-clause text",
    ),
    "itsdangerous": Clarified(
        "BSD-3-Clause",
        "Neither the name of the copyright holder nor the names of its",
        "its metadata names only the trove classifier 'BSD License'; LICENSE.txt is the 3-clause text",
    ),
}

CLASSIFIER = "License :: "
ENVIRONMENT = "priority-webhook:python-environment"
IMAGE_ID = "priority-webhook:image-id"
IMAGE_REFERENCE = "priority-webhook:image-reference"
IMAGE_ARCH = "priority-webhook:image-architecture"
IN_IMAGE = "/opt/priority-webhook/sbom.cdx.json"
# How scripts/sbom.py names the licence of a Debian package whose copyright file is free-form: then its path.
FREE_FORM = "free-form copyright file: "


def normalized(name: str) -> str:
    """A distribution's name as pip compares them (PEP 503)."""
    return name.lower().replace("_", "-").replace(".", "-")


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def properties(item: Mapping[str, Any]) -> dict[str, str]:
    return {p["name"]: p["value"] for p in item.get("properties", [])}


def python_components(sbom: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [c for c in sbom["components"] if ENVIRONMENT in properties(c)]


def debian_components(sbom: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [c for c in sbom["components"] if c.get("purl", "").startswith("pkg:deb/")]


def licence_verdict(name: str, licences: Iterable[Mapping[str, Any]]) -> str | None:
    """None when the distribution may ship with an Apache-2.0 work; else why not, in one line.

    An SBOM entry is an SPDX expression or a list of licences. Several licences in a list are the ones its
    metadata declares in different fields (the licence field and the classifiers), all of which apply;
    classifier names are vaguer restatements and count only when nothing else names the licence."""
    entries = list(licences)
    if not entries:
        return f"{name}: no licence declared"
    spdx = get_spdx_licensing()
    expressions: list[str] = []
    vague: list[str] = []
    for entry in entries:
        if "expression" in entry:
            expressions.append(entry["expression"])
        elif "id" in entry["license"]:
            expressions.append(entry["license"]["id"])
        else:
            vague.append(entry["license"]["name"])
    unexplained = [n for n in vague if not n.startswith(CLASSIFIER)]
    if unexplained:
        return f"{name}: licence not named by SPDX: {'; '.join(unexplained)}"
    if not expressions:
        clarified = CLARIFIED.get(normalized(name))
        if clarified is None:
            return f"{name}: licence unknown (only {'; '.join(vague)})"
        expressions.append(clarified.spdx)
    for text in expressions:
        try:
            parsed = spdx.parse(text, validate=True, strict=True)
        except ExpressionError as err:
            return f"{name}: {text!r} is not an SPDX expression ({err})"
        if not any(set(option.split()) <= set(ALLOWED) for option in _options(spdx, parsed)):
            return f"{name}: {text} is not among the allowed licences ({', '.join(sorted(ALLOWED))})"
    return None


def _options(spdx: Any, parsed: Any) -> list[str]:
    """The expression's alternatives, each the licences it requires together (disjunctive normal form)."""
    dnf = spdx.dnf(parsed)
    alternatives = dnf.args if type(dnf).__name__ == "OR" else [dnf]
    return [" ".join(sorted(str(symbol) for symbol in alt.symbols)) for alt in alternatives]
