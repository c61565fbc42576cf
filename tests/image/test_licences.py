"""The licence policy (testkit/sbom.py) on SBOM licence entries of each shape: what passes and what fails
(no engine needed; the image test applies it to the image's SBOM)."""

from __future__ import annotations

from typing import Any

import pytest

from testkit.sbom import ALLOWED, CLARIFIED, licence_verdict


def ident(spdx: str) -> dict[str, Any]:
    return {"license": {"id": spdx, "acknowledgement": "declared"}}


def named(name: str) -> dict[str, Any]:
    return {"license": {"name": name, "acknowledgement": "declared"}}


def expression(text: str) -> dict[str, Any]:
    return {"expression": text, "acknowledgement": "declared"}


CASES: list[tuple[str, list[dict[str, Any]], str | None]] = [
    ("apache", [ident("Apache-2.0")], None),
    ("mit with its classifier", [ident("MIT"), named("License :: OSI Approved :: MIT License")], None),
    ("either", [expression("Apache-2.0 OR BSD-3-Clause")], None),
    ("one allowed alternative", [expression("GPL-3.0-only OR MIT")], None),
    ("both required", [expression("Apache-2.0 AND BSD-2-Clause")], None),
    ("nested", [expression("MPL-2.0 AND (Apache-2.0 OR MIT)")], None),
    ("copyleft", [ident("GPL-3.0-only")], "not among the allowed"),
    ("copyleft required", [expression("MIT AND GPL-2.0-or-later")], "not among the allowed"),
    ("agpl and an allowed one", [ident("MIT"), ident("AGPL-3.0-only")], "not among the allowed"),
    ("nothing", [], "no licence declared"),
    ("a classifier only", [named("License :: OSI Approved :: BSD License")], "licence unknown"),
    ("free text", [named("Some custom licence")], "not named by SPDX"),
    ("not an expression", [expression("MIT OR OR Apache-2.0")], "not an SPDX expression"),
    ("unknown id", [expression("Made-Up-1.0")], "not an SPDX expression"),
    # Vague metadata, clarified by its licence file (the image test reads the file).
    ("jinja2", [named("License :: OSI Approved :: BSD License")], None),
]


@pytest.mark.parametrize(("name", "licences", "want"), CASES, ids=[case[0] for case in CASES])
def test_licence_verdicts(name: str, licences: list[dict[str, Any]], want: str | None) -> None:
    verdict = licence_verdict(name, licences)
    if want is None:
        assert verdict is None
    else:
        assert verdict is not None and want in verdict and verdict.startswith(f"{name}: ")


def test_every_exception_and_clarification_says_why() -> None:
    assert all(reason.strip() for reason in ALLOWED.values())
    exceptions = [spdx for spdx, reason in ALLOWED.items() if reason.startswith("EXCEPTION")]
    assert exceptions == ["MPL-2.0"]
    assert all(c.spdx in ALLOWED and c.phrase and c.why for c in CLARIFIED.values())
