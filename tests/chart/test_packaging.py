"""Chart and package hygiene: one version, a generated chart README, Artifact Hub metadata, the licence,
and pinned dependencies that cover what setup.cfg declares."""

from __future__ import annotations

import configparser
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import helm_python as helm
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

from webhook import __version__

ROOT = Path(__file__).resolve().parents[2]
CHART_DIR = ROOT / "charts" / "priority-webhook"


def chart_yaml() -> dict:
    return yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())


def setup_cfg() -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    return parser


def test_one_version_everywhere() -> None:
    """webhook.__version__ is the source: the wheel reads it, the chart and the image tag follow it."""
    assert setup_cfg()["metadata"]["version"].strip() == "attr: webhook.__version__"
    assert importlib.metadata.version("priority-webhook") == __version__
    chart = chart_yaml()
    assert chart["version"] == chart["appVersion"] == __version__
    images = yaml.safe_load(chart["annotations"]["artifacthub.io/images"])
    assert [image["image"] for image in images] == [f"priority-webhook:{__version__}"]
    assert not re.search(r"\b\d+\.\d+\.\d+\b", (ROOT / "Dockerfile").read_text()), "no version typed in"


def test_chart_readme_is_generated_from_the_values_comments() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "chart_readme.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    readme = (CHART_DIR / "README.md").read_text()
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    for key in values:
        assert f"| `{key}" in readme, f"{key} is not in the values table"
    assert "| `sidecar.nodeRestriction` | bool | `true` | A ValidatingAdmissionPolicy" in readme


def test_helm_show_readme_is_not_empty() -> None:
    """`helm show readme` prints the chart file named README.md: it must be packaged (not .helmignored)."""
    with helm.Chart.load(CHART_DIR) as chart:
        names = {f["name"] if isinstance(f, dict) else getattr(f, "name", str(f)) for f in chart.files}
    assert "README.md" in names, names


def test_artifact_hub_metadata() -> None:
    chart = chart_yaml()
    assert chart["icon"].startswith("https://") and chart["icon"].endswith(
        "/charts/priority-webhook/icon.svg"
    )
    assert (CHART_DIR / "icon.svg").read_text().startswith("<svg")
    assert chart["sources"] and chart["maintainers"] and chart["home"].startswith("https://")
    annotations = chart["annotations"]
    assert annotations["artifacthub.io/license"] == "Apache-2.0"
    for key in ("artifacthub.io/links", "artifacthub.io/changes", "artifacthub.io/images"):
        assert isinstance(yaml.safe_load(annotations[key]), list), key


def test_licence_in_the_repository_the_wheel_and_the_image() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert (
        "Apache License" in text
        and "Version 2.0, January 2004" in text
        and "END OF TERMS AND CONDITIONS" in text
    )
    metadata = setup_cfg()["metadata"]
    assert metadata["license"] == "Apache-2.0" and metadata["license_files"].split() == ["LICENSE"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^COPY .*\bLICENSE\b", dockerfile, re.MULTILINE)
    assert "cp LICENSE /opt/priority-webhook/LICENSE" in dockerfile, "inside what the runtime stage copies"
    assert "!LICENSE" in (ROOT / ".dockerignore").read_text().splitlines()


def test_constraints_pin_every_declared_dependency_within_its_floor() -> None:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name.lower().replace("_", "-")] = Version(version)
    options = setup_cfg()["options"]
    declared = [Requirement(r) for r in options["install_requires"].split("\n") if r.strip()]
    test_extra = setup_cfg()["options.extras_require"]["test"]
    declared += [Requirement(r) for r in test_extra.split("\n") if r.strip()]
    for requirement in declared:
        name = requirement.name.lower().replace("_", "-")
        assert name in pins, f"{name} is not pinned in constraints.txt"
        assert pins[name] in requirement.specifier, f"{name}=={pins[name]} outside {requirement.specifier}"


def test_imported_third_party_modules_are_declared() -> None:
    """urllib3 and werkzeug are imported directly, so they are declared, not left to flask/kubernetes."""
    names = {
        Requirement(r).name.lower()
        for r in setup_cfg()["options"]["install_requires"].split("\n")
        if r.strip()
    }
    imported = set()
    for path in (ROOT / "webhook").rglob("*.py"):
        imported |= set(
            re.findall(r"^\s*(?:from|import) (urllib3|werkzeug)\b", path.read_text(), re.MULTILINE)
        )
    assert imported == {"urllib3", "werkzeug"}
    assert imported <= names


def test_dependencies_install_before_the_source_is_copied() -> None:
    """A change to the source alone must not reinstall the dependencies (docker layer cache)."""
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    install = next(i for i, line in enumerate(lines) if "-c constraints.txt -r requirements.txt" in line)
    copy_source = next(i for i, line in enumerate(lines) if line.startswith("COPY webhook"))
    copy_cfg = next(i for i, line in enumerate(lines) if line.startswith("COPY setup.cfg constraints.txt"))
    assert copy_cfg < install < copy_source
    assert re.search(r"install --no-deps (--no-index )?/wheels/", "\n".join(lines[copy_source:]))
