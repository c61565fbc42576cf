"""Chart and package hygiene: one version, the chart linted and packaged by Helm's own actions (helm-python-sdk:
`helm lint`, `helm package`) into an archive whose digest is the same each time, a generated chart README,
Artifact Hub metadata, the licence, and pinned dependencies that cover what setup.cfg declares."""

from __future__ import annotations

import configparser
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

from testkit import constraints
from testkit.chart_rendering import KUBE_VERSION, NAMESPACE
from webhook import __version__

from .scenarios import SCENARIOS

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


@pytest.mark.parametrize("values", SCENARIOS.values(), ids=list(SCENARIOS))
def test_helm_lint_finds_nothing(values: dict[str, Any]) -> None:
    """`helm lint --strict` (warnings count) on the oldest Kubernetes the chart supports: not one finding,
    informational ones included, with each values set the chart offers."""
    report = helm.lint(CHART_DIR, values, strict=True, namespace=NAMESPACE, kube_version=f"v{KUBE_VERSION}.0")
    assert report["total_charts_linted"] == 1
    assert report["messages"] == [] and report["errors"] == [], report


def test_helm_lint_reports_a_broken_chart(tmp_path: Path) -> None:
    """The lint above can fail: the same chart with a version that is not SemVer is an error."""
    broken = Path(shutil.copytree(CHART_DIR, tmp_path / "priority-webhook"))
    chart = broken / "Chart.yaml"
    chart.write_text(chart.read_text().replace(f"version: {__version__}", "version: next", 1))
    report = helm.lint(broken, strict=True)
    assert any(m["severity"] == 3 and "version 'next'" in m["error"] for m in report["messages"]), report


def package(chart: Path, destination: Path) -> Path:
    destination.mkdir()
    return Path(helm.package(chart, destination=destination))


def test_helm_package_carries_the_package_version_and_every_chart_file(tmp_path: Path) -> None:
    archive = package(CHART_DIR, tmp_path / "out")
    assert archive.name == f"priority-webhook-{__version__}.tgz"
    with helm.Chart.load(archive) as packaged:
        assert packaged.metadata["version"] == packaged.metadata["appVersion"] == __version__
    with helm.Chart.load(CHART_DIR) as loaded:  # the loader applies .helmignore, as packaging does
        expected = {"Chart.yaml", "values.yaml", "values.schema.json"}
        expected |= {f["name"] for f in loaded.files} | {t["name"] for t in loaded.templates}
    with tarfile.open(archive) as tar:
        members = {m.name.removeprefix("priority-webhook/") for m in tar.getmembers() if m.isfile()}
    assert members == expected
    assert {"README.md", "files/hooks/wait_ready.py", "templates/tests/test-priority.yaml"} <= members
    assert "icon.svg" not in members  # .helmignored: Artifact Hub reads the icon from its URL


def test_helm_package_digest_is_the_same_each_time(tmp_path: Path) -> None:
    """Two packagings of the checkout give one archive, byte for byte. Helm records each file's modification
    time: two copies of the chart whose files carry the same times (the commit's, for a release built from
    a clone) package to that same digest too, wherever and whenever they are copied."""
    first = package(CHART_DIR, tmp_path / "first")
    second = package(CHART_DIR, tmp_path / "second")
    assert helm.digest(first) == helm.digest(second)
    assert first.read_bytes() == second.read_bytes()
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", helm.digest(first))

    commit_time = 1_700_000_000
    digests = set()
    for name in ("a", "b"):
        copy = Path(shutil.copytree(CHART_DIR, tmp_path / name / "priority-webhook"))
        for path in [copy, *copy.rglob("*")]:
            os.utime(path, (commit_time, commit_time))
        digests.add(helm.digest(package(copy, tmp_path / name / "out")))
    assert len(digests) == 1, digests
    os.utime(copy / "values.yaml", (commit_time + 1, commit_time + 1))
    assert helm.digest(package(copy, tmp_path / "touched")) not in digests  # the times are part of it


def test_classifiers_name_the_pythons_the_suite_runs_on() -> None:
    """What scripts/test runs the suite on in CI, and no other: the oldest Python we support (python_requires'
    floor: CI's host Python, .venv) and the ones it adds in Debian roots. The image runs one of them."""
    metadata, options = setup_cfg()["metadata"], setup_cfg()["options"]
    listed = set(re.findall(r"Programming Language :: Python :: (3\.\d+)", metadata["classifiers"]))
    floor = re.fullmatch(r">=(3\.\d+)", options["python_requires"].strip())
    added = re.search(r"PYTHONS:-\$host ((?:3\.\d+ ?)+)\}", (ROOT / "scripts" / "test").read_text())
    image = re.search(r"^ARG PYTHON_IMAGE=python:(3\.\d+)-", (ROOT / "Dockerfile").read_text(), re.M)
    assert floor and added and image
    assert listed == {floor.group(1), *added.group(1).split()}
    assert image.group(1) in listed


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
    pins = constraints.pins()
    options = setup_cfg()["options"]
    declared = [Requirement(r) for r in options["install_requires"].split("\n") if r.strip()]
    test_extra = setup_cfg()["options.extras_require"]["test"]
    declared += [Requirement(r) for r in test_extra.split("\n") if r.strip()]
    for requirement in declared:
        name = requirement.name.lower().replace("_", "-")
        assert name in pins, f"{name} is not pinned in constraints.txt"
        pin = pins[name]
        assert Version(pin.version) in requirement.specifier, (
            f"{name}=={pin.version} outside {requirement.specifier}"
        )
        # Installed only on some Pythons (orjson where it has wheels): pinned there alone, with the same marker.
        assert pin.marker == str(requirement.marker or ""), (
            f"{name}: marker {pin.marker!r} in constraints.txt"
        )


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
