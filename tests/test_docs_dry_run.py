"""A server-side dry run stores nothing, namespaces included: every namespace an example manifest of a
`kubectl ... --dry-run=server -f FILE` line in the docs names is created for real earlier in its block
(`kubectl create namespace NS`), as a new user copying the block needs it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(?:sh|bash|console)?\n(.*?)^```", re.M | re.S)
DRY_RUN = re.compile(r"^kubectl (?:apply|create) .*--dry-run=server.* -f (\S+)", re.M)
CREATE_NS = re.compile(r"^kubectl create namespace (\S+)", re.M)


def dry_runs() -> list[tuple[str, str, str]]:
    """(doc, file, the block's text before the line) for every server dry run of a file in the docs."""
    found = []
    for doc in DOCS:
        for block in FENCE.findall(doc.read_text()):
            for match in DRY_RUN.finditer(block):
                found.append((doc.name, match.group(1), block[: match.start()]))
    return found


def namespaces(path: Path) -> set[str]:
    return {
        doc["metadata"]["namespace"]
        for doc in yaml.safe_load_all(path.read_text())
        if isinstance(doc, dict) and (doc.get("metadata") or {}).get("namespace")
    }


def test_the_docs_have_server_dry_runs() -> None:
    assert any(file == "examples/deploy.yaml" for _, file, _ in dry_runs())


@pytest.mark.parametrize(("doc", "file", "before"), dry_runs(), ids=lambda v: v if "\n" not in v else "")
def test_a_dry_run_finds_its_namespace(doc: str, file: str, before: str) -> None:
    created = set(CREATE_NS.findall(before)) | {"default"}
    missing = namespaces(ROOT / file) - created
    assert not missing, f"{doc}: {file} is in namespace(s) {sorted(missing)}, created nowhere before it"
