"""The README stays a short front page: the two quick-start commands and a link to every page of docs/."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_is_short_and_links_every_docs_page() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    linked = set(re.findall(r"\]\((docs/[^)#]+\.md)\)", readme))
    pages = {str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")}
    assert pages and pages == linked


def test_readme_quick_start_names_both_scripts_and_they_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    for script in ("scripts/serve", "scripts/test"):
        assert script in readme
        assert (ROOT / script).is_file()


def test_every_relative_link_in_the_docs_resolves() -> None:
    for page in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.name} links to missing {target}"
