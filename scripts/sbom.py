"""The image's CycloneDX SBOM, made with the CycloneDX project's tools (cyclonedx-bom, cyclonedx-python-lib).

  sbom.py contents --environment /opt/priority-webhook --tools /opt/build/bin --output FILE
      (in the Dockerfile's build stage) what the image holds: every Python distribution of the environment
      and of the base's interpreter (cyclonedx-py reads their metadata, licences included), and every Debian
      package of the base (dpkg-query; the licences its copyright file declares, read with python-debian).
  sbom.py image --contents FILE --reference REF --id ID --arch ARCH --output FILE
      (in scripts/image) the same, described as the image with that reference and ID.

Both are reproducible: no time but SOURCE_DATE_EPOCH's, and a serial number derived from the content.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from cyclonedx.model import Property
from cyclonedx.model.bom import Bom, BomMetaData
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.model.license import DisjunctiveLicense, LicenseAcknowledgement
from cyclonedx.output import make_outputter
from cyclonedx.schema import OutputFormat, SchemaVersion
from cyclonedx.spdx import fixup_id
from packageurl import PackageURL

SCHEMA = SchemaVersion.V1_6
# Our own property names (CycloneDX reserves `cdx:`).
ENVIRONMENT = "priority-webhook:python-environment"
IMAGE_ID = "priority-webhook:image-id"
IMAGE_REFERENCE = "priority-webhook:image-reference"
IMAGE_ARCH = "priority-webhook:image-architecture"
# The licence name of a Debian package whose copyright file is free-form, followed by the file's path.
FREE_FORM = "free-form copyright file: "


def source_date() -> datetime | None:
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    return datetime.fromtimestamp(int(epoch), tz=UTC) if epoch else None


def python_components(tools: Path, interpreter: Path) -> Bom:
    """cyclonedx-py's SBOM of one interpreter's distributions, each marked with its environment."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "python.cdx.json"
        subprocess.run(
            [
                *(str(tools / "cyclonedx-py"), "environment", "--output-reproducible"),
                *("--sv", SCHEMA.to_version(), "--of", "JSON", "-o", str(out), str(interpreter)),
            ],
            check=True,
        )
        bom = Bom.from_json(json.loads(out.read_text()))
    assert bom is not None
    prefix = subprocess.run(
        [str(interpreter), "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True, check=True
    ).stdout.strip()
    for component in bom.components:
        component.properties.add(Property(name=ENVIRONMENT, value=prefix))
    return bom


def base_interpreter(environment: Path) -> Path:
    """The interpreter the virtual environment was made from: the base image's."""
    for line in (environment / "pyvenv.cfg").read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home":
            return Path(value.strip()) / "python3"
    raise SystemExit(f"sbom: no `home` in {environment / 'pyvenv.cfg'}")


def debian_release() -> str:
    for line in Path("/etc/os-release").read_text().splitlines():
        key, _, value = line.partition("=")
        if key == "VERSION_ID":
            return value.strip('"')
    return "unknown"


def copyright_licences(path: Path) -> list[str]:
    """The licence short names a package's machine-readable (DEP-5) copyright file declares, in order. A
    free-form file states its licences in prose: the SBOM names the file (it is in the image) rather than
    guess. [] where there is no file."""
    from debian.copyright import Copyright, Error

    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    try:
        parsed = Copyright(text.splitlines(keepends=True), strict=False)
    except (Error, ValueError):
        return [f"{FREE_FORM}{path}"]
    names: list[str] = []
    for paragraph in [parsed.header, *parsed.all_files_paragraphs()]:
        licence = getattr(paragraph, "license", None)
        if licence is not None and licence.synopsis and licence.synopsis not in names:
            names.append(licence.synopsis)
    return names


def licence_objects(names: Iterable[str]) -> Iterator[DisjunctiveLicense]:
    """SPDX ids where the name is one (any case), the name as written otherwise (Debian's short names)."""
    for name in names:
        spdx = fixup_id(name)
        declared = LicenseAcknowledgement.DECLARED
        yield (
            DisjunctiveLicense(id=spdx, acknowledgement=declared)
            if spdx
            else DisjunctiveLicense(name=name, acknowledgement=declared)
        )


def debian_components() -> list[Component]:
    """Every installed Debian package, with the licences of its copyright file (or its source's)."""
    listing = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package}\t${Version}\t${Architecture}\t${source:Package}\n"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = [line.split("\t") for line in listing.splitlines() if line]
    docs = Path("/usr/share/doc")
    by_source: dict[str, list[str]] = {}
    for package, _, _, source in rows:
        found = copyright_licences(docs / package / "copyright")
        if found:
            by_source.setdefault(source, found)
    distro = f"debian-{debian_release()}"
    components = []
    for package, version, arch, source in rows:
        # A package whose documentation folder is a link to another's (left out with the documentation)
        # shares its source package's copyright file.
        names = copyright_licences(docs / package / "copyright") or by_source.get(source, [])
        components.append(
            Component(
                type=ComponentType.LIBRARY,
                name=package,
                version=version,
                bom_ref=f"deb:{package}:{arch}",
                purl=PackageURL("deb", "debian", package, version, {"arch": arch, "distro": distro}),
                licenses=list(licence_objects(names)),
            )
        )
    return components


