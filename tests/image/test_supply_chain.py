"""What an operator's security team asks of the image: what is in it (the SBOM, beside the build and inside
the image), under which licences, and whether it is the image built from this commit (two builds without the
layer cache give one image ID); for both architectures, and both in one manifest list."""

from __future__ import annotations

import configparser
import json
import re
import subprocess
from datetime import UTC
from typing import Any

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from testkit import sbom
from testkit.image_engine import (
    EMULATED_ARCH,
    HOST_ARCH,
    ROOT,
    ArchImage,
    Built,
    build,
    inspect,
    podman,
)

pytestmark = pytest.mark.timeout(1800)

# Run inside the image as its user: every Python environment's `pip list` (the base interpreter's pip, for
# itself and for the virtual environment) and dpkg's list of packages.
LISTING = r"""
home=$(sed -n 's/^home *= *//p' /opt/priority-webhook/pyvenv.cfg)
echo "$home/python3" "$("$home/python3" -c 'import sys; print(sys.prefix)')"
"$home/python3" -m pip list --format=json
"$home/python3" -m pip --python /opt/priority-webhook/bin/python list --format=json
dpkg-query -W -f '${Package}\t${Version}\t${Architecture}\n'
"""


def run_in(image: str, *command: str, timeout: float = 300) -> str:
    """A command's output in the image, as its user, with a read-only root and no network."""
    done = podman(
        "run",
        "--rm",
        "--network=none",
        "--read-only",
        f"--entrypoint={command[0]}",
        image,
        *command[1:],
        timeout=timeout,
    )
    return done.stdout


# A distribution's licence files, as its metadata lists them.
LICENCE_TEXT = """
import importlib.metadata, sys
files = importlib.metadata.distribution(sys.argv[1]).files or []
print("\\n".join(f.read_text() for f in files if "LICEN" in f.name.upper()))
"""


def test_the_sboms_are_valid_cyclonedx_and_name_the_image(any_image: ArchImage) -> None:
    """Beside the build and inside the image, valid against CycloneDX 1.6's schema (the library's own); the
    one beside it names the image's reference, ID and architecture, and lists what the one inside does."""
    validator = JsonStrictValidator(SchemaVersion.V1_6)
    outside_text = any_image.built.sbom_path(any_image.arch).read_text()
    inside_text = run_in(any_image.id, "cat", sbom.IN_IMAGE)
    for where, text in (("beside the build", outside_text), ("in the image", inside_text)):
        assert validator.validate_str(text) is None, where
    outside, inside = json.loads(outside_text), json.loads(inside_text)
    described = sbom.properties(outside["metadata"]["component"])
    assert described[sbom.IMAGE_REFERENCE] == any_image.built.reference
    assert described[sbom.IMAGE_ID] == any_image.id == "sha256:" + inspect(any_image.id)["Id"]
    assert described[sbom.IMAGE_ARCH] == any_image.arch == inspect(any_image.id)["Architecture"]
    assert outside["components"] == inside["components"]
    for document in (outside, inside):
        assert re.fullmatch(r"urn:uuid:[0-9a-f-]{36}", document["serialNumber"])
    assert outside["serialNumber"] != inside["serialNumber"], "derived from the content, which differs"


def test_the_sbom_lists_what_pip_and_dpkg_report(any_image: ArchImage) -> None:
    """Every Python distribution of each environment (the image's and its base interpreter's) with its
    version, and every Debian package with its version and architecture: no more, no fewer."""
    first, system, venv, packages = run_in(any_image.id, "sh", "-c", LISTING).split("\n", 3)
    _, base_prefix = first.split()
    reported: dict[str, set[tuple[str, str]]] = {
        base_prefix: {(sbom.normalized(d["name"]), d["version"]) for d in json.loads(system)},
        "/opt/priority-webhook": {(sbom.normalized(d["name"]), d["version"]) for d in json.loads(venv)},
    }
    document = sbom.load(any_image.built.sbom_path(any_image.arch))
    listed: dict[str, set[tuple[str, str]]] = {}
    for component in sbom.python_components(document):
        environment = sbom.properties(component)[sbom.ENVIRONMENT]
        listed.setdefault(environment, set()).add((sbom.normalized(component["name"]), component["version"]))
    assert listed == reported
    assert ("priority-webhook", _package_version()) in listed["/opt/priority-webhook"]
    # Our own distribution with the licence setup.cfg declares, as every other one has its own.
    (own,) = [c for c in sbom.python_components(document) if c["name"] == "priority-webhook"]
    assert [entry["license"].get("id") for entry in own["licenses"]] == [_declared_licence()]
    dpkg = {tuple(line.split("\t")) for line in packages.splitlines() if line}
    debian = {
        (c["name"], c["version"], dict(q.split("=") for q in c["purl"].split("?")[1].split("&"))["arch"])
        for c in sbom.debian_components(document)
    }
    assert debian == dpkg
    assert {arch for _, _, arch in dpkg} <= {any_image.arch, "all"}