def write(bom: Bom, output: Path) -> None:
    """Serialize with a serial number derived from everything else in it."""
    bom.serial_number = uuid.UUID(int=0)
    draft = make_outputter(bom, OutputFormat.JSON, SCHEMA).output_as_string(indent=2)
    digest = hashlib.sha256(draft.encode()).digest()
    bom.serial_number = uuid.UUID(bytes=digest[:16], version=5)
    output.write_text(make_outputter(bom, OutputFormat.JSON, SCHEMA).output_as_string(indent=2) + "\n")


def contents(environment: Path, tools: Path, output: Path) -> None:
    boms = [
        python_components(tools, environment / "bin" / "python"),
        python_components(tools, base_interpreter(environment)),
    ]
    components: list[Component] = []
    for bom in boms:
        components.extend(bom.components)
    refs = [c.bom_ref.value for c in components]
    duplicated = sorted({ref for ref in refs if refs.count(ref) > 1})
    if duplicated:
        raise SystemExit(f"sbom: one distribution in two environments: {', '.join(map(str, duplicated))}")
    (own,) = [c for c in boms[0].components if c.name == "priority-webhook"]
    components.extend(debian_components())
    root = Component(
        type=ComponentType.CONTAINER, name="priority-webhook", version=own.version, bom_ref="image"
    )
    sbom = Bom(
        components=components,
        dependencies=[d for bom in boms for d in bom.dependencies],
        metadata=BomMetaData(
            timestamp=source_date(),  # None leaves it out
            tools=boms[0].metadata.tools,
            component=root,
        ),
    )
    # The image holds every component: it depends on each directly.
    sbom.register_dependency(root, components)
    write(sbom, output)


def image(contents_file: Path, reference: str, image_id: str, arch: str, output: Path) -> None:
    bom = Bom.from_json(json.loads(contents_file.read_text()))
    assert bom is not None
    repository, _, tag = reference.rpartition(":")
    described = bom.metadata.component
    assert described is not None
    described.name = repository
    described.version = tag
    described.properties.update(
        [
            Property(name=IMAGE_REFERENCE, value=reference),
            Property(name=IMAGE_ID, value=image_id),
            Property(name=IMAGE_ARCH, value=arch),
        ]
    )
    write(bom, output)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    made = commands.add_parser("contents")
    made.add_argument("--environment", type=Path, required=True)
    made.add_argument("--tools", type=Path, required=True, help="the folder with cyclonedx-py")
    made.add_argument("--output", type=Path, required=True)
    described = commands.add_parser("image")
    described.add_argument("--contents", type=Path, required=True)
    described.add_argument("--reference", required=True)
    described.add_argument("--id", required=True)
    described.add_argument("--arch", required=True)
    described.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "contents":
        contents(args.environment, args.tools, args.output)
    else:
        image(args.contents, args.reference, args.id, args.arch, args.output)


if __name__ == "__main__":
    main(sys.argv[1:])