def test_every_python_distribution_may_ship_with_an_apache_work(built: Built) -> None:
    """Each Python distribution's licence is named, and allowed (testkit/sbom.py says why each is); where the
    metadata is vague, the clarification is checked against the distribution's licence file in the image."""
    document = sbom.load(built.sbom_path(HOST_ARCH))
    components = sbom.python_components(document)
    verdicts = [sbom.licence_verdict(c["name"], c.get("licenses", [])) for c in components]
    assert [v for v in verdicts if v] == []
    clarified = {sbom.normalized(c["name"]) for c in components} & set(sbom.CLARIFIED)
    assert clarified == set(sbom.CLARIFIED), "a clarification no distribution needs any more: remove it"
    for name in sorted(clarified):
        text = run_in(built.image_id(HOST_ARCH), "python", "-c", LICENCE_TEXT, name)
        assert sbom.CLARIFIED[name].phrase in " ".join(text.split()), name


def test_every_debian_package_names_its_licences(built: Built) -> None:
    """As its copyright file declares them; a free-form file is named instead, and it is in the image."""
    document = sbom.load(built.sbom_path(HOST_ARCH))
    packages = sbom.debian_components(document)
    assert packages
    unnamed = [c["name"] for c in packages if not c.get("licenses")]
    assert unnamed == []
    free_form = sorted(
        entry["license"]["name"].removeprefix(sbom.FREE_FORM)
        for c in packages
        for entry in c["licenses"]
        if entry["license"].get("name", "").startswith(sbom.FREE_FORM)
    )
    assert len(free_form) < len(packages), "most of Debian's copyright files are machine-readable"
    present = run_in(built.image_id(HOST_ARCH), "ls", *free_form).split()
    assert present == free_form


def test_two_builds_without_the_cache_are_one_image(
    built: Built, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The session's build and one more, each with every step built again: one image ID, byte-identical
    SBOMs, and the image dated by the commit."""
    again = build("--no-cache", out_dir=tmp_path_factory.mktemp("again"))
    assert again.image_id(HOST_ARCH) == built.image_id(HOST_ARCH)
    assert again.sbom_path(HOST_ARCH).read_bytes() == built.sbom_path(HOST_ARCH).read_bytes()
    committed = subprocess.run(
        ["git", "log", "-1", "--format=%cI"], capture_output=True, text=True, cwd=ROOT, check=False
    )
    if committed.returncode == 0:
        created = inspect(built.image_id(HOST_ARCH))["Created"]
        assert _utc(created) == _utc(committed.stdout.strip())


def test_both_architectures_in_one_manifest_list(
    built: Built, built_emulated: Built, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """`--arch all` names a manifest list of the two images, the same ones the single builds made."""
    together = build(
        "--arch",
        "all",
        out_dir=tmp_path_factory.mktemp("all"),
        env={"IMAGE": "localhost/priority-webhook-manifest-test"},
    )
    try:
        assert together.reference == f"localhost/priority-webhook-manifest-test:{_package_version()}"
        listed: dict[str, Any] = json.loads(podman("manifest", "inspect", together.reference).stdout)
        platforms = {m["platform"]["architecture"]: m["digest"] for m in listed["manifests"]}
        assert set(platforms) == {HOST_ARCH, EMULATED_ARCH}
        for arch, single in ((HOST_ARCH, built), (EMULATED_ARCH, built_emulated)):
            assert together.image_id(arch) == single.image_id(arch), arch
            assert inspect(together.image_id(arch))["Digest"] == platforms[arch], arch
    finally:
        podman("manifest", "rm", together.reference, check=False)
        for arch in (HOST_ARCH, EMULATED_ARCH):
            podman("untag", together.image_id(arch), f"{together.reference}-{arch}", check=False)


def _utc(stamp: str) -> str:
    from datetime import datetime

    stamp = re.sub(r"\.\d+", "", stamp).replace("Z", "+00:00")
    return datetime.fromisoformat(stamp).astimezone(UTC).isoformat()


def _declared_licence() -> str:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return config["metadata"]["license"]


def _package_version() -> str:
    from webhook import __version__

    return __version__
